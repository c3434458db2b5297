package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/livemetrics"
	"github.com/infermatrix/infermatrix/reports"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/runner"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/schema/jsonschema"
	"github.com/infermatrix/infermatrix/sim"
	"github.com/infermatrix/infermatrix/sim/engine"
	"github.com/infermatrix/infermatrix/verdict"
	"github.com/infermatrix/infermatrix/workload"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newRoot(ctx context.Context, args []string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "infermatrix",
		Short: "Benchmark LLM inference servers from experiment files, and write decision records",
		Long: `infermatrix runs the workload matrix of an experiment file against an
OpenAI-compatible server (vLLM, SGLang, TGI, NIM, llama.cpp) or its built-in
simulator, measures what users feel (TTFT, TPOT, ITL, end-to-end latency,
throughput, goodput), judges every row against the file's acceptance rules,
and writes a decision record.

Exit codes: 0 pass, 1 runtime error, 2 usage error, 3 acceptance failed
(compare: a regression beyond its threshold), 4 invalid experiment (compare: the runs
cannot be compared), 5 inconclusive (a row with rules was invalid, not run
or left out), 130 interrupted. A shard (run --shard) exits 0 once its share is
recorded: the run's verdict is merge's.`,
		Example: `  infermatrix run experiments/quickstart.yaml
  infermatrix validate experiments/*.yaml
  infermatrix plan experiments/quickstart.yaml
  infermatrix report runs/quickstart/latest`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newRunCmd(ctx, args, stdout, stderr),
		newValidateCmd(stdout, stderr),
		newPlanCmd(stdout),
		newReportCmd(stdout, stderr),
		newMergeCmd(stdout, stderr),
		newK8sCmd(stdout, stderr),
		newHistoryCmd(stdout, stderr),
		newCompareCmd(stdout, stderr),
		newSimCmd(ctx, stdout, stderr),
		newCalibrateCmd(stdout, stderr),
		newSchemaCmd(stdout),
		newVersionCmd(stdout),
	)
	wireCompletion(root)
	return root
}

