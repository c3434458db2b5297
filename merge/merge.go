// Package merge makes one run directory from the run directories of a
// distributed run's shards (run --shard I/N): the union of their records,
// summarised again exactly (percentiles from every record, throughput over
// the union's window), judged once and reported as a single run would be.
//
// It reads local directories only; shards written to object storage are
// copied down first (gsutil rsync, aws s3 sync), since a merge needs every
// record anyway.
package merge

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/reports"
	"github.com/infermatrix/infermatrix/rundir"
)

// ErrUsage marks a directory that is not a shard's run directory, or an
// output directory that already holds files; ErrPlan marks shards that do
// not belong to one distributed run.
var (
	ErrUsage = errors.New("merge refused")
	ErrPlan  = errors.New("shards of different plans")
)

// Result is a merged run.
type Result struct {
	Dir      *rundir.Dir
	Manifest *rundir.Manifest
	Written  *reports.Written
	// Missing lists the shard indexes absent from the merge.
	Missing []int
	// Absent says, for each path given that held no finished shard when
	// the wait ended (Run with Options.Wait), why.
	Absent []rundir.AbsentShard
}

type shard struct {
	dir *rundir.Dir
	man *rundir.Manifest
}

// Merge merges the shard run directories dirs into a new run directory
// out (which must not hold files). It refuses (ErrUsage) a directory that
// is not a run directory of a shard, or two shards with one index, and
// (ErrPlan) shards whose count, plan hash or experiment differ. A merge
// that lacks some shards is still written; its verdict is INCONCLUSIVE.
func Merge(dirs []string, out string, now time.Time) (*Result, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no shard directories given", ErrUsage)
	}
	shards := make([]shard, 0, len(dirs))
	for _, p := range dirs {
		s, err := open(p)
		if err != nil {
			return nil, err
		}
		shards = append(shards, *s)
	}
	return merge(shards, nil, out, now)
}

// open reads the shard run directory at p.
func open(p string) (*shard, error) {
	d, err := rundir.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a run directory: %w", ErrUsage, p, err)
	}
	m, err := d.Manifest()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUsage, p, err)
	}
	if m.Shard == nil {
		return nil, fmt.Errorf("%w: %s is a run that was not sharded (its manifest has no shard); merge takes the directories of run --shard I/N", ErrUsage, p)
	}
	return &shard{d, m}, nil
}

// checkShards refuses shards that are not of one distributed run, or two
// with one index, and returns the directory of each index.
func checkShards(shards []shard) (map[int]string, error) {
	first := shards[0].man
	seen := map[int]string{}
	for _, s := range shards {
		sh := s.man.Shard
		switch {
		case sh.Count != first.Shard.Count:
			return nil, fmt.Errorf("%w: %s is shard %d/%d, %s is shard %d/%d: every shard of one run has the same count",
				ErrPlan, s.dir.Path, sh.Index, sh.Count, shards[0].dir.Path, first.Shard.Index, first.Shard.Count)
		case sh.PlanSHA256 != first.Shard.PlanSHA256:
			return nil, fmt.Errorf("%w: %s has plan sha256 %s, %s has %s: they ran different schedules",
				ErrPlan, s.dir.Path, sh.PlanSHA256, shards[0].dir.Path, first.Shard.PlanSHA256)
		case s.man.Experiment.SHA256 != first.Experiment.SHA256:
			return nil, fmt.Errorf("%w: %s ran experiment sha256 %s, %s ran %s",
				ErrPlan, s.dir.Path, s.man.Experiment.SHA256, shards[0].dir.Path, first.Experiment.SHA256)
		case sh.Index < 1 || sh.Index > sh.Count:
			return nil, fmt.Errorf("%w: %s is shard %d of %d", ErrUsage, s.dir.Path, sh.Index, sh.Count)
		}
		if prev, ok := seen[sh.Index]; ok {
			return nil, fmt.Errorf("%w: %s and %s are both shard %d/%d", ErrUsage, prev, s.dir.Path, sh.Index, sh.Count)
		}
		seen[sh.Index] = s.dir.Path
	}
	return seen, nil
}

