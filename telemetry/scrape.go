// Package telemetry scrapes an inference server's Prometheus endpoint and
// its GPUs' DCGM exporters while a row runs, maps each engine's metric names
// into one vocabulary (running and waiting requests, KV-cache usage, prefix
// cache, preemptions, token counters, the engine's own latency histograms),
// and reduces the scrapes to a row's figures (metrics.ServerTelemetry and
// metrics.GPUTelemetry).
//
// The client's own figures say what users felt; the server's say why. A
// scrape that fails is a sample with an error and a note in the record,
// never an error of the run: telemetry explains a row, it does not decide
// whether the row happened. docs/telemetry.md is the reference.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	dto "github.com/prometheus/client_model/go"
)

// Target kinds: an inference server's endpoint or a GPU exporter's. A
// sample's figures are classified by metric name, not by kind (the built-in
// server publishes DCGM names on its own endpoint); the kind says which
// figures a failing endpoint leaves absent.
const (
	KindServer = "server"
	KindGPU    = "gpu"
)

// MaxBody bounds an exposition: a bigger answer is a failed scrape, so that
// a misconfigured endpoint (a file server, a log) cannot fill memory.
const MaxBody = 16 << 20

// acceptHeader asks for the classic text format only. An endpoint that
// answers OpenMetrics anyway is decoded as such, but it is not asked for:
// Python's prometheus_client (vLLM, SGLang) switches to OpenMetrics as soon
// as the Accept header names it, whatever its q, and expfmt's OpenMetrics
// parser is two orders of magnitude slower than its text parser.
const acceptHeader = "text/plain;version=0.0.4"

// Target is one endpoint to scrape.
type Target struct {
	URL     string            // the exposition endpoint
	Kind    string            // KindServer or KindGPU
	Display string            // the URL as recorded (credentials masked by the caller)
	Headers map[string]string // sent with each scrape
}

// Options configure a Scraper.
type Options struct {
	Targets []Target
	// Interval between scrape rounds; 1 s when 0.
	Interval time.Duration
	// Timeout bounds one scrape; when 0, min(0.9 × Interval, 5 s), so
	// that a round ends before the next one is due. The first round,
	// which Start waits for, is bounded by min(Timeout, 2 s).
	Timeout time.Duration
	// Client is the run's client (its redirect policy); nil: a private one.
	Client *http.Client
	// Start is the row's clock zero: samples count ns from it.
	Start time.Time
	// Sink is called for every scrape as it completes, never concurrently,
	// in t order per target (a round's samples in target order). The
	// runner appends the line to rows/<id>/telemetry.jsonl at once. After
	// it first returns an error it is not called again (Err reports it);
	// the samples are still kept for Stop.
	Sink func(Sample) error
	// Clock, when set, stamps samples instead of the wall clock, and
	// Manual stops the scraper from taking rounds on its own: a run on the
	// built-in server's virtual clock (run --virtual) takes each round
	// itself (Round) when its clock reaches it, through a client that
	// must not be used concurrently, so a manual scraper scrapes its
	// targets one after the other.
	Clock  func() time.Time
	Manual bool
}

// Scraper scrapes its targets in rounds until Stop.
type Scraper struct {
	o       Options
	client  *http.Client
	start   time.Time
	timeout time.Duration

	phaseMu sync.Mutex
	phase   string

	// roundMu keeps rounds from overlapping: the loop, Start, Round and
	// Stop take turns.
	roundMu sync.Mutex

	mu      sync.Mutex
	samples []Sample
	round   int
	sinkErr error

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	ctx      context.Context
}

// Start takes a first scrape of every target before it returns (bounded by
// min(Timeout, 2 s), so a dead endpoint delays the row by two seconds at
// most), then scrapes every Interval until Stop or until ctx ends.
func Start(ctx context.Context, o Options) *Scraper {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = min(o.Interval*9/10, 5*time.Second)
	}
	s := &Scraper{
		o:       o,
		client:  o.Client,
		start:   o.Start,
		timeout: timeout,
		phase:   metrics.PhaseBetween,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		ctx:     ctx,
	}
	if s.client == nil {
		s.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if s.start.IsZero() {
		s.start = s.now()
	}
	if len(o.Targets) == 0 || o.Manual {
		close(s.done)
	}
	if len(o.Targets) == 0 {
		return s
	}
	s.scrapeRound(ctx, min(timeout, 2*time.Second))
	if !o.Manual {
		go s.loop()
	}
	return s
}