// loadPlan loads an experiment, printing every problem. A file that cannot
// be read is an invalid experiment too: nothing can be sent.
func loadPlan(path string, opts schema.Options, stderr io.Writer) (*schema.Plan, error) {
	plan, err := schema.Load(path, opts)
	if err != nil {
		var ps schema.Problems
		if errors.As(err, &ps) {
			fmt.Fprintln(stderr, textsafe.Terminal(ps.Error()))
			n := len(ps)
			return nil, withCode(exitInvalid, fmt.Errorf("%s: %d problem%s; nothing was run", path, n, plural(n)))
		}
		return nil, withCode(exitInvalid, err)
	}
	return plan, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func newRunCmd(ctx context.Context, argv []string, stdout, stderr io.Writer) *cobra.Command {
	var out, target, progressMode, baseline, format string
	var rows []string
	var virtual bool
	var metricsAddr string
	var metricsLinger time.Duration
	var shardFlag, startAtFlag, terminationLog string
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run an experiment and write its decision record",
		Long: `Run executes every row of the experiment in order, writes one record per request
as it completes, summarises each row, judges acceptance and writes the decision
record into a new run directory (default runs/<name>/<UTC timestamp>/).

The first Ctrl-C stops dispatching, gives requests in flight the row's grace
period, writes every record and summary (marked interrupted) and exits 130.
A second Ctrl-C exits at once; records already written stay intact.

--virtual runs the experiment on the built-in server's virtual clock: the same
rows, records and reports, with no socket and no waiting, in as long as the
CPU takes to simulate it, identical for identical seeds whatever the host's
load. The decision record says SIMULATED, VIRTUAL TIME (docs/simulator.md).

--metrics-addr HOST:PORT serves the run's live figures (requests in flight,
completed, errors by class, TTFT, ITL and dispatch-lag histograms) at
/metrics in the Prometheus text format while the run lasts, and for
--metrics-linger after it, so that the last scrape reads the final figures
(docs/live-metrics.md). 127.0.0.1 keeps them on the host; a pod needs
0.0.0.0 for Prometheus to reach them.

--shard I/N runs shard I of N of a distributed run: every shard derives the
same seeded schedule and sends its share (every N-th arrival of an open-loop
row or trace, an even part of a closed loop's users and count, every N-th
conversation whole, each ramp step's share on the step's own clock), so that
the union of the shards is the whole run (docs/sharding.md). --start-at TIME
(RFC 3339) begins the first row at that instant and every later row at an
instant the plan fixes, so that shards launched apart stay aligned.
--shard k8s/N takes I from a Kubernetes Indexed Job's JOB_COMPLETION_INDEX
(I = index + 1), and {shard} in --out stands for I (infermatrix k8s). A
shard exits 0 once its share is recorded, whatever its share's rules say:
it carries part of the load, so the run's verdict is infermatrix merge's.`,
		Example: `  # on the built-in simulated server
  infermatrix run experiments/quickstart.yaml

  # the same on its virtual clock: seconds, and the same figures every time
  infermatrix run experiments/quickstart.yaml --virtual

  # with live figures for Prometheus at http://127.0.0.1:9464/metrics
  infermatrix run experiments/quickstart.yaml --metrics-addr 127.0.0.1:9464

  # against a server, two rows only, results in a chosen directory
  infermatrix run experiments/llama-8b-h100-matrix.yaml --target http://127.0.0.1:8000/v1 \
      --rows short_chat,saturation --out results/after-driver-upgrade`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			var ending runEnding
			defer func() {
				if werr := writeTerminationLog(terminationLog, ending.message(err)); werr != nil && err == nil {
					err = withCode(exitRuntime, werr)
				}
			}()
			if progressMode != "auto" && progressMode != "bar" && progressMode != "lines" {
				return withCode(exitUsage, fmt.Errorf("--progress %q: want auto, bar or lines", progressMode))
			}
			var shard runner.Shard
			if shardFlag != "" {
				s, err := parseShardFlag(shardFlag)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--shard: %w", err))
				}
				shard = s
			}
			if strings.Contains(out, shardPlaceholder) {
				if shardFlag == "" {
					return withCode(exitUsage, fmt.Errorf("--out %q: %s stands for the shard's index and needs --shard", out, shardPlaceholder))
				}
				out = strings.ReplaceAll(out, shardPlaceholder, strconv.Itoa(shard.Index))
			}
			var startAt time.Time
			if startAtFlag != "" {
				t, err := time.Parse(time.RFC3339Nano, startAtFlag)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--start-at %q: want an RFC 3339 time, e.g. 2026-11-27T20:00:00Z: %w", startAtFlag, err))
				}
				startAt = t
			}
			if metricsLinger < 0 {
				return withCode(exitUsage, fmt.Errorf("--metrics-linger %v: want a duration of 0 or more", metricsLinger))
			}
			say, err := formatOut(format, stdout, stderr)
			if err != nil {
				return err
			}
			plan, err := loadPlan(args[0], schema.Options{Target: target, Rows: rows, Baseline: baseline}, stderr)
			if err != nil {
				return err
			}
			base, baseInfo, err := loadBaseline(plan)
			if err != nil {
				return err
			}
			var live *livemetrics.Recorder
			if metricsAddr != "" {
				var labels map[string]string
				if shard != (runner.Shard{}) {
					labels = map[string]string{"shard": shard.String()}
				}
				live, err = livemetrics.New(livemetrics.Options{Labels: labels})
				if err != nil {
					return withCode(exitUsage, err)
				}
				srv, err := livemetrics.Listen(metricsAddr, live.Handler())
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--metrics-addr: %w", err))
				}
				fmt.Fprintf(stderr, "live metrics at %s\n", srv.URL())
				defer func() { _ = srv.Close(metricsLinger) }()
			}
			ending.shard = shard
			res, runErr := runner.Run(ctx, plan, runner.Options{Out: out, Command: append([]string{"infermatrix"}, argv...), Log: stderr, Terminal: showBar(progressMode, stderr), Baseline: baseInfo, BaselineRun: base, Virtual: virtual, Live: live, Shard: shard, StartAt: startAt})
			if res == nil {
				if shard != (runner.Shard{}) && out != "" && runErr != nil {
					// A merge waiting for this shard learns at once that it
					// will not come, instead of waiting out its deadline.
					_ = rundir.WriteAbandoned(out, rundir.Abandoned{Index: shard.Index, Count: shard.Count, Reason: runErr.Error(), At: time.Now().UTC()})
				}
				if errors.Is(runErr, runner.ErrBadStart) {
					return withCode(exitUsage, fmt.Errorf("--start-at: %w\nnothing was run", runErr))
				}
				if errors.Is(runErr, runner.ErrBadShard) {
					return withCode(exitUsage, fmt.Errorf("--shard: %w\nnothing was run", runErr))
				}
				if errors.Is(runErr, runner.ErrNotVirtual) {
					return withCode(exitUsage, fmt.Errorf("--virtual: %w\nnothing was run", runErr))
				}
				if errors.Is(runErr, runner.ErrBadSource) {
					// A bad dataset or trace line is a problem of the
					// experiment, found before anything was sent.
					return withCode(exitInvalid, fmt.Errorf("%w\nnothing was run", runErr))
				}
				if ctx.Err() != nil {
					return withCode(exitInterrupted, fmt.Errorf("interrupted before the run started: %w", runErr))
				}
				return withCode(exitRuntime, runErr)
			}
			written, err := reports.Write(res.Dir, &reports.Input{Plan: plan, Manifest: res.Manifest, Summary: res.Summary, Baseline: base})
			if written == nil {
				return withCode(exitRuntime, errors.Join(runErr, err))
			}
			// A format that failed to render does not cost the verdict:
			// it is printed, and the missing reports make it a runtime
			// error (see reports.Write).
			formatErr := err
			for _, f := range written.Unsupported {
				fmt.Fprintf(stderr, "note: report format %q is not produced by this build yet\n", f)
			}
			decision := filepath.Join(res.Dir.Path, "decision.md")
			ending.dir, ending.summary, ending.decision = res.Dir.Path, res.Summary, written.Decision
			fmt.Fprintf(say, "decision record: %s\n", textsafe.Terminal(decision))
			if format == "github" {
				if err := reports.WriteGitHub(stdout, written.Input); err != nil {
					return withCode(exitRuntime, err)
				}
			}
			switch {
			case runErr != nil:
				return withCode(exitRuntime, errors.Join(runErr, formatErr))
			case res.Interrupted:
				return withCode(exitInterrupted, errors.Join(errors.New("interrupted; the decision record covers what was measured"), formatErr))
			}
			verdict := verdictExit(say, written.Decision)
			if shard != (runner.Shard{}) {
				verdict = shardVerdict(say, shard, verdict)
			}
			if formatErr != nil {
				return withCode(exitRuntime, fmt.Errorf("the decision record is written, but not every report: %w", formatErr))
			}
			return verdict
		},
	}
	cmd.Flags().StringVar(&terminationLog, "termination-log", "", "write how the run ended (verdict, requests, the shard's share) in one paragraph to this file, e.g. /dev/termination-log in a Kubernetes pod")
	cmd.Flags().StringVar(&out, "out", "", "run directory to create (must not exist or be empty); default runs/<name>/<UTC timestamp>")
	cmd.Flags().StringVar(&format, "format", "text", formatHelp)
	cmd.Flags().StringVar(&progressMode, "progress", "auto", "progress display: bar (redrawn in place), lines (a line every few seconds), or auto (bar on a terminal)")
	cmd.Flags().StringVar(&target, "target", "", "override the server: builtin, or a base URL such as http://127.0.0.1:8000/v1")
	cmd.Flags().StringSliceVar(&rows, "rows", nil, "run only these rows (ids, comma-separated; a swept row's id selects all its points)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve the run's live figures at http://HOST:PORT/metrics in the Prometheus text format (e.g. 127.0.0.1:9464; 0.0.0.0:9464 in a pod)")
	cmd.Flags().StringVar(&shardFlag, "shard", "", "run shard I of N of a distributed run (e.g. 2/4): this shard's share of the global schedule (docs/sharding.md)")
	cmd.Flags().StringVar(&startAtFlag, "start-at", "", "with --shard: begin the first row at this RFC 3339 instant and each later row at the instant the plan fixes (docs/sharding.md)")
	cmd.Flags().DurationVar(&metricsLinger, "metrics-linger", 2*time.Second, "with --metrics-addr: keep serving this long after the run, for a last scrape of the final figures")
	cmd.Flags().BoolVar(&virtual, "virtual", false, "run on the built-in server's virtual clock: no socket, no waiting, deterministic for a seed (needs target builtin and an engine preset)")
	cmd.Flags().StringVar(&baseline, "baseline", "", "judge against this run (a run directory, or runs/<name> for its newest complete run): rules read it as baseline.<metric>; overrides the file's baseline key")
	return cmd
}

