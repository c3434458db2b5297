package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultKind names a failure the simulator can inject, so that a client's
// error handling and its error accounting can be tested against known
// faults.
type FaultKind string

// The fault kinds. The three HTTP statuses answer before any generation;
// the others strike a stream part-way or delay it.
const (
	// FaultRateLimit answers 429 with a Retry-After header and an
	// OpenAI-shaped rate-limit body, as a gateway or a hosted API does.
	FaultRateLimit FaultKind = "429"
	// FaultServerError answers 500 with an OpenAI-shaped body.
	FaultServerError FaultKind = "500"
	// FaultUnavailable answers 503 with an OpenAI-shaped body, and a
	// Retry-After header when the rule sets one.
	FaultUnavailable FaultKind = "503"
	// FaultErrorEvent sends a vLLM error event in the middle of a stream
	// (a 500 for a request that does not stream).
	FaultErrorEvent FaultKind = "error_event"
	// FaultTruncate ends a stream cleanly at the HTTP level but without
	// its finish chunk, usage or [DONE], as a proxy that drops the
	// upstream does.
	FaultTruncate FaultKind = "truncate"
	// FaultReset resets the TCP connection part-way, as a crashed server
	// or a load balancer does.
	FaultReset FaultKind = "reset"
	// FaultStall stops a stream for a while, then lets it go on.
	FaultStall FaultKind = "stall"
	// FaultSlowHeaders delays the response headers while generation
	// proceeds, as a server that accepts the stream only after prefill
	// does.
	FaultSlowHeaders FaultKind = "slow_headers"
)

// FaultHeader is the request header that chooses the fault of a chat or
// completion request, overriding Config.Faults for that request. Its value is a kind, optionally
// followed by parameters: "reset; after=10", "stall; after=5; for=2s",
// "429; retry_after=3", "slow_headers; for=200ms". The kind "none" asks for
// no fault whatever the configuration says.
const FaultHeader = "X-Sim-Fault"

// faultNone is the header's way to opt a request out of configured faults.
const faultNone = "none"

// faultKinds lists the kinds in the order messages and /metrics use.
var faultKinds = [...]FaultKind{
	FaultRateLimit, FaultServerError, FaultUnavailable, FaultErrorEvent,
	FaultTruncate, FaultReset, FaultStall, FaultSlowHeaders,
}

// FaultRule is one fault: its kind, how often Config.Faults injects it, and
// its parameters. A parameter that does not apply to the kind must be zero.
type FaultRule struct {
	Kind FaultKind
	// Probability is the fraction of requests that get this fault, in
	// [0,1]. It is ignored for a fault chosen with the header.
	Probability float64
	// After is the number of output tokens sent before the fault strikes
	// (error_event, truncate, reset, stall). Zero strikes before the
	// first token; the header's default, when it omits after=, is 1.
	After int
	// For is how long a stall lasts (zero: until the client goes away or
	// the server closes) or how long slow_headers holds the headers
	// (zero selects the default, 1s).
	For time.Duration
	// RetryAfter is the Retry-After a 429 sends (zero selects the
	// default, 1s) or a 503 sends (zero sends none). The header carries
	// whole seconds, rounded up.
	RetryAfter time.Duration
}

const (
	defaultSlowHeaders = time.Second
	defaultRetryAfter  = time.Second
	defaultFaultAfter  = 1 // the header's after= when omitted
)

// status is the HTTP status a kind answers with instead of generating, or 0
// for the kinds that act on a response in progress.
func (k FaultKind) status() int {
	switch k {
	case FaultRateLimit:
		return http.StatusTooManyRequests
	case FaultServerError:
		return http.StatusInternalServerError
	case FaultUnavailable:
		return http.StatusServiceUnavailable
	}
	return 0
}

// positioned reports whether the kind strikes after a number of tokens.
func (k FaultKind) positioned() bool {
	switch k {
	case FaultErrorEvent, FaultTruncate, FaultReset, FaultStall:
		return true
	}
	return false
}

// index is the kind's position in faultKinds, or -1.
func (k FaultKind) index() int {
	for i, kk := range faultKinds {
		if k == kk {
			return i
		}
	}
	return -1
}

