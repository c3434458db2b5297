package validity

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// trials checks a repeated row. Each trial is its own measurement, with
// its own warmup, window, load and client, so every check that concerns
// the measurement is made on each trial alone, and the row is valid only
// if every trial is: a figure pooled over a trial the client could not
// keep up in, or one whose server saw half the load, is not the row's.
// The samples check is made once, on the pooled distributions, since the
// rules judge the pooled percentiles (a p99 over 5 trials of 100 requests
// rests on 500 samples); the intervals rest on the trials, whose number
// the row sets. A failed check says which trial it failed in.
func trials(in Input) Verdict {
	rs := in.Summary
	v := check(in, checkPooled)
	noted := map[string][]string{}
	var order []string
	for i := range rs.Trials {
		t := &rs.Trials[i]
		k := t.Trial
		if k == 0 {
			k = i + 1
		}
		tv := check(Input{Row: in.Row, Summary: t, Rules: in.Rules, Config: in.Config}, checkTrial)
		if !tv.Valid {
			v.Valid = false
		}
		for _, r := range tv.Reasons {
			r.Message = fmt.Sprintf("trial %d: %s", k, r.Message)
			v.Reasons = append(v.Reasons, r)
		}
		for _, n := range tv.Notes {
			if _, seen := noted[n]; !seen {
				order = append(order, n)
			}
			noted[n] = append(noted[n], strconv.Itoa(k))
		}
	}
	// A note every trial shares is said once.
	for _, n := range order {
		ks := noted[n]
		switch {
		case len(ks) == len(rs.Trials):
		case len(ks) == 1:
			n = "trial " + ks[0] + ": " + n
		default:
			n = "trials " + strings.Join(ks, ", ") + ": " + n
		}
		if !slices.Contains(v.Notes, n) {
			v.Notes = append(v.Notes, n)
		}
	}
	return v
}

// Trial checks one trial of a repeated row alone, as trials does for each:
// every check but the samples, which are judged on the pooled row.
func Trial(in Input) Verdict { return check(in, checkTrial) }
