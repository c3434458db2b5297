// Package redact keeps credentials out of everything infermatrix writes or
// prints. A run directory is meant to be shared: attached to a ticket,
// copied to a bucket, diffed in review. So every artifact and message goes
// through one rule for which names carry credentials (headers, engine
// flags) and one way of masking them, and the values read from the
// environment (API keys, header_env) are scrubbed from whatever a server
// echoes back.
//
// The package imports nothing of infermatrix, so schema, rundir, runner and
// reports can all use it without an import cycle.
package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Mask replaces a credential's value in every artifact.
const Mask = "(redacted)"

// urlMask replaces user info and query values in a URL. It is not Mask
// because a URL must still read as a URL: https://***@host/v1?key=***.
const urlMask = "***"

// secretWords are the parts of a name that mark its value as a credential.
// "auth" covers Authorization, Proxy-Authorization, X-Auth-Token and
// OAuth; "key" covers X-API-Key, X-Goog-Api-Key and
// Ocp-Apim-Subscription-Key; "passw" covers password.
var secretWords = []string{"key", "token", "secret", "auth", "passw", "passwd", "signature", "session", "credential", "cookie"}

// notSecret are words that contain a secret word but name a length or a
// tool, not a credential: engine flags such as max-num-batched-tokens or
// tokenizer, and a header such as X-Max-Tokens, keep their values.
var notSecret = []string{"tokenizer", "tokens"}

// SecretName reports whether a header or flag with this name carries a
// credential: Authorization, Proxy-Authorization, Cookie, or any name
// containing (in any letter case) key, token, secret, auth, password,
// passwd, signature, session or credential. Token counts (tokens) and
// tokenizers are not credentials.
//
// The rule is deliberately broad: a name wrongly taken for a credential
// costs a value shown as (redacted) or a header moved to header_env; a
// credential taken for an ordinary name leaks a key.
func SecretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range notSecret {
		n = strings.ReplaceAll(n, w, "_")
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Headers returns a copy of h with the value of every credential header
// replaced by Mask. A nil map stays nil, so omitempty still omits it.
func Headers(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if SecretName(k) {
			v = Mask
		}
		out[k] = v
	}
	return out
}

// Flags returns a copy of engine flags with credentials masked: the value
// of a flag named like a secret (vLLM's --api-key, an HF token) becomes
// Mask, and a URL anywhere in a value loses its user info and query.
func Flags(flags map[string]any) map[string]any {
	if flags == nil {
		return nil
	}
	out := make(map[string]any, len(flags))
	for k, v := range flags {
		if SecretName(k) {
			out[k] = Mask
			continue
		}
		out[k] = value(v)
	}
	return out
}

// value masks URLs inside a flag value, through nested maps and lists.
func value(v any) any {
	switch v := v.(type) {
	case string:
		return inText(v)
	case map[string]any:
		return Flags(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = value(e)
		}
		return out
	}
	return v
}

// URL returns s with everything that could be a credential masked: the
// whole user info, user name included (url.URL.Redacted masks only the
// password, but a token is often passed as the user), every query value,
// and the fragment. Query keys stay, so that "?api_key=***" still says
// what was wrong. A string that does not parse as a URL is masked the same
// way by position, so a malformed URL is never echoed whole either.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || !strings.Contains(s, "://") {
		return roughURL(s)
	}
	hasUser := u.User != nil
	u.User = nil
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = maskQuery(u.RawQuery), false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = urlMask, ""
	}
	out := u.String()
	if hasUser {
		if i := strings.Index(out, "//"); i >= 0 {
			out = out[:i+2] + urlMask + "@" + out[i+2:]
		}
	}
	return out
}

// maskQuery keeps each query key and masks its value; a part without '='
// may be a bare token and is masked whole.
func maskQuery(q string) string {
	if q == "" {
		return urlMask
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		if k, _, ok := strings.Cut(p, "="); ok {
			parts[i] = k + "=" + urlMask
		} else {
			parts[i] = urlMask
		}
	}
	return strings.Join(parts, "&")
}

