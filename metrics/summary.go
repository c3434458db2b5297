package metrics

import "fmt"

// SummaryFormat versions summary.json. Readers refuse other versions rather
// than misreading them.
const SummaryFormat = "infermatrix.summary/v1"

// Row statuses.
const (
	RowComplete    = "complete"    // every planned request was sent and finished or failed
	RowInterrupted = "interrupted" // the run was stopped (Ctrl-C) during or before this row
	RowFailed      = "failed"      // the tool failed during the row; RowSummary.Error says why
	RowNotRun      = "not_run"     // the run ended (interrupted or failed) before this row began
)

// Summary is the whole run's summary.json.
type Summary struct {
	Format      string       `json:"format"`
	Experiment  string       `json:"experiment"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Percentiles []float64    `json:"percentiles"`
	SLO         SLO          `json:"slo"`
	Rows        []RowSummary `json:"rows"`
}

// Row returns the summary of the row with this id, or nil.
func (s *Summary) Row(id string) *RowSummary {
	for i := range s.Rows {
		if s.Rows[i].ID == id {
			return &s.Rows[i]
		}
	}
	return nil
}

// SLO holds per-request objectives in milliseconds; zero means unset.
type SLO struct {
	TTFTms float64 `json:"ttft_ms,omitempty"`
	TPOTms float64 `json:"tpot_ms,omitempty"`
	ITLms  float64 `json:"itl_ms,omitempty"`
	E2Ems  float64 `json:"e2e_ms,omitempty"`
}

// IsZero reports whether no objective is set.
func (s SLO) IsZero() bool { return s == SLO{} }

// RowSummary is one row's results: rows/<id>/summary.json and one entry of
// the top-level summary.json.
type RowSummary struct {
	ID     string `json:"id"`
	Base   string `json:"base"` // the row id as written, before sweep expansion
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`

	// WindowS is the measured window in seconds: from the dispatch of the
	// first measured request to the end of the last one. Throughputs
	// divide by it.
	WindowS    float64    `json:"window_s"`
	Requests   Requests   `json:"requests"`
	Metrics    Metrics    `json:"metrics"`
	Throughput Throughput `json:"throughput"`
	Goodput    Goodput    `json:"goodput"`
	Errors     Errors     `json:"errors"`
	SelfCheck  SelfCheck  `json:"self_check"`
}

// SelfCheck says whether the client offered the load the row asked for. A
// benchmark client that falls behind its own schedule measures itself, not
// the server; these figures make that visible instead of silent.
type SelfCheck struct {
	// For open-loop rows: the rate asked for, the rate of the arrival
	// schedule actually drawn (a finite random sample), and the rate
	// requests were actually dispatched at.
	RequestedRate float64 `json:"requested_rate_per_s,omitempty"`
	ScheduledRate float64 `json:"scheduled_rate_per_s,omitempty"`
	AchievedRate  float64 `json:"achieved_rate_per_s,omitempty"`
	// DispatchLag is how late each open-loop request left the client
	// against its schedule, queue time excluded, in ms.
	DispatchLag Dist `json:"dispatch_lag_ms"`
	// ClientBound is set when the client may have limited the measurement;
	// Notes say why.
	ClientBound bool     `json:"client_bound,omitempty"`
	Notes       []string `json:"notes,omitempty"`
}

// Requests counts the row's requests by outcome.
type Requests struct {
	Sent      int `json:"sent" expr:"sent"`           // measured requests dispatched
	Completed int `json:"completed" expr:"completed"` // measured requests that succeeded
	Failed    int `json:"failed" expr:"failed"`       // measured requests that failed, cancellations included
	Canceled  int `json:"canceled" expr:"canceled"`   // of Failed, those the client cancelled on purpose
	Warmup    int `json:"warmup" expr:"warmup"`       // warmup requests, excluded from everything else
	// Retried counts measured requests the HTTP transport resent because
	// their reused connection closed before any response (see
	// Record.Retries).
	Retried int `json:"retried" expr:"retried"`
}

// Metrics are the per-request distributions. Latencies are in milliseconds.
type Metrics struct {
	TTFT         Dist `json:"ttft_ms" expr:"ttft"`
	TTFO         Dist `json:"ttfo_ms" expr:"ttfo"`
	TTST         Dist `json:"ttst_ms" expr:"ttst"`
	ITL          Dist `json:"itl_ms" expr:"itl"`
	TPOT         Dist `json:"tpot_ms" expr:"tpot"`
	E2E          Dist `json:"e2e_ms" expr:"e2e"`
	Queue        Dist `json:"queue_ms" expr:"queue"`
	InputTokens  Dist `json:"input_tokens" expr:"input_tokens"`
	OutputTokens Dist `json:"output_tokens" expr:"output_tokens"`
}

