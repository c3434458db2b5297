package workload

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// ErrBadSource is wrapped by the error a run returns, before anything is
// sent, when a row's dataset or trace file has lines that cannot be used:
// like a problem in the experiment file itself, it is found before the
// first request rather than halfway through a run.
var ErrBadSource = errors.New("bad dataset or trace file")

// Limits on reading source files. A dataset or trace file comes from
// anywhere (a download, a colleague, a mount that is really a device), and
// reading it must end, in bounded memory, whatever it holds: each limit is
// far above what real files have, so only a broken or hostile file meets
// one, and it is reported as file:line like any other bad line.
const (
	// maxSourceBytes bounds a whole file. ShareGPT's largest public dump
	// is under 1 GiB and a day of Mooncake trace is tens of MiB. The file
	// is read through a limit too, so one that grows while it is read
	// stops there as well.
	maxSourceBytes = 4 << 30
	// maxSourceLine bounds one JSONL line and one ShareGPT conversation:
	// the largest prompt (maxPromptChars), written with JSON escapes, with
	// room to spare. Past it the file is not what its format says.
	maxSourceLine = 4 << 20
	// maxPromptChars bounds one prompt, in characters (a messages line:
	// all its contents together). A million characters is a quarter of a
	// million tokens or more, beyond any context window served today;
	// every request copies and tokenizes its prompt, so one much larger
	// costs the client memory for nothing the server would accept.
	maxPromptChars = 1 << 20
	// maxFileTokens bounds an input or output length a file gives
	// (input_length, output_length, max_tokens, output_tokens): ten
	// million tokens, far above any model's context.
	maxFileTokens = 10_000_000
	// maxTraceMS bounds a trace timestamp: seven days, in milliseconds.
	// A timestamp past it (1e300, say) is a broken file, not a week-long
	// replay, and would overflow the schedule.
	maxTraceMS = 7 * 24 * 3600 * 1000
	// maxSourceProblems is how many bad lines of one file are reported;
	// past that the file is probably in another format altogether, and
	// reading stops.
	maxSourceProblems = 10
	// maxProblemSpan is how far reading goes on after a file's first
	// problem, looking for more to report at once: the first problem is
	// reported after at most this much more reading, never after reading
	// the rest of a large file.
	maxProblemSpan = 16 << 20
)

// Formats of dataset and trace files.
const (
	formatJSONL    = "jsonl"
	formatShareGPT = "sharegpt"
	formatMooncake = "mooncake"
)

// entry is one request of a dataset file or trace, as read from the file.
// Only what a request needs is kept: a big file costs the entries a row
// will send, not the file's size.
type entry struct {
	line     int                            // place in file order: the line (JSONL) or the conversation's index (ShareGPT)
	text     string                         // the prompt: a prompt line, a ShareGPT human turn, or joined messages for completions
	messages []openai.ChatCompletionMessage // a messages line, sent as is to the chat API
	output   int                            // output length the file gives; 0 when it gives none
	// A Mooncake line carries lengths, not text: its prompt is built from
	// the hash ids when the request is prepared (see blocks.go).
	mooncake bool
	input    int
	hashIDs  []int64
	atMS     float64 // trace timestamp in milliseconds
	// reply is a ShareGPT conversation's first reply, held only until its
	// tokens are counted as the entry's output length.
	reply string
	// turns are a ShareGPT conversation's non-empty human turns, for a
	// conversation row (the first is text); outputs the token counts of
	// the reply after each (0 where none), counted from replies when the
	// source is loaded.
	turns   []string
	outputs []int
	replies []string
}

// sourceSpec says how to read one row's file. Rows whose specs are equal
// read the file the same way, so the up-front check reads it once.
type sourceSpec struct {
	kind      string // "dataset" or "trace", for messages
	path      string
	format    string
	api       string // chat or completions: messages are joined for completions
	trace     bool   // timestamps are required
	needReply bool   // ShareGPT: the row sets no output_tokens, so the reply's length is the output length
	turns     bool   // ShareGPT: a conversation row replays every human turn, not only the first
	blockSize int    // Mooncake: tokens per hash id
}

