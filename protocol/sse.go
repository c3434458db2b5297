package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// maxEventBytes bounds one server-sent event. A real event is a few hundred
// bytes; a server that streams megabytes without an event boundary is broken,
// and reading on would only exhaust memory.
const maxEventBytes = 8 << 20

// errEventTooLarge is returned when an event exceeds maxEventBytes.
var errEventTooLarge = errors.New("server-sent event larger than 8 MiB")

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	// Data is the event's data, its data lines joined with "\n". It aliases
	// the reader's buffer and is valid until the next call to next.
	Data []byte
	// Type is the event field ("" when absent, i.e. "message").
	Type string
	// At is when the read that completed the event returned: the moment the
	// client could first have acted on it.
	At time.Time
}

// sseReader reads server-sent events (the WHATWG EventSource format) from a
// response body.
//
// We read SSE ourselves rather than through go-openai's stream reader
// because measurement needs what it hides: each event's arrival time, taken
// when its bytes are read and before any JSON decoding; a stream that ends
// without [DONE] reported as such rather than as a normal end; no cap on
// keep-alive comment lines; and multi-line data fields joined as the format
// specifies.
//
// Lines may end in CRLF, LF or CR. Comment lines (":...") and fields other
// than data and event are skipped. An event is dispatched at a blank line; at
// end of input a pending event is dispatched too, since some servers omit
// the final blank line after [DONE] (see finish).
type sseReader struct {
	r     io.Reader
	buf   []byte
	start int // first unconsumed byte
	end   int // end of read data
	at    time.Time
	now   func() time.Time
	eof   bool
	err   error

	data    []byte // the event being assembled
	hasData bool
	typ     string
	// skipLF is set after a lone CR ended a line at the end of the buffer,
	// so an LF arriving in the next read is not taken for a blank line.
	skipLF bool

	// hold, when set, accounts for the buffers' growth past their first
	// size, which a long event causes (see respHold).
	hold     *respHold
	dataHeld int // cap(data) as accounted in hold

	pooled *sseBuffer // where buf came from, for release
}

// sseBufSize is the read buffer an sseReader starts with.
const sseBufSize = 32 << 10

// maxPooledData is the largest event buffer kept for the next reader.
const maxPooledData = 4 << 10

// sseBuffers recycles readers' buffers from one request to the next
// (release): a fresh 32 KiB buffer, allocated and cleared for every
// request, was most of what a streamed request allocated (issue 16). A
// buffer that grew for a long event is left to the collector, so one huge
// response does not pin its memory.
var sseBuffers = sync.Pool{New: func() any { return &sseBuffer{buf: make([]byte, sseBufSize)} }}

type sseBuffer struct{ buf, data []byte }

func newSSEReader(r io.Reader, now func() time.Time) *sseReader {
	b := sseBuffers.Get().(*sseBuffer)
	return &sseReader{r: r, buf: b.buf, data: b.data[:0], now: now, pooled: b}
}

// release gives the reader's buffers back for another request's reader.
// Nothing the reader returned may be used after it: events alias them.
func (s *sseReader) release() {
	b := s.pooled
	if b == nil || len(s.buf) != sseBufSize {
		return
	}
	b.buf, b.data = s.buf, nil
	if cap(s.data) <= maxPooledData {
		b.data = s.data[:0]
	}
	s.buf, s.data, s.pooled = nil, nil, nil
	sseBuffers.Put(b)
}

// next returns the next event. At the end of the stream it returns io.EOF;
// any other error is the transport's (a reset, a timeout) or
// errEventTooLarge.
func (s *sseReader) next() (sseEvent, error) {
	s.data = s.data[:0]
	s.hasData = false
	s.typ = ""
	for {
		line, ok := s.line()
		if !ok {
			if s.eof {
				return s.finish()
			}
			if err := s.fill(); err != nil {
				return sseEvent{}, err
			}
			continue
		}
		if ev, done := s.field(line); done {
			return ev, nil
		}
	}
}

