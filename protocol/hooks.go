package protocol

import "context"

// A request's context may carry hooks the runner sets and the stream
// reader calls: the reader stamps the first token and reads the answer's
// text, but sees only the request's record and context, not why the
// runner wants them.

// firstTokenKey carries a request's first-token hook in its context.
type firstTokenKey struct{}

// WithFirstToken returns ctx carrying f, called when the request's first
// token arrives: the runner's prefill gate gives its slot back then.
func WithFirstToken(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, firstTokenKey{}, f)
}

// firstToken calls the hook ctx carries, if any.
func firstToken(ctx context.Context) {
	if f, ok := ctx.Value(firstTokenKey{}).(func()); ok {
		f()
	}
}

// Reply collects the text of a turn's answer (its content, not its
// reasoning, which chat APIs ask clients not to send back), for the next
// turn's history. The client fills it when the request's context holds
// one (WithReply).
type Reply struct{ b []byte }

func (s *Reply) add(parts ...[]byte) {
	for _, p := range parts {
		s.b = append(s.b, p...)
	}
}

// Text is the answer's text collected so far; "" when it carried none.
func (s *Reply) Text() string { return string(s.b) }

type replyKey struct{}

// WithReply returns ctx carrying s, which the client fills with the
// answer's text: a conversation's next turn sends it back.
func WithReply(ctx context.Context, s *Reply) context.Context {
	return context.WithValue(ctx, replyKey{}, s)
}

// replyOf is the sink of a request's context, or nil.
func replyOf(ctx context.Context) *Reply {
	s, _ := ctx.Value(replyKey{}).(*Reply)
	return s
}