// specOf returns how a row's file is read, with only the settings that
// matter to its format, so that rows reading one file alike share a spec.
func specOf(row *schema.PlannedRow, api string) (sourceSpec, bool) {
	var spec sourceSpec
	switch {
	case row.Trace != nil:
		spec = sourceSpec{kind: "trace", path: row.Trace.File, format: row.Trace.Format, trace: true, blockSize: row.Trace.BlockSize}
	case row.Dataset != nil:
		spec = sourceSpec{kind: "dataset", path: row.Dataset.File, format: row.Dataset.Format, blockSize: schema.DefaultBlockSize}
	default:
		return spec, false
	}
	switch spec.format {
	case formatJSONL:
		spec.api, spec.blockSize = api, 0
	case formatShareGPT:
		spec.needReply, spec.blockSize = row.Output.Mean == 0 && len(row.Output.Values) == 0, 0
		spec.turns = row.Conversation != nil
	}
	return spec, true
}

// sourceError lists the bad lines of one file.
type sourceError struct {
	spec     sourceSpec
	problems []string // "path:line: what is wrong", or "path: what is wrong"
	// stopped says why reading stopped before the end of the file, when
	// it did with problems found: the rest of the file was not checked.
	stopped string
}

func (e *sourceError) Error() string {
	var b strings.Builder
	n := len(e.problems)
	fmt.Fprintf(&b, "%s file %s: %d problem%s", e.spec.kind, e.spec.path, n, plural(n))
	for _, p := range e.problems {
		b.WriteString("\n  " + p)
	}
	if e.stopped != "" {
		fmt.Fprintf(&b, "\n  reading stopped %s; the rest of the file was not checked", e.stopped)
	}
	return b.String()
}

func (e *sourceError) Unwrap() error { return ErrBadSource }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// problems collects a file's bad lines, the first few: reading stops at
// maxSourceProblems, or maxProblemSpan bytes after the first.
type problems struct {
	spec  sourceSpec
	err   *sourceError
	first int64 // byte offset of the first problem
}

func (p *problems) add(line int, format string, args ...any) {
	if p.err == nil {
		p.err = &sourceError{spec: p.spec}
	}
	where := p.spec.path
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	p.err.problems = append(p.err.problems, where+": "+fmt.Sprintf(format, args...))
}

// addAt is add for a problem found at byte offset off, the place reading
// has reached.
func (p *problems) addAt(off int64, line int, format string, args ...any) {
	if p.err == nil {
		p.first = off
	}
	p.add(line, format, args...)
}

// enough says whether to stop reading at byte offset off, because enough
// problems are known to report now; it notes why in the error.
func (p *problems) enough(off int64) bool {
	if p.err == nil {
		return false
	}
	p.err.stopped = stopReason(len(p.err.problems), off-p.first)
	return p.err.stopped != ""
}

// stopReason says why reading stops with n problems found, the first
// span bytes back, or returns "" to read on.
func stopReason(n int, span int64) string {
	switch {
	case n >= maxSourceProblems:
		return fmt.Sprintf("after %d problems", n)
	case span > maxProblemSpan:
		return fmt.Sprintf("%d MiB after the first problem", maxProblemSpan>>20)
	}
	return ""
}

func (p *problems) result() error {
	if p.err == nil {
		return nil
	}
	return p.err
}

// readStats counts what a read found.
type readStats struct {
	used    int // usable entries
	skipped int // ShareGPT conversations without a usable prompt (and reply)
}

// readEntries reads a source file and calls keep with every usable entry,
// in file order; keep returns false to stop reading early. A bad line does
// not stop the read at once: the next bad lines, up to maxSourceProblems
// or maxProblemSpan bytes further, are reported together, so one pass
// shows most of what to fix.
func readEntries(spec sourceSpec, keep func(*entry) bool) (readStats, error) {
	ps := &problems{spec: spec}
	f, err := openSource(spec.path)
	if err != nil {
		ps.add(0, "%v", err)
		return readStats{}, ps.result()
	}
	defer f.Close()
	br, bom := skipBOMLen(bufio.NewReaderSize(&sizeLimit{r: f, left: maxSourceBytes}, 1<<20))
	var st readStats
	switch spec.format {
	case formatJSONL, formatMooncake:
		if spec.format == formatMooncake && spec.blockSize < 1 {
			ps.add(0, "block_size %d: want an integer ≥ 1", spec.blockSize)
			break
		}
		st = readLines(br, spec, ps, keep)
	case formatShareGPT:
		st = readShareGPT(br, f, bom, spec, ps, keep)
	default:
		ps.add(0, "unknown format %q", spec.format)
	}
	if ps.err == nil && st.used == 0 {
		what := "no prompts"
		if spec.format == formatShareGPT && st.skipped > 0 {
			what = fmt.Sprintf("no usable conversation (%d skipped: %s)", st.skipped, shareGPTNeed(spec))
		}
		ps.add(0, "%s", what)
	}
	return st, ps.result()
}

