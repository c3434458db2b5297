package merge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// writeRowSummary writes a shard's own summary of the arrivals row, as
// its live run would have.
func writeRowSummary(t *testing.T, dir string, sc metrics.SelfCheck) {
	t.Helper()
	rs := metrics.RowSummary{ID: "arrivals", Base: "arrivals", Status: metrics.RowComplete, SelfCheck: sc}
	rs.Requests.Completed = 20
	b, _ := json.Marshal(&rs)
	writeFile(t, filepath.Join(dir, rundir.RowFile("arrivals", rundir.SummaryFile)), b)
}

// editManifest changes a shard's manifest.
func editManifest(t *testing.T, dir string, edit func(*rundir.Manifest)) {
	t.Helper()
	var man rundir.Manifest
	readJSON(t, filepath.Join(dir, rundir.ManifestFile), &man)
	edit(&man)
	b, _ := json.Marshal(&man)
	writeFile(t, filepath.Join(dir, rundir.ManifestFile), b)
}

func decisionRow(t *testing.T, res *Result) *verdict.RowVerdict {
	t.Helper()
	rv := res.Written.Decision.Row("arrivals")
	if rv == nil {
		t.Fatal("no verdict for the arrivals row")
	}
	return rv
}

func decisionMD(t *testing.T, res *Result) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.DecisionFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A shard whose own row was invalid for a check only its live run makes
// (here its client's CPU) makes the merged row invalid, said with the
// shard; a check the union makes again from the records (dispatch lag) is
// not carried: the merged row is judged on the union's own. Shard 1's
// valid row carries nothing.
func TestMergeCarriesShardsLiveValidity(t *testing.T) {
	dirs := splitShards(t, 2, "plan-a", nil)
	writeRowSummary(t, dirs[0], metrics.SelfCheck{ClientCPU: 0.2, Cores: 2})
	writeRowSummary(t, dirs[1], metrics.SelfCheck{ClientCPU: 0.97, Cores: 2,
		DispatchLag: metrics.Dist{Count: 20, P99: 500}, RequestedRate: 10})
	res, err := Merge(dirs, filepath.Join(t.TempDir(), "merged"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rv := decisionRow(t, res)
	if rv.Validity.Valid || len(rv.Validity.Reasons) != 1 {
		t.Fatalf("validity %+v, want invalid for shard 2's client CPU alone", rv.Validity)
	}
	r := rv.Validity.Reasons[0]
	if r.Check != validity.ClientCPU || !strings.HasPrefix(r.Message, "shard 2/2: ") || !strings.Contains(r.Message, "97%") {
		t.Errorf("reason %+v, want shard 2/2's client_cpu at 97%%", r)
	}
	if res.Written.Decision.Verdict == verdict.Pass {
		t.Errorf("a merged run passed on a row a shard measured while saturated")
	}
	if md := decisionMD(t, res); !strings.Contains(md, "shard 2/2: the client's process used 97%") {
		t.Errorf("decision.md does not say which shard was saturated")
	}

}

// Under --start-at, a row whose shards began it further apart than the
// alignment limit is invalid, with the spread; within the limit it is
// valid, and decision.md's Merged line shows the spread either way.
func TestMergeAlignment(t *testing.T) {
	at := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		late  [2]time.Duration
		valid bool
		shown string
	}{
		{"aligned", [2]time.Duration{10 * time.Millisecond, 40 * time.Millisecond}, true, "arrivals 30ms"},
		{"apart", [2]time.Duration{10 * time.Millisecond, 1200 * time.Millisecond}, false, "arrivals 1.19s"},
	} {
		dirs := splitShards(t, 2, "plan-a", nil)
		for i, d := range dirs {
			editManifest(t, d, func(m *rundir.Manifest) {
				m.Shard.StartAt = &at
				m.Shard.StartSkewNS = 5 // the row starts rule over it
				m.Shard.RowStarts = []rundir.RowStart{{Row: "arrivals", Planned: at, LateNS: tt.late[i].Nanoseconds()}}
			})
		}
		res, err := Merge(dirs, filepath.Join(t.TempDir(), "merged"), time.Now())
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		rv := decisionRow(t, res)
		if rv.Validity.Valid != tt.valid {
			t.Errorf("%s: validity %+v, want valid %v", tt.name, rv.Validity, tt.valid)
		}
		if !tt.valid && (len(rv.Validity.Reasons) != 1 || rv.Validity.Reasons[0].Check != validity.Alignment ||
			!strings.Contains(rv.Validity.Reasons[0].Message, "limit 250ms")) {
			t.Errorf("%s: reasons %+v, want alignment against the 250ms floor", tt.name, rv.Validity.Reasons)
		}
		if md := decisionMD(t, res); !strings.Contains(md, "start spread per row (--start-at): "+tt.shown) {
			t.Errorf("%s: decision.md's Merged line does not show %q", tt.name, tt.shown)
		}
	}
}
