package runner

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

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// ErrBadSource is wrapped by the error a run returns, before anything is
// sent, when a row's dataset or trace file has lines that cannot be used:
// like a problem in the experiment file itself, it is found before the
// first request rather than halfway through a run.
var ErrBadSource = errors.New("bad dataset or trace file")

// Limits on reading source files.
const (
	// maxSourceLine bounds one JSONL line: a prompt near a long context
	// limit is a few megabytes; far beyond that the file is not JSONL.
	maxSourceLine = 64 << 20
	// maxSourceProblems is how many bad lines of one file are reported;
	// past that the file is probably in another format altogether.
	maxSourceProblems = 10
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
	}
	return spec, true
}

// sourceError lists the bad lines of one file.
type sourceError struct {
	spec     sourceSpec
	problems []string // "path:line: what is wrong", or "path: what is wrong"
	more     int
}

func (e *sourceError) Error() string {
	var b strings.Builder
	n := len(e.problems) + e.more
	fmt.Fprintf(&b, "%s file %s: %d problem%s", e.spec.kind, e.spec.path, n, plural(n))
	for _, p := range e.problems {
		b.WriteString("\n  " + p)
	}
	if e.more > 0 {
		fmt.Fprintf(&b, "\n  and %d more", e.more)
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

// problems collects a file's bad lines, keeping the first few.
type problems struct {
	spec sourceSpec
	err  *sourceError
}

func (p *problems) add(line int, format string, args ...any) {
	if p.err == nil {
		p.err = &sourceError{spec: p.spec}
	}
	if len(p.err.problems) >= maxSourceProblems {
		p.err.more++
		return
	}
	where := p.spec.path
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	p.err.problems = append(p.err.problems, where+": "+fmt.Sprintf(format, args...))
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
// not stop the read: every bad line (up to maxSourceProblems) is reported
// together, so one pass shows everything to fix.
func readEntries(spec sourceSpec, keep func(*entry) bool) (readStats, error) {
	f, err := os.Open(spec.path)
	if err != nil {
		return readStats{}, &sourceError{spec: spec, problems: []string{err.Error()}}
	}
	defer f.Close()
	br := skipBOM(bufio.NewReaderSize(f, 1<<20))
	ps := &problems{spec: spec}
	var st readStats
	switch spec.format {
	case formatJSONL, formatMooncake:
		st = readLines(br, spec, ps, keep)
	case formatShareGPT:
		st = readShareGPT(br, spec, ps, keep)
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

// skipBOM skips a UTF-8 byte order mark, which editors on Windows write
// and JSON parsers reject.
func skipBOM(br *bufio.Reader) *bufio.Reader {
	if b, err := br.Peek(3); err == nil && string(b) == "\xef\xbb\xbf" {
		br.Discard(3)
	}
	return br
}

// readLines reads a JSONL file: one JSON object per line, blank lines
// skipped.
func readLines(r io.Reader, spec sourceSpec, ps *problems, keep func(*entry) bool) readStats {
	var st readStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSourceLine)
	line := 0
	for sc.Scan() {
		line++
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
			ps.add(line, "%s", msg)
			continue
		}
		e.line = line
		st.used++
		if ps.err == nil && !keep(e) {
			return st
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			ps.add(line+1, "line longer than %d MiB", maxSourceLine>>20)
		} else {
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

// intField reads an optional integer field of at least lo.
func intField(m map[string]json.RawMessage, key string, lo int) (v int, ok bool, msg string) {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return 0, false, ""
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < float64(lo) || f > math.MaxInt32 {
		return 0, true, fmt.Sprintf("%s: want an integer ≥ %d, got %s", key, lo, clip(raw))
	}
	return int(f), true, ""
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
		if strings.Join(contents, "") == "" {
			return nil, "every message's content is empty"
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
		if err := json.Unmarshal(raw, &e.atMS); err != nil || e.atMS < 0 {
			return nil, "timestamp: want a number of milliseconds ≥ 0, got " + clip(raw)
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
// nothing beyond what is kept. The prompt is the first human turn; the
// output length, when the row sets no output_tokens, is the token count of
// the first gpt turn after it, as vLLM's benchmark does. Conversations
// without them are skipped and counted: the public dumps have many.
func readShareGPT(r io.Reader, spec sourceSpec, ps *problems, keep func(*entry) bool) readStats {
	var st readStats
	dec := json.NewDecoder(r)
	// Lines are worked out from byte offsets afterwards, and only for
	// problems: counting them while decoding would cost every good file.
	type bad struct {
		off  int64
		skip bool // the offset is before the element: skip separators
		msg  string
	}
	var bads []bad
	extra := 0 // bad elements past those reported
	note := func(b bad) {
		if len(bads) < maxSourceProblems {
			bads = append(bads, b)
		} else {
			extra++
		}
	}
	defer func() {
		if len(bads) == 0 {
			return
		}
		offs := make([]lineOffset, len(bads))
		for i, b := range bads {
			offs[i] = lineOffset{off: b.off, skip: b.skip}
		}
		lines := linesAt(spec.path, offs)
		for i, b := range bads {
			ps.add(lines[i], "%s", b.msg)
		}
		ps.err.more += extra
	}()
	syntax := func(err error, at int64) {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			note(bad{off: max(se.Offset-1, 0), msg: "not valid JSON: " + se.Error()})
			return
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			note(bad{off: at, msg: "the file ends inside the JSON array"})
			return
		}
		note(bad{off: at, msg: err.Error()})
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
	for i := 0; dec.More(); i++ {
		at := dec.InputOffset()
		var c shareGPTConversation
		if err := dec.Decode(&c); err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				var se *json.SyntaxError
				if errors.As(err, &se) {
					// The decoder's offset leaves out the separators
					// Token and More consumed; decode the element again
					// on its own to place the error exactly.
					if off, ok := syntaxOffset(spec.path, at); ok {
						note(bad{off: off, msg: "not valid JSON: " + se.Error()})
						return st
					}
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
		if e.text == "" || spec.needReply && e.reply == "" {
			st.skipped++
			continue
		}
		if !spec.needReply {
			e.reply = ""
		}
		e.line = i
		st.used++
		if len(bads) == 0 && ps.err == nil && !keep(e) {
			return st
		}
	}
	if _, err := dec.Token(); err != nil {
		syntax(err, dec.InputOffset())
		return st
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		note(bad{off: dec.InputOffset(), skip: true, msg: "unexpected data after the JSON array"})
	}
	return st
}

// lineOffset is a byte offset to turn into a line number. With skip, the
// line is that of the first byte after off that is not white space or a
// comma: the start of the next array element.
type lineOffset struct {
	off  int64
	skip bool
}

// linesAt returns the 1-based line of each offset in the file at path.
func linesAt(path string, offs []lineOffset) []int {
	out := make([]int, len(offs))
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	br := skipBOM(bufio.NewReader(f)) // as the decoder's offsets do
	order := make([]int, len(offs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(offs[a].off, offs[b].off) })
	line, k := 1, 0
	var waiting []int // skip offsets waiting for the next element's first byte
	for pos := int64(0); ; pos++ {
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
	}
	if spec.trace {
		at := make([]float64, len(src.entries))
		for i, e := range src.entries {
			at[i] = e.atMS
		}
		src.schedule = traceSchedule(at, row.Trace.Speedup)
	}
	return src, nil
}

// checkSources reads every dataset and trace file of the plan, the way
// each row will, before anything is sent: a bad line is reported now, with
// every other bad line, not when its row comes up an hour into the run.
// Nothing is kept. It returns a note for each file with skipped entries.
func checkSources(plan *schema.Plan) (notes []string, err error) {
	seen := map[sourceSpec]bool{}
	var errs []error
	for i := range plan.Rows {
		row := &plan.Rows[i]
		spec, ok := specOf(row, plan.Server.API)
		if !ok || seen[spec] {
			continue
		}
		seen[spec] = true
		st, err := readEntries(spec, func(*entry) bool { return true })
		if err != nil {
			errs = append(errs, fmt.Errorf("row %s: %w", row.ID, err))
			continue
		}
		if st.skipped > 0 {
			notes = append(notes, fmt.Sprintf("row %s: %s: using %d conversations, skipping %d (%s)",
				row.ID, spec.path, st.used, st.skipped, shareGPTNeed(spec)))
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
// the file (past whitespace and one comma) and returns the file offset of
// its syntax error.
func syntaxOffset(path string, at int64) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	br := bufio.NewReader(io.NewSectionReader(f, at, 1<<62))
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