// openSource opens a dataset or trace file, refusing anything but a
// regular file of at most maxSourceBytes: a device such as /dev/zero, a
// named pipe or a directory never ends, or never starts. The file is
// checked before it is opened (opening a named pipe waits for a writer)
// and again once open, in case it was replaced in between.
func openSource(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regularSource(fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = regularSource(fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regularSource says what is wrong with a file that cannot be a source.
func regularSource(fi os.FileInfo) error {
	var what string
	switch t := fi.Mode().Type(); {
	case t.IsRegular():
		if fi.Size() > maxSourceBytes {
			return fmt.Errorf("the file is %.1f GiB; dataset and trace files are read up to %d GiB", float64(fi.Size())/(1<<30), maxSourceBytes>>30)
		}
		return nil
	case t&os.ModeDir != 0:
		what = "a directory"
	case t&os.ModeNamedPipe != 0:
		what = "a named pipe"
	case t&os.ModeSocket != 0:
		what = "a socket"
	case t&os.ModeDevice != 0:
		what = "a device"
	default:
		what = "not a regular file"
	}
	return fmt.Errorf("%s: dataset and trace files must be regular files, which end", what)
}

// errSourceTooBig is returned by a sizeLimit past its limit.
var errSourceTooBig = fmt.Errorf("the file grew past %d GiB while being read; dataset and trace files are read up to %d GiB", maxSourceBytes>>30, maxSourceBytes>>30)

// sizeLimit reads at most left bytes from r, then fails with
// errSourceTooBig if r has more. Unlike io.LimitReader it does not end
// quietly, which would cut the file's last line short and report it as a
// bad line, or a ShareGPT array as unterminated.
type sizeLimit struct {
	r    io.Reader
	left int64
}

func (l *sizeLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := io.ReadFull(l.r, one[:]); n > 0 {
			return 0, errSourceTooBig
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// skipBOM skips a UTF-8 byte order mark, which editors on Windows write
// and JSON parsers reject.
func skipBOM(br *bufio.Reader) *bufio.Reader {
	br, _ = skipBOMLen(br)
	return br
}

// skipBOMLen is skipBOM, also returning how many bytes it skipped.
func skipBOMLen(br *bufio.Reader) (*bufio.Reader, int64) {
	if b, err := br.Peek(3); err == nil && string(b) == "\xef\xbb\xbf" {
		br.Discard(3)
		return br, 3
	}
	return br, 0
}

// readLines reads a JSONL file: one JSON object per line, blank lines
// skipped.
func readLines(r io.Reader, spec sourceSpec, ps *problems, keep func(*entry) bool) readStats {
	var st readStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSourceLine)
	line := 0
	off := int64(0) // bytes read so far, near enough: a CRLF counts one
	for sc.Scan() {
		line++
		off += int64(len(sc.Bytes())) + 1
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var e *entry
		var msg string
		if spec.format == formatMooncake {
			e, msg = parseMooncake(b, spec)
		} else {
			e, msg = parseJSONL(b, spec)
		}
		if msg != "" {
			ps.addAt(off, line, "%s", msg)
			if ps.enough(off) {
				return st
			}
			continue
		}
		e.line = line
		st.used++
		if ps.err != nil {
			if ps.enough(off) {
				return st
			}
			continue
		}
		if !keep(e) {
			return st
		}
	}
	if err := sc.Err(); err != nil {
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			ps.add(line+1, "line longer than %d MiB, the most a line may hold (is this %s?)", maxSourceLine>>20, spec.format)
		default: // errSourceTooBig, or the file could not be read
			ps.add(0, "%v", err)
		}
	}
	return st
}

// object decodes one line as a JSON object, keeping each value raw so that
// every field gets a precise message.
func object(b []byte) (map[string]json.RawMessage, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, "not valid JSON: " + se.Error()
		}
		return nil, "want a JSON object, got " + clip(b)
	}
	return m, ""
}

// clip shortens a JSON value for a message.
func clip(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// intField reads an optional token length: an integer of at least lo and
// at most maxFileTokens.
func intField(m map[string]json.RawMessage, key string, lo int) (v int, ok bool, msg string) {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return 0, false, ""
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < float64(lo) {
		return 0, true, fmt.Sprintf("%s: want an integer ≥ %d, got %s", key, lo, clip(raw))
	}
	if f > maxFileTokens {
		return 0, true, fmt.Sprintf("%s: %s tokens is more than the %d a file may give", key, clip(raw), maxFileTokens)
	}
	return int(f), true, ""
}

// promptTooLong says what is wrong with a prompt of more than
// maxPromptChars characters, or returns "".
func promptTooLong(what, s string) string {
	if len(s) <= maxPromptChars { // fewer bytes than the limit: fewer characters too
		return ""
	}
	if n := utf8.RuneCountInString(s); n > maxPromptChars {
		return fmt.Sprintf("%s is %d characters; a prompt may have at most %d", what, n, maxPromptChars)
	}
	return ""
}

// stringField reads an optional string field.
func stringField(m map[string]json.RawMessage, key string) (s string, ok bool, msg string) {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return "", false, ""
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, fmt.Sprintf("%s: want a string, got %s", key, clip(raw))
	}
	return s, true, ""
}

// completionsJoin is what separates messages joined into one prompt for
// the completions API.
const completionsJoin = "\n\n"

// parseJSONL reads one line of a JSONL dataset: {"prompt": "..."} or
// {"messages": [{"role": ..., "content": ...}, ...]}, with an optional
// output length as max_tokens or output_tokens. Other keys (ids, metadata)
// are ignored.
func parseJSONL(b []byte, spec sourceSpec) (*entry, string) {
	m, msg := object(b)
	if msg != "" {
		return nil, msg
	}
	e := &entry{}
	prompt, hasPrompt, msg := stringField(m, "prompt")
	if msg != "" {
		return nil, msg
	}
	rawMsgs, hasMsgs := m["messages"]
	if hasMsgs && string(rawMsgs) == "null" {
		hasMsgs = false
	}
	switch {
	case hasPrompt && hasMsgs:
		return nil, "has both prompt and messages; give one"
	case hasPrompt:
		if prompt == "" {
			return nil, "prompt is empty"
		}
		if msg := promptTooLong("prompt", prompt); msg != "" {
			return nil, msg
		}
		e.text = prompt
	case hasMsgs:
		var raws []json.RawMessage
		if err := json.Unmarshal(rawMsgs, &raws); err != nil {
			return nil, "messages: want a list of {role, content}, got " + clip(rawMsgs)
		}
		if len(raws) == 0 {
			return nil, "messages is empty"
		}
		var contents []string
		for i, raw := range raws {
			mm, msg := object(raw)
			if msg != "" {
				return nil, fmt.Sprintf("messages[%d]: want {role, content}, got %s", i, clip(raw))
			}
			role, _, msg := stringField(mm, "role")
			if msg == "" && role == "" {
				msg = "role: missing"
			}
			if msg != "" {
				return nil, fmt.Sprintf("messages[%d].%s", i, msg)
			}
			content, ok, msg := stringField(mm, "content")
			if msg == "" && !ok {
				msg = "content: missing"
			}
			if msg != "" {
				return nil, fmt.Sprintf("messages[%d].%s", i, msg)
			}
			e.messages = append(e.messages, openai.ChatCompletionMessage{Role: role, Content: content})
			contents = append(contents, content)
		}
		all := strings.Join(contents, "")
		if all == "" {
			return nil, "every message's content is empty"
		}
		if msg := promptTooLong("messages' content", all); msg != "" {
			return nil, msg
		}
		if spec.api == "completions" {
			e.text, e.messages = strings.Join(contents, completionsJoin), nil
		}
	default:
		return nil, `want "prompt" (a string) or "messages" (a list of {role, content})`
	}
	mt, hasMT, msg := intField(m, "max_tokens", 1)
	if msg != "" {
		return nil, msg
	}
	ot, hasOT, msg := intField(m, "output_tokens", 1)
	if msg != "" {
		return nil, msg
	}
	switch {
	case hasMT && hasOT && mt != ot:
		return nil, fmt.Sprintf("max_tokens %d and output_tokens %d disagree; give one", mt, ot)
	case hasMT:
		e.output = mt
	case hasOT:
		e.output = ot
	}
	return e, ""
}

// parseMooncake reads one line of a Mooncake trace: timestamp (ms, required
// in a trace), input_length, output_length and hash_ids. Other keys are
// ignored.
func parseMooncake(b []byte, spec sourceSpec) (*entry, string) {
	m, msg := object(b)
	if msg != "" {
		return nil, msg
	}
	e := &entry{mooncake: true}
	if raw, ok := m["timestamp"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &e.atMS); err != nil || !(e.atMS >= 0) {
			return nil, "timestamp: want a number of milliseconds ≥ 0, got " + clip(raw)
		}
		if e.atMS > maxTraceMS {
			return nil, fmt.Sprintf("timestamp: %s ms is more than 7 days (%d ms), the longest trace replayed", clip(raw), maxTraceMS)
		}
	} else if spec.trace {
		return nil, "timestamp: missing (milliseconds from the start of the trace)"
	}
	var ok bool
	if e.input, ok, msg = intField(m, "input_length", 1); msg != "" || !ok {
		return nil, cmp.Or(msg, "input_length: missing")
	}
	if e.output, ok, msg = intField(m, "output_length", 1); msg != "" || !ok {
		return nil, cmp.Or(msg, "output_length: missing")
	}
	if raw, ok := m["hash_ids"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &e.hashIDs); err != nil {
			return nil, "hash_ids: want a list of integers, got " + clip(raw)
		}
	}
	if blocks := (e.input + spec.blockSize - 1) / spec.blockSize; len(e.hashIDs) > blocks {
		return nil, fmt.Sprintf("%d hash_ids, but input_length %d fills only %d block%s of %d tokens (is block_size right?)",
			len(e.hashIDs), e.input, blocks, plural(blocks), spec.blockSize)
	}
	return e, ""
}

