package reports

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// turnsIntro says what the per-turn tables show, in both reports.
const turnsIntro = "Each conversation's turn k carries the turns before it, so its prompt grows with the history; a server whose prefix cache holds the history serves that growth from the cache, and the turn's TTFT stays near the first turn's. TTFT and ITL in ms, as p50 / p95 / p99 over the turn's successful measured requests (docs/metrics.md)."

// turnHeader heads both reports' per-turn tables.
var turnHeader = []string{"Turn", "OK", "Input tokens mean (max)", "Cached tokens mean", "Cache hit", "TTFT", "ITL"}

// conversationText describes a conversation row's turns after its input
// length in the workload matrix: "; conversations of 4 turns, +64 per turn,
// 2s think"; empty for other rows.
func conversationText(r *schema.PlannedRow) string {
	c := r.Conversation
	if c == nil {
		return ""
	}
	s := "; conversations of "
	if c.Turns > 0 {
		s += fmt.Sprintf("%d turns", c.Turns)
	} else {
		s += "the file's turns"
	}
	if u := c.User.String(); u != "—" {
		s += ", +" + u + " per turn"
	}
	if c.ThinkTime > 0 {
		s += ", " + c.ThinkTime.String() + " think"
	}
	return s
}

// conversationRows are the rows split by turn, in summary order.
func conversationRows(sum *metrics.Summary) []*metrics.RowSummary {
	return rowsWhere(sum, func(rs *metrics.RowSummary) bool { return len(rs.ByTurn) > 0 })
}

// turnCells are one turn's line. Cached tokens the server did not report
// are a dash, not a zero.
func turnCells(t *metrics.TurnSummary) []string {
	in := "—"
	if t.InputTokens.Count > 0 {
		in = fmt.Sprintf("%s (%s)", numfmt.Num(t.InputTokens.Mean), numfmt.Num(t.InputTokens.Max))
	}
	cached, hit := "—", "—"
	if t.CachedTokens != nil {
		cached = numfmt.Num(t.CachedTokens.Mean)
	}
	if t.CacheHitRatio != nil {
		hit = fmt.Sprintf("%.1f%%", 100**t.CacheHitRatio)
	}
	return []string{strconv.Itoa(t.Turn), strconv.Itoa(t.Requests), in, cached, hit, triple(t.TTFT), triple(t.ITL)}
}

// turns writes decision.md's per-turn split of conversation rows; a run
// without them has no such section.
func (m *mdWriter) turns(sum *metrics.Summary) {
	rows := conversationRows(sum)
	if len(rows) == 0 {
		return
	}
	m.printf("## Conversations by turn\n\n%s\n\n", turnsIntro)
	for _, rs := range rows {
		m.printf("### %s\n\n", codeSpan(rs.ID))
		m.printf("| %s |\n|%s\n", strings.Join(turnHeader, " | "), strings.Repeat("---|", len(turnHeader)))
		for i := range rs.ByTurn {
			c := turnCells(&rs.ByTurn[i])
			for j := range c {
				c[j] = cell(c[j])
			}
			m.printf("| %s |\n", strings.Join(c, " | "))
		}
		m.printf("\n")
	}
}

// htmlTurns is report.html's per-turn table of one conversation row;
// html/template escapes every cell.
type htmlTurns struct {
	ID     string
	Intro  string
	Header []string
	Rows   [][]string
}

func htmlTurnsOf(sum *metrics.Summary) []htmlTurns {
	var out []htmlTurns
	for _, rs := range conversationRows(sum) {
		h := htmlTurns{ID: rs.ID, Intro: turnsIntro, Header: turnHeader}
		for i := range rs.ByTurn {
			h.Rows = append(h.Rows, turnCells(&rs.ByTurn[i]))
		}
		out = append(out, h)
	}
	return out
}
