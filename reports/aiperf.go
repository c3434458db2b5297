package reports

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/infermatrix/infermatrix/metrics"
)

// AIPerfExport is the per-request export in NVIDIA AIPerf's shape
// (report.formats: aiperf), so that scripts and notebooks written for
// AIPerf's profile_export.jsonl read an infermatrix run unchanged.
const AIPerfExport = "profile_export.jsonl"

// aiperfRecord is one line of profile_export.jsonl: AIPerf's
// MetricRecordInfo, {metadata, metrics, error}.
type aiperfRecord struct {
	Metadata aiperfMetadata         `json:"metadata"`
	Metrics  map[string]aiperfValue `json:"metrics"`
	Error    *aiperfError           `json:"error"`
}

// aiperfMetadata is AIPerf's MetricRecordMetadata. Times are wall-clock
// epoch nanoseconds, as AIPerf's time.time_ns().
type aiperfMetadata struct {
	// SessionNum numbers the exported requests from 0 across the file,
	// as AIPerf numbers a single-turn benchmark's requests.
	SessionNum int `json:"session_num"`
	// XRequestID is the record's id, which infermatrix sent as the
	// X-Request-Id header, as AIPerf does. A single-turn request is its
	// own session, so it is the correlation id too.
	XRequestID     string  `json:"x_request_id"`
	XCorrelationID string  `json:"x_correlation_id"`
	ConversationID *string `json:"conversation_id"`
	TurnIndex      int     `json:"turn_index"`
	// CreditIssuedNS is when the load pattern wanted the request sent
	// (the record's scheduled time), the moment AIPerf's rate limiter
	// issues a credit.
	CreditIssuedNS int64 `json:"credit_issued_ns"`
	RequestStartNS int64 `json:"request_start_ns"`
	// RequestAckNS is the first byte of the response headers, for
	// streams only, as AIPerf has it.
	RequestAckNS       *int64 `json:"request_ack_ns"`
	RequestEndNS       int64  `json:"request_end_ns"`
	WorkerID           string `json:"worker_id"`
	RecordProcessorID  string `json:"record_processor_id"`
	BenchmarkPhase     string `json:"benchmark_phase"`
	WasCancelled       bool   `json:"was_cancelled"`
	CancellationTimeNS *int64 `json:"cancellation_time_ns"`
	// Row is infermatrix's addition: the row the request belongs to, since
	// one file holds every row. AIPerf's models accept extra fields.
	Row string `json:"infermatrix_row"`
}

// aiperfValue is AIPerf's MetricValue: a value in display units.
type aiperfValue struct {
	Value any    `json:"value"`
	Unit  string `json:"unit"`
}

