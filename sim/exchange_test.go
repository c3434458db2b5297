package sim

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateExchanges = flag.Bool("update-exchanges", false, "rewrite the responses in testdata/exchanges from the simulator (review the diff against the sources each file names)")

// An exchange file (testdata/exchanges/PERSONALITY-NAME.txt) holds one
// request and the response the mimicked server gives it:
//
//	# comments: where the shape comes from
//	POST /v1/chat/completions
//	Header: value
//
//	request body
//	--- 200
//	response body, or the server-sent events of a stream
//
// The personality is the file name's prefix. Volatile values are
// normalised on both sides before comparing: response ids, creation times
// and llama.cpp's timings. Requests carry a "seed", so the text is fixed.
type exchange struct {
	comments, method, path string
	header                 http.Header
	body                   string
	status                 int
	response               string
}

func parseExchange(t *testing.T, file string) exchange {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	reqPart, respPart, ok := strings.Cut(string(b), "\n--- ")
	if !ok {
		t.Fatalf("%s: no '--- STATUS' line", file)
	}
	var ex exchange
	sc := bufio.NewScanner(strings.NewReader(reqPart))
	var comments []string
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "#") {
			comments = append(comments, line)
			continue
		} else {
			ex.method, ex.path, _ = strings.Cut(line, " ")
		}
		break
	}
	ex.comments = strings.Join(comments, "\n")
	ex.header = http.Header{}
	for sc.Scan() && sc.Text() != "" {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		ex.header.Add(k, v)
	}
	var body []string
	for sc.Scan() {
		body = append(body, sc.Text())
	}
	ex.body = strings.Join(body, "\n")
	statusLine, resp, _ := strings.Cut(respPart, "\n")
	if ex.status, err = strconv.Atoi(strings.TrimSpace(statusLine)); err != nil {
		t.Fatalf("%s: status %q: %v", file, statusLine, err)
	}
	ex.response = resp
	return ex
}

func (ex exchange) write(file string) error {
	var b strings.Builder
	b.WriteString(ex.comments + "\n")
	fmt.Fprintf(&b, "%s %s\n", ex.method, ex.path)
	for k, vs := range ex.header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintf(&b, "\n%s\n--- %d\n%s", ex.body, ex.status, ex.response)
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

var (
	volatileID      = regexp.MustCompile(`"id":"(chatcmpl-|cmpl-)[0-9a-f]+"`)
	volatileCreated = regexp.MustCompile(`"created":\d+`)
	volatileTimings = regexp.MustCompile(`"timings":\{[^}]*\}`)
)

func normaliseExchange(s string) string {
	s = volatileID.ReplaceAllString(s, `"id":"${1}ID"`)
	s = volatileCreated.ReplaceAllString(s, `"created":0`)
	return volatileTimings.ReplaceAllString(s, `"timings":{}`)
}

// TestExchanges replays every exchange in testdata/exchanges against a
// simulator of the file's personality and compares the answer byte for
// byte, after normalisation: status, body shape, key order, messages and
// the order and content of a stream's events.
func TestExchanges(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "exchanges", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no exchanges: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		pers, _, _ := strings.Cut(name, "-")
		if pers == "llamacpp" {
			pers = PersonalityLlamaCpp
		}
		t.Run(strings.TrimSuffix(name, ".txt"), func(t *testing.T) {
			inst := startSim(t, Config{Model: "sim-model", MaxModelLen: 64, Seed: 7, TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Personality: pers})
			ex := parseExchange(t, file)
			base := strings.TrimSuffix(inst.BaseURL, "/v1")
			req, err := http.NewRequest(ex.method, base+ex.path, strings.NewReader(ex.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = ex.header.Clone()
			req.Header.Set("Idempotency-Key", name) // llama.cpp closes after streams
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if *updateExchanges {
				ex.status, ex.response = resp.StatusCode, normaliseExchange(string(got))
				if err := ex.write(file); err != nil {
					t.Fatal(err)
				}
				return
			}
			if resp.StatusCode != ex.status {
				t.Errorf("status %d, want %d", resp.StatusCode, ex.status)
			}
			if g, w := normaliseExchange(string(got)), normaliseExchange(ex.response); g != w {
				t.Errorf("response differs from %s:\n got: %s\nwant: %s", file, g, w)
			}
		})
	}
}
