package rundir

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// recordLines is n records, one a line, with seq numbers 0 … n-1.
func recordLines(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"id":"r-%d","row":"t","seq":%d,"status":200,"events":[1,2,%d]}`, i, i, i)
	}
	return lines
}

// TestScanRecordsOrderAndDamage: records decoded on several cores reach
// the callback in file order, across many batches; a bad line far into
// the file is an error naming it, after every record before it; a torn
// last line is skipped and named.
func TestScanRecordsOrderAndDamage(t *testing.T) {
	const n = scanBatchLines*scanMaxWorkers*3 + 17
	lines := recordLines(n)
	scan := func(text string) ([]int64, int, error) {
		var seqs []int64
		torn, err := scanRecords(strings.NewReader(text), "requests.jsonl", func(r *metrics.Record) error {
			if len(r.Events) != 3 || r.Events[2] != r.Seq {
				return fmt.Errorf("record %d has events %v", r.Seq, r.Events)
			}
			seqs = append(seqs, r.Seq)
			return nil
		})
		return seqs, torn, err
	}
	inOrder := func(seqs []int64, want int) bool {
		if len(seqs) != want {
			return false
		}
		for i, s := range seqs {
			if s != int64(i) {
				return false
			}
		}
		return true
	}

	seqs, torn, err := scan(strings.Join(lines, "\n") + "\n")
	if err != nil || torn != 0 || !inOrder(seqs, n) {
		t.Errorf("whole file: %d records in order %v, torn %d, %v; want %d, 0, nil", len(seqs), inOrder(seqs, len(seqs)), torn, err, n)
	}

	bad := 2*scanBatchLines + 40 // line bad+1
	damaged := append([]string(nil), lines...)
	damaged[bad] = `{"id":"r-x",`
	seqs, torn, err = scan(strings.Join(damaged, "\n") + "\n")
	if err == nil || torn != 0 || !strings.Contains(err.Error(), fmt.Sprintf("line %d is not a record", bad+1)) || !inOrder(seqs, bad) {
		t.Errorf("bad line %d: %d records, torn %d, %v; want the %d before it and an error naming it", bad+1, len(seqs), torn, err, bad)
	}

	seqs, torn, err = scan(strings.Join(lines, "\n") + "\n" + `{"id":"r-cut","se`)
	if err != nil || torn != n+1 || !inOrder(seqs, n) {
		t.Errorf("torn last line: %d records, torn %d, %v; want %d, line %d, nil", len(seqs), torn, err, n, n+1)
	}

	// The callback's error stops the scan.
	stop := errors.New("stop")
	calls := 0
	_, err = scanRecords(bytes.NewReader([]byte(strings.Join(lines, "\n"))), "requests.jsonl", func(*metrics.Record) error {
		calls++
		if calls == 300 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 300 {
		t.Errorf("callback error: %d calls, %v; want 300 and its error", calls, err)
	}
}
