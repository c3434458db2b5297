package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// fastRowsValidity switches off the checks that rows of a few dozen
// requests on a busy 2-core test machine cannot pass; what the tests
// assert is where each variant's capacity ends, which they can.
const fastRowsValidity = "validity: {ignore: [samples, steady_state, simulator, load, client_cpu, client_stall, bursts, stamp_error]}\n"

// Two built-in variants differing only in max_num_seqs run side by side:
// the one that serves one sequence at a time saturates first (its
// operating point is concurrency 1, concurrency 8 past capacity: its
// eighth request waits for seven others, about 7 × 32 × 3.3 ms), the other
// holds 8 users, and the record names it the best variant. The threshold
// sits far from both, for a busy test machine.
func TestVariantsSideBySide(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "exp.yaml")
	writeFileT(t, exp, `apiVersion: infermatrix/v1
name: variants
server:
  target: builtin
  sim: {preset: qwen3-0.6b-h200}
  variants:
    - {name: seqs1, sim: {engine: {max_num_seqs: 1}}}
    - {name: seqs64, sim: {engine: {max_num_seqs: 64}}}
defaults: {requests: 12, input_tokens: 64, output_tokens: 32, body: {ignore_eos: true}}
report: {formats: [markdown, json, html]}
rows:
  - {id: sat, question: "How many users at TTFT p95 under 400 ms?", sweep: {concurrency: [1, 8]}}
acceptance:
  - {name: ttft, rows: [sat], expect: ttft.p95 < 400, sweep: operating_point}
`+fastRowsValidity)
	out := filepath.Join(dir, "run")
	r := cli(t, context.Background(), "run", exp, "--out", out, "--progress", "lines")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var d verdict.Decision
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "decision.json"))), &d); err != nil {
		t.Fatal(err)
	}
	ops := map[string]verdict.OperatingPoint{}
	for _, op := range d.OperatingPoints {
		ops[op.Base] = op
	}
	if op := ops["sat@seqs1"]; op.Row != "sat/c=1@seqs1" || strings.Join(op.Rejected, ",") != "sat/c=8@seqs1" {
		t.Errorf("seqs1's operating point %q, past capacity %q; want sat/c=1@seqs1, sat/c=8@seqs1", op.Row, op.Rejected)
	}
	if op := ops["sat@seqs64"]; op.Row != "sat/c=8@seqs64" {
		t.Errorf("seqs64's operating point %q; want sat/c=8@seqs64", op.Row)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	for _, want := range []string{
		"best variant `seqs64` (",
		"| `seqs1` | `sat/c=1@seqs1` | ✅ pass |",
		"past capacity: `sat/c=8@seqs1`",
		"| **`seqs64`** (best) | `sat/c=8@seqs64` |",
		"built-in: max_num_seqs 1",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q:\n%s", want, md)
		}
	}
	if html := readFile(t, filepath.Join(out, "report.html")); !strings.Contains(html, `<section id="variants">`) {
		t.Error("report.html has no Variants section")
	}
}

// A launch variant starts the built-in server as its own process (this
// test binary running `infermatrix sim`), waits until it answers, runs its
// rows against it and stops it; the manifest records it and its log stays.
// A variant whose server never gets ready leaves its rows not run with
// why, and the run goes on.
func TestVariantLaunch(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	simArgs := strings.Join([]string{"sim", "--preset", "tiny-fast", "--addr", "127.0.0.1:" + port, "--max-num-seqs", "8"}, `\x1f`)
	exp := filepath.Join(dir, "exp.yaml")
	writeFileT(t, exp, `apiVersion: infermatrix/v1
name: launched
server:
  variants:
    - name: never
      urls: [http://127.0.0.1:`+freePort(t)+`/v1]
      launch: {command: [`+self+`, -test.run=^$], env: {`+mainArgsEnv+`: "sim\x1f--preset\x1fnope"}, ready: {timeout: 30s}}
    - name: sub
      urls: [http://127.0.0.1:`+port+`/v1]
      launch:
        command: [`+self+`]
        env: {`+mainArgsEnv+`: "`+simArgs+`"}
        ready: {timeout: 60s}
        stop: {signal: SIGTERM, grace: 10s}
defaults: {requests: 6, input_tokens: 32, output_tokens: 4, concurrency: 2}
report: {formats: [markdown, json]}
rows: [{id: one}]
acceptance: [{name: ok, expect: requests.failed == 0}]
`+fastRowsValidity)
	// plan lists the variants in run order, with what each starts.
	if r := cli(t, context.Background(), "plan", exp); r.code != exitOK || !strings.Contains(r.stdout, "  never: "+self+" -test.run=^$\n  sub: "+self+"\n") {
		t.Errorf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(dir, "run")
	r := cli(t, context.Background(), "run", exp, "--out", out, "--progress", "lines")
	// The variant that never ran leaves its row unjudged: inconclusive.
	if r.code != exitInconclusive {
		t.Fatalf("exit %d; want %d (inconclusive)\n%s%s", r.code, exitInconclusive, r.stdout, r.stderr)
	}
	var man rundir.Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "manifest.json"))), &man); err != nil {
		t.Fatal(err)
	}
	if len(man.Variants) != 2 {
		t.Fatalf("manifest has %d variants; want 2", len(man.Variants))
	}
	never, sub := man.Variants[0], man.Variants[1]
	if !strings.Contains(never.Error, "exited before it was ready") || !strings.Contains(never.Error, `unknown simulator preset "nope"`) {
		t.Errorf("never's error = %q; want the early exit and the end of its log", never.Error)
	}
	if sub.Error != "" || sub.Started == nil || sub.Ready == nil || sub.Stopped == nil || sub.StopError != "" || sub.PID == 0 {
		t.Errorf("sub = %+v; want started, ready and stopped cleanly", sub)
	}
	if sub.Discovered.Engine != "infermatrix-sim" || sub.Discovered.EngineVersion == "" {
		t.Errorf("sub discovered %q %q; want infermatrix-sim and its version", sub.Discovered.Engine, sub.Discovered.EngineVersion)
	}
	if got := strings.Join(sub.Command, " "); got != self {
		t.Errorf("sub's command = %q", got)
	}
	if log := readFile(t, filepath.Join(out, "variants", "sub", "server.log")); !strings.Contains(log, "serving infermatrix-sim") {
		t.Errorf("sub's server.log:\n%s", log)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	for _, want := range []string{"best variant `sub` (", "`never` rejected: did not run", "⚠ rows not run:"} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q:\n%s", want, md)
		}
	}
	// The launched server is gone: its port is free again.
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Errorf("the launched server still holds its port: %v", err)
	} else {
		ln.Close()
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func writeFileT(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// vLLM's pair of prefix-caching flags cannot both be given.
func TestSimPrefixCachingFlags(t *testing.T) {
	r := cli(t, context.Background(), "sim", "--enable-prefix-caching", "--no-enable-prefix-caching", "--addr", "127.0.0.1:0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "contradict") {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
}