// now is the scraper's clock.
func (s *Scraper) now() time.Time {
	if s.o.Clock != nil {
		return s.o.Clock()
	}
	return time.Now()
}

func (s *Scraper) loop() {
	defer close(s.done)
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.stop:
			return
		case <-t.C:
			s.scrapeRound(s.ctx, s.timeout)
		}
	}
}

// SetPhase stamps later samples with phase (metrics.Phase*).
func (s *Scraper) SetPhase(phase string) {
	s.phaseMu.Lock()
	s.phase = phase
	s.phaseMu.Unlock()
}

func (s *Scraper) currentPhase() string {
	s.phaseMu.Lock()
	defer s.phaseMu.Unlock()
	return s.phase
}

// Stop ends the rounds, takes one last scrape of every target (so that the
// counters' increase reaches past the row's last request, even when ctx
// has ended), and returns every sample in the order they were taken.
// Calling it again returns the same samples.
func (s *Scraper) Stop() []Sample {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		if len(s.o.Targets) > 0 {
			s.scrapeRound(context.WithoutCancel(s.ctx), s.timeout)
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Err returns the first error the Sink returned, if any.
func (s *Scraper) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sinkErr
}

// Round takes a round now, between the interval's rounds, and returns when
// it is recorded. The runner takes one when a row's warm prefixes are all
// cached and before its load begins: the priming requests ran one at a time
// and are over, so the counters read then are a clean base for the window,
// where a scrape up to an interval earlier would count the priming in it.
// A stopped scraper takes none.
func (s *Scraper) Round() {
	select {
	case <-s.stop:
		return
	case <-s.done:
		if !s.o.Manual {
			return
		}
	default:
	}
	if len(s.o.Targets) > 0 {
		s.scrapeRound(s.ctx, s.timeout)
	}
}

// scrapeRound scrapes every target at once and records their samples in
// target order. Rounds never overlap (roundMu).
func (s *Scraper) scrapeRound(ctx context.Context, timeout time.Duration) {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	phase := s.currentPhase()
	s.mu.Lock()
	round := s.round
	s.round++
	s.mu.Unlock()

	out := make([]Sample, len(s.o.Targets))
	var wg sync.WaitGroup
	for i, t := range s.o.Targets {
		if s.o.Manual {
			out[i] = s.scrape(ctx, t, timeout)
			out[i].Round, out[i].Phase = round, phase
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.scrape(ctx, t, timeout)
			out[i].Round, out[i].Phase = round, phase
		}()
	}
	wg.Wait()

	s.mu.Lock()
	s.samples = append(s.samples, out...)
	sinkFailed := s.sinkErr != nil
	s.mu.Unlock()
	// The sink is called without the lock (it writes a file; it may ask
	// for Err); rounds never overlap, so it is never called concurrently.
	if s.o.Sink == nil || sinkFailed {
		return
	}
	for _, smp := range out {
		if err := s.o.Sink(smp); err != nil {
			s.mu.Lock()
			s.sinkErr = fmt.Errorf("telemetry sink: %w", err)
			s.mu.Unlock()
			return
		}
	}
}

// scrape takes one sample of t; every failure is the sample's Error.
func (s *Scraper) scrape(ctx context.Context, t Target, timeout time.Duration) Sample {
	t0 := s.now()
	smp := Sample{TNS: t0.Sub(s.start).Nanoseconds(), Target: t.Display, Kind: t.Kind}
	if smp.Target == "" {
		smp.Target = redact(t.URL)
	}
	fams, err := s.fetch(ctx, t, timeout)
	smp.DurNS = s.now().Sub(t0).Nanoseconds()
	if err != nil {
		smp.Error = clip(err.Error())
		return smp
	}
	smp.Mapping, smp.Series = extract(fams)
	return smp
}

func (s *Scraper) fetch(ctx context.Context, t Target, timeout time.Duration) (fams []*dto.MetricFamily, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, errors.New("the endpoint URL is not valid")
	}
	req.Header.Set("Accept", acceptHeader)
	for k, v := range t.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, describe(ctx, err, timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, describe(ctx, err, timeout)
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("the exposition is larger than %d MiB", MaxBody>>20)
	}
	return decode(body, resp.Header)
}

// describe words a transport error without the URL (which may hold a
// token in its query) and says a timeout is one.
func describe(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", timeout)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return errors.New("canceled: the row ended")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redact hides a URL's credentials and query for the record.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an invalid URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.Redacted()
}

// clip bounds an error message kept in a sample: it may quote the server.
func clip(s string) string {
	const max = 300
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