// Throughput is measured over the row's window.
type Throughput struct {
	RequestsPerS      float64 `json:"requests_per_s" expr:"requests_per_s"`
	OutputTokensPerS  float64 `json:"output_tokens_per_s" expr:"output_tokens_per_s"`
	InputTokensPerS   float64 `json:"input_tokens_per_s" expr:"input_tokens_per_s"`
	TotalTokensPerS   float64 `json:"total_tokens_per_s" expr:"total_tokens_per_s"`
	OutputTokensPerSU float64 `json:"output_tokens_per_s_per_user" expr:"output_tokens_per_s_per_user"`
}

// Goodput counts requests that met every SLO.
type Goodput struct {
	Good         int     `json:"good" expr:"good"`
	RequestsPerS float64 `json:"requests_per_s" expr:"requests_per_s"`
	Ratio        float64 `json:"ratio" expr:"ratio"`
}

// Errors counts measured requests that failed for reasons other than the
// client cancelling them on purpose: what the server (or the network) did.
// Deliberate cancellations are counted in Requests.Canceled instead, so a
// rule like "errors.total == 0" holds on a row that cancels by design.
type Errors struct {
	Total   int            `json:"total"`
	Ratio   float64        `json:"ratio"` // Total / (Sent - Canceled)
	ByClass map[string]int `json:"by_class,omitempty"`
}

// Options shape a summary.
type Options struct {
	Percentiles []float64 // extra percentiles, beyond p50/p90/p95/p99
	SLO         SLO
	// RequestedRate is an open-loop row's rate, for the self-check; 0 for
	// other rows.
	RequestedRate float64
}

// Aggregator builds one row's summary from its records as they arrive. It
// keeps every sample (see Dist); memory grows by a few dozen bytes per
// request plus eight per streamed event.
type Aggregator struct {
	opts    Options
	reqs    Requests
	errs    map[string]int
	first   int64 // earliest dispatch of a measured request, ns since row start
	last    int64 // latest end of a measured request
	anyMeas bool

	ttft, ttfo, ttst, itl, tpot, e2e, queue, in, out []float64
	perUser                                          []float64
	inSum, outSum                                    int64
	good, goodBase                                   int

	lag                   []float64
	firstSched, lastSched int64
	lastDispatchNS        int64 // the earliest dispatch is first
}

// NewAggregator starts an empty row summary.
func NewAggregator(opts Options) *Aggregator {
	return &Aggregator{opts: opts, errs: map[string]int{}}
}

// Add folds in one record. Warmup records are only counted.
func (a *Aggregator) Add(r *Record) {
	if r.Warmup {
		a.reqs.Warmup++
		return
	}
	a.reqs.Sent++
	if r.Retries > 0 {
		a.reqs.Retried++
	}
	dispatch := r.StartNS - r.QueueNS
	end := r.StartNS + r.EndNS
	if !a.anyMeas {
		a.first, a.last = dispatch, end
		a.firstSched, a.lastSched = r.ScheduledNS, r.ScheduledNS
		a.lastDispatchNS = dispatch
	}
	a.anyMeas = true
	a.first, a.last = min(a.first, dispatch), max(a.last, end)
	a.firstSched, a.lastSched = min(a.firstSched, r.ScheduledNS), max(a.lastSched, r.ScheduledNS)
	a.lastDispatchNS = max(a.lastDispatchNS, dispatch)
	if a.opts.RequestedRate > 0 {
		a.lag = append(a.lag, ms(dispatch-r.ScheduledNS))
	}
	if !r.OK() {
		a.reqs.Failed++
		if r.Canceled() {
			a.reqs.Canceled++
		} else {
			a.errs[r.Error.Class]++
			a.goodBase++
		}
		return
	}
	a.reqs.Completed++
	a.goodBase++
	a.queue = append(a.queue, ms(r.QueueNS))

	in, out := r.InputTokens.Count(), r.OutputTokens.Count()
	a.inSum += int64(in)
	a.outSum += int64(out)
	a.in = append(a.in, float64(in))
	a.out = append(a.out, float64(out))
	e2e := ms(r.EndToEndNS())
	a.e2e = append(a.e2e, e2e)
	if r.Stream && r.FirstTokenNS > 0 {
		a.ttft = append(a.ttft, ms(r.FirstTokenNS))
	}
	if r.Stream && r.FirstOutputNS > 0 {
		a.ttfo = append(a.ttfo, ms(r.FirstOutputNS))
	}
	if len(r.Events) >= 2 {
		a.ttst = append(a.ttst, ms(r.Events[1]-r.Events[0]))
		for i := 1; i < len(r.Events); i++ {
			a.itl = append(a.itl, ms(r.Events[i]-r.Events[i-1]))
		}
	}
	tpot, hasTPOT := r.TPOTms()
	if hasTPOT {
		a.tpot = append(a.tpot, tpot)
		if tpot > 0 {
			a.perUser = append(a.perUser, 1000/tpot)
		}
	}
	if a.meetsSLO(r, e2e, tpot, hasTPOT) {
		a.good++
	}
}

