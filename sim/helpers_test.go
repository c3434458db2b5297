package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// request sends a POST with a JSON body and, when fault is not empty, an
// X-Sim-Fault header. It sets an Idempotency-Key, as a client of llama.cpp
// must, so that the transport retries a request sent on a connection the
// server was closing.
func request(t *testing.T, url, body, fault string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("test-%d", requestSeq.Add(1)))
	if fault != "" {
		req.Header.Set(FaultHeader, fault)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s (%s: %q): %v", url, FaultHeader, fault, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var requestSeq atomic.Uint64

// rawEvents reads an SSE body to its end and returns the data payloads, and
// the read error, if any. Unlike readEvents it tolerates a body cut short.
func rawEvents(body io.Reader) ([]string, error) {
	var events []string
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadString('\n')
		if payload, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
			events = append(events, payload)
		}
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
	}
}

// decodeMap decodes one JSON object, for checks on which keys are present.
func decodeMap(t *testing.T, payload string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatalf("decode %q: %v", payload, err)
	}
	return m
}

// syncBuffer is a Writer safe to read while the server writes to it.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *syncBuffer) writeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSuffix(b.buf.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// waitTruth polls until the ground truth holds n lines and decodes them: the
// server writes a line when the handler returns, which a client can see
// after the response has ended.
func waitTruth(t *testing.T, b *syncBuffer, n int) []truthRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(b.lines()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("ground truth has %d lines, want %d:\n%s", len(b.lines()), n, strings.Join(b.lines(), "\n"))
		}
		time.Sleep(2 * time.Millisecond)
	}
	var recs []truthRecord
	for _, l := range b.lines() {
		var r truthRecord
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("ground truth line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// contentOf returns the text a chunk carries, for chat or completions.
func contentOf(c chunk) string {
	if len(c.Choices) != 1 {
		return ""
	}
	if d := c.Choices[0].Delta; d != nil && d.Content != nil {
		return *d.Content
	}
	if c.Choices[0].Text != nil {
		return *c.Choices[0].Text
	}
	return ""
}

// scrape returns the /metrics text.
func scrape(t *testing.T, baseURL string) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(baseURL, "/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seriesValue returns the value of one series, named with its labels as
// /metrics writes them.
func seriesValue(t *testing.T, baseURL, series string) string {
	t.Helper()
	text := scrape(t, baseURL)
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("series %s missing from:\n%s", series, text)
	return ""
}