func (k FaultKind) takesFor() bool        { return k == FaultStall || k == FaultSlowHeaders }
func (k FaultKind) takesRetryAfter() bool { return k == FaultRateLimit || k == FaultUnavailable }

// validFaultKinds is the list that error messages quote.
func validFaultKinds() string {
	names := make([]string, 0, len(faultKinds)+1)
	for _, k := range faultKinds {
		names = append(names, string(k))
	}
	return strings.Join(append(names, faultNone), ", ")
}

// withDefaults fills the parameters whose zero value means "the default".
func (f FaultRule) withDefaults() FaultRule {
	switch f.Kind {
	case FaultRateLimit:
		if f.RetryAfter == 0 {
			f.RetryAfter = defaultRetryAfter
		}
	case FaultSlowHeaders:
		if f.For == 0 {
			f.For = defaultSlowHeaders
		}
	}
	return f
}

// check reports a rule whose kind is unknown or whose parameters do not fit
// its kind; it leaves the probability to the caller.
func (f FaultRule) check() error {
	if f.Kind.index() < 0 {
		return fmt.Errorf("unknown fault kind %q (valid kinds: %s)", f.Kind, validFaultKinds())
	}
	var errs []error
	if f.After < 0 {
		errs = append(errs, fmt.Errorf("after %d: must not be negative", f.After))
	} else if f.After != 0 && !f.Kind.positioned() {
		errs = append(errs, fmt.Errorf("after does not apply to %s", f.Kind))
	}
	if f.For < 0 {
		errs = append(errs, fmt.Errorf("for %v: must not be negative", f.For))
	} else if f.For != 0 && !f.Kind.takesFor() {
		errs = append(errs, fmt.Errorf("for does not apply to %s", f.Kind))
	}
	if f.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("retry_after %v: must not be negative", f.RetryAfter))
	} else if f.RetryAfter != 0 && !f.Kind.takesRetryAfter() {
		errs = append(errs, fmt.Errorf("retry_after does not apply to %s", f.Kind))
	}
	return errors.Join(errs...)
}

// checkFaultRules validates Config.Faults, one error per problem, each
// naming its rule.
func checkFaultRules(rules []FaultRule) []error {
	var errs []error
	sum := 0.0
	for i, f := range rules {
		if err := f.check(); err != nil {
			errs = append(errs, fmt.Errorf("faults[%d]: %w", i, err))
		}
		if !(f.Probability >= 0 && f.Probability <= 1) {
			errs = append(errs, fmt.Errorf("faults[%d]: probability %v: must be in [0,1]", i, f.Probability))
			continue
		}
		sum += f.Probability
	}
	// A little slack for sums like 0.1+0.2+0.7 that round above 1.
	if sum > 1+1e-9 {
		errs = append(errs, fmt.Errorf("faults: probabilities sum to %v: must not exceed 1", sum))
	}
	return errs
}

// parseFaultHeader parses the X-Sim-Fault values of a request. It returns
// set=false when the header is absent, and a nil rule for "none".
func parseFaultHeader(values []string) (rule *FaultRule, set bool, err *apiError) {
	if len(values) == 0 {
		return nil, false, nil
	}
	if len(values) > 1 {
		return nil, true, faultHeaderError(fmt.Errorf("given %d times, want at most once", len(values)))
	}
	parts := strings.Split(values[0], ";")
	kind := FaultKind(strings.TrimSpace(parts[0]))
	if kind == faultNone {
		if len(parts) > 1 {
			return nil, true, faultHeaderError(errors.New("none takes no parameters"))
		}
		return nil, true, nil
	}
	if kind.index() < 0 {
		return nil, true, faultHeaderError(fmt.Errorf("unknown fault kind %q", kind))
	}
	f := FaultRule{Kind: kind}
	if kind.positioned() {
		f.After = defaultFaultAfter
	}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		key, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" || value == "" {
			return nil, true, faultHeaderError(fmt.Errorf("parameter %q: want key=value", strings.TrimSpace(p)))
		}
		if seen[key] {
			return nil, true, faultHeaderError(fmt.Errorf("parameter %s given twice", key))
		}
		seen[key] = true
		var perr error
		switch {
		case key == "after" && kind.positioned():
			f.After, perr = strconv.Atoi(value)
			if perr == nil && f.After < 0 {
				perr = errors.New("must not be negative")
			}
		case key == "for" && kind.takesFor():
			f.For, perr = time.ParseDuration(value)
			if perr == nil && f.For < 0 {
				perr = errors.New("must not be negative")
			}
		case key == "retry_after" && kind.takesRetryAfter():
			f.RetryAfter, perr = parseSeconds(value)
		default:
			return nil, true, faultHeaderError(fmt.Errorf("parameter %q does not apply to %s", key, kind))
		}
		if perr != nil {
			return nil, true, faultHeaderError(fmt.Errorf("%s=%s: %w", key, value, perr))
		}
	}
	f = f.withDefaults()
	return &f, true, nil
}

