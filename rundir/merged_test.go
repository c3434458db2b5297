package rundir

import (
	"testing"
	"time"
)

// A row's start spread reads each shard's row starts: a repeated row's
// trial k is its k-th start (or one named for the trial), and the first
// row falls back to the start skew of a shard that recorded no row
// starts. Without a shared start, or with one shard alone, there is none.
func TestStartSpread(t *testing.T) {
	at := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	m := &MergeInfo{From: []MergedShard{
		{Index: 1, StartAt: &at, StartSkewNS: ms(5), RowStarts: []RowStart{
			{Row: "a", LateNS: ms(5)}, {Row: "r", LateNS: ms(10)}, {Row: "r", LateNS: ms(20)}}},
		{Index: 2, StartAt: &at, StartSkewNS: ms(300)}, // no row starts: the first row's lateness is its skew
		{Index: 3, StartAt: &at, StartSkewNS: ms(7), RowStarts: []RowStart{
			{Row: "a", LateNS: ms(7)}, {Row: TrialRow("r", 1), LateNS: ms(12)}, {Row: TrialRow("r", 2), LateNS: ms(400)}}},
		{Index: 4, StartSkewNS: ms(900)}, // no shared start: not aligned to anything
	}}
	for _, tt := range []struct {
		row   string
		trial int
		first bool
		want  time.Duration
		ok    bool
	}{
		{"a", 0, true, 295 * time.Millisecond, true},
		{"r", 1, false, 2 * time.Millisecond, true},
		{"r", 2, false, 380 * time.Millisecond, true},
		{"gone", 0, false, 0, false},
	} {
		got, ok := m.StartSpread(tt.row, tt.trial, tt.first)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s trial %d: spread %v %v, want %v %v", tt.row, tt.trial, got, ok, tt.want, tt.ok)
		}
	}
}
