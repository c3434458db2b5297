package schema

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/redact"
)

// Limits on the headers an experiment may send. Real gateways need a
// handful of headers of tens of bytes; servers refuse requests whose
// headers pass 8 to 16 KiB in all, so anything near these limits is a
// mistake (a pasted file, a runaway template), better refused by validate
// than by the server on every request.
const (
	// MaxHeaders bounds the headers one request carries from the file:
	// server.headers, server.header_env and the row's headers together.
	MaxHeaders = 64
	// MaxHeaderNameBytes bounds a header name.
	MaxHeaderNameBytes = 256
	// MaxHeaderValueBytes bounds a header value.
	MaxHeaderValueBytes = 8 << 10
)

// reservedHeaders are headers the experiment may not set, with why: Go's
// client writes the framing headers itself (a value given here would be
// dropped without a word), and infermatrix sets the request-id headers to
// each record's id, which is how a record is matched with the server's log.
var reservedHeaders = map[string]string{
	"Host":              "the host comes from the URL",
	"Content-Length":    "the HTTP client frames the body itself",
	"Transfer-Encoding": "the HTTP client frames the body itself",
	"Connection":        "the HTTP client manages connections itself",
	"X-Request-Id":      "infermatrix sets it to each request's record id",
	"Idempotency-Key":   "infermatrix sets it to each request's record id",
}

// envNamePattern is what an environment variable name may be, for
// api_key_env and header_env: POSIX's portable names.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// isTchar reports whether c may appear in a header name (RFC 9110 §5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// headerNameProblem says what is wrong with a header name, or "".
func headerNameProblem(name string) string {
	if name == "" {
		return "empty header name"
	}
	if len(name) > MaxHeaderNameBytes {
		return fmt.Sprintf("header name of %d bytes; at most %d", len(name), MaxHeaderNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if !isTchar(name[i]) {
			return fmt.Sprintf("header name %s has %s at byte %d, which a header name cannot hold", strconv.Quote(name), describeByte(name[i]), i+1)
		}
	}
	return ""
}

// headerValueProblem says what is wrong with a header value, or "". A
// value never appears in the message: it may be a credential.
func headerValueProblem(value string) string {
	if len(value) > MaxHeaderValueBytes {
		return fmt.Sprintf("header value of %d bytes; at most %d", len(value), MaxHeaderValueBytes)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			why := "HTTP cannot carry control characters other than tab"
			if c == '\r' || c == '\n' {
				why = "a line break would end the header and start another"
			}
			return fmt.Sprintf("header value has %s at byte %d; %s", describeByte(c), i+1, why)
		}
	}
	return ""
}

func describeByte(c byte) string {
	switch c {
	case '\r':
		return "a carriage return (CR)"
	case '\n':
		return "a line feed (LF)"
	case 0:
		return "a NUL byte"
	case ' ':
		return "a space"
	}
	if c < 0x20 || c == 0x7f {
		return fmt.Sprintf("the control character 0x%02x", c)
	}
	if c >= 0x80 {
		return fmt.Sprintf("the non-ASCII byte 0x%02x", c)
	}
	return strconv.QuoteRune(rune(c))
}

// headerProblem records a problem about the header key under parent. The
// key is quoted in the reported path when it is not a plain token, so a
// CR or an escape sequence in a hostile file never reaches the terminal.
func (r *resolver) headerProblem(parent, key, hint, format string, args ...any) {
	path := parent + "." + key
	if r.d.isBroken(path) {
		return
	}
	pos := r.posOf(path)
	shown := key
	if headerNameProblem(key) != "" {
		shown = strconv.Quote(key)
	}
	r.d.problems = append(r.d.problems, Problem{
		File: r.d.file, Pos: pos, Path: parent + "." + shown,
		Message: fmt.Sprintf(format, args...), Hint: hint,
	})
}

