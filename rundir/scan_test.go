package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
		torn, err := scanRecords(strings.NewReader(text), "requests.jsonl", false, func(r *metrics.Record) error {
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
	_, err = scanRecords(bytes.NewReader([]byte(strings.Join(lines, "\n"))), "requests.jsonl", false, func(*metrics.Record) error {
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

// TestLeanRecordsAreRecordsButEvents: a lean read gives every field of
// every record as a full read does, but the events and their token counts.
func TestLeanRecordsAreRecordsButEvents(t *testing.T) {
	server, cached := 31, 7
	recs := []metrics.Record{
		{ID: "a", Row: "t", Seq: 0, Stream: true, StartNS: 5, FirstTokenNS: 40, EndNS: 90, Status: 200,
			InputTokens:  metrics.Tokens{Requested: 16, Server: &server, Client: 16},
			OutputTokens: metrics.Tokens{Requested: 3, Client: 3}, CachedTokens: &cached,
			Events: []int64{40, 60, 90}, EventTokens: []int32{1, 1, 1}, FinishReason: "length"},
		{ID: "b", Row: "t", Seq: 1, Error: &metrics.Error{Class: "http", Message: `503 {"x":1,"events":[1,2]}`}, Status: 503,
			Events: []int64{}, EventTokens: nil},
	}
	var text strings.Builder
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
		text.WriteByte('\n')
	}
	var got []metrics.Record
	if _, err := scanRecords(strings.NewReader(text.String()), "requests.jsonl", true, func(r *metrics.Record) error {
		got = append(got, *r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		want := recs[i]
		want.Events, want.EventTokens = nil, nil
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
}

// TestCutIntArray: a lean read cuts the events out of a line only where
// they are a plain array of integers, once; anything else is left for
// encoding/json to judge.
func TestCutIntArray(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"id":"a","events":[1,22,-3],"status":200}`, `{"id":"a","status":200}`},
		{`{"id":"a","events":[]}`, `{"id":"a"}`},
		{`{"id":"a","events":[7]}`, `{"id":"a"}`},
		{`{"id":"a"}`, `{"id":"a"}`},
		{`{"id":"a","events":[1.5]}`, `{"id":"a","events":[1.5]}`},
		{`{"id":"a","events":[1,,2]}`, `{"id":"a","events":[1,,2]}`},
		{`{"id":"a","events":[1,]}`, `{"id":"a","events":[1,]}`},
		{`{"id":"a","events":[-]}`, `{"id":"a","events":[-]}`},
		{`{"id":"a","events":["x"]}`, `{"id":"a","events":["x"]}`},
		{`{"id":"a","events":[1,2`, `{"id":"a","events":[1,2`}, // torn
		{`{"id":"a","events":[`, `{"id":"a","events":[`},       // torn
		{`{"id":"a","events":[1],"events":[2]}`, `{"id":"a","events":[1],"events":[2]}`},
		// In a string every quote is escaped: not the member.
		{`{"id":"a","error":{"message":"x\",\"events\":[1]"}}`, `{"id":"a","error":{"message":"x\",\"events\":[1]"}}`},
	}
	for _, c := range cases {
		if got := string(cutIntArray([]byte(c.in), eventsMember)); got != c.want {
			t.Errorf("cutIntArray(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