// shareGPTConversation is one element of a ShareGPT file.
type shareGPTConversation struct {
	Conversations *[]struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// Speakers of ShareGPT turns. The common dumps say human and gpt; some
// conversions use the chat API's words.
var (
	shareGPTUser  = map[string]bool{"human": true, "user": true}
	shareGPTReply = map[string]bool{"gpt": true, "chatgpt": true, "assistant": true, "bard": true, "bing": true}
)

func shareGPTNeed(spec sourceSpec) string {
	if spec.needReply {
		return "each needs a non-empty human turn followed by a gpt reply, whose length is the output length unless the row sets output_tokens"
	}
	return "each needs a non-empty human turn"
}

// readShareGPT reads the ShareGPT format: one JSON array of
// {"conversations": [{"from": "human" | "gpt", "value": ...}, ...]}. The
// array is decoded one conversation at a time, so the file's size costs
// nothing beyond what is kept, and no conversation may be longer than
// maxSourceLine. The prompt is the first human turn; the output length,
// when the row sets no output_tokens, is the token count of the first gpt
// turn after it, as vLLM's benchmark does. Conversations without them are
// skipped and counted: the public dumps have many. f is the file r reads,
// after bom bytes of byte order mark, for placing problems.
func readShareGPT(r io.Reader, f io.ReaderAt, bom int64, spec sourceSpec, ps *problems, keep func(*entry) bool) readStats {
	var st readStats
	win := &window{r: r, limit: maxSourceLine}
	dec := json.NewDecoder(win)
	// Lines are worked out from byte offsets afterwards, and only for
	// problems: counting them while decoding would cost every good file.
	type bad struct {
		off  int64
		skip bool // the offset is before the element: skip separators
		msg  string
	}
	var bads []bad
	stopped := ""
	note := func(b bad) { bads = append(bads, b) }
	enough := func(off int64) bool {
		if len(bads) > 0 {
			stopped = stopReason(len(bads), off-bads[0].off)
		}
		return stopped != ""
	}
	defer func() {
		if len(bads) == 0 {
			return
		}
		offs := make([]lineOffset, len(bads))
		for i, b := range bads {
			offs[i] = lineOffset{off: b.off, skip: b.skip}
		}
		lines := linesAt(f, offs)
		for i, b := range bads {
			ps.add(lines[i], "%s", b.msg)
		}
		ps.err.stopped = stopped
	}()
	syntax := func(err error, at int64) {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			note(bad{off: max(se.Offset-1, 0), msg: "not valid JSON: " + se.Error()})
		case errors.Is(err, errValueTooLong):
			note(bad{off: at, skip: true, msg: fmt.Sprintf("no complete JSON value within %d MiB, the most one conversation may hold", maxSourceLine>>20)})
		case errors.Is(err, errSourceTooBig):
			ps.add(0, "%v", err)
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			note(bad{off: at, msg: "the file ends inside the JSON array"})
		default:
			note(bad{off: at, msg: err.Error()})
		}
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			ps.add(0, "empty file")
		} else {
			syntax(err, 0)
		}
		return st
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		note(bad{off: 0, skip: true, msg: "want a JSON array of conversations, the ShareGPT format (for one JSON object per line, use format: jsonl)"})
		return st
	}
	for i := 0; ; i++ {
		// The separators before an element, and the element itself, may
		// each be up to maxSourceLine long (and the decoder may need one
		// byte past a value to see its end).
		win.limit = dec.InputOffset() + maxSourceLine
		if !dec.More() {
			break
		}
		at := dec.InputOffset()
		win.limit = at + maxSourceLine + 1
		if enough(at) {
			return st
		}
		var c shareGPTConversation
		if err := dec.Decode(&c); err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				var se *json.SyntaxError
				if errors.As(err, &se) {
					// The decoder's offset leaves out the separators
					// Token and More consumed; decode the element again
					// on its own to place the error exactly.
					if off, ok := syntaxOffset(f, bom, at); ok {
						note(bad{off: off, msg: "not valid JSON: " + se.Error()})
						return st
					}
				}
				if errors.Is(err, errValueTooLong) {
					note(bad{off: at, skip: true, msg: fmt.Sprintf("conversation %d is longer than %d MiB, the most one may hold", i, maxSourceLine>>20)})
					return st
				}
				syntax(err, at)
				return st
			}
			// A type error leaves the decoder after the whole element, so
			// the next conversation is read normally.
			what, want := te.Field, "a string"
			switch what {
			case "":
				what, want = "conversation", "an object with conversations"
			case "conversations":
				want = "a list of {from, value}"
			}
			note(bad{off: at, skip: true, msg: fmt.Sprintf("conversation %d: %s: want %s, got %s", i, what, want, te.Value)})
			continue
		}
		if c.Conversations == nil {
			note(bad{off: at, skip: true, msg: fmt.Sprintf("conversation %d: conversations: missing", i)})
			continue
		}
		e := &entry{}
		turns := *c.Conversations
		for j, t := range turns {
			if !shareGPTUser[strings.ToLower(t.From)] || t.Value == "" {
				continue
			}
			e.text = t.Value
			for _, rt := range turns[j+1:] {
				if shareGPTReply[strings.ToLower(rt.From)] {
					e.reply = rt.Value
					break
				}
			}
			break
		}
		if msg := promptTooLong("the human turn", e.text); msg != "" {
			note(bad{off: at, skip: true, msg: fmt.Sprintf("conversation %d: %s", i, msg)})
			continue
		}
		if e.text == "" || spec.needReply && e.reply == "" {
			st.skipped++
			continue
		}
		if !spec.needReply {
			e.reply = ""
		}
		if spec.turns {
			e.turns, e.replies = shareGPTTurns(turns, spec.needReply)
		}
		e.line = i
		st.used++
		if len(bads) == 0 && ps.err == nil && !keep(e) {
			return st
		}
	}
	win.limit = dec.InputOffset() + maxSourceLine
	if _, err := dec.Token(); err != nil {
		syntax(err, dec.InputOffset())
		return st
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if errors.Is(err, errSourceTooBig) {
			syntax(err, 0)
			return st
		}
		note(bad{off: dec.InputOffset(), skip: true, msg: "unexpected data after the JSON array"})
	}
	return st
}

