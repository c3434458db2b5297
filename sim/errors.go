package sim

// Error bodies, in each personality's own shape. A client's error handling
// is written against one server's bodies: the official OpenAI SDK reads
// {"error":{...}} and reports "no body" for anything else, so the simulator
// answers every error the way the server it mimics does.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The kinds of error the simulator raises, named as vLLM 0.11 names them in
// the "type" field of its body. vLLM has two sources: its serving code
// (create_error_response: "BadRequestError", "NotFoundError", ...) and
// FastAPI's request validation, whose handler writes the status phrase
// ("Bad Request"). Routing errors never reach vLLM's handlers: Starlette
// answers them with {"detail": ...}.
const (
	kindBadRequest = "BadRequestError"     // vLLM's serving code refused the request
	kindValidation = "Bad Request"         // FastAPI/pydantic refused the body
	kindNotFound   = "NotFoundError"       // an unknown model
	kindInternal   = "InternalServerError" // the simulator itself failed
	kindRouting    = "routing"             // unknown path or method: Starlette's {"detail": ...}
)

// apiError is an error response with its HTTP status; the personality
// decides the body.
type apiError struct {
	status  int
	kind    string // one of the kind constants
	message string
	// contextPrompt and contextLimit are set on a context-length error,
	// and contextOutput when the output asked for is what overflows, so
	// that llama.cpp's and TGI's personalities answer with their own
	// bodies.
	contextPrompt, contextLimit, contextOutput int
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: kindBadRequest, message: fmt.Sprintf(format, args...)}
}

// invalidBody is a body that FastAPI's validation refuses before vLLM's
// code sees it: bad JSON, a missing field, a value of the wrong type.
func invalidBody(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: kindValidation, message: fmt.Sprintf(format, args...)}
}

func internalError(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, kind: kindInternal, message: err.Error()}
}

func unknownModel(model string) *apiError {
	return &apiError{status: http.StatusNotFound, kind: kindNotFound, message: fmt.Sprintf("The model `%s` does not exist.", model)}
}

// jsonError describes a body that did not decode, as pydantic's list of
// errors reads: a syntax error with its byte offset, or a field of the
// wrong type.
func jsonError(err error) *apiError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalidBody("[{'type': 'json_invalid', 'loc': ('body', %d), 'msg': 'JSON decode error', 'input': {}, 'ctx': {'error': %q}}]", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		return invalidBody("[{'type': '%s_type', 'loc': ('body', '%s'), 'msg': 'Input should be a valid %s', 'input': %s}]", typ.Type.Kind(), typ.Field, typ.Type.Kind(), typ.Value)
	}
	return invalidBody("[{'type': 'value_error', 'loc': ('body',), 'msg': %q}]", err.Error())
}

// writeError writes e in the server's personality.
func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	switch s.pers {
	case personaLlama:
		writeLlamaError(w, e)
	case personaTGI:
		writeTGIError(w, e)
	default:
		writeVLLMError(w, e)
	}
}

// writeVLLMError writes vLLM 0.11's ErrorResponse,
// {"error":{"message","type","param","code"}}, or Starlette's
// {"detail": ...} for a path or method no route serves.
func writeVLLMError(w http.ResponseWriter, e *apiError) {
	var v any
	if e.kind == kindRouting {
		v = struct {
			Detail string `json:"detail"`
		}{e.message}
	} else {
		type info struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    int     `json:"code"`
		}
		v = struct {
			Error info `json:"error"`
		}{info{e.message, e.kind, nil, e.status}}
	}
	writeErrorBody(w, e.status, v)
}

// writeLlamaError writes llama-server's {"error":{"code","message","type"}},
// with its type names, and for a prompt over the context its
// exceed_context_size_error with the counts (server-streams.md).
func writeLlamaError(w http.ResponseWriter, e *apiError) {
	if e.contextPrompt > 0 && e.contextOutput == 0 {
		writeErrorBody(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"code":            http.StatusBadRequest,
			"message":         fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", e.contextPrompt, e.contextLimit),
			"type":            "exceed_context_size_error",
			"n_prompt_tokens": e.contextPrompt,
			"n_ctx":           e.contextLimit,
		}})
		return
	}
	typ := "server_error"
	switch e.status {
	case http.StatusBadRequest:
		typ = "invalid_request_error"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		typ = "not_found_error"
	case http.StatusServiceUnavailable:
		typ = "unavailable_error"
	}
	type info struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	writeErrorBody(w, e.status, struct {
		Error info `json:"error"`
	}{info{e.status, e.message, typ}})
}

// writeTGIError writes text-generation-inference's {"error","error_type"}.
// TGI refuses a request its validation rejects with 422, not 400.
func writeTGIError(w http.ResponseWriter, e *apiError) {
	status, typ := e.status, "generation"
	switch e.status {
	case http.StatusBadRequest:
		status, typ = http.StatusUnprocessableEntity, "validation"
	case http.StatusTooManyRequests:
		typ = "overloaded"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		typ = "not_found"
	}
	msg := e.message
	switch {
	case e.contextOutput > 0:
		msg = fmt.Sprintf("Input validation error: `inputs` tokens + `max_new_tokens` must be <= %d. Given: %d `inputs` tokens and %d `max_new_tokens`", e.contextLimit, e.contextPrompt, e.contextOutput)
	case e.contextPrompt > 0:
		msg = fmt.Sprintf("Input validation error: `inputs` must have less than %d tokens. Given: %d", e.contextLimit, e.contextPrompt)
	}
	writeErrorBody(w, status, struct {
		Error     string `json:"error"`
		ErrorType string `json:"error_type"`
	}{msg, typ})
}

// writeErrorBody writes v as JSON without Go's HTML escaping: the servers
// mimicked send "<=" and backticks as they are.
func writeErrorBody(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	body := []byte(`{"error":{}}`) // encoding strings and ints cannot fail
	if enc.Encode(v) == nil {
		body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	writeJSON(w, status, body)
}

// checkContentType refuses a POST whose body is not declared JSON, as the
// server the personality mimics does: vLLM's validate_json_request raises
// a validation error (400), TGI's JSON extractor answers 415 in plain text,
// and llama-server reads any body. It reports whether the request may go on.
func (s *Server) checkContentType(w http.ResponseWriter, r *http.Request) bool {
	media, _, _ := strings.Cut(strings.ToLower(r.Header.Get("Content-Type")), ";")
	if strings.TrimSpace(media) == "application/json" {
		return true
	}
	switch s.pers {
	case personaLlama:
		return true
	case personaTGI:
		body := "Expected request with `Content-Type: application/json`"
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusUnsupportedMediaType)
		_, _ = w.Write([]byte(body))
		return false
	}
	s.writeError(w, invalidBody(`["Unsupported Media Type: Only 'application/json' is allowed"]`))
	return false
}
