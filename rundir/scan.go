package rundir

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/infermatrix/infermatrix/metrics"
)

// scanBatchLines is how many lines a decoding worker takes at a time.
const scanBatchLines = 256

// scanMaxWorkers bounds the decoding workers, and with them the batches in
// flight (a few megabytes each at most).
const scanMaxWorkers = 4

// scanBatch is a run of lines of a records file, decoded by a worker.
type scanBatch struct {
	first int // line number of lines[0]
	lines [][]byte
	recs  []metrics.Record // the lines decoded, up to bad
	bad   int              // index of the first line that is not a record; -1 for none
	jerr  error
	// lean leaves Events and EventTokens out (see ReadRecordsLean).
	lean  bool
	ready chan struct{}
}

// decode decodes the batch's lines up to the first that is not a record.
func (b *scanBatch) decode() {
	b.recs = make([]metrics.Record, len(b.lines))
	b.bad = -1
	var cut []byte
	for i, l := range b.lines {
		l = bytes.TrimSpace(l)
		var err error
		if b.lean {
			cut = append(cut[:0], l...)
			cut = cutIntArray(cut, eventsMember)
			cut = cutIntArray(cut, eventTokensMember)
			var lr leanRecord
			err = json.Unmarshal(cut, &lr)
			b.recs[i] = lr.Record
		} else {
			err = json.Unmarshal(l, &b.recs[i])
		}
		if err != nil {
			b.recs, b.bad, b.jerr = b.recs[:i], i, err
			break
		}
	}
	close(b.ready)
}

// leanRecord decodes a record but its events and their token counts: its
// own fields of those names hide the Record's (encoding/json takes the
// shallower of two fields of one name), and skipping a value is a
// fraction of decoding its numbers.
type leanRecord struct {
	metrics.Record
	Events      skipValue `json:"events"`
	EventTokens skipValue `json:"event_tokens"`
}

// The members cutIntArray takes out of a line read lean.
var (
	eventsMember      = []byte(`,"events":[`)
	eventTokensMember = []byte(`,"event_tokens":[`)
)

// cutIntArray removes from line, in place, the member that member opens
// (`,"name":[`) when its value is a plain array of integers, as the
// record writer writes Events and EventTokens, and returns what is left.
// encoding/json checks and scans every byte of a line even to skip a
// value, and these arrays, a number per token, are most of a streamed
// record's bytes; cutting them costs one search.
//
// Where the member is absent, appears twice or is not such an array, line
// is returned as it is, and leanRecord skips it the slow way. A quote in
// member is never escaped, so it cannot be found inside a string of the
// line, and removing a well-formed member keeps a record a record.
func cutIntArray(line, member []byte) []byte {
	i := bytes.Index(line, member)
	if i < 0 {
		return line
	}
	j := i + len(member)
	if j == len(line) {
		return line
	}
	if line[j] != ']' { // not empty: integers, one comma between each two
		for {
			if j < len(line) && line[j] == '-' {
				j++
			}
			d := j
			for j < len(line) && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j == d || j == len(line) {
				return line
			}
			if line[j] != ',' {
				break
			}
			j++
		}
	}
	if line[j] != ']' || bytes.Contains(line[j:], member) {
		return line
	}
	return append(line[:i], line[j+1:]...)
}

// skipValue is a JSON value read and thrown away.
type skipValue struct{}

func (skipValue) UnmarshalJSON([]byte) error { return nil }

// scanRecords reads a records file as ScanRecords describes, decoding its
// lines on several cores and handing the records to fn in file order:
// decoding JSON is most of what reading a million records costs, and a
// report reads them after the row, when the cores are free.
func scanRecords(r io.Reader, path string, lean bool, fn func(*metrics.Record) error) (torn int, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	workers := min(scanMaxWorkers, max(1, runtime.GOMAXPROCS(0)))
	order := make(chan *scanBatch, 2*workers) // in file order, for fn
	work := make(chan *scanBatch, 2*workers)  // for the workers
	stop := make(chan struct{})
	defer close(stop)
	var readErr error // set before order is closed
	go func() {
		defer close(work)
		defer close(order)
		line := 1
		for eof := false; !eof; {
			b := &scanBatch{first: line, ready: make(chan struct{}), lean: lean}
			for len(b.lines) < scanBatchLines {
				l, err := br.ReadBytes('\n')
				if len(l) > 0 {
					b.lines = append(b.lines, l)
					line++
				}
				if err != nil {
					if !errors.Is(err, io.EOF) {
						readErr = err
					}
					eof = true
					break
				}
			}
			if len(b.lines) == 0 {
				return
			}
			select {
			case order <- b:
			case <-stop:
				return
			}
			select {
			case work <- b:
			case <-stop:
				return
			}
		}
	}()
	for range workers {
		go func() {
			for b := range work {
				b.decode()
			}
		}()
	}
	for b := range order {
		<-b.ready
		for i := range b.recs {
			if err := fn(&b.recs[i]); err != nil {
				return 0, err
			}
		}
		if b.bad >= 0 {
			n := b.first + b.bad
			if l := b.lines[b.bad]; l[len(l)-1] != '\n' {
				return n, nil // a torn final write
			}
			return 0, fmt.Errorf("read records: %s: line %d is not a record (%w); only the last line can be cut short by a killed run, so the file was edited or damaged",
				path, n, b.jerr)
		}
	}
	if readErr != nil {
		return 0, fmt.Errorf("read records: %w", readErr)
	}
	return 0, nil
}