// finish handles the end of input. After a transport error nothing pending
// is handed over: the event was cut off. After a clean end, a pending event
// whose lines all arrived is dispatched even without its final blank line,
// and so is a last line "data: [DONE]" without a line ending, since some
// servers end that way; any other unterminated last line was cut off
// mid-way and is dropped, so the stream reads as truncated rather than as
// a malformed event.
func (s *sseReader) finish() (sseEvent, error) {
	if s.err != nil {
		return sseEvent{}, s.err
	}
	if s.start < s.end {
		line := s.buf[s.start:s.end]
		s.start = s.end
		if !s.hasData && isDoneLine(line) {
			return sseEvent{Data: []byte("[DONE]"), Type: s.typ, At: s.at}, nil
		}
		if s.hasData {
			s.hasData = false
			s.data = s.data[:0]
		}
		return sseEvent{}, io.EOF
	}
	if s.hasData {
		s.hasData = false
		return sseEvent{Data: s.data, Type: s.typ, At: s.at}, nil
	}
	return sseEvent{}, io.EOF
}

func isDoneLine(line []byte) bool {
	v, ok := bytes.CutPrefix(line, []byte("data:"))
	return ok && string(bytes.TrimSpace(v)) == "[DONE]"
}

// field processes one line; done is set when a blank line dispatches an
// event.
func (s *sseReader) field(line []byte) (sseEvent, bool) {
	if len(line) == 0 {
		if !s.hasData {
			s.typ = ""
			return sseEvent{}, false // blank line with nothing pending
		}
		return sseEvent{Data: s.data, Type: s.typ, At: s.at}, true
	}
	if line[0] == ':' {
		return sseEvent{}, false // comment, e.g. ": ping"
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.typ = string(value)
	}
	return sseEvent{}, false
}

// line returns the next complete line without its ending, or ok=false when
// the buffer holds no complete line.
func (s *sseReader) line() ([]byte, bool) {
	if s.skipLF && s.start < s.end {
		if s.buf[s.start] == '\n' {
			s.start++
		}
		s.skipLF = false
	}
	rest := s.buf[s.start:s.end]
	// Two vectorized single-byte searches beat IndexAny's byte-by-byte
	// set test: find the LF, then any CR before it (a CR-only line end,
	// or the CR of a CRLF).
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		i = len(rest)
	}
	if j := bytes.IndexByte(rest[:i], '\r'); j >= 0 {
		i = j
	}
	if i == len(rest) {
		return nil, false
	}
	line := rest[:i]
	adv := i + 1
	if rest[i] == '\r' {
		if i+1 < len(rest) {
			if rest[i+1] == '\n' {
				adv++
			}
		} else if !s.eof {
			s.skipLF = true // the LF of a CRLF may be in the next read
		}
	}
	s.start += adv
	return line, true
}

// fill reads more input, compacting or growing the buffer, and stamps the
// time the read returned.
func (s *sseReader) fill() error {
	if s.start > 0 {
		// Pending event data is copied into s.data as lines complete, so
		// only the partial line at the end needs keeping.
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= maxEventBytes {
			return errEventTooLarge
		}
		if err := s.hold.grow(int64(len(s.buf))); err != nil {
			return err
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	if len(s.data) > maxEventBytes {
		return errEventTooLarge
	}
	if c := cap(s.data); c > s.dataHeld {
		if err := s.hold.grow(int64(c - s.dataHeld)); err != nil {
			return err
		}
		s.dataHeld = c
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.at = s.now()
	s.end += n
	if err != nil {
		s.eof = true
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
	}
	if n == 0 && err == nil {
		return nil // a zero read; try again
	}
	return nil
}

// String is for debugging.
func (e sseEvent) String() string {
	return fmt.Sprintf("event %q data %q at %s", e.Type, e.Data, e.At.Format(time.RFC3339Nano))
}
