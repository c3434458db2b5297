package schema

import (
	"errors"
	"strings"
	"testing"
)

// TestCostPlan: the server's price per hour is the node price, or the GPU
// price times the GPUs the file declares (hardware first, then the built-in
// server's replicas, then 1), and the plan says where the count came from.
func TestCostPlan(t *testing.T) {
	for _, c := range []struct {
		name, server, cost string
		usd                float64
		gpus               int
		from               string
	}{
		{"none", "server: {target: builtin}\n", "", 0, 1, "server.sim.replicas"},
		{"gpu hour, default count", "server: {urls: [http://h:8000/v1]}\n", "cost: {usd_per_gpu_hour: 2.5}\n", 2.5, 1, "default"},
		{"gpu hour x hardware", "server: {urls: [http://h:8000/v1], hardware: {count: 8}}\n", "cost: {usd_per_gpu_hour: 2.5}\n", 20, 8, "server.hardware.count"},
		{"gpu hour x replicas", "server: {target: builtin, sim: {replicas: 4}}\n", "cost: {usd_per_gpu_hour: 3}\n", 12, 4, "server.sim.replicas"},
		{"node hour", "server: {urls: [http://h:8000/v1], hardware: {count: 8}}\n", "cost: {usd_per_node_hour: 98.32}\n", 98.32, 8, "server.hardware.count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "apiVersion: infermatrix/v1\nname: t\n" + c.server + c.cost + telemetryRows
			plan, err := Parse("test.yaml", []byte(src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Cost; got.USDPerHour != c.usd || got.GPUs != c.gpus || got.GPUsFrom != c.from {
				t.Errorf("cost plan %+v; want %v/h over %d GPUs from %s", got, c.usd, c.gpus, c.from)
			}
		})
	}
}

// TestCostProblems: a price that is not one positive number is refused at
// its key, and a rule on cost.* in a file without a price is refused at the
// name, while throughput per GPU stays readable.
func TestCostProblems(t *testing.T) {
	for _, c := range []struct{ name, body, path, msg string }{
		{"both", "cost: {usd_per_gpu_hour: 2, usd_per_node_hour: 16}\n", "cost.usd_per_node_hour", "both"},
		{"neither", "cost: {}\n", "cost", "no price"},
		{"zero", "cost: {usd_per_gpu_hour: 0}\n", "cost.usd_per_gpu_hour", ""},
		{"negative", "cost: {usd_per_node_hour: -3}\n", "cost.usd_per_node_hour", ""},
		{"rule without price", "acceptance: [{name: cheap, expect: 'throughput.output_tokens_per_s_per_gpu > 0 && cost.usd_per_million_output_tokens < 1'}]\n",
			"acceptance[0].expect", "reads the row's cost (cost)"},
		{"hypothesis without price", "hypotheses: [{id: H1, statement: s, expect: 'rows.a.cost.output_tokens_per_usd > 1'}]\n",
			"hypotheses[0].expect", "reads the row's cost (rows.a.cost)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(header+telemetryRows+c.body), Options{})
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v; want problems", err)
			}
			for _, p := range ps {
				if p.Path == c.path && strings.Contains(p.Message, c.msg) && p.Pos.Line > 0 {
					return
				}
			}
			t.Errorf("problems %v; want one at %s saying %q", ps, c.path, c.msg)
		})
	}
	plan := mustParse(t, telemetryRows+"cost: {usd_per_gpu_hour: 2}\nacceptance: [{name: cheap, expect: cost.usd_per_million_output_tokens < 1}]\n", Options{})
	if plan.Cost.USDPerHour != 2 {
		t.Errorf("cost plan %+v; want 2/h", plan.Cost)
	}
}
