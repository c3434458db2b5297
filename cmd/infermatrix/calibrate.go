package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/infermatrix/infermatrix/calibrate"
	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/sim/engine"
	"github.com/spf13/cobra"
)

func newCalibrateCmd(stdout, stderr io.Writer) *cobra.Command {
	var out, base, variant string
	var holdOut []string
	var maxRequests, maxEvals, seeds int
	cmd := &cobra.Command{
		Use:   "calibrate RUN_DIR -o PRESET.yaml",
		Short: "Fit the built-in server's parameters to a measured run and write a preset file",
		Long: `Calibrate makes the built-in server a twin of a server you measured. It reads
the run directory's rows (their load, every request's prompt and output tokens
as the server counted them, and each row's TTFT p50, TPOT p50 and output
tokens/s), replays each row on the simulator's virtual clock with its own load
pattern and token lengths, and fits the engine's step and per-sequence
overheads, its bandwidth, FLOP and attention efficiencies, and the front
end's request cost (per request and per prompt token) and token cost, to
minimise the rows' squared log errors. It sends no request.

Some rows are held out of the fit (by default every third row by load, at
least one when there are two or more) and the fit's error on them is
reported: it is the honest measure of how well the preset predicts loads it
was not fitted to. The preset file (-o) holds the fitted keys and a
calibration block with every row's measured and simulated figures; name it
in an experiment as server.sim.preset_file, and the decision record of a run
on it shows the calibration error (docs/calibrate.md).

The fit starts from a built-in preset: the run's own when the built-in server
served it, otherwise --base (the preset nearest the measured model and GPU;
a model or GPU no preset has is fitted from the nearest one only).

Rows the fit cannot replay are listed and left out: failed rows, pooling
rows (embeddings, rerank), ramps, conversations, repeated rows, and search
rows as planned (their probes are used).

Exit codes: 0 written, 1 the run has no usable row or a file could not be
read or written, 2 usage error (no --base for a real server's run, an unknown
preset, a --hold-out row the run does not have).`,
		Example: `  # a run of the built-in server: its own preset is the base
  infermatrix calibrate runs/sweep/latest -o presets/twin.yaml

  # a run of a real vLLM server with Llama 3.1 8B on an H100
  infermatrix calibrate runs/vllm-sweep/latest -o presets/my-vllm.yaml --base llama-3.1-8b-h100

  # choose the held-out rows
  infermatrix calibrate runs/sweep/latest -o twin.yaml --hold-out 'saturation/c=8,saturation/c=32'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return withCode(exitUsage, errors.New("-o PRESET.yaml is required: where to write the fitted preset"))
			}
			if maxRequests < 0 || maxEvals < 0 || seeds < 0 {
				return withCode(exitUsage, errors.New("--max-requests, --max-evals and --seeds must not be negative"))
			}
			if base != "" {
				if _, ok := engine.LookupPreset(base); !ok {
					return withCode(exitUsage, fmt.Errorf("--base %q: not an engine preset; have %s", base, strings.Join(engine.PresetNames(), ", ")))
				}
			}
			opts := calibrate.Options{Base: base, Variant: variant, MaxRequests: maxRequests, MaxEvals: maxEvals, Seeds: seeds, Tool: buildinfo.Get().Version}
			if cmd.Flags().Changed("hold-out") {
				opts.HoldOut = []string{}
				for _, h := range holdOut {
					if h != "" && h != "none" {
						opts.HoldOut = append(opts.HoldOut, h)
					}
				}
			}
			res, err := calibrate.Run(args[0], opts)
			switch {
			case errors.Is(err, calibrate.ErrNeedBase), errors.Is(err, calibrate.ErrUsage):
				return withCode(exitUsage, err)
			case err != nil:
				return withCode(exitRuntime, err)
			}
			for _, s := range res.Skipped {
				fmt.Fprintf(stderr, "left out %s\n", textsafe.TerminalLine(s))
			}
			for _, c := range res.Checks {
				fmt.Fprintf(stderr, "check %s\n", textsafe.TerminalLine(c))
			}
			res.Table(stdout)
			if dir := filepath.Dir(out); dir != "." {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return withCode(exitRuntime, err)
				}
			}
			if err := os.WriteFile(out, res.YAML(), 0o644); err != nil {
				return withCode(exitRuntime, err)
			}
			fmt.Fprintf(stdout, "wrote %s (%d replays of %d rows); use it as server.sim.preset_file\n",
				textsafe.TerminalLine(out), res.Evals, len(res.Preset.Calibration.Rows))
			if res.Replicas > 0 {
				fmt.Fprintf(stdout, "the run had %d replicas: set server.sim.replicas: %d beside preset_file\n", res.Replicas, res.Replicas)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "out", "o", "", "the preset file to write (required)")
	f.StringVar(&base, "base", "", "the built-in preset to start from: "+strings.Join(engine.PresetNames(), ", ")+" (default: the run's own, when the built-in server served it)")
	f.StringSliceVar(&holdOut, "hold-out", nil, "rows to hold out of the fit, comma-separated ids, or none (default: every third row by load)")
	f.StringVar(&variant, "variant", "", "in a run with server.variants, fit the rows of this variant")
	f.IntVar(&maxRequests, "max-requests", 0, fmt.Sprintf("replay at most this many requests per row, the first ones (default %d)", calibrate.DefaultMaxRequests))
	f.IntVar(&maxEvals, "max-evals", 0, fmt.Sprintf("replay the run about this many times in the search (default %d; the noise grid and the last polish add a few dozen)", calibrate.DefaultMaxEvals))
	f.IntVar(&seeds, "seeds", 0, fmt.Sprintf("replay each row with this many draws of the noise and fit their mean (default %d)", calibrate.DefaultSeeds))
	return cmd
}
