package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/infermatrix/infermatrix/merge"
)

func newMergeCmd(stdout, stderr io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge SHARD_DIR... -o OUT",
		Short: "Make one run directory from the run directories of a distributed run's shards",
		Long: `Merge makes one run directory from the shards of a distributed run (run
--shard I/N): every row's records concatenated, summaries computed again
from the union of the records (percentiles exact, throughput over the
union's window), acceptance judged once, and every report rendered as for
a single run.

The shards must belong to one run: the same shard count, plan hash and
experiment (exit 4 otherwise). A merge that lacks a shard is still written,
but its verdict is INCONCLUSIVE, naming the missing shards (exit 5).

Only local directories are read: copy shards from object storage first
(gsutil rsync, aws s3 sync).`,
		Example: `  infermatrix merge results/shard-1 results/shard-2 -o runs/merged`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return withCode(exitUsage, errors.New("-o OUT is required: the new run directory to write"))
			}
			res, err := merge.Merge(args, out, time.Now())
			switch {
			case errors.Is(err, merge.ErrPlan):
				return withCode(exitInvalid, fmt.Errorf("%w\nnothing was merged", err))
			case errors.Is(err, merge.ErrUsage):
				return withCode(exitUsage, fmt.Errorf("%w\nnothing was merged", err))
			case err != nil && (res == nil || res.Written == nil):
				return withCode(exitRuntime, err)
			}
			fmt.Fprintf(stdout, "merged %d shard(s) into %s\n", len(args), res.Dir.Path)
			if len(res.Missing) > 0 {
				fmt.Fprintf(stderr, "warning: shards missing: %v\n", res.Missing)
			}
			if err != nil {
				_ = verdictExit(stdout, res.Written.Decision)
				return withCode(exitRuntime, fmt.Errorf("the decision record is written, but not every report: %w", err))
			}
			return verdictExit(stdout, res.Written.Decision)
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the merged run directory to create (must not hold files)")
	return cmd
}