// parseSeconds reads a Retry-After-like value: whole seconds ("3") or a Go
// duration ("1500ms").
func parseSeconds(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, errors.New("must not be negative")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = errors.New("must not be negative")
	}
	return d, err
}

// faultHeaderError turns a header problem into the 400 the client gets; the
// message carries the syntax and the valid kinds, since a caller who got the
// header wrong needs both.
func faultHeaderError(err error) *apiError {
	return badRequest("invalid %s header: %v; want KIND or KIND; key=value; ... with KIND one of %s", FaultHeader, err, validFaultKinds())
}

// faultStream separates the fault draws from the text and EOS draws of the
// same request.
const faultStream = 0x6a09e667f3bcc909

// chooseFault draws the configured fault of a request, or nil. The draw is
// keyed by Config.Seed and the request's arrival number, not by its seed
// field: benchmark clients often send one seed with every request, and the
// configured fault rate must hold for them too. A run that sends its
// requests in the same order therefore gets the same faults.
func (s *Server) chooseFault(counter uint64) *FaultRule {
	if len(s.cfg.Faults) == 0 {
		return nil
	}
	u := unitFloat(rand.NewPCG(uint64(s.cfg.Seed)^faultStream, counter))
	acc := 0.0
	for i := range s.cfg.Faults {
		acc += s.cfg.Faults[i].Probability
		if u < acc {
			return &s.cfg.Faults[i]
		}
	}
	return nil
}

// unitFloat returns a uniform float64 in [0,1) from src.
func unitFloat(src rand.Source) float64 {
	return float64(src.Uint64()>>11) / (1 << 53)
}

// countFault records that g's fault struck, once per request.
func (s *Server) countFault(g *generation) {
	if g.struck || g.fault == nil {
		return
	}
	g.struck = true
	if i := g.fault.Kind.index(); i >= 0 {
		s.metrics.faults[i].Add(1)
	}
}

// openAIError is the {"error":{...}} body OpenAI's API answers with. Code is
// a string or null there, unlike vLLM's integer code.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// writeFaultStatus answers with the HTTP status of a 429, 500 or 503 fault.
// The bodies follow OpenAI's shapes, which a client's retry logic is most
// likely to have been written against; the messages say the fault is
// simulated, so that nobody debugs a real outage that is not there.
func writeFaultStatus(w http.ResponseWriter, f *FaultRule) {
	var e openAIError
	switch f.Kind {
	case FaultRateLimit:
		code := "rate_limit_exceeded"
		e.Error.Code = &code
		// OpenAI sets type to the limit that was hit: "requests" or
		// "tokens".
		e.Error.Type = "requests"
		e.Error.Message = fmt.Sprintf("Rate limit reached for requests (simulated fault). Please try again in %ds.", retrySeconds(f.RetryAfter))
	case FaultServerError:
		e.Error.Type = "server_error"
		e.Error.Message = "The server had an error while processing your request (simulated fault)."
	case FaultUnavailable:
		e.Error.Type = "service_unavailable"
		e.Error.Message = "The server is overloaded or not ready yet (simulated fault)."
	}
	body, err := json.Marshal(e)
	if err != nil {
		body = []byte(`{"error":{}}`)
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(f.RetryAfter)))
	}
	writeJSON(w, f.Kind.status(), body)
}

// retrySeconds rounds d up to the whole seconds Retry-After carries.
func retrySeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// errorEvent is the event vLLM sends when generation fails after the stream
// has started, followed by [DONE]: vLLM's stream generators catch the
// exception, yield the error as a data event, and then fall through to the
// same "data: [DONE]" every stream ends with. A client must therefore check
// each event for "error" rather than rely on the stream ending abnormally.
const errorEvent = `data: {"error":{"message":"simulated fault: generation failed","type":"InternalServerError","param":null,"code":500}}` + "\n\n" + doneEvent

