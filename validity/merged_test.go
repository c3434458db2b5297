package validity

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// The alignment limit grows with the row: 1% of a 60 s row is 600 ms,
// past the 250 ms floor; a shard's carried failure is ignored when the
// experiment ignores its check, but alignment cannot be.
func TestMergedRowChecks(t *testing.T) {
	row := &schema.PlannedRow{ID: "r", Duration: schema.Duration(50 * time.Second), WarmupDuration: schema.Duration(10 * time.Second)}
	if got := AlignmentLimit(row); got != 600*time.Millisecond {
		t.Errorf("limit of a 60 s row %v, want 600ms", got)
	}
	if got := AlignmentLimit(&schema.PlannedRow{ID: "r"}); got != AlignmentFloor {
		t.Errorf("limit of a row without duration %v, want the floor", got)
	}
	spread := func(d time.Duration) *int64 { ns := d.Nanoseconds(); return &ns }
	rs := &metrics.RowSummary{ID: "r", Status: metrics.RowComplete}
	rs.Requests.Completed = 10
	for _, tt := range []struct {
		spread time.Duration
		valid  bool
	}{{500 * time.Millisecond, true}, {700 * time.Millisecond, false}} {
		rs.Merged = &metrics.MergedRow{StartSpreadNS: spread(tt.spread)}
		v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
		if v.Valid != tt.valid {
			t.Errorf("spread %v: %+v, want valid %v", tt.spread, v, tt.valid)
		}
		if !tt.valid && !strings.Contains(v.Reasons[0].Message, "700ms apart (limit 600ms") {
			t.Errorf("spread %v: %q does not state the spread and the limit", tt.spread, v.Reasons[0].Message)
		}
	}

	rs.Merged = &metrics.MergedRow{ShardInvalid: []metrics.ShardReason{{Shard: 3, Count: 4, Check: ClientStall, Message: "held up", Fix: "f"}},
		StartSpreadNS: spread(time.Second)}
	cfg := schema.DefaultValidity
	cfg.Ignore = []string{ClientStall}
	v := Row(Input{Row: row, Summary: rs, Config: cfg})
	var checks []string
	for _, r := range v.Reasons {
		checks = append(checks, r.Check)
	}
	if !slices.Equal(checks, []string{Alignment}) {
		t.Errorf("with client_stall ignored: failed %v, want alignment alone", checks)
	}
	v = Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
	if len(v.Reasons) != 2 || v.Reasons[0].Message != "shard 3/4: held up" {
		t.Errorf("reasons %+v, want shard 3/4's client_stall first, then alignment", v.Reasons)
	}

	// Two shards failing one check name it once in the summary line.
	rs.Merged = &metrics.MergedRow{ShardInvalid: []metrics.ShardReason{
		{Shard: 1, Count: 2, Check: ClientCPU, Message: "a"}, {Shard: 2, Count: 2, Check: ClientCPU, Message: "b"}}}
	if got := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity}).Summary(); got != "invalid: client_cpu" {
		t.Errorf("summary %q, want each check named once", got)
	}

	// A shard killed during the row has no live figures: said, not passed in silence.
	rs.Merged = &metrics.MergedRow{Unmeasured: []int{2, 3}}
	v = Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
	if !v.Valid || !slices.ContainsFunc(v.Notes, func(n string) bool {
		return strings.HasPrefix(n, "client_cpu, client_stall, simulator, stamp_error: not measured on shard 2, 3:")
	}) {
		t.Errorf("unmeasured shards: %+v", v)
	}
}
