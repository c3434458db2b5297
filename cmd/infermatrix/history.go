package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/infermatrix/infermatrix/history"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/spf13/cobra"
)

func newHistoryCmd(stdout, stderr io.Writer) *cobra.Command {
	var out, format string
	var rows []string
	var last int
	cmd := &cobra.Command{
		Use:   "history FOLDER",
		Short: "List every run of an experiment in time order, with verdicts, figures and what changed",
		Long: `History lists every run directory in FOLDER (runs/<name>, or any folder of
run directories, such as CI artifacts unpacked under names of their own) in
the order they ran, by the start time in each run's manifest.json, never by
folder name. For each run: its start, the tool's version, its verdict (from
decision.json), each row's headline figures (TTFT p95, TPOT p95, E2E p95,
output tokens per second, error ratio; from summary.json), and what changed
since the run before, from the two manifests (tool, experiment file, the
server as declared and as found, GPU, driver, host; credentials masked).

Run directories are folders holding a manifest.json, up to three levels down.
Symbolic links (runs/<name>/latest), comparisons (compare-*), re-judgements
(rejudged) and hidden folders are not runs and are skipped; a folder whose
manifest.json cannot be read is listed as left out, with why. A run killed
before it wrote its summary is listed as "killed": infermatrix report
rebuilds its figures from its records.

It writes history.md and history.html (self-contained) with a trend chart per
metric, one line per row, hollow where the row was invalid, into
FOLDER/history/ or --out. It sends no request.

Exit codes: 0 listed, 1 no run found or a file could not be written,
2 usage error (a --rows id no run has, say).`,
		Example: `  infermatrix history runs/llama31-8b-h100-chat

  # the last five runs, two rows, as a job summary in GitHub Actions
  infermatrix history artifacts/ --last 5 --rows short_chat,saturation \
      --format github >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "github" {
				return withCode(exitUsage, fmt.Errorf("--format %q: want text or github", format))
			}
			if last < 0 {
				return withCode(exitUsage, fmt.Errorf("--last %d: want a number of runs, or 0 for all", last))
			}
			h, err := history.Load(args[0], history.Options{Rows: rows, Last: last})
			if err != nil {
				var unknown *history.UnknownRowError
				if errors.As(err, &unknown) {
					return withCode(exitUsage, fmt.Errorf("--rows: %w", err))
				}
				if h != nil {
					for _, s := range h.Skipped {
						fmt.Fprintf(stderr, "left out %s: %s\n", textsafe.TerminalLine(s.Dir), textsafe.TerminalLine(s.Why))
					}
				}
				return withCode(exitRuntime, err)
			}
			if out == "" {
				out = filepath.Join(args[0], history.DirName)
			}
			// The table goes to stdout; in github format that is the
			// Markdown alone, for >> $GITHUB_STEP_SUMMARY, and the files
			// written are said on stderr.
			files := stdout
			if format == "github" {
				err = h.WriteGitHub(stdout)
				files = stderr
			} else {
				err = h.WriteText(stdout)
			}
			if err != nil {
				return withCode(exitRuntime, err)
			}
			if _, err := history.Write(h, out); err != nil {
				return withCode(exitRuntime, err)
			}
			fmt.Fprintf(files, "\nhistory: %s\n         %s\n", textsafe.TerminalLine(filepath.Join(out, history.MarkdownFile)),
				textsafe.TerminalLine(filepath.Join(out, history.HTMLFile)))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write history.md, history.html and plots/ here (default FOLDER/history)")
	cmd.Flags().StringVar(&format, "format", "text", "what to print: text (a table for the terminal) or github (Markdown for a job summary or pull-request comment)")
	cmd.Flags().StringSliceVar(&rows, "rows", nil, "show only these rows (ids, comma-separated; a swept row's id selects all its points)")
	cmd.Flags().IntVar(&last, "last", 0, "show only the newest N runs (0: all); numbers and what changed still count from the first run")
	return cmd
}
