package calibrate

import (
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim/engine"
)

// maxVirtual bounds one row's replay on the virtual clock: a configuration
// so slow that the row has not drained by then is a poor fit, not a figure,
// and the optimiser must not spend minutes finding that out.
const maxVirtual = 2 * time.Hour

// simulated is what replaying a row on a configuration gave.
type simulated struct {
	figures
	cacheHit *float64
	// done is the share of the row's requests that finished within
	// maxVirtual; below one, the figures describe part of the row.
	done float64
}

// figuresOf reads a replayed row's figures from its summary.
func figuresOf(s metrics.RowSummary, done float64) simulated {
	out := simulated{done: done}
	if s.Metrics.TTFT.Count > 0 && s.Metrics.TTFT.P50 > 0 {
		out.ttftP50 = ptr(s.Metrics.TTFT.P50)
	}
	if s.Metrics.TPOT.Count > 0 && s.Metrics.TPOT.P50 > 0 {
		out.tpotP50 = ptr(s.Metrics.TPOT.P50)
	}
	if s.Throughput.OutputTokensPerS > 0 {
		out.outputTPS = ptr(s.Throughput.OutputTokensPerS)
	}
	out.ttftTail, out.tpotTail = tail(s.Metrics.TTFT), tail(s.Metrics.TPOT)
	if s.Cache.PromptTokens > 0 {
		out.cacheHit = ptr(s.Cache.HitRatio)
	}
	return out
}

// summarise is the row summary of replayed records, by the run's
// semantics: records never sent or not finished are left out, as a
// measured row leaves out what did not end.
func summarise(recs []*metrics.Record, rw *row, semantics string) metrics.RowSummary {
	agg := metrics.NewAggregator(metrics.Options{Semantics: semantics, API: rw.api,
		OpenLoop: rw.plan.Load.Mode != schema.ModeConcurrency, RequestedRate: rw.plan.Load.Rate})
	for _, rec := range recs {
		if rec != nil && rec.EndNS > 0 {
			agg.Add(rec)
		}
	}
	return agg.Summary(rw.plan.ID, rw.plan.Base, metrics.RowComplete)
}

// firstUnique is the first prompt token id no request shares: ids below
// it are the shared prefix, the same for every request.
const firstUnique = 1 << 20

// replayRun replays rows in the order given on one engine, each row
// starting when the one before has drained, as one server serves a run's
// rows one after the other: what the earlier rows left in the prefix cache
// and how far they moved the engine's noise carry over. A run of the
// built-in server replayed on its own parameters and seed this way gives
// back the run's own noise.
func replayRun(cfg engine.Config, rows []*row) ([][]*metrics.Record, []float64) {
	recs := make([][]*metrics.Record, len(rows))
	done := make([]float64, len(rows))
	c, err := engine.New(cfg)
	if err != nil {
		return recs, done
	}
	next := firstUnique // unique across rows: one row's prompts must not hit another's
	for i, rw := range rows {
		recs[i], done[i] = replayOn(c, rw, &next)
	}
	return recs, done
}

