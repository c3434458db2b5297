package merge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// setStatus rewrites a shard's manifest status, as its run does at its end.
func setStatus(t *testing.T, dir, status string) {
	t.Helper()
	if err := writeStatus(dir, status); err != nil {
		t.Fatal(err)
	}
}

// writeStatus is setStatus for a goroutine: it replaces the manifest
// whole, as rundir does.
func writeStatus(dir, status string) error {
	b, err := os.ReadFile(filepath.Join(dir, rundir.ManifestFile))
	if err != nil {
		return err
	}
	var man rundir.Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return err
	}
	man.Status = status
	if b, err = json.Marshal(&man); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "manifest.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, rundir.ManifestFile))
}

// syncBuffer is a bytes.Buffer safe for the wait's log and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The shards appear while merge waits: shard 1 finished, shard 2 first
// running, then complete. The merge waits for both and merges them whole.
func TestWaitMergesShardsAsTheyFinish(t *testing.T) {
	staged := splitShards(t, 2, "plan-a", nil)
	base := t.TempDir()
	paths := []string{filepath.Join(base, "shard-1"), filepath.Join(base, "shard-2")}
	done := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		if err := os.Rename(staged[0], paths[0]); err != nil {
			done <- err
			return
		}
		if err := writeStatus(staged[1], rundir.StatusRunning); err != nil {
			done <- err
			return
		}
		if err := os.Rename(staged[1], paths[1]); err != nil {
			done <- err
			return
		}
		time.Sleep(150 * time.Millisecond)
		done <- writeStatus(paths[1], rundir.StatusComplete)
	}()
	var log syncBuffer
	res, err := Run(context.Background(), paths, filepath.Join(base, "merged"),
		Options{Wait: 5 * time.Second, Poll: 10 * time.Millisecond, Report: 20 * time.Millisecond, Log: &log})
	if gerr := <-done; gerr != nil {
		t.Fatal(gerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing) != 0 || len(res.Manifest.Merged.From) != 2 {
		t.Fatalf("merged %+v, missing %v: want both shards", res.Manifest.Merged.From, res.Missing)
	}
	if res.Written.Decision.Verdict != verdict.Pass {
		t.Errorf("verdict %s (%v), want pass", res.Written.Decision.Verdict, res.Written.Decision.Why)
	}
	if !strings.Contains(log.String(), "merge: waiting for") {
		t.Errorf("the wait said nothing of the shards it waited for: %q", log.String())
	}
}

// At the deadline a shard still running is missing, with that reason,
// and is not merged half-written: the merge is INCONCLUSIVE and names it.
func TestWaitDeadlineLeavesRunningShardOut(t *testing.T) {
	dirs := splitShards(t, 3, "plan-a", nil)
	setStatus(t, dirs[1], rundir.StatusRunning)
	gone := filepath.Join(t.TempDir(), "never")
	res, err := Run(context.Background(), append(dirs, gone), filepath.Join(t.TempDir(), "merged"),
		Options{Wait: 100 * time.Millisecond, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Missing, []int{2}) {
		t.Errorf("missing %v, want [2]", res.Missing)
	}
	if d := res.Written.Decision; d.Verdict != verdict.Inconclusive {
		t.Errorf("verdict %s, want inconclusive", d.Verdict)
	}
	for _, f := range res.Manifest.Merged.From {
		if f.Index == 2 {
			t.Errorf("the running shard 2 was merged")
		}
	}
	b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.DecisionFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"merged without shard 2", "shard 2 (", "still running after waiting 100ms", "never: no run directory"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("decision.md does not say %q", want)
		}
	}
}

func TestWaitNoShardFinished(t *testing.T) {
	dirs := splitShards(t, 2, "plan-a", []int{1})
	setStatus(t, dirs[0], rundir.StatusRunning)
	out := filepath.Join(t.TempDir(), "merged")
	_, err := Run(context.Background(), append(dirs, filepath.Join(t.TempDir(), "none")), out,
		Options{Wait: 50 * time.Millisecond, Poll: 10 * time.Millisecond})
	if !errors.Is(err, ErrNoShards) || !strings.Contains(err.Error(), "still running") {
		t.Errorf("no shard finished: %v, want ErrNoShards saying why", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a merge of no shards wrote %s", out)
	}
}

// Cancelled during the wait (Ctrl-C, SIGTERM): nothing is written.
func TestWaitInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	out := filepath.Join(t.TempDir(), "merged")
	_, err := Run(ctx, []string{filepath.Join(t.TempDir(), "later")}, out, Options{Wait: time.Minute, Poll: 10 * time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted wait: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("an interrupted merge wrote %s", out)
	}
}

// A path whose manifest is not a shard's is refused at once, not waited on.
func TestWaitRefusesUnshardedAtOnce(t *testing.T) {
	// Waiting on it would end in the context's deadline instead.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Run(ctx, []string{fixture}, filepath.Join(t.TempDir(), "merged"), Options{Wait: time.Hour})
	if !errors.Is(err, ErrUsage) {
		t.Errorf("an unsharded run: %v, want ErrUsage at once", err)
	}
}

// A shard that refused to run (too late for the shared start) leaves a
// mark in its directory: the merge counts it missing at once, with the
// shard's own reason, rather than waiting out its deadline for it.
func TestWaitTakesAbandonedShardAsMissingAtOnce(t *testing.T) {
	dirs := splitShards(t, 2, "plan-a", nil)
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := rundir.WriteAbandoned(dirs[1], rundir.Abandoned{Index: 2, Count: 2, Reason: "bad start time: 2026-11-27T20:00:00Z is 15s in the past"}); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), dirs, filepath.Join(t.TempDir(), "merged"), Options{Wait: time.Minute, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Missing, []int{2}) || res.Written.Decision.Verdict != verdict.Inconclusive {
		t.Fatalf("missing %v, verdict %s: want shard 2 missing, INCONCLUSIVE", res.Missing, res.Written.Decision.Verdict)
	}
	if len(res.Absent) != 1 || res.Absent[0].Index != 2 || !strings.Contains(res.Absent[0].Reason, "shard 2/2 did not run: bad start time") {
		t.Errorf("absent %+v: want shard 2 with its own reason", res.Absent)
	}
	// The mark never hides a run: a directory with a manifest is a run.
	if err := rundir.WriteAbandoned(dirs[0], rundir.Abandoned{Index: 1, Count: 2, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if a, _ := rundir.ReadAbandoned(dirs[0]); a != nil {
		t.Error("a mark was written into a run directory")
	}
}
