package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestSecretName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		// Credential headers from the issue, in the letter case users write.
		{"Authorization", true},
		{"proxy-authorization", true},
		{"Cookie", true},
		{"X-API-Key", true},
		{"api-key", true},
		{"X-Goog-Api-Key", true},
		{"Ocp-Apim-Subscription-Key", true},
		{"X-Auth-Token", true},
		{"Private-Token", true},
		{"X-Amz-Security-Token", true},
		{"X-Amz-Signature", true},
		{"X-Session-Id", true},
		{"X-Client-Secret", true},
		{"X-Password", true},
		{"X-Passwd", true},
		{"X-Credential", true},
		// Engine flags that hold a credential.
		{"api-key", true},
		{"hf_token", true},
		{"ssl-keyfile", true},
		// Names that are not credentials keep their values.
		{"X-Team", false},
		{"X-Max-Tokens", false},
		{"max-num-batched-tokens", false},
		{"tokenizer", false},
		{"tokenizer-mode", false},
		{"max-num-seqs", false},
		{"Content-Type", false},
		// A name with both words is still a credential.
		{"X-Tokens-Secret", true},
		{"X-Auth-Tokens", true},
	} {
		if got := SecretName(tc.name); got != tc.want {
			t.Errorf("SecretName(%q) = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"},
		// The user name is masked too: tokens are often passed as one.
		{"https://user:pw@host/v1", "https://***@host/v1"},
		{"https://sk-abc123@host/v1", "https://***@host/v1"},
		{"http://host/v1?api_key=sk-abc&x=1", "http://host/v1?api_key=***&x=***"},
		{"http://host/v1?sk-abc", "http://host/v1?***"},
		{"http://host/v1#tok", "http://host/v1#***"},
		{"http://u:p@host/v1?key=k#f", "http://***@host/v1?key=***#***"},
		// url.Parse rejects these; they are masked by position.
		{"http://user:p%zz@host/v1", "http://***@host/v1"},
		{"http://us er:pw@ho st/v1?key=a b", "http://***@ho st/v1?key=***"},
		{"not a url", "not a url"},
		{"host:8000/v1?api_key=sk-1", "host:8000/v1?api_key=***"},
	} {
		got := URL(tc.in)
		if got != tc.want {
			t.Errorf("URL(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLSecretsScrubParseErrors(t *testing.T) {
	// url.Parse's error quotes the URL; the parts URL masks must go from
	// its message too.
	raw := "http://user:hunter22@host:bad/v1?key=sk-zzz"
	msg := fmt.Sprintf("parse %q: invalid port", raw)
	got := URLSecrets(raw).String(msg)
	for _, s := range []string{"hunter22", "sk-zzz"} {
		if strings.Contains(got, s) {
			t.Errorf("%q still holds %q", got, s)
		}
	}
}

func TestHeadersAndFlags(t *testing.T) {
	h := Headers(map[string]string{"X-Goog-Api-Key": "AIza-1", "X-Team": "capacity"})
	if h["X-Goog-Api-Key"] != Mask || h["X-Team"] != "capacity" {
		t.Errorf("Headers = %v", h)
	}
	if Headers(nil) != nil {
		t.Error("Headers(nil) is not nil: omitempty would write {}")
	}
	f := Flags(map[string]any{
		"api-key":                "sk-1",
		"max-num-batched-tokens": 8192,
		"hf-endpoint":            "https://u:p@hub.example/x?token=t",
		"nested":                 map[string]any{"hf_token": "hf-1", "list": []any{"http://a:b@c/"}},
	})
	if f["api-key"] != Mask || f["max-num-batched-tokens"] != 8192 || f["hf-endpoint"] != "https://***@hub.example/x?token=***" {
		t.Errorf("Flags = %v", f)
	}
	n := f["nested"].(map[string]any)
	if n["hf_token"] != Mask || n["list"].([]any)[0] != "http://***@c/" {
		t.Errorf("nested flags = %v", n)
	}
}

func TestArgs(t *testing.T) {
	got := Args([]string{"infermatrix", "run", "x.yaml", "--target", "https://u:p@h/v1", "--target=http://h/v1?key=k"})
	want := "infermatrix run x.yaml --target https://***@h/v1 --target=http://h/v1?key=***"
	if strings.Join(got, " ") != want {
		t.Errorf("Args = %q; want %q", strings.Join(got, " "), want)
	}
}

func TestSecrets(t *testing.T) {
	s := NewSecrets("SEKRIT-<abc>&1", "ab", "")
	if s.Empty() {
		t.Fatal("no secrets kept")
	}
	// The raw value and its JSON escapes (with and without HTML escaping)
	// are all scrubbed; values under MinSecretLen are not, or every "ab"
	// in a run directory would go.
	for _, in := range []string{`key SEKRIT-<abc>&1 echoed`, `{"m":"SEKRIT-\u003cabc\u003e\u00261"}`} {
		if got := s.String(in); strings.Contains(got, "SEKRIT") || !strings.Contains(got, Mask) {
			t.Errorf("String(%q) = %q", in, got)
		}
		if got := string(s.Bytes([]byte(in))); strings.Contains(got, "SEKRIT") {
			t.Errorf("Bytes(%q) = %q", in, got)
		}
	}
	if got := s.String("tab and cab"); got != "tab and cab" {
		t.Errorf("a short value was scrubbed: %q", got)
	}
	err := s.Error(fmt.Errorf("server said SEKRIT-<abc>&1: %w", fs.ErrPermission))
	if strings.Contains(err.Error(), "SEKRIT") || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Error = %v (errors.Is %v)", err, errors.Is(err, fs.ErrPermission))
	}
	if NewSecrets().Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}
