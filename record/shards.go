package record

import (
	"fmt"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// shardFacts say that a run is one shard of a distributed run, or that it
// was merged from shards (and which are missing), so that a reader of a
// shard's record knows it measured only part of the load, and a reader of
// a merged one where each part came from. The merged run's host and tool
// are its first shard's.
func shardFacts(man *rundir.Manifest) [][2]string {
	var out [][2]string
	if s := man.Shard; s != nil {
		v := fmt.Sprintf("%d of %d (plan sha256 %s): this run sent only its share of each row's load", s.Index, s.Count, verdict.ShortCommit(s.PlanSHA256))
		if s.StartAt != nil {
			v += fmt.Sprintf("; shared start %s, began %s late", s.StartAt.UTC().Format(time.RFC3339Nano), time.Duration(s.StartSkewNS))
			v += lateRows(s.RowStarts)
		}
		out = append(out, [2]string{"Shard", v})
	}
	if m := man.Merged; m != nil {
		var from []string
		for _, s := range m.From {
			from = append(from, fmt.Sprintf("%d (%s, %s)", s.Index, s.Dir, s.Status))
		}
		v := fmt.Sprintf("%d of %d shards (plan sha256 %s): %s; host and tool are shard %d's", len(m.From), m.Count, verdict.ShortCommit(m.PlanSHA256), strings.Join(from, "; "), firstIndex(m))
		if len(m.Missing) > 0 {
			v += fmt.Sprintf("; MISSING: %s", strings.Trim(fmt.Sprint(m.Missing), "[]"))
		}
		for _, a := range m.Absent {
			if a.Index > 0 {
				v += fmt.Sprintf("; shard %d (%s): %s", a.Index, a.Dir, a.Reason)
			} else {
				v += fmt.Sprintf("; %s: %s", a.Dir, a.Reason)
			}
		}
		if spreads := startSpreads(man); spreads != "" {
			v += "; shards' start spread per row (--start-at): " + spreads
		}
		out = append(out, [2]string{"Merged", v})
	}
	return out
}

// lateRowStart is how late a row may begin against the start --start-at
// planned for it before the shard's record says so: the timer's own
// slack and a row's set-up are a few milliseconds; a row that began later
// than this was out of step with the other shards for that long (the row
// before it overran its slot).
const lateRowStart = 100 * time.Millisecond

// lateRows names the row that began latest against its planned start,
// when any began more than lateRowStart late; "" when none did.
func lateRows(starts []rundir.RowStart) string {
	late, worst := 0, -1
	for i, r := range starts {
		if time.Duration(r.LateNS) <= lateRowStart {
			continue
		}
		late++
		if worst < 0 || r.LateNS > starts[worst].LateNS {
			worst = i
		}
	}
	if worst < 0 {
		return ""
	}
	w := starts[worst]
	return fmt.Sprintf("; %d of %d rows began over %s late, the latest row %s, %s after its planned start %s",
		late, len(starts), lateRowStart, w.Row, time.Duration(w.LateNS).Round(time.Millisecond), w.Planned.UTC().Format(time.RFC3339Nano))
}

func firstIndex(m *rundir.MergeInfo) int {
	if len(m.From) == 0 {
		return 0
	}
	return m.From[0].Index
}

// startSpreads lists how far apart the merged shards began each row under
// --start-at ("decode 3ms, prefill 12ms"; a repeated row's widest trial),
// or "" when the shards recorded no row starts: a row whose spread is
// past validity's alignment limit is invalid, and this shows how close
// the others came.
func startSpreads(man *rundir.Manifest) string {
	var out []string
	for i, r := range man.Rows {
		first := i == 0
		spread, ok := man.Merged.StartSpread(r.ID, 0, first)
		for k := 1; k <= r.Repeat; k++ {
			if d, tok := man.Merged.StartSpread(r.ID, k, first); tok && (!ok || d > spread) {
				spread, ok = d, true
			}
		}
		if ok {
			if spread >= time.Millisecond {
				spread = spread.Round(time.Millisecond)
			} else {
				spread = spread.Round(time.Microsecond) // "190µs", not "0s"
			}
			out = append(out, fmt.Sprintf("%s %v", r.ID, spread))
		}
	}
	return strings.Join(out, ", ")
}
