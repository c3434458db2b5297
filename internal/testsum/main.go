// Command testsum reads `go test -json` output on stdin and prints, as the
// run goes, what go test prints without -json: a result line per package
// and the full output of every failing test, package build and crash. At the
// end it lists every skipped test with its skip message, so that a test
// skipped for want of a resource (the shared tokenizer files, Chromium) or
// by -short cannot pass unnoticed, then the failures again and a one-line
// total.
//
//	go test -json ./... | testsum [-module PATH] [-note TEXT]
//
// It exits 1 when a test or package failed, a package failed to build, the
// input held no test events, or the input ended while a package was still
// running (go test killed).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() {
	module := flag.String("module", "", "module path to strip from package names in the summary (default: the one in ./go.mod)")
	note := flag.String("note", "", "a line printed under the list of skipped tests, when there are any")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go test -json ./... | testsum [-module PATH] [-note TEXT]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *module == "" {
		*module = modulePath("go.mod")
	}

	// A Ctrl-C reaches go test and this command alike. Read on until go
	// test has gone, so that the summary says what ran and that the run was
	// cut short; a second Ctrl-C ends this command at once.
	interrupt := make(chan os.Signal, 2)
	signal.Notify(interrupt, os.Interrupt)
	go func() {
		<-interrupt
		<-interrupt
		os.Exit(130)
	}()

	s := newSummary(os.Stdout, *module, *note, colorful(os.Stdout))
	os.Exit(s.run(os.Stdin))
}

// modulePath returns the module path declared in the go.mod file at path, or
// "" when there is none.
func modulePath(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// colorful says whether f is a terminal that wants color.
func colorful(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// event is a test2json TestEvent, or a BuildEvent (ImportPath, Action
// build-output or build-fail), both of which go test -json writes.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	FailedBuild string
	ImportPath  string
}

// record is one piece of a package's output.
type record struct {
	test string // "" for the package's own output
	text string
}

type pkgState struct {
	status map[string]string // test -> pass, fail, skip; absent or "" while running
	out    []record          // output not yet printed or dropped, in order
}

type entry struct {
	pkg, test, msg string
}

type summary struct {
	w      io.Writer
	module string
	note   string
	color  bool
	now    func() time.Time
	start  time.Time

	pkgs   map[string]*pkgState
	builds map[string][]string // build output by ImportPath, until its build-fail

	events                   int
	passed, failed           int // tests, subtests included
	pkgsOK, pkgsNoTests      int
	pkgsFailed, buildsFailed int
	truncated                bool // the input ended while a package ran
	cutLine                  bool // the input ended in the middle of a line

	skips    []entry
	failures []entry
}

func newSummary(w io.Writer, module, note string, color bool) *summary {
	s := &summary{
		w: w, module: module, note: note, color: color, now: time.Now,
		pkgs:   map[string]*pkgState{},
		builds: map[string][]string{},
	}
	s.start = s.now()
	return s
}

// run reads events from r until it ends, printing as it goes, then prints
// the summary and returns the exit status.
func (s *summary) run(r io.Reader) int {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && !s.line(line) && err != nil {
			// A last line, without its newline, that is no event: go test
			// was stopped in the middle of writing it.
			s.cutLine = true
		}
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(s.w, "testsum: reading the input: %v\n", err)
				s.truncated = true
			}
			break
		}
	}
	return s.finish()
}

// line handles one line of input and says whether it was an event.
func (s *summary) line(b []byte) bool {
	var e event
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return false
	}
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &e) != nil || e.Action == "" {
		// Not an event (go test writes early errors as text): pass it on.
		s.write(string(trimmed) + "\n")
		return false
	}
	s.events++
	switch e.Action {
	case "build-output":
		s.builds[e.ImportPath] = append(s.builds[e.ImportPath], e.Output)
		return true
	case "build-fail":
		s.write(strings.Join(s.builds[e.ImportPath], ""))
		delete(s.builds, e.ImportPath)
		s.buildsFailed++
		return true
	}
	if e.Package == "" {
		return true
	}
	p := s.pkgs[e.Package]
	if p == nil {
		p = &pkgState{status: map[string]string{}}
		s.pkgs[e.Package] = p
	}
	switch e.Action {
	case "run":
		p.status[e.Test] = ""
	case "output":
		p.out = append(p.out, record{e.Test, e.Output})
	case "pass", "fail", "skip", "bench":
		if e.Test == "" {
			s.packageDone(e, p)
		} else {
			s.testDone(e, p)
		}
	}
	// start, pause, cont and any newer action need nothing.
	return true
}