// sleepCtx blocks for d or until ctx is done, returning ctx's error in that
// case. A non-positive d returns at once.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stall blocks for d, or, when d is zero, until ctx is done: an unbounded
// stall ends only when the client gives up or the server closes, and both
// cancel ctx, so that a stall never holds Close up.
func stall(ctx context.Context, d time.Duration) error {
	if d == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return sleepCtx(ctx, d)
}

// resetConnection takes the connection over from net/http and resets it:
// with SO_LINGER set to zero, close sends a TCP RST instead of a FIN, which
// the client reads as "connection reset by peer". Data already flushed has
// been sent before the reset. It reports false when the ResponseWriter
// cannot be hijacked (HTTP/2, httptest.ResponseRecorder); the caller then
// falls back to ending the response cleanly.
func resetConnection(w http.ResponseWriter) bool {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	// A listener wrapped by the caller may hide the *net.TCPConn; then
	// the close is an ordinary FIN, which is still an abrupt end.
	if l, ok := conn.(interface{ SetLinger(int) error }); ok {
		_ = l.SetLinger(0)
	}
	_ = conn.Close()
	return true
}

// closeAfterResponse ends a streamed response and closes its connection
// without announcing it: no "Connection: close" header was sent, so a
// keep-alive client will try to reuse the connection and find it gone. It
// takes the connection over from net/http after the last bytes are flushed,
// writes the terminating zero-length chunk that net/http would have written,
// and closes shortly after (see llamaCloseDelay). It reports whether it
// could hijack the connection.
func closeAfterResponse(w http.ResponseWriter, r *http.Request) bool {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	// An HTTP/1.1 response without Content-Length that was flushed
	// before the handler returned is chunked; HTTP/1.0 ends at the close.
	if r.ProtoAtLeast(1, 1) {
		_ = conn.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		_, _ = conn.Write([]byte("0\r\n\r\n"))
	}
	_ = sleepCtx(r.Context(), llamaCloseDelay)
	if tc, ok := conn.(*net.TCPConn); ok {
		// Half-close first so that the terminator is delivered ahead
		// of the FIN even if the client has sent more bytes.
		_ = tc.CloseWrite()
	}
	_ = conn.Close()
	return true
}

// closeWriteTimeout bounds the write of a stream's terminator on a hijacked
// connection, which net/http no longer bounds for us.
const closeWriteTimeout = 5 * time.Second

// llamaCloseDelay is how long after a stream's last chunk the connection is
// closed. llama-server closes shortly after, not with the last chunk, so a
// client that sends its next request at once often finds the connection
// still open, writes to it, and loses the request (in captures, 2 to 9 of
// every 10 to 20). Closing at once would let the FIN travel with the last
// chunk, and most clients would notice the close before reusing the
// connection, hiding the quirk this personality exists to reproduce.
const llamaCloseDelay = time.Millisecond

// ParseFaultRule reads a fault rule in the X-Sim-Fault header's syntax plus
// a probability, "reset; after=10; probability=0.01", as `infermatrix sim
// --fault` takes it. The probability defaults to 1: every request.
func ParseFaultRule(spec string) (FaultRule, error) {
	prob := 1.0
	var rest []string
	for i, p := range strings.Split(spec, ";") {
		key, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		if i > 0 && ok && strings.TrimSpace(key) == "probability" {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil || v <= 0 || v > 1 {
				return FaultRule{}, fmt.Errorf("fault %q: probability must be a number in (0, 1]", spec)
			}
			prob = v
			continue
		}
		rest = append(rest, p)
	}
	rule, _, apiErr := parseFaultHeader([]string{strings.Join(rest, ";")})
	if apiErr != nil {
		return FaultRule{}, fmt.Errorf("fault %q: %s", spec, strings.TrimPrefix(apiErr.message, "invalid "+FaultHeader+" header: "))
	}
	if rule == nil {
		return FaultRule{}, fmt.Errorf("fault %q: none is not a fault", spec)
	}
	rule.Probability = prob
	return *rule, nil
}