// roughURL masks a string url.Parse rejects: the user info before the last
// '@' of the authority, and everything after '?' or '#'.
func roughURL(s string) string {
	rest, frag, hasFrag := strings.Cut(s, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.Index(rest, "://"); i >= 0 {
		auth := rest[i+3:]
		end := strings.IndexByte(auth, '/')
		if end < 0 {
			end = len(auth)
		}
		if at := strings.LastIndexByte(auth[:end], '@'); at >= 0 {
			rest = rest[:i+3] + urlMask + auth[at:]
		}
	}
	if hasQuery {
		rest += "?" + maskQuery(query)
	}
	if hasFrag && frag != "" {
		rest += "#" + urlMask
	}
	return rest
}

// inText masks a value that is, or holds, a URL. Anything without "://"
// is returned unchanged.
func inText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	fields := strings.Fields(s)
	if len(fields) == 1 && fields[0] == s {
		return URL(s)
	}
	for _, f := range fields {
		if strings.Contains(f, "://") {
			s = strings.Replace(s, f, URL(f), 1)
		}
	}
	return s
}

// URLSecrets returns the parts of a URL that URL masks (user info, query
// values, fragment), so that a message about the URL, such as url.Parse's
// error, can be scrubbed of them too.
func URLSecrets(s string) Secrets {
	var parts []string
	rest, frag, _ := strings.Cut(s, "#")
	rest, query, _ := strings.Cut(rest, "?")
	parts = append(parts, frag)
	if i := strings.Index(rest, "://"); i >= 0 {
		auth := rest[i+3:]
		if end := strings.IndexByte(auth, '/'); end >= 0 {
			auth = auth[:end]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			user := auth[:at]
			parts = append(parts, user)
			parts = append(parts, strings.Split(user, ":")...)
		}
	}
	for _, p := range strings.Split(query, "&") {
		if _, v, ok := strings.Cut(p, "="); ok {
			parts = append(parts, v)
		} else {
			parts = append(parts, p)
		}
	}
	return NewSecrets(parts...)
}

// Args returns a command line with every URL in it masked, as written in
// the manifest and the decision record's "reproduce" command.
func Args(args []string) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
			out[i] = k + "=" + inText(v)
			continue
		}
		out[i] = inText(a)
	}
	return out
}

// MinSecretLen is the shortest value Secrets scrubs. Masking every "a" or
// "1" in a run directory would destroy it, and a credential that short
// protects nothing anyway.
const MinSecretLen = 4

// Secrets are values known to be credentials (read from the environment),
// to be scrubbed from anything a server sends back before it is written or
// printed: a hostile or careless server can echo the key in an error body,
// a model id or a header.
type Secrets struct {
	forms []string // each value as written and as JSON escapes it, longest first
}

// NewSecrets returns Secrets for the values, ignoring those shorter than
// MinSecretLen.
func NewSecrets(values ...string) Secrets {
	var forms []string
	for _, v := range values {
		if len(v) < MinSecretLen {
			continue
		}
		forms = append(forms, v)
		for _, html := range []bool{true, false} {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(v) == nil {
				forms = append(forms, strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:])
			}
		}
	}
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	return Secrets{forms: slices.Compact(forms)}
}

// Empty reports whether there is nothing to scrub.
func (s Secrets) Empty() bool { return len(s.forms) == 0 }

// String returns x with every secret replaced by Mask.
func (s Secrets) String(x string) string {
	for _, f := range s.forms {
		if strings.Contains(x, f) {
			x = strings.ReplaceAll(x, f, Mask)
		}
	}
	return x
}

// Bytes returns b with every secret replaced by Mask; b itself is returned
// when it holds none, so the common case copies nothing.
func (s Secrets) Bytes(b []byte) []byte {
	for _, f := range s.forms {
		if bytes.Contains(b, []byte(f)) {
			b = bytes.ReplaceAll(b, []byte(f), []byte(Mask))
		}
	}
	return b
}

// Error returns err with its message scrubbed. The result still unwraps to
// err, so errors.Is keeps working; only the text changes.
func (s Secrets) Error(err error) error {
	if err == nil || s.Empty() {
		return err
	}
	msg := err.Error()
	if clean := s.String(msg); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