func (s *summary) testDone(e event, p *pkgState) {
	action := e.Action
	if action == "bench" { // a benchmark that logged but did not fail
		action = "pass"
	}
	p.status[e.Test] = action
	switch action {
	case "pass":
		s.passed++
	case "skip":
		s.skips = append(s.skips, entry{e.Package, e.Test, skipMessage(p.text(e.Test))})
	case "fail":
		s.failed++
		s.failures = append(s.failures, entry{e.Package, e.Test, ""})
	}
	if strings.Contains(e.Test, "/") {
		return // its output goes with its top-level test's
	}
	family := func(r record) bool { return r.test == e.Test || strings.HasPrefix(r.test, e.Test+"/") }
	if action == "fail" {
		s.printOutput(p, family)
	}
	p.out = slices.DeleteFunc(p.out, family)
}

func (s *summary) packageDone(e event, p *pkgState) {
	delete(s.pkgs, e.Package)
	switch e.Action {
	case "pass":
		s.pkgsOK++
		s.write(p.resultLine("ok", fmt.Sprintf("ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)))
	case "skip":
		s.pkgsNoTests++
		s.write(p.resultLine("?", fmt.Sprintf("?   \t%s\t[no test files]\n", e.Package)))
	case "fail":
		s.pkgsFailed++
		if e.FailedBuild != "" {
			// Its build output was printed at its build-fail event; print
			// it here if that event never came.
			s.write(strings.Join(s.builds[e.FailedBuild], ""))
			delete(s.builds, e.FailedBuild)
			s.failures = append(s.failures, entry{e.Package, "", "[build failed]"})
		}
		s.crashed(e.Package, p, "did not finish: the test binary exited while it ran (see its output above)")
		s.printOutput(p, func(record) bool { return true })
		if e.FailedBuild == "" && !slices.ContainsFunc(s.failures, func(f entry) bool { return f.pkg == e.Package }) {
			s.failures = append(s.failures, entry{e.Package, "", "failed outside any test (see its output above)"})
		}
	}
}

// crashed counts as failed every test of p that started and never ended.
func (s *summary) crashed(pkg string, p *pkgState, why string) {
	var running []string
	for test, status := range p.status {
		if status == "" {
			running = append(running, test)
		}
	}
	slices.Sort(running)
	for _, test := range running {
		s.failed++
		s.failures = append(s.failures, entry{pkg, test, why})
	}
}

// printableOutput returns the output in p's records that match and belong
// to the package itself or to a test that failed or never ended, leaving out
// the === RUN, PAUSE, CONT and NAME lines that -json adds.
func (p *pkgState) printableOutput(match func(record) bool) string {
	var b strings.Builder
	for _, r := range p.out {
		if !match(r) {
			continue
		}
		if r.test != "" {
			if st := p.status[r.test]; st == "pass" || st == "skip" {
				continue
			}
		}
		if framing(r.text) {
			continue
		}
		b.WriteString(r.text)
	}
	return b.String()
}

// printOutput prints p.printableOutput(match).
func (s *summary) printOutput(p *pkgState, match func(record) bool) {
	out := p.printableOutput(match)
	if s.color {
		var b strings.Builder
		for line := range strings.SplitAfterSeq(out, "\n") {
			t := strings.TrimLeft(line, " ")
			if strings.HasPrefix(t, "--- FAIL") || strings.HasPrefix(t, "FAIL") {
				line = red + strings.TrimSuffix(line, "\n") + reset + "\n"
			}
			b.WriteString(line)
		}
		out = b.String()
	}
	s.write(out)
}

func framing(text string) bool {
	for _, prefix := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(text, prefix) {
			return true
		}
	}
	return false
}

// resultLine returns the package's own output line that starts with prefix
// and a space (go test's "ok  \tpkg\t1.2s" or "?   \tpkg\t[no test files]"),
// or def when it printed none.
func (p *pkgState) resultLine(prefix, def string) string {
	for _, r := range slices.Backward(p.out) {
		if r.test == "" && strings.HasPrefix(r.text, prefix+" ") {
			return r.text
		}
	}
	return def
}

// text returns everything test printed.
func (p *pkgState) text(test string) string {
	var b strings.Builder
	for _, r := range p.out {
		if r.test == test {
			b.WriteString(r.text)
		}
	}
	return b.String()
}

// logLine matches the first line of a t.Log, t.Skip or t.Error message:
// indentation, file:line, colon.
var logLine = regexp.MustCompile(`^(\s*)[^\s:]+\.go:\d+: ?(.*)$`)

// skipMessage returns the last message a skipped test logged, which is its
// t.Skip message, with its continuation lines.
func skipMessage(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m := logLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		msg := []string{m[2]}
		cont := m[1] + "    "
		for _, l := range lines[i+1:] {
			rest, ok := strings.CutPrefix(l, cont)
			if !ok {
				break
			}
			msg = append(msg, rest)
		}
		if strings.TrimSpace(strings.Join(msg, "")) == "" {
			break
		}
		return strings.Join(msg, "\n")
	}
	return "(no message)"
}

// finish handles the end of the input and prints the summary.
func (s *summary) finish() int {
	for _, ip := range slices.Sorted(maps.Keys(s.builds)) {
		s.write(strings.Join(s.builds[ip], "")) // output of a build that did not fail
	}
	for _, pkg := range slices.Sorted(maps.Keys(s.pkgs)) {
		p := s.pkgs[pkg]
		s.truncated = true
		s.pkgsFailed++
		s.write(s.paint(red, fmt.Sprintf("testsum: the input ended while %s was still running: go test was killed or crashed", pkg)) + "\n")
		s.printOutput(p, func(record) bool { return true })
		n := len(s.failures)
		s.crashed(pkg, p, "did not finish: the input ended while it ran")
		if len(s.failures) == n {
			s.failures = append(s.failures, entry{pkg, "", "did not finish: the input ended while it ran"})
		}
	}
	if s.events == 0 {
		s.write(s.paint(red, "testsum: no test events on the input: did go test -json run?") + "\n")
	} else if s.cutLine && !s.truncated {
		s.write(s.paint(red, "testsum: the input ended in the middle of a line: go test was killed") + "\n")
	}

	if len(s.skips) > 0 {
		s.write("\n" + s.paint(yellow, fmt.Sprintf("======== SKIPPED: %s did not run ========", plural(len(s.skips), "test"))) + "\n")
		s.write(s.table(s.skips))
		if s.note != "" {
			s.write(s.note + "\n")
		}
	}
	if len(s.failures) > 0 {
		s.write("\n" + s.paint(red, fmt.Sprintf("======== FAILED: %s ========", plural(len(s.failures), "failure"))) + "\n")
		s.write(s.table(s.failures))
	}

	failed := s.failed > 0 || s.pkgsFailed > 0 || s.buildsFailed > 0 || s.truncated || s.cutLine || s.events == 0
	verdict := s.paint(green, "PASS")
	if failed {
		verdict = s.paint(red, "FAIL")
	}
	pkgs := fmt.Sprintf("%s ok", plural(s.pkgsOK, "package"))
	if s.pkgsFailed > 0 {
		pkgs += fmt.Sprintf(", %d failed", s.pkgsFailed)
	}
	if s.buildsFailed > 0 {
		pkgs += fmt.Sprintf(" (%s failed)", plural(s.buildsFailed, "build"))
	}
	if s.pkgsNoTests > 0 {
		pkgs += fmt.Sprintf(", %d without tests", s.pkgsNoTests)
	}
	if s.truncated || s.cutLine {
		pkgs += ", run cut short"
	}
	elapsed := s.now().Sub(s.start).Round(100 * time.Millisecond)
	s.write(fmt.Sprintf("\n%s: %d passed, %d failed, %d skipped (tests and subtests); %s; %v\n",
		verdict, s.passed, s.failed, len(s.skips), pkgs, elapsed))
	if failed {
		return 1
	}
	return 0
}

// table formats entries grouped by package, packages in order, one line each.
func (s *summary) table(entries []entry) string {
	entries = slices.Clone(entries)
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.pkg, b.pkg) })
	width := 0
	for _, e := range entries {
		width = max(width, len(s.short(e.pkg)))
	}
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "%-*s  ", width, s.short(e.pkg))
		what := e.test
		if e.msg != "" {
			if what != "" {
				what += ": "
			}
			what += strings.ReplaceAll(e.msg, "\n", "\n"+strings.Repeat(" ", width+2+4))
		}
		b.WriteString(what + "\n")
	}
	return b.String()
}

// short returns pkg relative to the module.
func (s *summary) short(pkg string) string {
	if s.module == "" {
		return pkg
	}
	if pkg == s.module {
		return "."
	}
	if rest, ok := strings.CutPrefix(pkg, s.module+"/"); ok {
		return rest
	}
	return pkg
}

func (s *summary) write(text string) {
	if text != "" {
		io.WriteString(s.w, text)
	}
}

const (
	red    = "\x1b[1;31m"
	green  = "\x1b[1;32m"
	yellow = "\x1b[1;33m"
	reset  = "\x1b[0m"
)

func (s *summary) paint(color, text string) string {
	if !s.color {
		return text
	}
	return color + text + reset
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