// merge writes the merged run of shards into out; absent are the paths
// given that held no finished shard when a wait ended.
func merge(shards []shard, absent []rundir.AbsentShard, out string, now time.Time) (*Result, error) {
	seen, err := checkShards(shards)
	if err != nil {
		return nil, err
	}
	first := shards[0].man
	sort.Slice(shards, func(i, j int) bool { return shards[i].man.Shard.Index < shards[j].man.Shard.Index })

	plan, err := reports.PlanOf(shards[0].dir, first)
	if err != nil {
		return nil, err
	}
	dst, err := rundir.Create("", "", out, now)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	res := &Result{Dir: dst}
	for _, f := range []string{rundir.ExperimentFile, rundir.HashFile} {
		b, err := os.ReadFile(filepath.Join(shards[0].dir.Path, f))
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		if err := dst.WriteFile(f, b); err != nil {
			return nil, err
		}
	}
	man := mergedManifest(shards, now)
	for i := 1; i <= first.Shard.Count; i++ {
		if _, ok := seen[i]; !ok {
			res.Missing = append(res.Missing, i)
		}
	}
	man.Merged.Missing = res.Missing
	man.Merged.Absent = absent
	res.Absent = absent
	if err := dst.WriteJSON(rundir.ManifestFile, man); err != nil {
		return nil, err
	}
	for _, row := range man.Rows {
		if err := mergeRow(dst, shards, row.ID); err != nil {
			return nil, err
		}
	}
	status := metrics.RowComplete
	if man.Status != rundir.StatusComplete {
		status = metrics.RowInterrupted
	}
	sum, err := reports.SummariseRecords(dst, man, plan, status)
	if err != nil {
		return nil, err
	}
	sum.MissingShards = res.Missing
	if err := carry(sum, man, shards, plan); err != nil {
		return nil, err
	}
	if err := dst.WriteJSON(rundir.SummaryFile, sum); err != nil {
		return nil, err
	}
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Status == metrics.RowNotRun {
			continue
		}
		if err := dst.WriteJSON(rundir.RowFile(rs.ID, rundir.SummaryFile), rs); err != nil {
			return nil, err
		}
		// Each trial's own summary, as the run writes it (without its
		// timeslices, which only the pooled row keeps here).
		for j := range rs.Trials {
			if err := dst.WriteJSON(rundir.RowFile(rundir.TrialRow(rs.ID, rs.Trials[j].Trial), rundir.SummaryFile), &rs.Trials[j]); err != nil {
				return nil, err
			}
		}
	}
	res.Manifest = man
	w, err := reports.Write(dst, &reports.Input{Plan: plan, Manifest: man, Summary: sum})
	res.Written = w
	return res, err
}

// mergedManifest is the first shard's manifest, with the run's span
// covering every shard's and a status that is complete only when every
// shard merged completed.
func mergedManifest(shards []shard, now time.Time) *rundir.Manifest {
	m := *shards[0].man
	m.Shard = nil
	m.Command = append([]string(nil), os.Args...)
	m.Merged = &rundir.MergeInfo{Count: shards[0].man.Shard.Count, PlanSHA256: shards[0].man.Shard.PlanSHA256}
	m.Status = rundir.StatusComplete
	var ended *time.Time
	for _, s := range shards {
		abs, err := filepath.Abs(s.dir.Path)
		if err != nil {
			abs = s.dir.Path
		}
		m.Merged.From = append(m.Merged.From, rundir.MergedShard{Index: s.man.Shard.Index, Dir: abs, Status: s.man.Status,
			StartSkewNS: s.man.Shard.StartSkewNS, StartAt: s.man.Shard.StartAt, RowStarts: s.man.Shard.RowStarts})
		if s.man.Started.Before(m.Started) {
			m.Started = s.man.Started
		}
		if s.man.Ended == nil {
			m.Status = rundir.StatusInterrupted
		} else if ended == nil || s.man.Ended.After(*ended) {
			e := *s.man.Ended
			ended = &e
		}
		if s.man.Status != rundir.StatusComplete && m.Status == rundir.StatusComplete {
			m.Status = s.man.Status
		}
	}
	if ended == nil {
		e := now.UTC()
		ended = &e
	}
	m.Ended = ended
	return &m
}