// meetsSLO applies every set objective. A non-streamed response has no
// separate first token, so its TTFT objective is judged on end-to-end
// latency: that is when its reader sees the first word.
func (a *Aggregator) meetsSLO(r *Record, e2e, tpot float64, hasTPOT bool) bool {
	s := a.opts.SLO
	if s.TTFTms > 0 {
		ttft := e2e
		if r.Stream && r.FirstTokenNS > 0 {
			ttft = ms(r.FirstTokenNS)
		}
		if ttft > s.TTFTms {
			return false
		}
	}
	if s.TPOTms > 0 && hasTPOT && tpot > s.TPOTms {
		return false
	}
	if s.ITLms > 0 && r.MaxGapMS() > s.ITLms {
		return false
	}
	if s.E2Ems > 0 && e2e > s.E2Ems {
		return false
	}
	return true
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// Summary returns the row's summary. The aggregator must not be used after.
func (a *Aggregator) Summary(id, base, status string) RowSummary {
	x := a.opts.Percentiles
	s := RowSummary{
		ID:       id,
		Base:     base,
		Status:   status,
		Requests: a.reqs,
		Metrics: Metrics{
			TTFT:         NewDist(a.ttft, x),
			TTFO:         NewDist(a.ttfo, x),
			TTST:         NewDist(a.ttst, x),
			ITL:          NewDist(a.itl, x),
			TPOT:         NewDist(a.tpot, x),
			E2E:          NewDist(a.e2e, x),
			Queue:        NewDist(a.queue, x),
			InputTokens:  NewDist(a.in, x),
			OutputTokens: NewDist(a.out, x),
		},
	}
	if a.anyMeas {
		s.WindowS = float64(a.last-a.first) / 1e9
	}
	if s.WindowS > 0 {
		w := s.WindowS
		s.Throughput = Throughput{
			RequestsPerS:     float64(a.reqs.Completed) / w,
			OutputTokensPerS: float64(a.outSum) / w,
			InputTokensPerS:  float64(a.inSum) / w,
			TotalTokensPerS:  float64(a.inSum+a.outSum) / w,
		}
		s.Goodput.RequestsPerS = float64(a.good) / w
	}
	if len(a.perUser) > 0 {
		var sum float64
		for _, v := range a.perUser {
			sum += v
		}
		s.Throughput.OutputTokensPerSU = sum / float64(len(a.perUser))
	}
	s.Goodput.Good = a.good
	if a.goodBase > 0 {
		s.Goodput.Ratio = float64(a.good) / float64(a.goodBase)
	}
	s.Errors.Total = a.reqs.Failed - a.reqs.Canceled
	if n := a.reqs.Sent - a.reqs.Canceled; n > 0 {
		s.Errors.Ratio = float64(s.Errors.Total) / float64(n)
	}
	if len(a.errs) > 0 {
		s.Errors.ByClass = a.errs
	}
	s.SelfCheck = a.selfCheck()
	return s
}

// selfCheck compares what the client dispatched with what it scheduled.
//
// The client is flagged as the possible bottleneck when its p99 dispatch
// lag exceeds 1 ms or a tenth of the mean gap between arrivals, whichever
// is larger: below that, lateness is small beside the arrival process
// itself.
func (a *Aggregator) selfCheck() SelfCheck {
	c := SelfCheck{DispatchLag: NewDist(a.lag, a.opts.Percentiles)}
	if a.opts.RequestedRate <= 0 {
		return c
	}
	c.RequestedRate = a.opts.RequestedRate
	n := float64(a.reqs.Sent - 1)
	if span := a.lastSched - a.firstSched; n > 0 && span > 0 {
		c.ScheduledRate = n / (float64(span) / 1e9)
	}
	if span := a.lastDispatchNS - a.first; n > 0 && span > 0 {
		c.AchievedRate = n / (float64(span) / 1e9)
	}
	limit := max(1.0, 100/a.opts.RequestedRate) // ms: 1 ms, or a tenth of the mean gap
	if c.DispatchLag.Count > 0 && c.DispatchLag.P99 > limit {
		c.ClientBound = true
		c.Notes = append(c.Notes, fmt.Sprintf(
			"the client fell behind its arrival schedule: p99 dispatch lag %.1f ms (limit %.1f ms); dispatched at %.3g req/s against %.3g scheduled",
			c.DispatchLag.P99, limit, c.AchievedRate, c.ScheduledRate))
	}
	return c
}
