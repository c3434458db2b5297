package record

import (
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/rundir"
)

// A shard's Shard line names the row that began latest against the start
// --start-at planned for it, once any began more than 100 ms late, and
// says nothing of rows that began on time.
func TestShardLineNamesTheLatestRowStart(t *testing.T) {
	at := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	shardLine := func(starts ...rundir.RowStart) string {
		man := &rundir.Manifest{Shard: &rundir.ShardInfo{Index: 1, Count: 2, PlanSHA256: "abc", StartAt: &at, StartSkewNS: starts[0].LateNS, RowStarts: starts}}
		for _, f := range shardFacts(man) {
			if f[0] == "Shard" {
				return f[1]
			}
		}
		t.Fatal("no Shard line")
		return ""
	}
	onTime := shardLine(rundir.RowStart{Row: "a", Planned: at, LateNS: 3e6}, rundir.RowStart{Row: "b", Planned: at.Add(time.Minute), LateNS: 90e6})
	if strings.Contains(onTime, "rows began") {
		t.Errorf("rows 3 ms and 90 ms late: %q; want no late rows named", onTime)
	}
	late := shardLine(rundir.RowStart{Row: "a", Planned: at, LateNS: 3e6},
		rundir.RowStart{Row: "b", Planned: at.Add(time.Minute), LateNS: 2_300e6},
		rundir.RowStart{Row: "c", Planned: at.Add(2 * time.Minute), LateNS: 150e6})
	for _, want := range []string{"2 of 3 rows began over 100ms late", "the latest row b, 2.3s after its planned start 2026-11-27T20:01:00Z"} {
		if !strings.Contains(late, want) {
			t.Errorf("Shard line %q; want %q", late, want)
		}
	}
}
