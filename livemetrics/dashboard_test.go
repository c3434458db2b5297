package livemetrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardFile is the Grafana dashboard shipped for these metrics.
const dashboardFile = "../docs/grafana/infermatrix-live.json"

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// selectorName finds the metric names of a PromQL expression: a name
// followed by a label selector, or one standing alone as an argument.
// Function names are followed by "(", label names inside by() and
// matchers by "," "=" "!" or ")", so neither is taken for a metric.
var selectorName = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\{`)

var infermatrixName = regexp.MustCompile(`\binfermatrix_[a-z_]+`)

// TestDashboardNamesOnlyExportedMetrics: the dashboard parses, every
// panel's PromQL names only metrics the recorder exports, every metric
// the recorder exports is on some panel, and the shard variable exists so
// that every shard of a distributed run shows.
func TestDashboardNamesOnlyExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no uid or no panels", dashboardFile)
	}
	exported := Names()
	used := map[string]bool{}
	check := func(where, expr string) {
		if expr == "" {
			t.Errorf("%s: an empty query", where)
		}
		for _, m := range selectorName.FindAllString(expr, -1) {
			name := strings.TrimSuffix(m, "{")
			if !slices.Contains(exported, name) {
				t.Errorf("%s: %q selects %s, which the recorder does not export", where, expr, name)
			}
		}
		names := infermatrixName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no infermatrix metric", where, expr)
		}
		for _, n := range names {
			if !slices.Contains(exported, n) {
				t.Errorf("%s: %q names %s, which the recorder does not export", where, expr, n)
			}
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
		}
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			check("panel "+p.Title, q.Expr)
		}
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Definition != "" {
			check("variable "+v.Name, v.Definition)
		}
	}
	if !vars["shard"] {
		t.Error("no shard variable: the shards of a distributed run cannot be told apart")
	}
	for _, m := range []string{MetricRunInfo, MetricInFlight, MetricCompleted, MetricErrors, MetricWarmup, MetricOutTokens, MetricTTFT, MetricITL, MetricDispatchLag} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}
