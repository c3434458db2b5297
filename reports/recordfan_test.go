package reports

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// TestRecordFan: readers asking for different rows, in summary order or
// not, each get every record of every row they ask for, in order, while
// each row asked for in order is read from the source once.
func TestRecordFan(t *testing.T) {
	sizes := map[string]int{"a": 3, "b": fanBatchSize*2 + 7, "c": 0, "d": 5}
	var mu sync.Mutex
	reads := map[string]int{}
	src := func(row string, fn func(*metrics.Record) error) error {
		mu.Lock()
		reads[row]++
		mu.Unlock()
		n, ok := sizes[row]
		if !ok {
			return fmt.Errorf("read records: %w", fs.ErrNotExist)
		}
		var r metrics.Record // reused, as a source may
		for i := range n {
			r = metrics.Record{Row: row, Seq: int64(i)}
			if err := fn(&r); err != nil {
				return err
			}
		}
		if row == "d" {
			return errors.New("line 6 is not a record")
		}
		return nil
	}
	sum := &metrics.Summary{Rows: []metrics.RowSummary{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "gone"}}}
	asks := [][]string{
		{"a", "b", "c", "d"},
		{"b", "d", "gone"},
		{"a", "c", "a", "x"}, // a again, and a row the summary lacks: read on their own
	}
	fan := newRecordFan(src, sum, len(asks))
	got := make([]map[string][]int64, len(asks))
	errs := make([]map[string]error, len(asks))
	var wg sync.WaitGroup
	for i, rows := range asks {
		records, done := fan.reader(i)
		got[i], errs[i] = map[string][]int64{}, map[string]error{}
		wg.Go(func() {
			defer done()
			for k, row := range rows {
				key := fmt.Sprintf("%s#%d", row, k)
				errs[i][key] = records(row, func(r *metrics.Record) error {
					if r.Row != row {
						return fmt.Errorf("record of row %s in row %s", r.Row, row)
					}
					got[i][key] = append(got[i][key], r.Seq)
					return nil
				})
			}
		})
	}
	wg.Wait()
	for i, rows := range asks {
		for k, row := range rows {
			key := fmt.Sprintf("%s#%d", row, k)
			var want []int64
			for s := range sizes[row] {
				want = append(want, int64(s))
			}
			if !slices.Equal(got[i][key], want) {
				t.Errorf("reader %d, %s: %d records %v…; want %d", i, key, len(got[i][key]), head(got[i][key]), len(want))
			}
			err := errs[i][key]
			switch row {
			case "d":
				if err == nil || err.Error() != "line 6 is not a record" {
					t.Errorf("reader %d, %s: error %v; want the source's", i, key, err)
				}
			case "gone", "x":
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("reader %d, %s: error %v; want fs.ErrNotExist", i, key, err)
				}
			default:
				if err != nil {
					t.Errorf("reader %d, %s: %v", i, key, err)
				}
			}
		}
	}
	want := map[string]int{"a": 2, "b": 1, "c": 1, "d": 1, "gone": 1, "x": 1}
	if !maps.Equal(reads, want) {
		t.Errorf("source reads per row = %v; want %v", reads, want)
	}
}

// TestRecordFanReaderError: a reader whose callback fails gets its error,
// and the other readers of the row still get every record.
func TestRecordFanReaderError(t *testing.T) {
	src := func(row string, fn func(*metrics.Record) error) error {
		for i := range 1000 {
			if err := fn(&metrics.Record{Seq: int64(i)}); err != nil {
				return err
			}
		}
		return nil
	}
	fan := newRecordFan(src, &metrics.Summary{Rows: []metrics.RowSummary{{ID: "r"}}}, 2)
	stop := errors.New("stop")
	var seen [2]int
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		records, done := fan.reader(i)
		wg.Go(func() {
			defer done()
			errs[i] = records("r", func(*metrics.Record) error {
				seen[i]++
				if i == 0 && seen[i] == 10 {
					return stop
				}
				return nil
			})
		})
	}
	wg.Wait()
	if !errors.Is(errs[0], stop) || seen[0] != 10 {
		t.Errorf("failing reader: %d records, error %v; want 10 and its own error", seen[0], errs[0])
	}
	if errs[1] != nil || seen[1] != 1000 {
		t.Errorf("other reader: %d records, error %v; want 1000 and none", seen[1], errs[1])
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 5)] }
