package cheapsse

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/protocol"
)

// Stamps is what the raw drain client saw of one response.
type Stamps struct {
	ID     string
	Events []int64 // wall-clock arrival of each data line, Unix ns
}

// RawDrain is the minimal SSE client the benchmarks compare against: it
// sends the same request through the same transport, reads the body line
// by line, stamps each data line, and decodes nothing but the response id.
// It measures what any client must pay: HTTP, the socket reads, framing.
func RawDrain(ctx context.Context, hc *http.Client, url string, body []byte, keep bool) (Stamps, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Stamps{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return Stamps{}, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 32<<10)
	var st Stamps
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 6 && string(line[:6]) == "data: " {
			if keep {
				st.Events = append(st.Events, time.Now().UnixNano())
				if st.ID == "" {
					if i := bytes.Index(line, []byte(`"id":"`)); i >= 0 {
						rest := line[i+6:]
						if j := bytes.IndexByte(rest, '"'); j >= 0 {
							st.ID = string(rest[:j])
						}
					}
				}
			}
			if bytes.HasPrefix(line[6:], []byte("[DONE]")) {
				return st, nil
			}
		}
		if err != nil {
			return st, err
		}
	}
}

func StreamBody(outTokens int) []byte {
	return fmt.Appendf(nil, `{"messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`, outTokens)
}

// DrainThroughput runs users raw drain clients, each sending requests back
// to back, and returns output tokens per second; the first error stops it.
// They share an HTTP client made as the runner makes its own
// (protocol.NewHTTPClient), so the two differ only in what they do with
// the stream.
func DrainThroughput(url string, users, requests, outTokens int) (float64, error) {
	hc := protocol.NewHTTPClient(users)
	defer hc.CloseIdleConnections()
	body := StreamBody(outTokens)
	var next sync.Mutex
	left := requests
	start := time.Now()
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	for range users {
		wg.Go(func() {
			for {
				next.Lock()
				if left == 0 {
					next.Unlock()
					return
				}
				left--
				next.Unlock()
				if _, err := RawDrain(context.Background(), hc, url, body, false); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(requests*outTokens) / time.Since(start).Seconds(), firstErr
}
