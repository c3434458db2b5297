package main

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// The inputs are go test -json output of real packages (Go 1.26), with the
// Time fields and the runtime's stack frames taken out.
const (
	passJSON = `{"Action":"start","Package":"example.com/m/passpkg"}
{"Action":"run","Package":"example.com/m/passpkg","Test":"TestA"}
{"Action":"output","Package":"example.com/m/passpkg","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"example.com/m/passpkg","Test":"TestA","Output":"    a_test.go:3: hello\n"}
{"Action":"output","Package":"example.com/m/passpkg","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/passpkg","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"example.com/m/passpkg","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/passpkg","Output":"ok  \texample.com/m/passpkg\t0.019s\n"}
{"Action":"pass","Package":"example.com/m/passpkg","Elapsed":0.028}
`
	noTestsJSON = `{"Action":"start","Package":"example.com/m/notests"}
{"Action":"output","Package":"example.com/m/notests","Output":"?   \texample.com/m/notests\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/notests","Elapsed":0}
`
	failJSON = `{"Action":"start","Package":"example.com/m/failpkg"}
{"Action":"run","Package":"example.com/m/failpkg","Test":"TestGood"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestGood","Output":"=== RUN   TestGood\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestGood","Output":"--- PASS: TestGood (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/failpkg","Test":"TestGood","Elapsed":0}
{"Action":"run","Package":"example.com/m/failpkg","Test":"TestBad"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestBad","Output":"    a_test.go:4: some log\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestBad","Output":"    a_test.go:4: want 1, got 2\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/failpkg","Test":"TestBad","Elapsed":0}
{"Action":"run","Package":"example.com/m/failpkg","Test":"TestSub"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub","Output":"=== RUN   TestSub\n"}
{"Action":"run","Package":"example.com/m/failpkg","Test":"TestSub/ok"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub/ok","Output":"=== RUN   TestSub/ok\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub/ok","Output":"    a_test.go:5: quiet\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub/ok","Output":"--- PASS: TestSub/ok (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/failpkg","Test":"TestSub/ok","Elapsed":0}
{"Action":"run","Package":"example.com/m/failpkg","Test":"TestSub/bad"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub/bad","Output":"=== RUN   TestSub/bad\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub/bad","Output":"    a_test.go:5: inner broke\n"}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub/bad","Output":"--- FAIL: TestSub/bad (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/failpkg","Test":"TestSub/bad","Elapsed":0}
{"Action":"output","Package":"example.com/m/failpkg","Test":"TestSub","Output":"--- FAIL: TestSub (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/failpkg","Test":"TestSub","Elapsed":0}
{"Action":"output","Package":"example.com/m/failpkg","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/m/failpkg","Output":"FAIL\texample.com/m/failpkg\t0.021s\n"}
{"Action":"fail","Package":"example.com/m/failpkg","Elapsed":0.023}
`
	skipJSON = `{"Action":"start","Package":"example.com/m/skippkg"}
{"Action":"run","Package":"example.com/m/skippkg","Test":"TestShared"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestShared","Output":"=== RUN   TestShared\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestShared","Output":"    a_test.go:3: looking\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestShared","Output":"    a_test.go:3: shared tokenizer files not found at ../../shared/tokenizers; skipping\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestShared","Output":"--- SKIP: TestShared (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/skippkg","Test":"TestShared","Elapsed":0}
{"Action":"run","Package":"example.com/m/skippkg","Test":"TestMulti"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestMulti","Output":"=== RUN   TestMulti\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestMulti","Output":"    a_test.go:4: line one\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestMulti","Output":"        line two\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestMulti","Output":"--- SKIP: TestMulti (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/skippkg","Test":"TestMulti","Elapsed":0}
{"Action":"run","Package":"example.com/m/skippkg","Test":"TestNow"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestNow","Output":"=== RUN   TestNow\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestNow","Output":"--- SKIP: TestNow (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/skippkg","Test":"TestNow","Elapsed":0}
{"Action":"run","Package":"example.com/m/skippkg","Test":"TestSub"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestSub","Output":"=== RUN   TestSub\n"}
{"Action":"run","Package":"example.com/m/skippkg","Test":"TestSub/y"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestSub/y","Output":"=== RUN   TestSub/y\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestSub/y","Output":"    a_test.go:6: no chromium\n"}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestSub/y","Output":"--- SKIP: TestSub/y (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/skippkg","Test":"TestSub/y","Elapsed":0}
{"Action":"output","Package":"example.com/m/skippkg","Test":"TestSub","Output":"--- PASS: TestSub (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/skippkg","Test":"TestSub","Elapsed":0}
{"Action":"output","Package":"example.com/m/skippkg","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/skippkg","Output":"ok  \texample.com/m/skippkg\t0.036s\n"}
{"Action":"pass","Package":"example.com/m/skippkg","Elapsed":0.04}
`
	// The build output comes when the package is built, its result when
	// its turn to run comes.
	buildFailJSON = `{"ImportPath":"example.com/m/buildfail [example.com/m/buildfail.test]","Action":"build-output","Output":"# example.com/m/buildfail [example.com/m/buildfail.test]\n"}
{"ImportPath":"example.com/m/buildfail [example.com/m/buildfail.test]","Action":"build-output","Output":"buildfail/a_test.go:3:39: cannot use \"s\" (untyped string constant) as int value in variable declaration\n"}
{"ImportPath":"example.com/m/buildfail [example.com/m/buildfail.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m/buildfail"}
{"Action":"output","Package":"example.com/m/buildfail","Output":"FAIL\texample.com/m/buildfail [build failed]\n"}
{"Action":"fail","Package":"example.com/m/buildfail","Elapsed":0.001,"FailedBuild":"example.com/m/buildfail [example.com/m/buildfail.test]"}
`
	panicJSON = `{"Action":"start","Package":"example.com/m/panicpkg"}
{"Action":"run","Package":"example.com/m/panicpkg","Test":"TestP"}
{"Action":"output","Package":"example.com/m/panicpkg","Test":"TestP","Output":"=== RUN   TestP\n"}
{"Action":"output","Package":"example.com/m/panicpkg","Test":"TestP","Output":"--- FAIL: TestP (0.00s)\n"}
{"Action":"output","Package":"example.com/m/panicpkg","Test":"TestP","Output":"panic: assignment to entry in nil map [recovered, repanicked]\n"}
{"Action":"output","Package":"example.com/m/panicpkg","Test":"TestP","Output":"\n"}
{"Action":"output","Package":"example.com/m/panicpkg","Test":"TestP","Output":"example.com/m/panicpkg.TestP(0x318ebbf8a248?)\n"}
{"Action":"output","Package":"example.com/m/panicpkg","Test":"TestP","Output":"\tpanicpkg/a_test.go:3 +0x28\n"}
{"Action":"fail","Package":"example.com/m/panicpkg","Test":"TestP","Elapsed":0}
{"Action":"output","Package":"example.com/m/panicpkg","Output":"FAIL\texample.com/m/panicpkg\t0.094s\n"}
{"Action":"fail","Package":"example.com/m/panicpkg","Elapsed":0.097}
`
	// A panic in a goroutine (like os.Exit, a timeout or a race report)
	// ends the test binary: the test that ran never gets its fail event.
	crashJSON = `{"Action":"start","Package":"example.com/m/crashpkg"}
{"Action":"run","Package":"example.com/m/crashpkg","Test":"TestG"}
{"Action":"output","Package":"example.com/m/crashpkg","Test":"TestG","Output":"=== RUN   TestG\n"}
{"Action":"output","Package":"example.com/m/crashpkg","Test":"TestG","Output":"    a_test.go:3: starting\n"}
{"Action":"output","Package":"example.com/m/crashpkg","Test":"TestG","Output":"panic: boom in goroutine\n"}
{"Action":"output","Package":"example.com/m/crashpkg","Test":"TestG","Output":"\n"}
{"Action":"output","Package":"example.com/m/crashpkg","Test":"TestG","Output":"example.com/m/crashpkg.TestG.func1()\n"}
{"Action":"output","Package":"example.com/m/crashpkg","Test":"TestG","Output":"\tcrashpkg/a_test.go:3 +0x25\n"}
{"Action":"output","Package":"example.com/m/crashpkg","Output":"FAIL\texample.com/m/crashpkg\t0.032s\n"}
{"Action":"fail","Package":"example.com/m/crashpkg","Elapsed":0.034}
`
	// go test killed while a package ran: the stream stops mid-package.
	killedJSON = `{"Action":"start","Package":"example.com/m/slow"}
{"Action":"run","Package":"example.com/m/slow","Test":"TestSlow"}
{"Action":"output","Package":"example.com/m/slow","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"example.com/m/slow","Test":"TestSlow","Output":"    a_test.go:3: sleeping\n"}
`
)

