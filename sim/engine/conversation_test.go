package engine

import "testing"

// TestReplyBlocksCached: a request whose generated ids are known leaves
// its reply's full blocks in the prefix cache, as vLLM does, so a chat's
// next turn (the prompt, the reply, a new message) hits both; without
// the ids, only the prompt's blocks are there.
func TestReplyBlocksCached(t *testing.T) {
	const bs, prompt, reply = 16, 10 * 16, 5*16 + 3
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	for _, known := range []bool{true, false} {
		c := newCluster(t, cfg)
		p, g := ids(0, prompt), ids(50_000, reply)
		first := &Request{Prompt: p, Output: reply}
		if known {
			first.Generated = g
		}
		c.Submit(first)
		drain(c)
		next := append(append(append([]int(nil), p...), g...), ids(90_000, 40)...)
		second := submit(c, next, 2)
		drain(c)
		// The reply's last token is never fed back, so its KV (and the
		// block it would complete) is not computed: whole blocks of the
		// prompt and all but the reply's last token hit.
		want := prompt
		if known {
			want = (prompt + reply - 1) / bs * bs
		}
		if got := second.Info().CachedTokens; got != want {
			t.Errorf("generated ids known %v: the next turn hit %d cached tokens; want %d", known, got, want)
		}
	}
}
