package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/infermatrix/infermatrix/merge"
	"github.com/infermatrix/infermatrix/verdict"
)

func newMergeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out, termLog string
		wait         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "merge SHARD_DIR... -o OUT",
		Short: "Make one run directory from the run directories of a distributed run's shards",
		Long: `Merge makes one run directory from the shards of a distributed run (run
--shard I/N): every row's records concatenated (a repeated row's trial by
trial), summaries computed again from the union of the records (percentiles
exact, throughput over the union's window), acceptance judged once, and
every report rendered as for a single run.

The shards must belong to one run: the same shard count, plan hash and
experiment (exit 4 otherwise). A merge that lacks a shard is still written,
but its verdict is INCONCLUSIVE, naming the missing shards (exit 5).

A merged row is INVALID when a shard's own row was invalid for a reason
only its live run measured (the client's CPU, its timer probe, the built-in
server's timing: "shard 2/4: ..."), and when its shards began it further
apart than max(250 ms, 1% of the row's length) under --start-at.

--wait D waits, for D at most, until every path given holds a shard run
directory that is no longer running, looking every 2 s and saying every
30 s which shards it still waits for: a merge started with its shards (a
Kubernetes Job beside theirs) merges them as they finish. A path without a
finished shard at the deadline is a missing shard (INCONCLUSIVE); if no
shard finished, merge exits 1. Ctrl-C or SIGTERM during the wait exits 130
and writes nothing.

--termination-log PATH writes how the merge ended in one paragraph
(verdict, judged rows, missing shards and why, the output directory, or
the error), for an orchestrator to show: /dev/termination-log on
Kubernetes.

Only local directories are read: copy shards from object storage first
(gsutil rsync, aws s3 sync).`,
		Example: `  infermatrix merge results/shard-1 results/shard-2 -o runs/merged
  infermatrix merge /results/r/shard-1 /results/r/shard-2 -o /results/r/merged \
      --wait 30m --termination-log /dev/termination-log`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runMerge(cmd.Context(), args, out, wait, stdout, stderr, termLog)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the merged run directory to create (must not hold files)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for every shard to finish (paths may not exist yet); 0 merges the directories as they are")
	cmd.Flags().StringVar(&termLog, "termination-log", "", "write how the merge ended, in one paragraph, to this file (Kubernetes: /dev/termination-log)")
	return cmd
}

// runMerge merges and returns the exit code's error; every ending, a
// verdict, a refusal or an error, is written to the termination log too.
func runMerge(ctx context.Context, args []string, out string, wait time.Duration, stdout, stderr io.Writer, termLog string) error {
	ending := func(code int, err error, msg string) error {
		if terr := writeTerminationLog(termLog, msg); terr != nil {
			fmt.Fprintln(stderr, "warning:", terr)
		}
		if code == exitOK {
			return nil
		}
		return withCode(code, err)
	}
	if out == "" {
		err := errors.New("-o OUT is required: the new run directory to write")
		return ending(exitUsage, err, "merge refused (exit 2): "+err.Error())
	}
	if wait < 0 {
		err := fmt.Errorf("--wait %v: a wait cannot be negative", wait)
		return ending(exitUsage, err, "merge refused (exit 2): "+err.Error())
	}
	res, err := merge.Run(ctx, args, out, merge.Options{Wait: wait, Log: stderr})
	switch {
	case errors.Is(err, merge.ErrPlan):
		return ending(exitInvalid, fmt.Errorf("%w\nnothing was merged", err), "merge refused (exit 4): "+err.Error()+"; nothing was merged")
	case errors.Is(err, merge.ErrUsage):
		return ending(exitUsage, fmt.Errorf("%w\nnothing was merged", err), "merge refused (exit 2): "+err.Error()+"; nothing was merged")
	case errors.Is(err, context.Canceled) && res == nil:
		return ending(exitInterrupted, err, "merge interrupted (exit 130): "+err.Error())
	case err != nil && (res == nil || res.Written == nil):
		return ending(exitRuntime, err, "merge failed (exit 1): "+err.Error())
	}
	fmt.Fprintf(stdout, "merged %d shard(s) into %s\n", len(res.Manifest.Merged.From), res.Dir.Path)
	if len(res.Missing) > 0 {
		fmt.Fprintf(stderr, "warning: shards missing: %v\n", res.Missing)
	}
	if err != nil {
		_ = verdictExit(stdout, res.Written.Decision)
		err = fmt.Errorf("the decision record is written, but not every report: %w", err)
		return ending(exitRuntime, err, mergeEnding(res, exitRuntime)+" Error: "+err.Error())
	}
	verr := verdictExit(stdout, res.Written.Decision)
	code := exitOK
	var ee *exitError
	if errors.As(verr, &ee) {
		code = ee.code
	}
	if terr := writeTerminationLog(termLog, mergeEnding(res, code)); terr != nil {
		fmt.Fprintln(stderr, "warning:", terr)
	}
	return verr
}

// mergeEnding is a merged run's ending in one paragraph: the verdict and
// why, the rows judged, which shards were merged and which are missing
// and why, and where the run directory is.
func mergeEnding(res *merge.Result, code int) string {
	d := res.Written.Decision
	var b strings.Builder
	fmt.Fprintf(&b, "merge: verdict %s (exit %d); %s.", strings.ToUpper(d.Verdict), code, judgedText(d))
	if len(d.Why) > 0 && d.Verdict != verdict.Pass {
		fmt.Fprintf(&b, " Why: %s.", strings.Join(d.Why, "; "))
	}
	m := res.Manifest.Merged
	fmt.Fprintf(&b, " Merged %d of %d shards", len(m.From), m.Count)
	if len(res.Missing) > 0 {
		fmt.Fprintf(&b, "; missing: %s", strings.Trim(fmt.Sprint(res.Missing), "[]"))
	}
	for _, a := range res.Absent {
		if a.Index > 0 {
			fmt.Fprintf(&b, "; shard %d (%s): %s", a.Index, a.Dir, a.Reason)
		} else {
			fmt.Fprintf(&b, "; %s: %s", a.Dir, a.Reason)
		}
	}
	out := res.Dir.Path
	if abs, err := filepath.Abs(out); err == nil {
		out = abs
	}
	fmt.Fprintf(&b, ". Output: %s", out)
	return b.String()
}