func TestSummary(t *testing.T) {
	const total = "\nPASS: 1 passed, 0 failed, 0 skipped (tests and subtests); 1 package ok; 0s\n"
	for _, tc := range []struct {
		name, in string
		want     string
		status   int
	}{{
		name:   "pass",
		in:     passJSON,
		want:   "ok  \texample.com/m/passpkg\t0.019s\n" + total,
		status: 0,
	}, {
		name: "no test files",
		in:   noTestsJSON,
		want: "?   \texample.com/m/notests\t[no test files]\n" +
			"\nPASS: 0 passed, 0 failed, 0 skipped (tests and subtests); 0 packages ok, 1 without tests; 0s\n",
		status: 0,
	}, {
		name: "fail with output",
		in:   failJSON,
		want: `    a_test.go:4: some log
    a_test.go:4: want 1, got 2
--- FAIL: TestBad (0.00s)
    a_test.go:5: inner broke
--- FAIL: TestSub/bad (0.00s)
--- FAIL: TestSub (0.00s)
FAIL
FAIL	example.com/m/failpkg	0.021s

======== FAILED: 3 failures ========
failpkg  TestBad
failpkg  TestSub/bad
failpkg  TestSub

FAIL: 2 passed, 3 failed, 0 skipped (tests and subtests); 0 packages ok, 1 failed; 0s
`,
		status: 1,
	}, {
		name: "skip with message",
		in:   skipJSON,
		want: `ok  	example.com/m/skippkg	0.036s

======== SKIPPED: 4 tests did not run ========
skippkg  TestShared: shared tokenizer files not found at ../../shared/tokenizers; skipping
skippkg  TestMulti: line one
             line two
skippkg  TestNow: (no message)
skippkg  TestSub/y: no chromium
set REQUIRE=1 to fail instead

PASS: 1 passed, 0 failed, 4 skipped (tests and subtests); 1 package ok; 0s
`,
		status: 0,
	}, {
		name: "build failure",
		in:   buildFailJSON,
		want: `# example.com/m/buildfail [example.com/m/buildfail.test]
buildfail/a_test.go:3:39: cannot use "s" (untyped string constant) as int value in variable declaration
FAIL	example.com/m/buildfail [build failed]

======== FAILED: 1 failure ========
buildfail  [build failed]

FAIL: 0 passed, 0 failed, 0 skipped (tests and subtests); 0 packages ok, 1 failed (1 build failed); 0s
`,
		status: 1,
	}, {
		name: "panic",
		in:   panicJSON,
		want: `--- FAIL: TestP (0.00s)
panic: assignment to entry in nil map [recovered, repanicked]

example.com/m/panicpkg.TestP(0x318ebbf8a248?)
	panicpkg/a_test.go:3 +0x28
FAIL	example.com/m/panicpkg	0.094s

======== FAILED: 1 failure ========
panicpkg  TestP

FAIL: 0 passed, 1 failed, 0 skipped (tests and subtests); 0 packages ok, 1 failed; 0s
`,
		status: 1,
	}, {
		name: "crash outside the test's goroutine",
		in:   crashJSON,
		want: `    a_test.go:3: starting
panic: boom in goroutine

example.com/m/crashpkg.TestG.func1()
	crashpkg/a_test.go:3 +0x25
FAIL	example.com/m/crashpkg	0.032s

======== FAILED: 1 failure ========
crashpkg  TestG: did not finish: the test binary exited while it ran (see its output above)

FAIL: 0 passed, 1 failed, 0 skipped (tests and subtests); 0 packages ok, 1 failed; 0s
`,
		status: 1,
	}, {
		name: "killed while a package ran",
		in:   passJSON + killedJSON,
		want: `ok  	example.com/m/passpkg	0.019s
testsum: the input ended while example.com/m/slow was still running: go test was killed or crashed
    a_test.go:3: sleeping

======== FAILED: 1 failure ========
slow  TestSlow: did not finish: the input ended while it ran

FAIL: 1 passed, 1 failed, 0 skipped (tests and subtests); 1 package ok, 1 failed, run cut short; 0s
`,
		status: 1,
	}, {
		name: "killed in the middle of a line",
		in:   passJSON + `{"Action":"start","Pack`,
		want: "ok  \texample.com/m/passpkg\t0.019s\n" +
			`{"Action":"start","Pack` + "\n" +
			"testsum: the input ended in the middle of a line: go test was killed\n" +
			"\nFAIL: 1 passed, 0 failed, 0 skipped (tests and subtests); 1 package ok, run cut short; 0s\n",
		status: 1,
	}, {
		name: "no events",
		in:   "",
		want: "testsum: no test events on the input: did go test -json run?\n" +
			"\nFAIL: 0 passed, 0 failed, 0 skipped (tests and subtests); 0 packages ok; 0s\n",
		status: 1,
	}, {
		name: "text among the events",
		in:   "go: warning: something\n" + passJSON,
		want: "go: warning: something\nok  \texample.com/m/passpkg\t0.019s\n" + total,
	}, {
		name: "a whole run",
		in:   skipJSON + buildFailJSON + noTestsJSON + failJSON + passJSON,
		want: `ok  	example.com/m/skippkg	0.036s
# example.com/m/buildfail [example.com/m/buildfail.test]
buildfail/a_test.go:3:39: cannot use "s" (untyped string constant) as int value in variable declaration
FAIL	example.com/m/buildfail [build failed]
?   	example.com/m/notests	[no test files]
    a_test.go:4: some log
    a_test.go:4: want 1, got 2
--- FAIL: TestBad (0.00s)
    a_test.go:5: inner broke
--- FAIL: TestSub/bad (0.00s)
--- FAIL: TestSub (0.00s)
FAIL
FAIL	example.com/m/failpkg	0.021s
ok  	example.com/m/passpkg	0.019s

======== SKIPPED: 4 tests did not run ========
skippkg  TestShared: shared tokenizer files not found at ../../shared/tokenizers; skipping
skippkg  TestMulti: line one
             line two
skippkg  TestNow: (no message)
skippkg  TestSub/y: no chromium
set REQUIRE=1 to fail instead

======== FAILED: 4 failures ========
buildfail  [build failed]
failpkg    TestBad
failpkg    TestSub/bad
failpkg    TestSub

FAIL: 4 passed, 3 failed, 4 skipped (tests and subtests); 2 packages ok, 2 failed (1 build failed), 1 without tests; 0s
`,
		status: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			s := newSummary(&out, "example.com/m", "set REQUIRE=1 to fail instead", false)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s.now = func() time.Time { return t0 }
			s.start = t0
			status := s.run(strings.NewReader(tc.in))
			if got := out.String(); got != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tc.want)
			}
			if status != tc.status {
				t.Errorf("exit status %d, want %d", status, tc.status)
			}
		})
	}
}

// TestStreams checks that a package's result is printed as soon as its
// events arrive, not when the input ends.
func TestStreams(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		status := newSummary(outW, "", "", false).run(inR)
		outW.Close()
		done <- status
	}()
	go io.WriteString(inW, passJSON) // the input stays open

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if want := "ok  \texample.com/m/passpkg\t0.019s"; l != want {
			t.Errorf("first line %q, want %q", l, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing printed while the input stayed open")
	}
	inW.Close()
	for range lines {
	}
	if status := <-done; status != 0 {
		t.Errorf("exit status %d, want 0", status)
	}
}

func TestModulePath(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ gomod, want string }{
		{"module example.com/m\n\ngo 1.26\n", "example.com/m"},
		{"// comment\nmodule \"example.com/q\" // trailing\n", "example.com/q"},
		{"go 1.26\n", ""},
	} {
		path := dir + "/go.mod"
		if err := os.WriteFile(path, []byte(tc.gomod), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := modulePath(path); got != tc.want {
			t.Errorf("modulePath(%q) = %q, want %q", tc.gomod, got, tc.want)
		}
	}
	if got := modulePath(dir + "/absent"); got != "" {
		t.Errorf("modulePath of a missing file = %q, want \"\"", got)
	}
}