// replayOn replays rw on c from c's current time, which is the row's time
// zero, drawing prompt ids no request shares from *nextToken.
func replayOn(c *engine.Cluster, rw *row, nextToken *int) ([]*metrics.Record, float64) {
	origin := c.Now()
	reqs := rw.requests
	// A closed-loop row that ran for a duration sent as many requests as
	// its server's speed allowed: the replay sends as many as the
	// replayed server's allows, stopping as the runner does, at the
	// duration after the first measured request, and cycles through the
	// measured lengths if it needs more. Sending the run's count instead
	// would end the row early or late, and leave the engine's noise for
	// the next rows drawn a different number of times.
	limit := len(reqs)
	byDuration := rw.plan.Load.Mode == schema.ModeConcurrency && rw.plan.Duration > 0 && rw.plan.Requests == 0 && !rw.truncated
	if byDuration {
		limit = 2*len(reqs) + 16
	}
	warmN := 0
	for _, q := range reqs {
		if q.warmup {
			warmN++
		}
	}
	firstMeasured := time.Duration(-1)
	recs := make([]*metrics.Record, limit)
	finished := 0
	nextID := 0
	// Prompt ids: a row-wide shared prefix for each request's shared
	// tokens, then ids no other request uses, so the prefix cache hits
	// what the workload shares and nothing else.
	prompt := func(q request) []int {
		ids := make([]int, q.prompt)
		for i := range ids {
			if i < q.shared {
				ids[i] = i + 1
			} else {
				ids[i] = *nextToken
				*nextToken++
			}
		}
		return ids
	}
	inflight, planned := 0, len(reqs)
	maxLen := c.Config().MaxModelLen
	var queue []int // rate rows over max_concurrency wait here
	var send func(i int, scheduled time.Duration)
	var done func()
	send = func(i int, scheduled time.Duration) {
		q := reqs[i%len(reqs)]
		q.warmup = i < warmN
		if !q.warmup && firstMeasured < 0 {
			firstMeasured = c.Now() - origin
		}
		q.output = min(q.output, maxLen-1)
		q.prompt = max(min(q.prompt, maxLen-q.output), 1)
		q.shared = min(q.shared, q.prompt)
		start := c.Now() - origin
		rec := &metrics.Record{
			Seq: int64(i), Warmup: q.warmup, Stream: rw.plan.Streaming,
			ScheduledNS: int64(scheduled), StartNS: int64(start),
			InputTokens:  metrics.Tokens{Requested: q.prompt, Server: ptrInt(q.prompt), Client: q.prompt},
			OutputTokens: metrics.Tokens{Requested: q.output, Server: ptrInt(q.output), Client: q.output},
			SharedTokens: q.shared,
		}
		if start > scheduled {
			rec.QueueNS = int64(start - scheduled)
		}
		recs[i] = rec
		inflight++
		if rw.plan.Streaming {
			rec.Events = make([]int64, 0, q.output)
		}
		r := &engine.Request{Prompt: prompt(q), Output: q.output}
		r.Deliver = func(k int, at time.Duration) {
			rel := int64(at - origin - start)
			if k == 0 {
				rec.FirstTokenNS, rec.FirstChoiceNS = rel, rel
			}
			if rw.plan.Streaming {
				rec.Events = append(rec.Events, rel)
			}
			if k == q.output-1 {
				rec.LastTokenNS, rec.LastChoiceNS, rec.EndNS, rec.UsageNS = rel, rel, rel, rel
				cached := r.Info().CachedTokens
				rec.CachedTokens = &cached
				rec.Status = 200
				finished++
				inflight--
				done()
			}
		}
		c.Submit(r)
	}
	mode := rw.plan.Load.Mode
	switch mode {
	case schema.ModeConcurrency:
		done = func() {
			if byDuration && firstMeasured >= 0 && c.Now()-origin-firstMeasured >= time.Duration(rw.plan.Duration) {
				return // the row's duration is over: this user stops
			}
			if nextID < limit {
				nextID++
				send(nextID-1, c.Now()-origin)
			}
		}
		for range min(max(rw.plan.Load.Concurrency, 1), limit) {
			nextID++
			send(nextID-1, 0)
		}
	default:
		limit := rw.plan.Load.MaxConcurrency
		done = func() {
			if len(queue) > 0 {
				i := queue[0]
				queue = queue[1:]
				send(i, time.Duration(reqs[i].scheduled))
			}
		}
		first := reqs[0].scheduled
		for i, q := range reqs {
			at := time.Duration(q.scheduled - first)
			if at > maxVirtual {
				planned = i
				break
			}
			c.RunUntil(origin + at)
			if limit > 0 && inflight >= limit {
				queue = append(queue, i)
				continue
			}
			send(i, at)
		}
	}
	if byDuration {
		planned = -1 // known only as users stop
	}
	for finished < planned || (planned < 0 && finished < nextID) {
		if !c.Step() || c.Now()-origin > maxVirtual {
			break
		}
	}
	if planned < 0 {
		planned = nextID
	}
	return recs[:max(planned, nextID)], float64(finished) / float64(max(planned, 1))
}

func ptrInt(v int) *int { return &v }