// errValueTooLong is returned by a window past its limit.
var errValueTooLong = errors.New("JSON value too long")

// window is a reader that fails with errValueTooLong once read reaches
// limit, which its user moves forward before each JSON value: a
// json.Decoder buffers a whole value before decoding it, and this bounds
// what it buffers.
type window struct {
	r     io.Reader
	read  int64 // bytes returned so far
	limit int64
}

func (w *window) Read(p []byte) (int, error) {
	if w.read >= w.limit {
		return 0, errValueTooLong
	}
	if int64(len(p)) > w.limit-w.read {
		p = p[:w.limit-w.read]
	}
	n, err := w.r.Read(p)
	w.read += int64(n)
	return n, err
}

// lineOffset is a byte offset to turn into a line number. With skip, the
// line is that of the first byte after off that is not white space or a
// comma: the start of the next array element.
type lineOffset struct {
	off  int64
	skip bool
}

// linesAt returns the 1-based line of each offset in f, offsets counted
// after a byte order mark as the decoder's are. It reads only as far as
// the offsets need: a problem near the start of a large file costs a
// short read.
func linesAt(f io.ReaderAt, offs []lineOffset) []int {
	out := make([]int, len(offs))
	end := int64(0)
	for _, o := range offs {
		end = max(end, o.off)
	}
	// 3 for a byte order mark; a skip offset is resolved within one
	// element's length, or placed at the line reading stopped.
	end += 3 + maxSourceLine
	br := skipBOM(bufio.NewReader(io.NewSectionReader(f, 0, end)))
	order := make([]int, len(offs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(offs[a].off, offs[b].off) })
	line, k := 1, 0
	var waiting []int // skip offsets waiting for the next element's first byte
	for pos := int64(0); k < len(order) || len(waiting) > 0; pos++ {
		c, err := br.ReadByte()
		if err != nil {
			break
		}
		for ; k < len(order) && offs[order[k]].off <= pos; k++ {
			if i := order[k]; offs[i].skip {
				waiting = append(waiting, i)
			} else {
				out[i] = line
			}
		}
		if len(waiting) > 0 && !strings.ContainsRune(" \t\r\n,", rune(c)) {
			for _, i := range waiting {
				out[i] = line
			}
			waiting = waiting[:0]
		}
		if c == '\n' {
			line++
		}
	}
	for _, i := range waiting {
		out[i] = line
	}
	for ; k < len(order); k++ {
		out[order[k]] = line
	}
	return out
}

