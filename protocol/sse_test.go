package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// chunkReader returns its chunks one Read at a time, so tests control how
// events are split across reads.
type chunkReader struct {
	chunks []string
	err    error // returned after the last chunk, io.EOF if nil
	reads  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	c.reads++
	return n, nil
}

type gotEvent struct {
	typ, data string
}

func readAll(t *testing.T, r io.Reader) ([]gotEvent, error) {
	t.Helper()
	s := newSSEReader(r, time.Now)
	var out []gotEvent
	for {
		ev, err := s.next()
		if err != nil {
			return out, err
		}
		out = append(out, gotEvent{ev.Type, string(ev.Data)})
		if len(out) > 1000 {
			t.Fatal("runaway reader")
		}
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []gotEvent
	}{
		{"one event", []string{"data: {\"a\":1}\n\n"}, []gotEvent{{"", `{"a":1}`}}},
		{"CRLF", []string{"data: x\r\n\r\ndata: y\r\n\r\n"}, []gotEvent{{"", "x"}, {"", "y"}}},
		{"CR only", []string{"data: x\r\rdata: y\r\r"}, []gotEvent{{"", "x"}, {"", "y"}}},
		{"CRLF split between reads", []string{"data: x\r", "\n\r", "\ndata: y\n\n"}, []gotEvent{{"", "x"}, {"", "y"}}},
		{"event split mid-line", []string{"da", "ta: hel", "lo\n", "\n"}, []gotEvent{{"", "hello"}}},
		{"multi-line data joined", []string{"data: a\ndata: b\ndata:c\n\n"}, []gotEvent{{"", "a\nb\nc"}}},
		{"comments and unknown fields skipped", []string{": ping\nid: 7\nretry: 10\ndata: x\n\n: keep-alive\n\n"}, []gotEvent{{"", "x"}}},
		{"many keep-alives", []string{strings.Repeat(": ping\n\n", 500) + "data: x\n\n"}, []gotEvent{{"", "x"}}},
		{"event type", []string{"event: error\ndata: {\"message\":\"boom\"}\n\n"}, []gotEvent{{"error", `{"message":"boom"}`}}},
		{"no space after colon", []string{"data:x\n\n"}, []gotEvent{{"", "x"}}},
		{"two spaces keep one", []string{"data:  x\n\n"}, []gotEvent{{"", " x"}}},
		{"field without colon", []string{"data\n\n"}, []gotEvent{{"", ""}}},
		{"final event without blank line", []string{"data: a\n\ndata: [DONE]\n"}, []gotEvent{{"", "a"}, {"", "[DONE]"}}},
		{"final line without ending", []string{"data: a\n\ndata: [DONE]"}, []gotEvent{{"", "a"}, {"", "[DONE]"}}},
		{"cut off mid-line", []string{"data: a\n\ndata: {\"choices\":[{\"del"}, []gotEvent{{"", "a"}}},
		{"cut off mid-event", []string{"data: a\n\ndata: b\ndata: {\"x"}, []gotEvent{{"", "a"}}},
		{"blank lines between events", []string{"\n\n\ndata: a\n\n\n\ndata: b\n\n"}, []gotEvent{{"", "a"}, {"", "b"}}},
		{"several events in one read", []string{"data: 1\n\ndata: 2\n\ndata: 3\n\n"}, []gotEvent{{"", "1"}, {"", "2"}, {"", "3"}}},
		{"large event", []string{"data: " + strings.Repeat("x", 100000) + "\n\n"}, []gotEvent{{"", strings.Repeat("x", 100000)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, &chunkReader{chunks: append([]string(nil), tt.chunks...)})
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v; want io.EOF", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events = %q; want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %q; want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSSEReaderTransportError(t *testing.T) {
	boom := errors.New("connection reset by peer")
	got, err := readAll(t, &chunkReader{chunks: []string{"data: a\n\ndata: partial"}, err: boom})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v; want the transport's error", err)
	}
	// The half-received event is not handed over: it was cut off.
	if len(got) != 1 || got[0].data != "a" {
		t.Errorf("events = %q", got)
	}
}

func TestSSEReaderTooLarge(t *testing.T) {
	big := strings.NewReader("data: " + strings.Repeat("x", maxEventBytes+10))
	_, err := readAll(t, big)
	if !errors.Is(err, errEventTooLarge) {
		t.Errorf("err = %v; want errEventTooLarge", err)
	}
}

// TestSSEReaderStampsCompletingRead checks that an event is stamped with the
// time of the read that completed it, not a later one and not the time of
// parsing.
func TestSSEReaderStampsCompletingRead(t *testing.T) {
	var clock time.Time
	base := time.Unix(1000, 0)
	r := &stampingReader{chunks: []string{"data: a", "\n\ndata: b\n\n", "data: c\n\n"}, clock: &clock, base: base}
	s := newSSEReader(r, func() time.Time { return clock })
	var ats []time.Duration
	for {
		ev, err := s.next()
		if err != nil {
			break
		}
		ats = append(ats, ev.At.Sub(base))
	}
	// Read 1 (t=1s) delivers "data: a" (incomplete), read 2 (t=2s)
	// completes a and carries b, read 3 (t=3s) carries c.
	want := []time.Duration{2 * time.Second, 2 * time.Second, 3 * time.Second}
	if len(ats) != 3 || ats[0] != want[0] || ats[1] != want[1] || ats[2] != want[2] {
		t.Errorf("event times = %v; want %v", ats, want)
	}
}

type stampingReader struct {
	chunks []string
	clock  *time.Time
	base   time.Time
	n      int
}

func (r *stampingReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	r.n++
	*r.clock = r.base.Add(time.Duration(r.n) * time.Second)
	n := copy(p, r.chunks[0])
	r.chunks = r.chunks[1:]
	return n, nil
}

// referenceParse is a direct transcription of the EventSource parsing
// rules, used as the oracle for the fuzz test: simple and slow, with no
// buffering to get wrong.
func referenceParse(input string) []gotEvent {
	var out []gotEvent
	var data []string
	has := false
	typ := ""
	lines := splitLines(input)
	for i, line := range lines {
		last := i == len(lines)-1
		if line.text == "" && line.ended {
			if has {
				out = append(out, gotEvent{typ, strings.Join(data, "\n")})
			}
			data, has, typ = nil, false, ""
			continue
		}
		if !line.ended && last {
			// An unterminated last line is kept only when it is a bare
			// "data: [DONE]" (see finish); otherwise it and any event it
			// belongs to were cut off.
			if !has && isDoneLine([]byte(line.text)) {
				out = append(out, gotEvent{typ, "[DONE]"})
			}
			return out
		}
		if strings.HasPrefix(line.text, ":") {
			continue
		}
		name, value, found := strings.Cut(line.text, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data = append(data, value)
			has = true
		case "event":
			typ = value
		}
	}
	if has {
		out = append(out, gotEvent{typ, strings.Join(data, "\n")})
	}
	return out
}

type sseLine struct {
	text  string
	ended bool
}

func splitLines(s string) []sseLine {
	var out []sseLine
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, sseLine{s, false})
			break
		}
		out = append(out, sseLine{s[:i], true})
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

func FuzzSSEReader(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", uint8(7))
	f.Add("data: a\r\n\r\n: c\r\nevent: error\r\ndata: b\r\ndata: c\r\n\r\n", uint8(1))
	f.Add("data:x\r\rdata:y\r", uint8(3))
	f.Add("\n\n\ndata\n\n", uint8(2))
	f.Fuzz(func(t *testing.T, input string, split uint8) {
		// Cut the input into reads of `split+1` bytes: the result must not
		// depend on how the bytes arrive.
		step := int(split)%13 + 1
		var chunks []string
		for i := 0; i < len(input); i += step {
			chunks = append(chunks, input[i:min(i+step, len(input))])
		}
		got, err := readAll(t, &chunkReader{chunks: chunks})
		if !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v", err)
		}
		want := referenceParse(input)
		if len(got) != len(want) {
			t.Fatalf("input %q split %d: got %q; want %q", input, step, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("input %q split %d: event %d = %q; want %q", input, step, i, got[i], want[i])
			}
		}
		// And the same bytes in one read.
		whole, _ := readAll(t, bytes.NewReader([]byte(input)))
		if len(whole) != len(want) {
			t.Fatalf("input %q whole: got %q; want %q", input, whole, want)
		}
	})
}
