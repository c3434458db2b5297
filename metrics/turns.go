package metrics

import (
	"strconv"

	"github.com/infermatrix/infermatrix/metrics/samples"
)

// TurnSummary is one turn of a conversation row's conversations (Record.Turn),
// over its successful measured requests. A conversation's later turns carry
// its earlier ones, so their prompts grow turn by turn; a server whose prefix
// cache holds the history serves that growth from the cache, and their TTFT
// stays near the first turn's instead of growing with the prompt. The row's
// own figures mix every turn and hide both.
type TurnSummary struct {
	Turn int `json:"turn"` // from 0
	// Requests counts the turn's successful measured requests, which the
	// distributions below describe.
	Requests    int  `json:"requests"`
	TTFT        Dist `json:"ttft_ms"`
	ITL         Dist `json:"itl_ms"`
	InputTokens Dist `json:"input_tokens"`
	// CachedTokens are the prompt tokens the server said it found in its
	// prefix cache, and CacheHitRatio their share of the turn's prompt
	// tokens; both absent when the server reported none for the turn.
	CachedTokens  *Dist    `json:"cached_tokens,omitempty"`
	CacheHitRatio *float64 `json:"cache_hit_ratio,omitempty"`
}

// turnAcc gathers each turn's samples as a row's records are added.
type turnAcc struct {
	turns []*turnSamples // by turn
	// store and limit are where the turns' samples spill, and from how
	// many (Options.SpillLimit).
	store *samples.Store
	limit int
}

type turnSamples struct {
	n                      int
	ttft, itl, in, cached  samples.Column
	cachedSum, cachedInSum int64
}

// add folds in a successful measured request of a conversation; records
// without a turn are not conversations' and are left out.
func (t *turnAcc) add(r *Record, v measured) {
	if r.Turn == nil || *r.Turn < 0 {
		return
	}
	k := *r.Turn
	for len(t.turns) <= k {
		ts := &turnSamples{}
		for _, c := range []*samples.Column{&ts.ttft, &ts.itl, &ts.in, &ts.cached} {
			*c = samples.NewColumn(t.store, t.limit)
		}
		t.turns = append(t.turns, ts)
	}
	s := t.turns[k]
	s.n++
	if v.ttft > 0 {
		s.ttft.Add(ms(v.ttft))
	}
	eventGaps(r.Events, func(ns int64) { s.itl.Add(ms(ns)) })
	if v.hasIn {
		s.in.Add(float64(v.in))
	}
	if r.CachedTokens != nil {
		s.cached.Add(float64(*r.CachedTokens))
		s.cachedSum += int64(*r.CachedTokens)
		s.cachedInSum += int64(r.InputTokens.Count())
	}
}

// summary is each turn's figures, in turn order; nil for a row without
// conversations. A turn no successful request reached is listed with
// Requests 0 and empty distributions, not left out, so that turn k is
// always ByTurn[k].
func (t *turnAcc) summary(a *Aggregator, extra []float64) []TurnSummary {
	if len(t.turns) == 0 {
		return nil
	}
	out := make([]TurnSummary, len(t.turns))
	for k, s := range t.turns {
		turn := "turn " + strconv.Itoa(k) + " "
		ts := TurnSummary{Turn: k, Requests: s.n,
			TTFT: a.dist(turn+"ttft_ms", &s.ttft, extra), ITL: a.dist(turn+"itl_ms", &s.itl, extra), InputTokens: a.dist(turn+"input_tokens", &s.in, extra)}
		if s.cached.Len() > 0 {
			d := a.dist(turn+"cached_tokens", &s.cached, extra)
			ts.CachedTokens = &d
			if s.cachedInSum > 0 {
				h := round6(float64(s.cachedSum) / float64(s.cachedInSum))
				ts.CacheHitRatio = &h
			}
		}
		out[k] = ts
	}
	return out
}
