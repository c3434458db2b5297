package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// problemsOf parses an experiment against a real URL and returns its
// problems, flattened one a line.
func problemsOf(t *testing.T, server, rows string, opts Options) string {
	t.Helper()
	src := "apiVersion: infermatrix/v1\nname: t\nserver:\n  urls: [http://127.0.0.1:8000/v1]\n  model: m\n" + server +
		"defaults: {requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}\nrows:\n" + rows
	_, err := Parse("t.yaml", []byte(src), opts)
	if err == nil {
		return ""
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want Problems", err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, flat(p))
	}
	return strings.Join(out, "\n")
}

func TestHeaderEnvIsPlanned(t *testing.T) {
	src := "  api_key_env: OPENAI_API_KEY\n  headers: {X-Team: capacity, X-Max-Tokens: \"9\"}\n" +
		"  header_env: {X-Goog-Api-Key: GOOGLE_API_KEY, Ocp-Apim-Subscription-Key: AZURE_KEY, Private-Token: GITLAB_TOKEN}\n"
	if got := problemsOf(t, src, "  - id: a\n    headers: {X-Row: \"tab\\tok\"}\n", Options{}); got != "" {
		t.Fatalf("credentials from the environment were refused:\n%s", got)
	}
	p, err := Parse("t.yaml", []byte("apiVersion: infermatrix/v1\nname: t\nserver:\n  urls: [http://h/v1]\n  model: m\n"+src+
		"rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Server.HeaderEnv["X-Goog-Api-Key"] != "GOOGLE_API_KEY" || len(p.Server.HeaderEnv) != 3 {
		t.Errorf("HeaderEnv = %v", p.Server.HeaderEnv)
	}
}

func TestHeaderLimits(t *testing.T) {
	long := strings.Repeat("v", MaxHeaderValueBytes+1)
	longName := "X-" + strings.Repeat("n", MaxHeaderNameBytes)
	got := problemsOf(t, fmt.Sprintf("  headers: {X-Long: %s, %s: x}\n", long, longName), "  - id: a\n", Options{})
	for _, want := range []string{
		fmt.Sprintf("server.headers.X-Long: header value of %d bytes; at most %d", MaxHeaderValueBytes+1, MaxHeaderValueBytes),
		fmt.Sprintf("header name of %d bytes; at most %d", len(longName), MaxHeaderNameBytes),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}

	var many []string
	for i := range MaxHeaders + 1 {
		many = append(many, fmt.Sprintf("X-H%d: v", i))
	}
	got = problemsOf(t, "  headers: {"+strings.Join(many, ", ")+"}\n", "  - id: a\n", Options{})
	if want := fmt.Sprintf("server.headers: %d headers in server.headers and server.header_env; at most %d", MaxHeaders+1, MaxHeaders); !strings.Contains(got, want) || strings.Count(got, "\n") != 0 {
		t.Errorf("problems = %q; want only %q", got, want)
	}
	// The row's own headers count with the server's: all go on one request.
	got = problemsOf(t, "  headers: {"+strings.Join(many[:MaxHeaders-1], ", ")+"}\n  header_env: {X-E: E}\n",
		"  - id: a\n    headers: {X-Row: r}\n", Options{})
	if want := fmt.Sprintf("rows[0]: %d headers with server.headers and server.header_env; at most %d", MaxHeaders+1, MaxHeaders); !strings.Contains(got, want) {
		t.Errorf("problems = %q; want %q", got, want)
	}
}

// TestCredentialsAreNotEchoed: a problem about a credential says where it
// is and what to do, never what it is.
func TestCredentialsAreNotEchoed(t *testing.T) {
	got := problemsOf(t, "  api_key_env: sk-live-123456\n  headers: {X-Goog-Api-Key: AIza-live-123456, X-Auth-Token: \"tok-live-123456\\r\\n\"}\n"+
		"  header_env: {Private-Token: glpat-live-123456}\n", "  - id: a\n    headers: {Cookie: sess-live-123456}\n", Options{})
	if strings.Count(got, "\n") != 4 {
		t.Errorf("want 5 problems:\n%s", got)
	}
	if strings.Contains(got, "live-123456") {
		t.Errorf("a credential is echoed:\n%s", got)
	}
}

// TestTargetURLIsRedacted: --target with a password or a key in the query
// is refused, and the message shows the URL masked.
func TestTargetURLIsRedacted(t *testing.T) {
	for _, tc := range []struct{ target, shown string }{
		{"https://alice:hunter22@host/v1", `--target URL "https://***@host/v1" embeds credentials`},
		{"https://sk-zzz999@host/v1", `--target URL "https://***@host/v1" embeds credentials`},
		{"http://host/v1?api_key=sk-zzz999", `--target URL "http://host/v1?api_key=***" has a query or fragment`},
		{"http://alice:hunter22@host:port/v1", `invalid --target URL "http://***@host:port/v1": invalid port`},
		{"ftp://alice:hunter22@host/v1", `--target URL "ftp://***@host/v1" must start with http://`},
	} {
		_, err := Parse("t.yaml", []byte(header+"rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]\n"), Options{Target: tc.target})
		if err == nil {
			t.Errorf("--target %s was accepted", tc.target)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.shown) {
			t.Errorf("--target %s: %s\nwant %s", tc.target, msg, tc.shown)
		}
		for _, secret := range []string{"alice", "hunter22", "sk-zzz999"} {
			if strings.Contains(msg, secret) {
				t.Errorf("--target %s: the message holds %q: %s", tc.target, secret, msg)
			}
		}
	}
}