// verdictExit prints a decision's verdict and returns the exit code it
// means: passed (or nothing to accept), failed, inconclusive, or, for a run
// without rules whose requests mostly failed, a runtime failure.
func verdictExit(stdout io.Writer, d *verdict.Decision) error {
	for _, op := range d.OperatingPoints {
		if op.Row != "" {
			fmt.Fprintf(stdout, "operating point of %s: %s\n", textsafe.Terminal(op.Base), textsafe.Terminal(op.Row))
		}
	}
	for _, rv := range d.Rows {
		if rv.Ramp != nil && rv.Ramp.Operating != "" && len(rv.Rules) > 0 {
			fmt.Fprintf(stdout, "operating step of %s: %s\n", textsafe.Terminal(rv.ID), textsafe.Terminal(rv.Ramp.Operating))
		}
	}
	switch d.Verdict {
	case verdict.Pass:
		fmt.Fprintf(stdout, "verdict: PASS (%s)\n", judgedText(d))
		return nil
	case verdict.NoRules:
		if d.MostFailed {
			fmt.Fprintf(stdout, "verdict: none (no acceptance rules); most requests failed: %d of %d\n", d.Failed, d.Sent)
			return withCode(exitRuntime, errors.New("most requests failed: the run measured failures, not the server"))
		}
		fmt.Fprintln(stdout, "verdict: none (the experiment has no acceptance rules)")
		return nil
	case verdict.Fail:
		fmt.Fprintf(stdout, "verdict: FAIL (%s)\n", judgedText(d))
		return withCode(exitAcceptance, errors.New(""))
	case verdict.Inconclusive:
		fmt.Fprintf(stdout, "verdict: INCONCLUSIVE (%s)\n", textsafe.Terminal(strings.Join(d.Why, "; ")))
		return withCode(exitInconclusive, errors.New(""))
	case verdict.Incomplete:
		if d.Rebuilt != "" {
			fmt.Fprintln(stdout, "verdict: INCOMPLETE (the run stopped before its end; rebuilt from its records)")
		} else {
			fmt.Fprintln(stdout, "verdict: INCOMPLETE (the run was interrupted)")
		}
		return withCode(exitInterrupted, errors.New(""))
	default:
		fmt.Fprintf(stdout, "verdict: %s\n", strings.ToUpper(d.Verdict))
		return withCode(exitRuntime, errors.New("rows with acceptance rules have no verdict"))
	}
}

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var experiment, semantics, baseline, format string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Re-render a run's decision record and reports from its run directory",
		Long: `Report re-renders every artifact of a run directory (decision.md,
decision.json, analysis.json, the plots and the formats the experiment asks
for) from what the run recorded: experiment.yaml, manifest.json, summary.json
and the per-request records. It sends no request.

With --experiment, the run is judged by another experiment file instead: its
acceptance rules, validity thresholds and hypotheses are evaluated again
against the recorded measurements, and its report formats decide which files
are written. Its rows must be the ones the run measured; its SLOs and
percentiles are not applied (the measurements were summarised under the
run's), and a note says so where they differ.

With --semantics, every row is summarised again from its records under
another tool's metric definitions (vllm, aiperf) or infermatrix's own.

A judgement never overwrites the run's record: with --experiment or
--semantics the files go to RUN_DIR/rejudged/<UTC time>-<label>/, whose
record names both experiment files and their hashes at the top. Without
them the record is rendered again in place, unless this build judges the run
otherwise than the recorded decision.json, when it goes beside too.

Files the experiment names (datasets, traces, tokenizer files) are not needed:
everything is re-rendered from the run's own records, so a run directory can
be re-rendered from anywhere, on another machine too.

A run killed before its end (SIGKILL, a second Ctrl-C, a full disk) keeps its
records but not its summaries. When summary.json is missing or torn, each row
is taken from its own rows/<id>/summary.json where that is intact, and is
otherwise summarised again from its requests.jsonl as the run would have; a
row without records did not run. A torn last line of requests.jsonl (a write
cut short by the kill) is skipped and reported; a bad line anywhere else is an
error. When manifest.json is missing or torn, the run's settings are read
from experiment.yaml. The record says near its verdict that it was rebuilt;
a run that did not record its end is judged INCOMPLETE (exit 130), and the
client self-check only the live run measured is "not measured". Nothing the
run wrote is overwritten: the rebuild is done again on every report.

The exit code is the verdict's, as for run: 0 pass, 3 failed, 5
inconclusive, 130 for a run that was interrupted or killed (INCOMPLETE);
1 when the run directory cannot be read, 4 when its experiment is invalid.`,
		Example: `  # after upgrading infermatrix, or to add report.html to an old run
  infermatrix report runs/llama31-8b-h100-chat/20260301T101500Z

  # would the run have passed a stricter rule?
  infermatrix report runs/llama31-8b-h100-chat/latest --experiment stricter.yaml

  # the same records, as vllm bench serve would have summarised them
  infermatrix report runs/llama31-8b-h100-chat/latest --semantics vllm

  # a run that was killed: its summaries are rebuilt from its records
  infermatrix report runs/llama31-8b-h100-chat/20260301T101500Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch semantics {
			case "", "infermatrix", "vllm", "aiperf":
			default:
				return withCode(exitUsage, fmt.Errorf("--semantics %q: want infermatrix, vllm or aiperf", semantics))
			}
			say, err := formatOut(format, stdout, stderr)
			if err != nil {
				return err
			}
			res, err := reports.Rerender(args[0], reports.RerenderOptions{Experiment: experiment, Semantics: semantics, Baseline: baseline})
			if err != nil && res != nil {
				// The decision record was written; a format was not.
				fmt.Fprintf(stderr, "some reports were not written:\n%s\n", textsafe.Terminal(err.Error()))
				fmt.Fprintf(say, "decision record: %s\n", textsafe.Terminal(filepath.Join(res.Dir.Path, "decision.md")))
				_ = verdictExit(say, res.Decision)
				return withCode(exitRuntime, errors.New("the decision record is written, but not every report"))
			}
			if err != nil {
				var ps schema.Problems
				switch {
				case errors.As(err, &ps):
					fmt.Fprintln(stderr, textsafe.Terminal(ps.Error()))
					n := len(ps)
					return withCode(exitInvalid, fmt.Errorf("%d problem%s; nothing was re-rendered", n, plural(n)))
				case errors.Is(err, reports.ErrInvalidExperiment):
					return withCode(exitInvalid, fmt.Errorf("%w\nnothing was re-rendered", err))
				case baselineExit(err) != nil:
					return baselineExit(err)
				}
				return withCode(exitRuntime, err)
			}
			for _, n := range res.Notes {
				fmt.Fprintf(stderr, "note: %s\n", textsafe.Terminal(n))
			}
			for _, f := range res.Unsupported {
				fmt.Fprintf(stderr, "note: report format %q is not produced by this build yet\n", f)
			}
			if res.Rejudged {
				fmt.Fprintf(stderr, "note: %s; the run's own record is unchanged\n", textsafe.Terminal(res.Why))
			}
			fmt.Fprintf(say, "decision record: %s\n", textsafe.Terminal(filepath.Join(res.Dir.Path, "decision.md")))
			if format == "github" {
				if err := reports.WriteGitHub(stdout, res.Input); err != nil {
					return withCode(exitRuntime, err)
				}
			}
			return verdictExit(say, res.Decision)
		},
	}
	cmd.Flags().StringVar(&experiment, "experiment", "", "judge the run by this experiment file instead of the run's experiment.yaml (same rows); written to RUN_DIR/rejudged/")
	cmd.Flags().StringVar(&baseline, "baseline", "", "judge against this baseline run instead of the one the run recorded (a run directory, or runs/<name> for its newest complete run); written to RUN_DIR/rejudged/")
	cmd.Flags().StringVar(&format, "format", "text", formatHelp)
	cmd.Flags().StringVar(&semantics, "semantics", "", "summarise the records again under these definitions: infermatrix, vllm or aiperf; written to RUN_DIR/rejudged/")
	return cmd
}

// judgedText says how many judged rows passed.
func judgedText(d *verdict.Decision) string {
	var pass, fail, rejected int
	for _, rv := range d.Rows {
		switch rv.Verdict {
		case verdict.Pass:
			pass++
		case verdict.Fail:
			fail++
		case verdict.Rejected:
			rejected++
		}
	}
	s := fmt.Sprintf("%d of %d judged rows pass", pass, pass+fail+rejected)
	switch {
	case rejected == 1:
		s += ", 1 sweep point past the operating point"
	case rejected > 1:
		s += fmt.Sprintf(", %d sweep points past the operating point", rejected)
	}
	return s
}

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check experiment files without running them",
		Long: `Validate decodes each file strictly, applies defaults, expands sweeps and
