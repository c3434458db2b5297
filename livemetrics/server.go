package livemetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server serves a recorder's Handler on a TCP address for as long as a
// run lasts.
type Server struct {
	ln  net.Listener
	srv *http.Server
	// done is closed when Serve returns.
	done chan struct{}
}

// ErrBadAddr is wrapped by Listen's error when the address is not
// HOST:PORT or cannot be bound: a usage error, found before the run.
var ErrBadAddr = errors.New("bad metrics address")

// Listen binds addr (HOST:PORT; port 0 picks a free one) and serves h on
// it until Close. 0.0.0.0 or [::] is what a pod needs for Prometheus to
// reach it; anyone who can reach the port then reads the experiment's
// name and row ids, and nothing else.
func Listen(addr string, h http.Handler) (*Server, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("%w %q: want HOST:PORT, such as 127.0.0.1:9464 or 0.0.0.0:9464: %w", ErrBadAddr, addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrBadAddr, addr, err)
	}
	s := &Server{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return s, nil
}

// URL is the metrics endpoint's address, with the port bound.
func (s *Server) URL() string {
	return "http://" + s.ln.Addr().String() + "/metrics"
}

// Close stops serving after linger, the time left for a last scrape to
// read the run's final figures, and waits for scrapes in progress.
func (s *Server) Close(linger time.Duration) error {
	if linger > 0 {
		time.Sleep(linger)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}