// checkServerHeaders checks server.headers and server.header_env: names
// and values that HTTP can carry, within the limits, no credential
// written in the file, and no header set twice.
func (r *resolver) checkServerHeaders(s Server) {
	credHint := func(k string) string {
		if textproto.CanonicalMIMEHeaderKey(k) == "Authorization" {
			return "set api_key_env: OPENAI_API_KEY (sent as Authorization: Bearer <key>), or header_env: {Authorization: VAR} for another scheme"
		}
		return fmt.Sprintf("move it to header_env: {%s: VAR} and export the value in VAR", k)
	}
	r.checkHeaderMap(s.Headers, func(string) string { return "server.headers" }, credHint)
	seen := map[string]string{}
	for _, k := range sortedKeys(s.Headers) {
		seen[textproto.CanonicalMIMEHeaderKey(k)] = "server.headers"
	}
	for _, k := range sortedKeys(s.HeaderEnv) {
		if p := headerNameProblem(k); p != "" {
			r.headerProblem("server.header_env", k, "header names are letters, digits and !#$%&'*+-.^_`|~", "%s", p)
			continue
		}
		canon := textproto.CanonicalMIMEHeaderKey(k)
		if why, ok := reservedHeaders[canon]; ok {
			r.headerProblem("server.header_env", k, "remove it: "+why, "%s cannot be set", k)
			continue
		}
		if where, dup := seen[canon]; dup {
			r.headerProblem("server.header_env", k, "keep one of them", "%s is also set in %s", k, where)
			continue
		}
		seen[canon] = "server.header_env"
		if canon == "Authorization" && s.APIKeyEnv != "" {
			r.headerProblem("server.header_env", k, "keep one: api_key_env sends Authorization: Bearer <key>",
				"Authorization is also set by api_key_env")
		}
		if v := s.HeaderEnv[k]; !envNamePattern.MatchString(v) {
			// Not quoted back: a value that is not a variable name may be
			// the credential itself, pasted in the wrong place.
			r.headerProblem("server.header_env", k, "name the variable, e.g. GOOGLE_API_KEY, not the value itself",
				"not an environment variable name (letters, digits and _, not starting with a digit)")
		}
	}
	if n := len(seen); n > MaxHeaders {
		r.problem("server.headers", "send fewer headers", "%d headers in server.headers and server.header_env; at most %d", n, MaxHeaders)
	}
}

// checkRowHeaders checks a row's headers after defaults are merged in,
// each at the place it was written (the row or defaults).
func (r *resolver) checkRowHeaders(row *Row, rowPath string, merged map[string]string) {
	at := func(k string) string {
		if _, ok := row.Headers[k]; ok {
			return rowPath + ".headers"
		}
		return "defaults.headers"
	}
	r.checkHeaderMap(merged, at, func(k string) string {
		return fmt.Sprintf("set server.header_env: {%s: VAR} and export the value in VAR (or server.api_key_env for a Bearer key)", k)
	})
	fromEnv := map[string]bool{}
	for k := range r.exp.Server.HeaderEnv {
		fromEnv[textproto.CanonicalMIMEHeaderKey(k)] = true
	}
	all := map[string]bool{}
	for k := range r.exp.Server.Headers {
		all[textproto.CanonicalMIMEHeaderKey(k)] = true
	}
	for k := range fromEnv {
		all[k] = true
	}
	serverOnly := len(all)
	for _, k := range sortedKeys(merged) {
		canon := textproto.CanonicalMIMEHeaderKey(k)
		all[canon] = true
		if fromEnv[canon] && !redact.SecretName(k) {
			r.headerProblem(at(k), k, "remove one: a header read from the environment would replace this value",
				"%s is also set by server.header_env", k)
		}
	}
	// Too many in the server section alone is reported there, once.
	if n := len(all); n > MaxHeaders && serverOnly <= MaxHeaders {
		r.problem(rowPath, "send fewer headers", "%d headers with server.headers and server.header_env; at most %d", n, MaxHeaders)
	}
}

// checkHeaderMap checks literal headers; parent gives, for each key, the
// path of the map it was written in.
func (r *resolver) checkHeaderMap(h map[string]string, parent func(string) string, credHint func(string) string) {
	seen := map[string]string{}
	for _, k := range sortedKeys(h) {
		if p := headerNameProblem(k); p != "" {
			r.headerProblem(parent(k), k, "header names are letters, digits and !#$%&'*+-.^_`|~", "%s", p)
			continue
		}
		canon := textproto.CanonicalMIMEHeaderKey(k)
		if why, ok := reservedHeaders[canon]; ok {
			r.headerProblem(parent(k), k, "remove it: "+why, "%s cannot be set", k)
			continue
		}
		if prev, dup := seen[canon]; dup {
			r.headerProblem(parent(k), k, "header names ignore letter case; keep one", "%s is also set as %s", k, prev)
			continue
		}
		seen[canon] = k
		v := h[k]
		if redact.SecretName(k) && v != "" {
			r.headerProblem(parent(k), k, credHint(k),
				"%s is a credential header: a value written in the file is recorded in the run", k)
			continue
		}
		if p := headerValueProblem(v); p != "" {
			r.headerProblem(parent(k), k, "headers are one line of text; remove the control characters", "%s", p)
		}
	}
}

// urlParseError is url.Parse's reason without the URL it quotes, and
// scrubbed of the parts redact.URL masks: the error is printed, and the URL
// may hold a password.
func urlParseError(raw string, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return redact.URLSecrets(raw).String(err.Error())
}
