package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/infermatrix/infermatrix/schema"
)

// experimentExts are the file extensions shells offer for an experiment
// argument.
var experimentExts = []string{"yaml", "yml"}

// wireCompletion gives the shell completion that cobra's `completion`
// command generates something to complete: experiment files for the
// commands that take one, run directories for report, and the file's row
// ids for --rows. It is wired by name so that each command's constructor
// stays about its own flags.
func wireCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "run", "plan", "validate":
			c.ValidArgsFunction = completeExperiment
		case "report":
			c.ValidArgsFunction = completeRunDir
			_ = c.RegisterFlagCompletionFunc("experiment", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return experimentExts, cobra.ShellCompDirectiveFilterFileExt
			})
		}
		if c.Flags().Lookup("rows") != nil {
			_ = c.RegisterFlagCompletionFunc("rows", completeRows)
		}
		if c.Flags().Lookup("out") != nil {
			_ = c.RegisterFlagCompletionFunc("out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return nil, cobra.ShellCompDirectiveFilterDirs
			})
		}
	}
}

// completeExperiment offers YAML files; validate takes several, run and
// plan one.
func completeExperiment(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if cmd.Name() != "validate" && len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return experimentExts, cobra.ShellCompDirectiveFilterFileExt
}

// completeRunDir offers directories: a run directory, or runs/<name>/latest.
func completeRunDir(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// completeRows offers the row ids of the experiment named before --rows:
// each row's id as written and, for swept rows, every point's id. The file
// is loaded without checking the files it names, as a shell is no place to
// report them; an invalid file offers nothing. --rows takes a comma-separated
// list, so ids already typed are kept as a prefix.
func completeRows(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	if len(args) == 0 {
		return nil, none
	}
	plan, err := schema.Load(args[0], schema.Options{SkipFileChecks: true})
	if err != nil {
		return nil, none
	}
	typed, prefix := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		typed, prefix = toComplete[:i+1], toComplete[i+1:]
	}
	done := map[string]bool{}
	for _, id := range strings.Split(typed, ",") {
		done[id] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, row := range plan.Rows {
		for _, id := range []string{row.Base, row.ID} {
			if seen[id] || done[id] || !strings.HasPrefix(id, prefix) {
				continue
			}
			seen[id] = true
			out = append(out, typed+id)
		}
	}
	return out, none | cobra.ShellCompDirectiveNoSpace
}
