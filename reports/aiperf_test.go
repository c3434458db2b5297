package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

func intp(i int) *int { return &i }

// TestAIPerfExport checks profile_export.jsonl record by record: the
// fields AIPerf's MetricRecordInfo requires, AIPerf's definitions of the
// metrics, errors and cancellations, and which requests are left out.
func TestAIPerfExport(t *testing.T) {
	const unix = int64(1_772_360_100_000_000_000)
	ok := &metrics.Record{ID: "r-ok", Row: "a", Stream: true, ScheduledNS: 1_000_000, StartNS: 1_500_000, StartUnixNS: unix,
		FirstByteNS: 2_000_000, FirstTokenNS: 40_000_000, FirstOutputNS: 50_000_000, LastTokenNS: 100_000_000, EndNS: 100_300_000,
		Status: 200, Events: []int64{40_000_000, 60_000_000, 100_000_000},
		// AIPerf counts with its tokenizer by default: the client's
		// counts, not the server's.
		InputTokens:  metrics.Tokens{Requested: 100, Server: intp(107), Client: 100},
		OutputTokens: metrics.Tokens{Requested: 4, Server: intp(3), Client: 4}}
	plain := &metrics.Record{ID: "r-plain", Row: "a", StartUnixNS: unix, EndNS: 80_000_000, Status: 200,
		InputTokens: metrics.Tokens{Client: 10}, OutputTokens: metrics.Tokens{Client: 5}}
	warm := &metrics.Record{ID: "r-warm", Row: "a", Warmup: true, StartUnixNS: unix, EndNS: 1}
	http := &metrics.Record{ID: "r-503", Row: "b", Stream: true, StartUnixNS: unix, EndNS: 3_000_000, Status: 503,
		Error: &metrics.Error{Class: metrics.ErrHTTP, Message: "HTTP 503: busy"}, InputTokens: metrics.Tokens{Client: 100}}
	cancel := &metrics.Record{ID: "r-cancel", Row: "b", Stream: true, StartUnixNS: unix, EndNS: 9_000_000,
		Error: &metrics.Error{Class: metrics.ErrCanceled, Message: "cancelled after 9 ms"}}
	records := map[string][]*metrics.Record{"a": {warm, ok, plain}, "b": {http, cancel}}
	in := &Input{
		Summary: &metrics.Summary{Rows: []metrics.RowSummary{
			{ID: "a", Status: metrics.RowComplete}, {ID: "b", Status: metrics.RowInterrupted},
			{ID: "c", Status: metrics.RowNotRun}, {ID: "d", Status: metrics.RowFailed},
		}},
		Records: func(row string, fn func(*metrics.Record) error) error {
			rs, found := records[row]
			if !found {
				return fmt.Errorf("read records: %w", fs.ErrNotExist)
			}
			for _, r := range rs {
				if err := fn(r); err != nil {
					return err
				}
			}
			return nil
		},
	}
	var b bytes.Buffer
	if err := WriteAIPerf(&b, in); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines; want 4 (no warmup, nothing for rows without records):\n%s", len(lines), b.String())
	}
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		md := m["metadata"].(map[string]any)
		for _, k := range []string{"session_num", "request_start_ns", "request_end_ns", "worker_id", "record_processor_id", "benchmark_phase"} {
			if md[k] == nil {
				t.Errorf("metadata lacks %s, which AIPerf requires: %s", k, l)
			}
		}
		if _, ok := m["metrics"].(map[string]any); !ok {
			t.Errorf("metrics is not an object, which AIPerf requires: %s", l)
		}
		got = append(got, m)
	}
	metric := func(i int, tag string) any {
		v, ok := got[i]["metrics"].(map[string]any)[tag].(map[string]any)
		if !ok {
			return nil
		}
		return v["value"]
	}
	unit := func(i int, tag string) string {
		return got[i]["metrics"].(map[string]any)[tag].(map[string]any)["unit"].(string)
	}
	near := func(name string, v any, want float64) {
		t.Helper()
		f, ok := v.(float64)
		if !ok || math.Abs(f-want) > 1e-9 {
			t.Errorf("%s = %v; want %v", name, v, want)
		}
	}

	md := got[0]["metadata"].(map[string]any)
	near("session_num", md["session_num"], 0)
	if md["x_request_id"] != "r-ok" || md["infermatrix_row"] != "a" || md["benchmark_phase"] != "profiling" {
		t.Errorf("metadata %v", md)
	}
	near("request_start_ns", md["request_start_ns"], float64(unix))
	near("request_end_ns", md["request_end_ns"], float64(unix+100_300_000))
	near("request_ack_ns", md["request_ack_ns"], float64(unix+2_000_000))
	near("credit_issued_ns", md["credit_issued_ns"], float64(unix-500_000))
	near("time_to_first_token", metric(0, "time_to_first_token"), 40)
	near("time_to_first_output_token", metric(0, "time_to_first_output_token"), 50)
	near("time_to_second_token", metric(0, "time_to_second_token"), 20)
	near("request_latency", metric(0, "request_latency"), 100)
	near("inter_token_latency", metric(0, "inter_token_latency"), 20) // (100 − 40) ÷ (4 − 1)
	near("output_token_throughput_per_user", metric(0, "output_token_throughput_per_user"), 50)
	near("input_sequence_length", metric(0, "input_sequence_length"), 100)
	near("output_sequence_length", metric(0, "output_sequence_length"), 4)
	if icl, _ := metric(0, "inter_chunk_latency").([]any); len(icl) != 2 || icl[0] != 20.0 || icl[1] != 40.0 {
		t.Errorf("inter_chunk_latency = %v; want [20 40]", metric(0, "inter_chunk_latency"))
	}
	if unit(0, "time_to_first_token") != "ms" || unit(0, "output_sequence_length") != "tokens" ||
		unit(0, "output_token_throughput_per_user") != "tokens/sec/user" {
		t.Error("units differ from AIPerf's display units")
	}
	if got[0]["error"] != nil {
		t.Errorf("error = %v; want null", got[0]["error"])
	}

	// Not streamed: a latency, no TTFT.
	near("request_latency", metric(1, "request_latency"), 80)
	if metric(1, "time_to_first_token") != nil || got[1]["metadata"].(map[string]any)["request_ack_ns"] != nil {
		t.Errorf("a non-streamed request has a TTFT or an ack: %s", lines[1])
	}

	e := got[2]["error"].(map[string]any)
	near("error code", e["code"], 503)
	if e["type"] != "http" || e["message"] != "HTTP 503: busy" {
		t.Errorf("error %v", e)
	}
	near("error_isl", metric(2, "error_isl"), 100)
	if len(got[2]["metrics"].(map[string]any)) != 1 {
		t.Errorf("a failed request has metrics besides error_isl: %s", lines[2])
	}

	md = got[3]["metadata"].(map[string]any)
	if md["was_cancelled"] != true {
		t.Errorf("a cancelled request is not marked: %s", lines[3])
	}
	near("cancellation_time_ns", md["cancellation_time_ns"], float64(unix+9_000_000))
	near("cancelled code", got[3]["error"].(map[string]any)["code"], 499)
	near("session_num", md["session_num"], 3)
}

