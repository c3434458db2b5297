package sim

import (
	"testing"
	"time"
)

// TestLatenessSnapshotSince checks an interval's reading against
// observations made directly: counts and percentiles of the interval alone,
// and its largest lateness exact when the interval set a record and bounded
// by its highest bucket when not.
func TestLatenessSnapshotSince(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.metrics.flushLateness
	type reading struct {
		count             uint64
		p50, p99, maxLate time.Duration
	}
	since := func(a, b LatenessSnapshot) reading {
		var r reading
		r.count, r.p50, r.p99, r.maxLate = a.Since(b)
		return r
	}
	const us, ms = time.Microsecond, time.Millisecond

	s0 := s.LatenessSnapshot()
	if got := since(s0, LatenessSnapshot{}); got != (reading{}) {
		t.Errorf("nothing flushed yet: %+v", got)
	}
	if got := since(LatenessSnapshot{}, LatenessSnapshot{}); got != (reading{}) {
		t.Errorf("zero readings: %+v", got)
	}

	// Row 1: 100 flushes 30µs late and one 2ms late, a new record.
	h.observeN(30*us, 100)
	h.observe(2 * ms)
	s1 := s.LatenessSnapshot()
	if got, want := since(s1, s0), (reading{101, 50 * us, 50 * us, 2 * ms}); got != want {
		t.Errorf("row 1: %+v, want %+v", got, want)
	}

	// Row 2, through a stream's batch as the handlers record: ten flushes
	// 200µs late. The record stays 2ms, from row 1; the interval's largest
	// is bounded by its highest bucket, 250µs.
	b := histBatch{h: h}
	b.observeN(200*us, 10)
	b.flush()
	s2 := s.LatenessSnapshot()
	if got, want := since(s2, s1), (reading{10, 250 * us, 250 * us, 250 * us}); got != want {
		t.Errorf("row 2: %+v, want %+v", got, want)
	}

	// Both rows: the cumulative reading, as FlushLateness reports it.
	count, p50, p99 := s.FlushLateness()
	if got, want := since(s2, LatenessSnapshot{}), (reading{count, p50, p99, 2 * ms}); got != want || count != 111 {
		t.Errorf("since the start: %+v, want %+v (FlushLateness)", got, want)
	}
	if got, want := since(s2, s0), since(s2, LatenessSnapshot{}); got != want {
		t.Errorf("since an empty reading %+v, since the zero value %+v", got, want)
	}
	// Readings passed the wrong way round count nothing.
	if got := since(s1, s2); got != (reading{}) {
		t.Errorf("an earlier reading since a later one: %+v", got)
	}
	// An interval with no flushes.
	if got := since(s.LatenessSnapshot(), s2); got != (reading{}) {
		t.Errorf("an empty interval: %+v", got)
	}

	// Past the last bound (100ms): a record is exact; a later, smaller
	// value in the +Inf bucket is bounded by the record.
	h.observe(200 * ms)
	s3 := s.LatenessSnapshot()
	if got, want := since(s3, s2), (reading{1, 200 * ms, 200 * ms, 200 * ms}); got != want {
		t.Errorf("a 200ms record: %+v, want %+v", got, want)
	}
	h.observe(150 * ms)
	h.observeN(5*us, 3)
	s4 := s.LatenessSnapshot()
	if got, want := since(s4, s3), (reading{4, 10 * us, 200 * ms, 200 * ms}); got != want {
		t.Errorf("150ms under a 200ms record: %+v, want %+v", got, want)
	}
}

// TestInstanceLatenessSnapshot reads two rows of streams through an
// Instance: each interval counts its own row's flushes.
func TestInstanceLatenessSnapshot(t *testing.T) {
	truth := &syncBuffer{}
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 200 * time.Microsecond, GroundTruth: truth})
	before := inst.LatenessSnapshot()
	for range 2 {
		readEvents(t, request(t, inst.BaseURL+"/chat/completions", chatStream(7), "").Body)
	}
	// A line of ground truth is written when the handler returns, after
	// the stream has merged its observations.
	waitTruth(t, truth, 2)
	mid := inst.LatenessSnapshot()
	readEvents(t, request(t, inst.BaseURL+"/chat/completions", chatStream(5), "").Body)
	waitTruth(t, truth, 3)
	after := inst.LatenessSnapshot()

	for _, c := range []struct {
		name    string
		a, b    LatenessSnapshot
		flushes uint64
	}{
		{"row 1", mid, before, 14},
		{"row 2", after, mid, 5},
		{"both", after, before, 19},
	} {
		count, p50, p99, maxLate := c.a.Since(c.b)
		if count != c.flushes || p50 <= 0 || p99 < p50 || maxLate < p99 {
			t.Errorf("%s: %d flushes, p50 %v, p99 %v, max %v; want %d flushes and 0 < p50 <= p99 <= max", c.name, count, p50, p99, maxLate, c.flushes)
		}
	}
	if count, _, _ := inst.Server.FlushLateness(); count != 19 {
		t.Errorf("FlushLateness counts %d flushes, want 19", count)
	}
}
