package merge

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/runner"
	"github.com/infermatrix/infermatrix/schema"
)

// Two shards of a ramped row (run --shard on virtual time), merged: the
// merged row's steps are rebuilt from the union's records, each step
// holding the requests the shards sent in it, which for a rate ramp are
// those the unsharded run sends in it.
func TestMergedRampSteps(t *testing.T) {
	src := []byte(`apiVersion: infermatrix/v1
name: ramp
server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 7}}
defaults: {input_tokens: 50, output_tokens: 5, body: {ignore_eos: true}}
rows:
  - {id: rates, rate: {arrival: poisson}, ramp: {rate: {from: 10, to: 30, step: 10}, step_duration: 1s}}
`)
	run := func(sh runner.Shard) *runner.Result {
		p, err := schema.Parse(filepath.Join(t.TempDir(), "exp.yaml"), src, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := runner.Run(context.Background(), p, runner.Options{Out: filepath.Join(t.TempDir(), "run"), Virtual: true, Shard: sh})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	whole := run(runner.Shard{}).Summary.Row("rates")
	var dirs []string
	sum := make([]int, len(whole.Steps))
	for i := 1; i <= 2; i++ {
		res := run(runner.Shard{Index: i, Count: 2})
		for k, st := range res.Summary.Row("rates").Steps {
			sum[k] += st.Requests.Sent
		}
		dirs = append(dirs, res.Dir.Path)
	}
	res, err := Merge(dirs, filepath.Join(t.TempDir(), "merged"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := res.Dir.Summary()
	if err != nil {
		t.Fatal(err)
	}
	merged := ms.Row("rates")
	if len(merged.Steps) != 3 || len(whole.Steps) != 3 {
		t.Fatalf("merged %d steps, unsharded %d; the ramp has 3", len(merged.Steps), len(whole.Steps))
	}
	for k, st := range merged.Steps {
		if st.Requests.Sent != sum[k] || st.Requests.Sent != whole.Steps[k].Requests.Sent || st.Rate != whole.Steps[k].Rate {
			t.Errorf("step %d (%s): merged %d requests at r=%v; the shards sent %d, the unsharded run %d at r=%v",
				k+1, st.Label, st.Requests.Sent, st.Rate, sum[k], whole.Steps[k].Requests.Sent, whole.Steps[k].Rate)
		}
	}
}
