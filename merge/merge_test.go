package merge

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/stats"
	"github.com/infermatrix/infermatrix/verdict"
)

// fixture is a small open-loop run on the built-in server (run --virtual:
// 40 requests, Poisson 20/s), which the tests deal out to shards as run
// --shard would: every N-th arrival.
const fixture = "testdata/run"

// splitShards writes count shard run directories from the fixture, shard
// k holding every count-th record from the (k-1)-th, each with its copy of
// the telemetry, and returns those listed in keep (all when nil).
func splitShards(t *testing.T, count int, plan string, keep []int) []string {
	t.Helper()
	base := t.TempDir()
	var dirs []string
	for k := 1; k <= count; k++ {
		if keep != nil && !slices.Contains(keep, k) {
			continue
		}
		d := filepath.Join(base, "shard-"+string(rune('0'+k)))
		for _, f := range []string{rundir.ExperimentFile, rundir.HashFile, rundir.RowFile("arrivals", rundir.TelemetryFile)} {
			copyFile(t, filepath.Join(fixture, f), filepath.Join(d, f))
		}
		var man rundir.Manifest
		readJSON(t, filepath.Join(fixture, rundir.ManifestFile), &man)
		man.Shard = &rundir.ShardInfo{Index: k, Count: count, PlanSHA256: plan}
		b, _ := json.Marshal(&man)
		writeFile(t, filepath.Join(d, rundir.ManifestFile), b)
		var out []byte
		for i, line := range lines(t, filepath.Join(fixture, rundir.RowFile("arrivals", rundir.RecordsFile))) {
			if i%count == k-1 {
				out = append(append(out, line...), '\n')
			}
		}
		writeFile(t, filepath.Join(d, rundir.RowFile("arrivals", rundir.RecordsFile)), out)
		dirs = append(dirs, d)
	}
	return dirs
}

func TestMergeIsTheUnion(t *testing.T) {
	for _, n := range []int{2, 4} {
		dirs := splitShards(t, n, "plan-a", nil)
		out := filepath.Join(t.TempDir(), "merged")
		res, err := Merge(dirs, out, time.Now())
		if err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		sum, err := res.Dir.Summary()
		if err != nil {
			t.Fatal(err)
		}
		rs := sum.Row("arrivals")
		recs := records(t, filepath.Join(fixture, rundir.RowFile("arrivals", rundir.RecordsFile)))
		if rs.Requests.Completed != len(recs) || rs.Requests.Sent != len(recs) {
			t.Errorf("%d shards: merged %d sent, %d completed; the shards hold %d", n, rs.Requests.Sent, rs.Requests.Completed, len(recs))
		}
		// Percentiles from every record of the union, computed here
		// independently of the aggregator.
		var ttft []float64
		for _, r := range recs {
			ttft = append(ttft, float64(r.FirstTokenNS)/1e6)
		}
		slices.Sort(ttft)
		for q, got := range map[float64]float64{50: rs.Metrics.TTFT.P50, 90: rs.Metrics.TTFT.P90, 99: rs.Metrics.TTFT.P99} {
			if want := stats.Percentile(ttft, q); math.Abs(got-want) > 1e-6 {
				t.Errorf("%d shards: ttft p%g = %v, the union's records give %v", n, q, got, want)
			}
		}
		// The merged row offers the row's rate, not a shard's share.
		if r := rs.Throughput.RequestsPerS; r < 15 || r > 25 {
			t.Errorf("%d shards: merged rate %.2f req/s; the row asks for 20", n, r)
		}
		if res.Written.Decision.Verdict != verdict.Pass {
			t.Errorf("%d shards: verdict %s (%v), want pass", n, res.Written.Decision.Verdict, res.Written.Decision.Why)
		}
		man, err := res.Dir.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if man.Shard != nil || man.Merged == nil || len(man.Merged.From) != n || len(man.Merged.Missing) != 0 {
			t.Errorf("%d shards: manifest shard %+v merged %+v", n, man.Shard, man.Merged)
		}
		got := records(t, res.Dir.RecordsPath("arrivals"))
		if !slices.IsSortedFunc(got, func(a, b *metrics.Record) int { return int(a.StartNS - b.StartNS) }) {
			t.Errorf("%d shards: merged records are not in start order", n)
		}
		if _, err := os.Stat(filepath.Join(out, rundir.RowFile("arrivals", "telemetry-shard-2.jsonl"))); err != nil {
			t.Errorf("%d shards: shard 2's telemetry not kept: %v", n, err)
		}
	}
}

func TestMergeMissingShardIsInconclusive(t *testing.T) {
	dirs := splitShards(t, 3, "plan-a", []int{1, 3})
	res, err := Merge(dirs, filepath.Join(t.TempDir(), "merged"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Missing, []int{2}) {
		t.Errorf("missing %v, want [2]", res.Missing)
	}
	if d := res.Written.Decision; d.Verdict != verdict.Inconclusive {
		t.Errorf("verdict %s, want inconclusive", d.Verdict)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.DecisionFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "merged without shard 2") || !strings.Contains(string(b), "MISSING: 2") {
		t.Errorf("decision.md does not name the missing shard")
	}
}

func TestMergeRefusesOtherPlans(t *testing.T) {
	a := splitShards(t, 2, "plan-a", []int{1})
	b := splitShards(t, 2, "plan-b", []int{2})
	out := filepath.Join(t.TempDir(), "merged")
	if _, err := Merge(append(a, b...), out, time.Now()); !errors.Is(err, ErrPlan) {
		t.Errorf("shards of two plans merged: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused merge wrote %s", out)
	}
	twice := splitShards(t, 2, "plan-a", []int{1})
	if _, err := Merge(append(twice, a...), out, time.Now()); !errors.Is(err, ErrUsage) {
		t.Errorf("shard 1 merged twice: %v", err)
	}
	if _, err := Merge([]string{fixture}, out, time.Now()); !errors.Is(err, ErrUsage) {
		t.Errorf("an unsharded run merged: %v", err)
	}
}

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

func records(t *testing.T, path string) []*metrics.Record {
	t.Helper()
	var out []*metrics.Record
	for _, l := range lines(t, path) {
		var r metrics.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, &r)
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, b)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
