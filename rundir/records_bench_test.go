package rundir

import (
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// benchRecord is a streamed request of 256 text events, as a load row
// writes hundreds of thousands of them.
func benchRecord() *metrics.Record {
	server := 256
	rec := &metrics.Record{ID: "r1a2b3c4-0-12345", Row: "t", Seq: 12345, URL: "http://127.0.0.1:8000/v1", Stream: true,
		ScheduledNS: 1_234_567_890, StartNS: 1_234_600_000, StartUnixNS: 1_790_000_000_123_456_789, ConnNS: 41_000, ConnReused: true,
		FirstByteNS: 900_000, FirstTokenNS: 1_000_000, FirstOutputNS: 1_000_000, LastTokenNS: 30_000_000, EndNS: 30_100_000,
		FirstChoiceNS: 1_000_000, LastChoiceNS: 30_000_000, UsageNS: 30_050_000, Status: 200, ResponseID: "chatcmpl-abc123", FinishReason: "length",
		InputTokens: metrics.Tokens{Requested: 16, Server: &server, Client: 16}, OutputTokens: metrics.Tokens{Requested: 256, Server: &server, Client: 256}}
	for i := range 256 {
		rec.Events = append(rec.Events, 1_000_000+int64(i)*113_537)
	}
	return rec
}

// BenchmarkRecordWrite measures encoding and appending one record to
// requests.jsonl, which every request pays on its way out (issue 16).
func BenchmarkRecordWrite(b *testing.B) {
	d, err := Create(b.TempDir(), "bench", "", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	w, err := d.CreateRecords("t")
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
}
