package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/infermatrix/infermatrix/compare"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/spf13/cobra"
)

func newCompareCmd(stdout, stderr io.Writer) *cobra.Command {
	var out, format string
	var thresholds []string
	var level float64
	var force bool
	cmd := &cobra.Command{
		Use:   "compare BASE_RUN NEW_RUN | compare RUNS_FOLDER",
		Short: "Compare two runs of an experiment: what changed, and what regressed beyond its threshold",
		Long: `Compare matches the two runs' rows by id (sweep points too), lists the rows
added, removed or run with another workload (never compared as if equal), and
for every other row and headline metric (TTFT, TPOT, ITL and E2E at p50, p95
and p99; output and request throughput; goodput ratio; error ratio) gives the
base, the new value, the change, its confidence interval, and whether it is a
regression: significant (the interval excludes zero) and worse by more than the
threshold. Rows invalid on either side are not comparable. It also lists what
changed between the manifests: tool, experiment file, server, host.

With one argument, a folder of runs (runs/<name>), its two newest runs are
compared. comparison.md, comparison.json and comparison.html (with overlay
plots) go to runs/<name>/compare-<base>-<new>/ or --out. The method and its
false-alarm rate: docs/comparison.md.

Exit codes: 0 no metric regressed beyond its threshold, its whole interval
included (possible regressions are listed, and do not fail), 3 one did, 4 the runs cannot be compared (a missing file, different
experiments without --force, no row to compare), 1 runtime error.`,
		Example: `  # the two newest runs of the quickstart
  infermatrix compare runs/quickstart

  # two given runs, TPOT judged at 3%
  infermatrix compare runs/quickstart/20260101T120000Z runs/quickstart/latest --threshold tpot=3%

  # a pull-request comment or job summary
  infermatrix compare base-run new-run --format github >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "github" {
				return withCode(exitUsage, fmt.Errorf("--format %q: want text or github", format))
			}
			opts := compare.Options{Level: level, Force: force, Thresholds: map[string]float64{}}
			for _, t := range thresholds {
				k, v, err := compare.ParseThreshold(t)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--threshold: %w", err))
				}
				if k == "" {
					opts.Threshold = v
				} else {
					opts.Thresholds[k] = v
				}
			}
			if level <= 0 || level >= 1 {
				return withCode(exitUsage, fmt.Errorf("--level %g: want a fraction in (0, 1), such as 0.95", level))
			}
			basePath, newPath, err := compare.Resolve(args)
			if err != nil {
				return comparisonError(err)
			}
			base, err := compare.Load(basePath)
			if err != nil {
				return comparisonError(err)
			}
			newRun, err := compare.Load(newPath)
			if err != nil {
				return comparisonError(err)
			}
			c, err := compare.Compare(base, newRun, opts)
			if err != nil {
				return comparisonError(err)
			}
			dir := out
			if dir == "" {
				dir = c.DefaultDir()
			}
			paths, werr := c.Write(dir)
			info := stdout
			if format == "github" {
				if err := c.WriteGitHub(stdout); err != nil {
					return withCode(exitRuntime, err)
				}
				info = stderr
			} else {
				c.WriteTerminal(stdout)
			}
			if werr != nil {
				return withCode(exitRuntime, werr)
			}
			if len(paths) > 0 {
				fmt.Fprintf(info, "comparison record: %s\n", textsafe.Terminal(paths[0]))
			}
			switch c.Verdict {
			case compare.VerdictRegression:
				return withCode(exitAcceptance, errors.New(""))
			case compare.VerdictNotComparable:
				return withCode(exitInvalid, errors.New(""))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for comparison.md, .json and .html; default runs/<name>/compare-<base>-<new>")
	cmd.Flags().StringArrayVar(&thresholds, "threshold", nil, "practical threshold: 5% for every metric, or METRIC=3% for one metric (tpot.p95) or family (tpot); repeatable")
	cmd.Flags().Float64Var(&level, "level", compare.DefaultLevel, "confidence level of the intervals")
	cmd.Flags().BoolVar(&force, "force", false, "compare runs of different experiments (rows matched by id and workload)")
	cmd.Flags().StringVar(&format, "format", "text", "terminal output: text (a short table) or github (GitHub-flavoured Markdown, for a PR comment or $GITHUB_STEP_SUMMARY)")
	return cmd
}

// comparisonError gives a failed comparison its exit code: 4 when the runs
// cannot be compared, 1 for anything else.
func comparisonError(err error) error {
	if errors.Is(err, compare.ErrNotComparable) {
		return withCode(exitInvalid, err)
	}
	return withCode(exitRuntime, err)
}