compiles every acceptance and hypothesis expression against the real metric
names. It prints every problem at once, as file:line:col: key.path: message,
with a hint where one helps. Then it reads the dataset and trace files the
rows name, as run does before sending anything, and reports their bad lines
as file:line: message. It exits 4 if any file is invalid.`,
		Example: `  infermatrix validate experiments/*.yaml`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, f := range args {
				plan, err := schema.Load(f, schema.Options{})
				if err != nil {
					bad++
					var ps schema.Problems
					if errors.As(err, &ps) {
						fmt.Fprintln(stderr, textsafe.Terminal(ps.Error()))
					} else {
						fmt.Fprintln(stderr, textsafe.Terminal(err.Error()))
					}
					continue
				}
				notes, err := workload.CheckSources(plan)
				for _, n := range notes {
					fmt.Fprintf(stderr, "%s: %s\n", textsafe.Terminal(f), textsafe.Terminal(n))
				}
				if err != nil {
					bad++
					fmt.Fprintf(stderr, "%s: %s\n", textsafe.Terminal(f), textsafe.Terminal(err.Error()))
					continue
				}
				rows := "rows"
				if len(plan.Rows) == 1 {
					rows = "row"
				}
				fmt.Fprintf(stdout, "%s: ok (%d %s)\n", textsafe.Terminal(f), len(plan.Rows), rows)
			}
			if bad > 0 {
				return withCode(exitInvalid, fmt.Errorf("%d of %d file%s invalid", bad, len(args), plural(len(args))))
			}
			return nil
		},
	}
}

func newPlanCmd(stdout io.Writer) *cobra.Command {
	var target string
	var rows []string
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Show the expanded rows, request counts and an estimated duration",
		Example: `  infermatrix plan experiments/quickstart.yaml
  infermatrix plan experiments/llama-8b-h100-matrix.yaml --rows saturation`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			plan, err := loadPlan(args[0], schema.Options{Target: target, Rows: rows}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := reports.WritePlan(stdout, plan); err != nil {
				return withCode(exitRuntime, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "override the server: builtin, or a base URL")
	cmd.Flags().StringSliceVar(&rows, "rows", nil, "plan only these rows")
	return cmd
}

func newSimCmd(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var (
		settings  schema.SimSettings
		ttft, itl time.Duration
		faults    []string
		truthPath string
		addr      string
		listenAny bool
		// prefixCaching and noPrefixCaching are vLLM's pair of flags; set
		// neither, the preset decides.
		prefixCaching, noPrefixCaching bool
	)
	var presetFile string // a fitted preset (infermatrix calibrate)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Serve the built-in simulated OpenAI-compatible server",
		Long: `Sim serves the simulated inference server on its own, for trying clients and
other tools against it. It binds to loopback unless --listen-any is given.

The server is a continuous-batching engine model of a real model on a real GPU
(see docs/simulator.md): a preset, with the same settings an experiment's
server.sim section takes. Preset fixed instead has a constant --ttft and --itl.
Besides chat and completions it serves /v1/embeddings and /v1/rerank, as
prefill-only work through the same engine.`,
		Example: `  infermatrix sim --preset llama-3.1-8b-h100
  infermatrix sim --preset qwen3-0.6b-8xh200 --addr 127.0.0.1:8001
  infermatrix sim --preset fixed --ttft 50ms --itl 10ms --fault '429; probability=0.05'
  curl -N http://127.0.0.1:8000/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}'
  curl http://127.0.0.1:8000/v1/embeddings -d '{"input":["a whale","a ship"]}'
  curl http://127.0.0.1:8000/v1/rerank -d '{"query":"whale","documents":["krill","a ship"]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if settings.Preset != schema.PresetFixed && (cmd.Flags().Changed("ttft") || cmd.Flags().Changed("itl")) {
				return withCode(exitUsage, fmt.Errorf("--ttft and --itl apply to --preset fixed; preset %s models its own latencies", settings.Preset))
			}
			settings.TTFT, settings.ITL = schema.Duration(ttft), schema.Duration(itl)
			if presetFile != "" {
				if !cmd.Flags().Changed("preset") {
					settings.Preset = "" // the file's base
				}
				if err := settings.ApplyPresetFile(presetFile); err != nil {
					return withCode(exitUsage, err)
				}
			}
			switch {
			case prefixCaching && noPrefixCaching:
				return withCode(exitUsage, errors.New("--enable-prefix-caching and --no-enable-prefix-caching contradict each other"))
			case prefixCaching || noPrefixCaching:
				settings.Engine.PrefixCaching = &prefixCaching
			}
			cfg, err := runner.BuiltinConfig(settings)
			if err != nil {
				return withCode(exitUsage, err)
			}
			for _, f := range faults {
				rule, err := sim.ParseFaultRule(f)
				if err != nil {
					return withCode(exitUsage, err)
				}
				cfg.Faults = append(cfg.Faults, rule)
			}
			if truthPath != "" {
				f, err := os.Create(truthPath)
				if err != nil {
					return withCode(exitRuntime, err)
				}
				defer f.Close()
				cfg.GroundTruth = f
			}
			ln, err := sim.Listen(addr, listenAny)
			if errors.Is(err, sim.ErrNotLoopback) {
				return withCode(exitUsage, fmt.Errorf("refusing to listen on %s: %w; add --listen-any to serve other hosts (the server has no authentication)", addr, sim.ErrNotLoopback))
			}
			if err != nil {
				return withCode(exitRuntime, err)
			}
			inst, err := sim.StartOn(ln, cfg)
			if err != nil {
				_ = ln.Close()
				return withCode(exitUsage, err)
			}
			fmt.Fprintf(stdout, "serving %s (preset %s) on %s (Ctrl-C to stop)\n", textsafe.Terminal(inst.Server.Config().Model), textsafe.Terminal(settings.Preset), inst.BaseURL)
			<-ctx.Done()
			if err := inst.Close(); err != nil {
				return withCode(exitRuntime, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8000", "address to listen on")
	f.BoolVar(&listenAny, "listen-any", false, "allow a non-loopback address (the server has no authentication)")
	f.StringVar(&settings.Preset, "preset", schema.DefaultSimPreset, "engine model: "+strings.Join(engine.PresetNames(), ", ")+", or "+schema.PresetFixed)
	f.StringVar(&presetFile, "preset-file", "", "a preset file (base preset plus engine and front-end keys), as infermatrix calibrate writes it; flags set here override it")
	f.StringVar(&settings.Model, "model", "", "model name to serve (default: the preset's)")
	f.IntVar(&settings.MaxModelLen, "max-model-len", 0, "context limit in tokens (default: the preset's)")
	f.IntVar(&settings.Replicas, "replicas", 0, "data-parallel engine replicas behind the one port (default: the preset's, 1 or 8)")
	f.BoolVar(&settings.PhysicsOnly, "physics-only", false, "drop fixed overheads, front end and jitter: step times are exactly the roofline")
	f.IntVar(&settings.Engine.MaxNumSeqs, "max-num-seqs", 0, "most sequences in one engine step, as vLLM's (default: the preset's)")
	f.IntVar(&settings.Engine.MaxNumBatchedTokens, "max-num-batched-tokens", 0, "most tokens computed in one engine step, prefill chunks and decodes together, as vLLM's (default: the preset's)")
	f.BoolVar(&prefixCaching, "enable-prefix-caching", false, "automatic prefix caching, as vLLM's (default: the preset's)")
	f.BoolVar(&noPrefixCaching, "no-enable-prefix-caching", false, "no automatic prefix caching, as vLLM's")
	f.Float64Var(&settings.Engine.GPUMemoryUtilization, "gpu-memory-utilization", 0, "fraction of GPU memory for weights, reserve and KV cache, as vLLM's; lower it to run out of KV cache (default: the preset's)")
	f.DurationVar(&ttft, "ttft", schema.DefaultSimTTFT, "time to first token (preset fixed)")
	f.DurationVar(&itl, "itl", schema.DefaultSimITL, "time between tokens (preset fixed)")
	f.Int64Var(&settings.Seed, "seed", 0, "seed of the text, EOS draws, faults and jitter")
	f.StringVar(&settings.Personality, "personality", "vllm", "wire format to mimic: vllm, llama.cpp or tgi")
	f.IntVar(&settings.TokensPerEvent, "tokens-per-event", 0, "tokens per streamed event (default 1, as vLLM, llama.cpp and TGI send; more stands for speculative decoding)")
	f.IntVar(&settings.EOSMeanTokens, "eos-mean-tokens", 0, "mean natural output length for requests without ignore_eos (0: no EOS)")
	f.StringArrayVar(&faults, "fault", nil, "inject a fault, in X-Sim-Fault syntax plus a probability, e.g. 'reset; after=10; probability=0.01' (repeatable)")
	f.StringVar(&truthPath, "ground-truth", "", "write each request's token due and flush times to this JSONL file")
	return cmd
}

func newSchemaCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of experiment files, for editors",
		Long: `Schema prints a JSON Schema (draft 2020-12) of the experiment format. Point your
editor's YAML language server at it to get completion and checks as you type:

  # yaml-language-server: $schema=./infermatrix.schema.json`,
		Example: `  infermatrix schema > infermatrix.schema.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := jsonschema.Generate()
			if err != nil {
				return withCode(exitRuntime, err)
			}
			_, err = stdout.Write(b)
			return err
		},
	}
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: `  infermatrix version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(stdout, versionLine(buildinfo.Get()))
			return nil
		},
	}
}

// versionLine is `infermatrix version`'s output: the version (a release
// tag when built by make release), then the commit and its date where the
// build knows them, then the Go toolchain.
func versionLine(i buildinfo.Info) string {
	s := "infermatrix " + i.Version
	var in []string
	for _, v := range []string{i.Commit, i.Date} {
		if v != "" {
			in = append(in, v)
		}
	}
	if len(in) > 0 {
		s += " (" + strings.Join(in, ", ") + ")"
	}
	return s + " " + i.Go
}

// showBar decides whether a run draws live progress bars on w: always for
// --progress bar, never for lines, and for auto when w is a terminal and
// TERM is not "dumb" (one that cannot move the cursor).
func showBar(mode string, w io.Writer) bool {
	switch mode {
	case "bar":
		return true
	case "lines":
		return false
	}
	f, ok := w.(*os.File)
	return ok && os.Getenv("TERM") != "dumb" && term.IsTerminal(int(f.Fd()))
}

// formatHelp is --format's help for run and report.
const formatHelp = "what to print: text (the record's path and the verdict) or github (the verdict and one line per row as GitHub-flavoured Markdown, for a pull-request comment or $GITHUB_STEP_SUMMARY; the path and verdict lines then go to stderr)"

// formatOut checks --format and returns where the usual lines go: stdout
// for text, stderr for github, whose Markdown alone goes to stdout so that
// `>> $GITHUB_STEP_SUMMARY` takes nothing else.
func formatOut(format string, stdout, stderr io.Writer) (io.Writer, error) {
	switch format {
	case "text":
		return stdout, nil
	case "github":
		return stderr, nil
	}
	return nil, withCode(exitUsage, fmt.Errorf("--format %q: want text or github", format))
}