// aiperfError is AIPerf's ErrorDetails.
type aiperfError struct {
	Code    *int   `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// aiperfWorker names the producer where AIPerf names its worker and
// record processor.
const aiperfWorker = "infermatrix"

// WriteAIPerf writes every measured request of the run, row by row in plan
// order, as AIPerf's profile_export.jsonl records. Warmup requests are left
// out, as AIPerf exports only its profiling phase. The metrics follow
// AIPerf's definitions with its default options, whatever the run's
// report.semantics (docs/metrics.md, "AIPerf"): token counts are the
// client tokenizer's, inter_token_latency is (request_latency −
// time_to_first_token) ÷ (output_sequence_length − 1), and
// inter_chunk_latency lists the gaps between text events.
func WriteAIPerf(w io.Writer, in *Input) error {
	if in.Records == nil {
		return errors.New("the per-request records are not at hand")
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	for i := range in.Summary.Rows {
		rs := &in.Summary.Rows[i]
		if rs.Status == metrics.RowNotRun {
			continue
		}
		err := in.Records(rs.ID, func(r *metrics.Record) error {
			if r.Warmup {
				return nil
			}
			rec := aiperfFromRecord(r, n)
			n++
			return enc.Encode(rec)
		})
		// A row the tool failed on before it began has no records.
		if errors.Is(err, fs.ErrNotExist) && rs.Status == metrics.RowFailed {
			continue
		}
		if err != nil {
			return fmt.Errorf("row %s: %w", rs.ID, err)
		}
	}
	return bw.Flush()
}

// aiperfFromRecord converts one record.
func aiperfFromRecord(r *metrics.Record, session int) aiperfRecord {
	start := r.StartUnixNS
	md := aiperfMetadata{
		SessionNum: session, XRequestID: r.ID, XCorrelationID: r.ID,
		CreditIssuedNS: start - (r.StartNS - r.ScheduledNS),
		RequestStartNS: start, RequestEndNS: start + r.EndNS,
		WorkerID: aiperfWorker, RecordProcessorID: aiperfWorker,
		BenchmarkPhase: "profiling", Row: r.Row,
	}
	if r.Turn != nil {
		// A conversation's turns are one AIPerf session: its correlation
		// id and conversation id are the conversation's.
		id := r.ConversationID
		md.XCorrelationID, md.ConversationID, md.TurnIndex = id, &id, *r.Turn
	}
	if r.Stream && r.FirstByteNS > 0 {
		ack := start + r.FirstByteNS
		md.RequestAckNS = &ack
	}
	out := aiperfRecord{Metadata: md, Metrics: map[string]aiperfValue{}}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	tokens := func(n int) aiperfValue { return aiperfValue{n, "tokens"} }

	if !r.OK() {
		e := &aiperfError{Type: r.Error.Class, Message: r.Error.Message}
		switch {
		case r.Status != 0:
			code := r.Status
			e.Code = &code
		case r.Canceled():
			code := 499 // AIPerf's code for a cancelled request
			e.Code = &code
		}
		if r.Canceled() {
			out.Metadata.WasCancelled = true
			end := start + r.EndNS
			out.Metadata.CancellationTimeNS = &end
		}
		if isl := r.InputTokens.Client; isl > 0 {
			out.Metrics["error_isl"] = tokens(isl)
		}
		out.Error = e
		return out
	}

	if isl := r.InputTokens.Client; isl > 0 {
		out.Metrics["input_sequence_length"] = tokens(isl)
	}
	// A record whose output the client could not count (the request
	// ended while a huge output was being counted) takes the server's
	// count, as the aiperf semantics do; without one the lengths, and the
	// ITL they divide, are left out rather than written as zero.
	osl, known := r.OutputTokens.Client, true
	if r.OutputTokens.Uncounted {
		known = r.OutputTokens.Server != nil
		if known {
			osl = *r.OutputTokens.Server
		}
	}
	if known {
		out.Metrics["output_sequence_length"] = tokens(osl)
		out.Metrics["output_token_count"] = tokens(osl)
	}
	latency := r.EndToEndNS()
	out.Metrics["request_latency"] = aiperfValue{ms(latency), "ms"}
	if !r.Stream {
		return out
	}
	if r.FirstTokenNS > 0 {
		out.Metrics["time_to_first_token"] = aiperfValue{ms(r.FirstTokenNS), "ms"}
	}
	if r.FirstOutputNS > 0 {
		out.Metrics["time_to_first_output_token"] = aiperfValue{ms(r.FirstOutputNS), "ms"}
	}
	if len(r.Events) >= 2 {
		out.Metrics["time_to_second_token"] = aiperfValue{ms(r.Events[1] - r.Events[0]), "ms"}
		gaps := make([]float64, len(r.Events)-1)
		for i := range gaps {
			gaps[i] = ms(r.Events[i+1] - r.Events[i])
		}
		out.Metrics["inter_chunk_latency"] = aiperfValue{gaps, "ms"}
	}
	if known && r.FirstTokenNS > 0 && osl >= 2 {
		itl := ms(latency-r.FirstTokenNS) / float64(osl-1)
		out.Metrics["inter_token_latency"] = aiperfValue{itl, "ms"}
		if itl > 0 {
			out.Metrics["output_token_throughput_per_user"] = aiperfValue{1000 / itl, "tokens/sec/user"}
		}
	}
	return out
}
