package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// ErrNotLoopback is returned by Listen for an address other hosts could
// reach when the caller did not allow that.
var ErrNotLoopback = errors.New("not a loopback address")

// Listen binds a TCP listener on addr. Unless allowAny is set it refuses
// every address but a loopback one ("127.0.0.1:8000", "[::1]:0",
// "localhost:8000"): the simulator answers anyone who can reach it, so the
// tool binds loopback by default and exposing it must be a deliberate choice.
// An empty host (":8000") means every interface and is refused likewise.
func Listen(addr string, allowAny bool) (net.Listener, error) {
	if !allowAny {
		if err := checkLoopback(addr); err != nil {
			return nil, fmt.Errorf("sim: refusing to listen on %q: %w (allow other hosts explicitly to bind it)", addr, err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sim: listen: %w", err)
	}
	return ln, nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return ErrNotLoopback
	}
	return nil
}

// Instance is a simulated server running in-process on its own listener.
type Instance struct {
	// BaseURL is the OpenAI base URL clients use, like
	// "http://127.0.0.1:PORT/v1".
	BaseURL string
	// Addr is the listener's address, like "127.0.0.1:PORT".
	Addr string
	// Server is the handler the instance serves, for callers that want
	// its resolved Config.
	Server *Server

	srv       *http.Server
	cancel    context.CancelFunc
	served    chan error
	closeOnce sync.Once
	closeErr  error
}

// Start serves cfg on a fresh loopback listener (127.0.0.1, a free port), as
// tests and a run against the built-in target need.
func Start(cfg Config) (*Instance, error) {
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		return nil, err
	}
	inst, err := StartOn(ln, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return inst, nil
}

// StartOn serves cfg on ln, which the caller has bound (with Listen, so that
// the loopback rule applies). The instance owns ln from then on and closes
// it in Close; if StartOn fails, ln is left to the caller.
func StartOn(ln net.Listener, cfg Config) (*Instance, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	// Every request's context derives from base, so cancelling it in
	// Close stops in-flight streams at their next token instead of
	// letting them run to the end.
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	inst := &Instance{
		BaseURL: "http://" + ln.Addr().String() + "/v1",
		Addr:    ln.Addr().String(),
		Server:  s,
		srv:     srv,
		cancel:  cancel,
		served:  make(chan error, 1),
	}
	go func() { inst.served <- srv.Serve(ln) }()
	return inst, nil
}

// LatenessSnapshot returns a reading of the server's flush lateness, so
// that a caller can report the lateness of an interval, such as one
// benchmark row, with LatenessSnapshot.Since.
func (i *Instance) LatenessSnapshot() LatenessSnapshot { return i.Server.LatenessSnapshot() }

// closeGrace bounds how long Close waits for handlers to return after their
// contexts are cancelled. A handler can outlast its context only while
// blocked writing to a client that stopped reading; after the grace period
// Close drops the connections, which unblocks it.
const closeGrace = 5 * time.Second

// Close stops accepting connections, cancels in-flight requests, and returns
// once every handler has returned. It is safe to call more than once.
func (i *Instance) Close() error {
	i.closeOnce.Do(func() {
		i.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		if err := i.srv.Shutdown(ctx); err != nil {
			// Shutdown timed out: force the remaining connections
			// closed. Handlers blocked on writes then fail and return.
			_ = i.srv.Close()
		}
		if err := <-i.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			i.closeErr = fmt.Errorf("sim: serve: %w", err)
		}
		i.Server.Close()
	})
	return i.closeErr
}