// mergeRow writes the union of a row's records from every shard: a
// repeated row's trial by trial (rows/<id>/trial-<k>/), each trial the
// union of that trial on every shard, since the shards ran trial k of the
// row together (the rows run in rounds, the same on every shard).
func mergeRow(dst *rundir.Dir, shards []shard, rowID string) error {
	n := 0
	for _, s := range shards {
		n = max(n, s.dir.Trials(rowID))
	}
	if n == 0 {
		return mergePart(dst, shards, rowID)
	}
	for k := 1; k <= n; k++ {
		if err := mergePart(dst, shards, rundir.TrialRow(rowID, k)); err != nil {
			return err
		}
	}
	return nil
}

// mergePart writes the union of a row's (or a trial's) records from
// every shard, sorted by start time then id. Each shard stamps StartNS from its own clock's
// origin, so each shard's records are moved onto one timeline first: the
// wall clock at StartNS 0 (StartUnixNS - StartNS) is the shard's origin,
// and the earliest origin is the merged run's. A shard's telemetry is
// kept as telemetry-shard-I.jsonl beside the records (each shard scraped
// the servers on its own; the samples are not merged).
func mergePart(dst *rundir.Dir, shards []shard, rowID string) error {
	type part struct {
		recs   []*metrics.Record
		origin int64
	}
	var parts []part
	for _, s := range shards {
		if _, err := os.Stat(s.dir.RecordsPath(rowID)); err != nil {
			continue // not run on this shard
		}
		var p part
		first := true
		if _, err := s.dir.ScanRecords(rowID, func(r *metrics.Record) error {
			if r.StartUnixNS != 0 {
				if o := r.StartUnixNS - r.StartNS; first || o < p.origin {
					p.origin, first = o, false
				}
			}
			p.recs = append(p.recs, r)
			return nil
		}); err != nil {
			return err
		}
		parts = append(parts, p)
		if err := copyTelemetry(s, dst, rowID); err != nil {
			return err
		}
	}
	if len(parts) == 0 {
		return nil
	}
	base := parts[0].origin
	for _, p := range parts {
		base = min(base, p.origin)
	}
	var all []*metrics.Record
	for _, p := range parts {
		shift := p.origin - base
		for _, r := range p.recs {
			r.StartNS += shift
			r.ScheduledNS += shift
			all = append(all, r)
		}
	}
	slices.SortStableFunc(all, func(a, b *metrics.Record) int {
		if a.StartNS != b.StartNS {
			return cmp.Compare(a.StartNS, b.StartNS)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	w, err := dst.CreateRecords(rowID)
	if err != nil {
		return err
	}
	for _, r := range all {
		if err := w.Write(r); err != nil {
			_ = w.Close()
			return err
		}
	}
	return w.Close()
}

// copyTelemetry keeps a shard's telemetry samples for a row, if it has
// any, as rows/<id>/telemetry-shard-I.jsonl.
func copyTelemetry(s shard, dst *rundir.Dir, rowID string) error {
	src, err := os.Open(filepath.Join(s.dir.Path, rundir.RowFile(rowID, rundir.TelemetryFile)))
	if err != nil {
		return nil // no telemetry on this shard
	}
	defer src.Close()
	b, err := io.ReadAll(src)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return dst.WriteFile(rundir.RowFile(rowID, fmt.Sprintf("telemetry-shard-%d.jsonl", s.man.Shard.Index)), b)
}
