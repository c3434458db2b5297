package reports

import (
	"bytes"
	"strings"
	"testing"
)

// TestSearchRunRejudged: a search run read back from its directory judges
// its probes as the run did (the rules moved onto them, past-the-limit
// probes rejected), restates the search, and decision.md says it in one
// sentence and marks every probe in the workload matrix. The limit is
// exact: with a constant-latency server a closed loop of c users keeps c
// requests in flight. Requests last about 45 ms so that the client's own
// gap between one request and the next (longer under -race on a busy
// machine) stays a small part of each user's time: with 6 ms requests the
// load check once found 0.88 of 1 user in flight and the probe invalid.
func TestSearchRunRejudged(t *testing.T) {
	run := runExperiment(t, t.TempDir(), `apiVersion: infermatrix/v1
name: search
server: {target: builtin, hardware: {gpu: H100-SXM, count: 1}, sim: {preset: fixed, ttft: 10ms, itl: 5ms}}
validity: {ignore: [client_stall, bursts, simulator, client_cpu, stamp_error, dispatch_lag]}
defaults: {input_tokens: 16, output_tokens: 8, requests: 40, body: {ignore_eos: true}}
rows:
  - {id: sat, search: {concurrency: {min: 1, max: 4}}}
acceptance:
  - {name: users, rows: [sat], expect: in_flight.mean < 2.5}
`)
	in, _, err := judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Decision.Verdict != "pass" {
		t.Errorf("verdict %s (%v); want pass: probes past the limit are rejected, not failed", in.Decision.Verdict, in.Decision.Why)
	}
	if len(in.Analysis.Searches) != 1 {
		t.Fatalf("searches %+v", in.Analysis.Searches)
	}
	sa := in.Analysis.Searches[0]
	if sa.Status != "bracketed" || *sa.PassingValue != 2 || *sa.FailingValue != 3 || len(sa.Probes) != 4 {
		t.Fatalf("search %+v; want [2, 3] after probes 1, 2, 4, 3", sa)
	}
	if rv := in.Decision.Row("sat/c=4"); rv == nil || rv.Search != "sat" || rv.Probe != 3 || rv.Verdict != "rejected" {
		t.Errorf("decision of sat/c=4: %+v; want probe 3 of sat, rejected", rv)
	}
	var csvOut bytes.Buffer
	if err := WriteCSV(&csvOut, in.Summary, in.Decision); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(csvOut.String(), "\n")
	if !strings.HasSuffix(lines[0], ",probe_of,probe") || !strings.HasPrefix(lines[1], "sat/c=1,sat,") || !strings.HasSuffix(lines[1], ",sat,1") {
		t.Errorf("summary.csv does not mark probes:\n%s\n%s", lines[0], lines[1])
	}
	md := markdownOf(t, in)
	for _, want := range []string{
		"## Searches\n\n- Search `sat`: holds 2 users (`sat/c=2`) on one H100-SXM under its rules; 3 (`sat/c=3`) fails users: in_flight.mean ",
		"| `sat/c=4` |  | concurrency 4 (probe 3 of search sat) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q:\n%s", want, md)
		}
	}
}
