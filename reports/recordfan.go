package reports

import (
	"sync"

	"github.com/infermatrix/infermatrix/metrics"
)

// recordFan reads each row's records once for several readers: the plots,
// the spreadsheet and the AIPerf export each stream every record, and
// decoding a record's JSON is most of what they cost. A million-request
// row read three times took three times the CPU of the one read it needs
// (issue 16).
//
// Each reader runs in a goroutine of its own and asks for rows in summary
// order, each once, as they all do. The fan waits until every reader still
// running is waiting for a row, then reads the first of the rows asked for
// and hands its records, in batches, to every reader that asked for it;
// readers waiting for a later row wait on. A reader that asks for a row
// out of that order, or one the summary does not have, reads it on its
// own: the fan makes fewer passes, it never changes what a reader gets.
//
// The readers share the decoded records, so none may change one, and none
// may keep a pointer to one past its callback.
type recordFan struct {
	src   func(string, func(*metrics.Record) error) error
	order map[string]int // a row's position in the summary

	mu      sync.Mutex
	readers []*fanReader
	busy    bool // a row is being read
}

// fanReader is one reader's place in the fan.
type fanReader struct {
	done bool
	last int // position of the last row it asked for; -1 before any
	// row and ch are set while it waits for a row.
	row string
	ch  chan fanBatch
}

// fanBatch is a run of records of a row, or the error that ended it.
type fanBatch struct {
	recs []metrics.Record
	err  error
}

// fanBatchSize is how many records a batch holds: enough that handing
// them over costs little beside decoding them, few enough that the
// batches in flight are a few megabytes.
const fanBatchSize = 256

// newRecordFan makes a fan over src, with n readers, for the rows of sum.
func newRecordFan(src func(string, func(*metrics.Record) error) error, sum *metrics.Summary, n int) *recordFan {
	f := &recordFan{src: src, order: map[string]int{}}
	if sum != nil {
		for i, rs := range sum.Rows {
			if _, dup := f.order[rs.ID]; !dup {
				f.order[rs.ID] = i
			}
		}
	}
	for range n {
		f.readers = append(f.readers, &fanReader{last: -1})
	}
	return f
}

// reader returns the records function of reader i. Its done function must
// be called when the reader will ask for no more rows, or the others wait
// for it.
func (f *recordFan) reader(i int) (records func(string, func(*metrics.Record) error) error, done func()) {
	rd := f.readers[i]
	var once sync.Once
	return func(row string, fn func(*metrics.Record) error) error {
			return f.read(rd, row, fn)
		}, func() {
			once.Do(func() {
				f.mu.Lock()
				rd.done = true
				f.serveLocked()
				f.mu.Unlock()
			})
		}
}

func (f *recordFan) read(rd *fanReader, row string, fn func(*metrics.Record) error) error {
	f.mu.Lock()
	pos, ok := f.order[row]
	if !ok || pos <= rd.last || rd.done {
		f.mu.Unlock()
		return f.src(row, fn)
	}
	ch := make(chan fanBatch, 4)
	rd.last, rd.row, rd.ch = pos, row, ch
	f.serveLocked()
	f.mu.Unlock()
	var ferr error
	for b := range ch {
		if b.err != nil {
			if ferr == nil {
				ferr = b.err
			}
			continue
		}
		for i := range b.recs {
			if ferr != nil {
				break // keep taking the batches, so the row's reading ends
			}
			ferr = fn(&b.recs[i])
		}
	}
	return ferr
}

// serveLocked starts reading a row if every reader still running waits
// for one and none is being read. f.mu is held.
func (f *recordFan) serveLocked() {
	if f.busy {
		return
	}
	first := -1
	for _, rd := range f.readers {
		switch {
		case rd.done:
			continue
		case rd.ch == nil:
			return // busy with something else: it may yet ask for an earlier row
		case first < 0 || f.order[rd.row] < first:
			first = f.order[rd.row]
		}
	}
	if first < 0 {
		return
	}
	var row string
	var chans []chan fanBatch
	for _, rd := range f.readers {
		if !rd.done && rd.ch != nil && f.order[rd.row] == first {
			row = rd.row
			chans = append(chans, rd.ch)
			rd.row, rd.ch = "", nil
		}
	}
	f.busy = true
	go f.serve(row, chans)
}

// serve reads a row's records once and hands them to chans, then closes
// them and lets the next row be read.
func (f *recordFan) serve(row string, chans []chan fanBatch) {
	batch := make([]metrics.Record, 0, fanBatchSize)
	send := func(b fanBatch) {
		for _, ch := range chans {
			ch <- b
		}
	}
	err := f.src(row, func(r *metrics.Record) error {
		// A copy: a source may reuse the record it hands over.
		batch = append(batch, *r)
		if len(batch) == fanBatchSize {
			send(fanBatch{recs: batch})
			batch = make([]metrics.Record, 0, fanBatchSize)
		}
		return nil
	})
	if len(batch) > 0 {
		send(fanBatch{recs: batch})
	}
	if err != nil {
		send(fanBatch{err: err})
	}
	for _, ch := range chans {
		close(ch)
	}
	f.mu.Lock()
	f.busy = false
	f.serveLocked()
	f.mu.Unlock()
}
