package metrics

import "testing"

// TestByTurn splits a conversation row's successful measured requests by
// turn: TTFT, gaps, prompt length and cache hits each turn's own; a turn
// whose requests all failed is listed empty, so turn k stays ByTurn[k];
// cache figures are absent where the server said nothing; rows without
// conversations have no split.
func TestByTurn(t *testing.T) {
	a := NewAggregator(Options{})
	turn := func(k int, r *Record) *Record { r.Turn, r.ConversationID = &k, "c"; return r }
	r0 := turn(0, stream(0, 100, 110))
	r0.CachedTokens = intp(0)
	r1 := turn(1, stream(200, 20, 25, 30))
	r1.InputTokens = Tokens{Requested: 300, Server: intp(300), Client: 300}
	r1.CachedTokens = intp(240)
	a.Add(r0)
	a.Add(r1)
	a.Add(turn(2, &Record{Stream: true, StartNS: 400 * msNS, EndNS: msNS, Error: &Error{Class: ErrHTTP}}))
	r3 := turn(3, stream(500, 40)) // the server said nothing of its cache
	a.Add(r3)
	warm := turn(0, stream(0, 1))
	warm.Warmup = true
	a.Add(warm)
	bt := a.Summary("r", "r", RowComplete).ByTurn
	if len(bt) != 4 {
		t.Fatalf("by_turn %+v; want turns 0 to 3", bt)
	}
	if bt[0].Requests != 1 || bt[0].TTFT.Mean != 100 || bt[0].ITL.Mean != 10 || bt[0].InputTokens.Mean != 100 || *bt[0].CacheHitRatio != 0 {
		t.Errorf("turn 0: %+v", bt[0])
	}
	if bt[1].TTFT.Mean != 20 || bt[1].ITL.Count != 2 || bt[1].InputTokens.Mean != 300 || bt[1].CachedTokens.Mean != 240 || *bt[1].CacheHitRatio != 0.8 {
		t.Errorf("turn 1: %+v", bt[1])
	}
	if bt[2].Turn != 2 || bt[2].Requests != 0 || bt[2].TTFT.Count != 0 {
		t.Errorf("turn 2 (failed): %+v; want listed, empty", bt[2])
	}
	if bt[3].CachedTokens != nil || bt[3].CacheHitRatio != nil {
		t.Errorf("turn 3: cache %v, %v; want absent, not zero", bt[3].CachedTokens, bt[3].CacheHitRatio)
	}
	b := NewAggregator(Options{})
	b.Add(stream(0, 10, 20))
	if s := b.Summary("p", "p", RowComplete); s.ByTurn != nil {
		t.Errorf("a row without conversations: by_turn %+v", s.ByTurn)
	}
}
