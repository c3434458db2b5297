package merge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/rundir"
)

// ErrNoShards is returned when the wait ended with no shard finished:
// there is nothing to merge, and a merged directory of nothing would only
// hide that every shard failed to start or is still running.
var ErrNoShards = errors.New("no shard finished")

// Defaults of Options.
const (
	// PollInterval is how often a waiting merge looks at the shards'
	// manifests: each look reads one small file per shard, and a shard's
	// manifest changes at its row ends, so seconds lose nothing.
	PollInterval = 2 * time.Second
	// ReportInterval is how often a waiting merge says which shards it
	// still waits for: often enough for a log a person watches, seldom
	// enough not to bury the rest.
	ReportInterval = 30 * time.Second
)

// Options say how Run gets its shards.
type Options struct {
	// Wait, when positive, makes Run wait until every given path holds a
	// shard's run directory that is no longer running (complete,
	// interrupted or failed), for this long at most: on Kubernetes the
	// merge starts with the shards and waits for them on the shared
	// volume. A path still without a finished shard at the deadline is a
	// missing shard. Zero takes the directories as they are, running or
	// not, and refuses a path that is not a run directory.
	Wait time.Duration
	// Poll and Report are how often the wait looks at the shards and
	// says which it still waits for (PollInterval, ReportInterval when
	// zero); tests make them short.
	Poll, Report time.Duration
	// Log receives the wait's progress; nil discards it.
	Log io.Writer
}

// found is what a path held when the wait ended: a shard's run directory
// (finished, or still running), or nothing yet.
type found struct {
	path string
	sh   *shard // nil: no run directory
	// gone is the shard's mark that it will never run (it refused to
	// start, or failed before its run directory existed).
	gone *rundir.Abandoned
}

// Run merges the shard directories dirs into out, as Merge does, after
// waiting for them as opts say. It returns ErrNoShards when no shard
// finished in time, and ctx's error, having written nothing, when ctx
// ends during the wait.
func Run(ctx context.Context, dirs []string, out string, opts Options) (*Result, error) {
	if opts.Wait <= 0 {
		return Merge(dirs, out, time.Now())
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no shard directories given", ErrUsage)
	}
	// A full output directory is refused before the wait, not after it.
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%w: output directory %s is not empty; choose a new one so earlier results are kept", ErrUsage, out)
	}
	all, err := wait(ctx, dirs, opts)
	if err != nil {
		return nil, err
	}
	var shards []shard
	var absent []rundir.AbsentShard
	for _, f := range all {
		switch {
		case f.sh == nil && f.gone != nil:
			absent = append(absent, rundir.AbsentShard{Index: f.gone.Index, Dir: absPath(f.path),
				Reason: fmt.Sprintf("shard %d/%d did not run: %s", f.gone.Index, f.gone.Count, f.gone.Reason)})
		case f.sh == nil:
			absent = append(absent, rundir.AbsentShard{Dir: absPath(f.path),
				Reason: fmt.Sprintf("no run directory after waiting %v", opts.Wait)})
		case f.sh.man.Status == rundir.StatusRunning:
			absent = append(absent, rundir.AbsentShard{Index: f.sh.man.Shard.Index, Dir: absPath(f.path),
				Reason: fmt.Sprintf("still running after waiting %v: not merged half-written", opts.Wait)})
		default:
			shards = append(shards, *f.sh)
		}
	}
	// Shards still running are checked too: one of another plan, or a
	// second copy of an index, is as wrong running as finished.
	var seen []shard
	for _, f := range all {
		if f.sh != nil {
			seen = append(seen, *f.sh)
		}
	}
	if len(seen) > 0 {
		if _, err := checkShards(seen); err != nil {
			return nil, err
		}
	}
	if len(shards) == 0 {
		var why []string
		for _, a := range absent {
			why = append(why, a.Dir+": "+a.Reason)
		}
		return nil, fmt.Errorf("%w after waiting %v, so there is nothing to merge: %s", ErrNoShards, opts.Wait, strings.Join(why, "; "))
	}
	return merge(shards, absent, out, time.Now())
}

// wait polls the paths until each holds a finished shard, the deadline
// passes or ctx ends. A path whose manifest exists but is not a shard's
// is refused at once: waiting will not make it one.
func wait(ctx context.Context, dirs []string, opts Options) ([]found, error) {
	poll, report := opts.Poll, opts.Report
	if poll <= 0 {
		poll = PollInterval
	}
	if report <= 0 {
		report = ReportInterval
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	start := time.Now()
	deadline := start.Add(opts.Wait)
	nextReport := start.Add(report)
	all := make([]found, len(dirs))
	for i, p := range dirs {
		all[i].path = p
	}
	for {
		var pending []string
		for i := range all {
			f := &all[i]
			if f.sh != nil && f.sh.man.Status != rundir.StatusRunning || f.gone != nil {
				continue
			}
			sh, err := look(f.path)
			if err != nil {
				return nil, err
			}
			f.sh = sh
			if sh == nil {
				if f.gone, err = rundir.ReadAbandoned(f.path); err != nil {
					return nil, err
				}
			}
			switch {
			case sh == nil && f.gone != nil:
				// This shard will not come: no need to wait for it.
			case sh == nil:
				pending = append(pending, f.path+" (no run directory yet)")
			case sh.man.Status == rundir.StatusRunning:
				pending = append(pending, fmt.Sprintf("shard %d/%d in %s (running)", sh.man.Shard.Index, sh.man.Shard.Count, f.path))
			}
		}
		now := time.Now()
		if len(pending) == 0 || !now.Before(deadline) {
			return all, nil
		}
		if !now.Before(nextReport) {
			fmt.Fprintf(logw, "merge: waiting for %d of %d shards (%v left): %s\n",
				len(pending), len(all), deadline.Sub(now).Round(time.Second), strings.Join(pending, "; "))
			nextReport = now.Add(report)
		}
		t := time.NewTimer(min(poll, deadline.Sub(now)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("interrupted while waiting for shards, nothing was merged: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// look reads the shard a path holds: nil (and no error) while it holds no
// manifest yet.
func look(p string) (*shard, error) {
	if _, err := os.Stat(filepath.Join(p, rundir.ManifestFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return open(p)
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
