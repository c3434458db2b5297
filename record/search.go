package record

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/search"
)

// SearchSentence states what a search row found in one sentence, in the
// words of every format: the load it holds, on what hardware (as the
// experiment declares it), and the load above it that fails with the rule
// and value that failed it; or that the bracket was not found, and why.
func SearchSentence(sa analysis.SearchAnalysis, hw schema.Hardware) string {
	amount := func(v float64) string {
		s := search.FormatValue(v)
		if sa.Vary == "concurrency" {
			if v == 1 {
				return s + " user"
			}
			return s + " users"
		}
		return s + " req/s"
	}
	row := func(id string) string {
		if id == "" {
			return ""
		}
		return " (`" + id + "`)"
	}
	head := "Search `" + sa.Row + "`: "
	on := ""
	if hw.GPU != "" {
		switch {
		case hw.Count > 1 && sa.PassingValue != nil:
			per := *sa.PassingValue / float64(hw.Count)
			per, _ = strconv.ParseFloat(strconv.FormatFloat(per, 'g', 3, 64), 64)
			on = fmt.Sprintf(" on %d× %s (%s per GPU)", hw.Count, hw.GPU, amount(per))
		default:
			on = " on one " + hw.GPU
		}
	}
	why := func() string {
		if sa.Failing == nil {
			return "does not pass"
		}
		return sa.Failing.Why
	}
	switch sa.Status {
	case analysis.NotRun:
		return head + "did not run."
	case string(search.MinFails):
		if sa.Failing != nil && sa.Failing.Invalid {
			return head + fmt.Sprintf("the minimum, %s%s, was %s: it counts as not passing, so no limit can be claimed.", amount(sa.Min), row(sa.FailingRow), why())
		}
		return head + fmt.Sprintf("the minimum, %s%s, already %s: the limit is below the range.", amount(sa.Min), row(sa.FailingRow), verb(why()))
	case string(search.AllPass):
		return head + fmt.Sprintf("holds the maximum, %s%s%s, under its rules: the limit is above the range.", amount(sa.Max), row(sa.PassingRow), on)
	case string(search.Bracketed):
		return head + fmt.Sprintf("holds %s%s%s under its rules; %s%s %s.", amount(*sa.PassingValue), row(sa.PassingRow), on,
			search.FormatValue(*sa.FailingValue), row(sa.FailingRow), verb(why()))
	}
	// Stopped: the run ended before the answer.
	s := head + fmt.Sprintf("stopped after %d probe%s, before its answer", len(sa.Probes), plural(len(sa.Probes)))
	if sa.PassingValue != nil {
		s += fmt.Sprintf("; holds at least %s%s", amount(*sa.PassingValue), row(sa.PassingRow))
	}
	if sa.FailingValue != nil {
		s += fmt.Sprintf("; %s%s %s", search.FormatValue(*sa.FailingValue), row(sa.FailingRow), verb(why()))
	}
	return s + "."
}

// verb turns an outcome's phrase ("fails slo: ...", "invalid (...)") into
// a predicate.
func verb(why string) string {
	switch {
	case strings.HasPrefix(why, "fails"), strings.HasPrefix(why, "does"):
		return why
	case strings.HasPrefix(why, "invalid"):
		return "was " + why + ", so it counts as not passing"
	}
	return "did not pass: " + why
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