// TestAIPerfExportUncountedOutput: a record whose output the client could
// not count (the request ended while a huge output was being counted)
// exports the server's count, or no length at all, never a zero that
// AIPerf would average in.
func TestAIPerfExportUncountedOutput(t *testing.T) {
	base := metrics.Record{ID: "r", Row: "a", Stream: true, EndNS: 100_000_000, Status: 200,
		FirstTokenNS: 10_000_000, Events: []int64{10_000_000, 100_000_000}}
	withServer := base
	withServer.OutputTokens = metrics.Tokens{Requested: 5000, Server: intp(5000), Uncounted: true}
	m := aiperfFromRecord(&withServer, 0).Metrics
	if v, ok := m["output_sequence_length"]; !ok || fmt.Sprint(v.Value) != "5000" {
		t.Errorf("output_sequence_length = %+v; want the server's 5000", m["output_sequence_length"])
	}
	if _, ok := m["inter_token_latency"]; !ok {
		t.Error("inter_token_latency missing although the server counted the output")
	}
	alone := base
	alone.OutputTokens = metrics.Tokens{Requested: 5000, Uncounted: true}
	m = aiperfFromRecord(&alone, 0).Metrics
	for _, k := range []string{"output_sequence_length", "output_token_count", "inter_token_latency", "output_token_throughput_per_user"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %+v for an output nobody counted; want it left out", k, v)
		}
	}
	if _, ok := m["request_latency"]; !ok {
		t.Error("request_latency missing: only the lengths are unknown")
	}
}