// keyed is an entry with its place in the order requests use.
type keyed struct {
	key  float64
	line int
	e    *entry
}

func keyedLess(a, b keyed) bool {
	return a.key < b.key || a.key == b.key && a.line < b.line
}

// keepHeap holds the entries with the smallest keys, largest on top, so
// that once full, each new entry costs one comparison to reject.
type keepHeap []keyed

func (h keepHeap) Len() int           { return len(h) }
func (h keepHeap) Less(i, j int) bool { return keyedLess(h[j], h[i]) }
func (h keepHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keepHeap) Push(x any)        { *h = append(*h, x.(keyed)) }
func (h *keepHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// source is a row's prompts (and, for a trace, its schedule), read from
// its file once before the row's load starts.
type source struct {
	entries []*entry
	// schedule is when each entry is due, from the row's load start; set
	// for traces only.
	schedule []time.Duration
	stats    readStats
}

// rowNeeds is how many entries a row can use at most, or 0 when it cannot
// be known before the run: a row stopped by duration or warmup_duration
// sends as many as time allows.
func rowNeeds(row *schema.PlannedRow) int {
	if row.Requests == 0 || row.WarmupDuration > 0 {
		return 0
	}
	return row.Requests + row.Warmup
}

// loadSource reads a row's dataset or trace and keeps the entries it will
// use, in the order it will use them:
//   - a trace in timestamp order (lines out of order are sorted; equal
//     times keep file order);
//   - a dataset in file order, or, with shuffle, in a random order seeded
//     by the row's seed alone, so that rows (and sweep points) with the same
//     file and seed send the same prompts in the same order.
//
// When the row stops after a known number of requests, only that many
// entries are kept: the first ones in file order (and the file is read no
// further), or those with the smallest keys, chosen while reading with a
// bounded heap.
func loadSource(row *schema.PlannedRow, api string, tok tokenizer.Tokenizer) (*source, error) {
	spec, ok := specOf(row, api)
	if !ok {
		return nil, nil
	}
	shuffle := row.Dataset != nil && row.Dataset.Shuffle
	shuffleSeed := splitmix64(uint64(row.Seed) ^ 0x5bd1e995)
	need := rowNeeds(row)
	var kept keepHeap
	keyOf := func(e *entry) float64 {
		switch {
		case spec.trace:
			return e.atMS
		case shuffle:
			return float64(splitmix64(shuffleSeed+uint64(e.line)) >> 11)
		}
		return 0
	}
	st, err := readEntries(spec, func(e *entry) bool {
		k := keyed{key: keyOf(e), line: e.line, e: e}
		if need == 0 {
			kept = append(kept, k)
			return true
		}
		if len(kept) < need {
			heap.Push(&kept, k)
		} else if keyedLess(k, kept[0]) {
			kept[0] = k
			heap.Fix(&kept, 0)
		}
		// File order: nothing later can displace what is kept.
		return spec.trace || shuffle || len(kept) < need
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(kept, func(a, b keyed) int {
		if keyedLess(a, b) {
			return -1
		}
		if keyedLess(b, a) {
			return 1
		}
		return 0
	})
	src := &source{stats: st, entries: make([]*entry, len(kept))}
	for i, k := range kept {
		src.entries[i] = k.e
		if k.e.reply != "" {
			k.e.output = tok.Count(k.e.reply)
			k.e.reply = ""
		}
		if k.e.replies != nil {
			k.e.outputs = make([]int, len(k.e.replies))
			for j, r := range k.e.replies {
				if r != "" {
					k.e.outputs[j] = tok.Count(r)
				}
			}
			k.e.replies = nil
		}
	}
	if spec.trace {
		at := make([]float64, len(src.entries))
		for i, e := range src.entries {
			at[i] = e.atMS
		}
		if n := len(at); n > 0 && !scheduleFits(at[n-1], row.Trace.Speedup) {
			ps := &problems{spec: spec}
			ps.add(src.entries[n-1].line, "timestamp %g ms at speedup %g is too far in the future to schedule", at[n-1], row.Trace.Speedup)
			return nil, ps.result()
		}
		src.schedule = traceSchedule(at, row.Trace.Speedup)
	}
	return src, nil
}

// scheduleFits says whether a timestamp at a speedup is a time the
// dispatcher can wait for: within a year, far from time.Duration's
// overflow. Timestamps are at most maxTraceMS; a speedup far below 1 could
// still push one out of range.
func scheduleFits(ms, speedup float64) bool {
	if speedup <= 0 {
		speedup = 1
	}
	return ms/speedup <= float64(365*24*time.Hour/time.Millisecond)
}

// CheckSources reads every dataset and trace file of the plan, the way
// each row will, before anything is sent: a bad line is reported now, with
// the next few bad lines, not when its row comes up an hour into the run.
// Nothing is kept. It returns a note for each file with skipped entries.
// Its error wraps ErrBadSource. runner.Run calls it first; validate
// calls it too, so that a file that validates also runs.
func CheckSources(plan *schema.Plan) (notes []string, err error) {
	type read struct {
		err  error
		last float64 // the latest timestamp, for scheduleFits
	}
	seen := map[sourceSpec]*read{}
	var errs []error
	for i := range plan.Rows {
		row := &plan.Rows[i]
		spec, ok := specOf(row, plan.RowAPI(row))
		if !ok {
			continue
		}
		r, again := seen[spec]
		if !again {
			r = &read{}
			seen[spec] = r
			var st readStats
			st, r.err = readEntries(spec, func(e *entry) bool {
				r.last = max(r.last, e.atMS)
				return true
			})
			if r.err != nil {
				errs = append(errs, fmt.Errorf("row %s: %w", row.ID, r.err))
			} else if st.skipped > 0 {
				notes = append(notes, fmt.Sprintf("row %s: %s: using %d conversations, skipping %d (%s)",
					row.ID, spec.path, st.used, st.skipped, shareGPTNeed(spec)))
			}
		}
		// Rows sharing a trace may replay it at different speeds.
		if r.err == nil && spec.trace && !scheduleFits(r.last, row.Trace.Speedup) {
			ps := &problems{spec: spec}
			ps.add(0, "timestamp %g ms at speedup %g is too far in the future to schedule", r.last, row.Trace.Speedup)
			errs = append(errs, fmt.Errorf("row %s: %w", row.ID, ps.result()))
		}
	}
	return notes, errors.Join(errs...)
}

// splitmix64 is a fast, well-mixing hash of one integer (Steele et al.'s
// SplitMix64 finalizer): hash ids and line numbers become well-spread
// corpus offsets and shuffle keys.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// syntaxOffset decodes the JSON value that starts at or after byte at of
// the decoder's input (past whitespace and one comma), which begins bom
// bytes into f, and returns the decoder offset of its syntax error. It
// reads at most one element's length.
func syntaxOffset(f io.ReaderAt, bom, at int64) (int64, bool) {
	br := bufio.NewReader(io.NewSectionReader(f, bom+at, maxSourceLine+64))
	skipped := int64(0)
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, false
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' && b != ',' {
			_ = br.UnreadByte()
			break
		}
		skipped++
	}
	var raw json.RawMessage
	var se *json.SyntaxError
	if err := json.NewDecoder(br).Decode(&raw); errors.As(err, &se) {
		return at + skipped + max(se.Offset-1, 0), true
	}
	return 0, false
}
