package sim

// vLLM's /tokenize and /detokenize, which clients use to count a prompt's
// tokens the way the server will, or to build prompts of an exact length.
// Both count as generation does (request.go, chattemplate.go), so that
// /tokenize's count is the prompt_tokens a generation request with the same
// prompt reports: messages through the chat template, a prompt with the
// model's BOS unless add_special_tokens is false.

import (
	"bytes"
	"encoding/json"
	"net/http"
)

type tokenizeRequest struct {
	Model           string          `json:"model"`
	Prompt          json.RawMessage `json:"prompt"`
	Messages        []chatMessage   `json:"messages"`
	ReturnTokenStrs bool            `json:"return_token_strs"`
	templateFields
}

// tokenizeResponse is vLLM's TokenizeResponse, in its field order;
// token_strs is null unless the request asked for it.
type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int    `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// readJSON reads r's body into v, answering the error itself when it fails.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBodyBytes)); err != nil {
		s.writeError(w, invalidBody("could not read request body: %v", err))
		return false
	}
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		s.writeError(w, jsonError(err))
		return false
	}
	return true
}

// checkModel answers vLLM's 404 for a model the server does not serve. An
// empty model is the served one, as on vLLM; llama.cpp and TGI ignore the
// field.
func (s *Server) checkModel(model string) *apiError {
	if model == "" || model == s.cfg.Model || s.pers != personaVLLM {
		return nil
	}
	return unknownModel(model)
}

func (s *Server) serveTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if !s.readJSON(w, r, &req) {
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		s.writeError(w, e)
		return
	}
	var ids []int
	switch {
	case req.Messages != nil:
		ids = s.chatIDs(req.Messages, req.chatOptions())
	default:
		var err error
		if ids, err = s.encodePrompt(req.Prompt, req.completionSpecialTokens()); err != nil {
			s.writeError(w, invalidBody("prompt: %v", err))
			return
		}
	}
	resp := tokenizeResponse{Count: len(ids), MaxModelLen: s.cfg.MaxModelLen, Tokens: ids}
	if resp.Tokens == nil {
		resp.Tokens = []int{}
	}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			resp.TokenStrs[i] = s.decode([]int{id})
		}
	}
	s.writeBody(w, resp)
}

func (s *Server) serveDetokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	if !s.readJSON(w, r, &req) {
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		s.writeError(w, e)
		return
	}
	if req.Tokens == nil {
		s.writeError(w, invalidBody("[{'type': 'missing', 'loc': ('body', 'tokens'), 'msg': 'Field required'}]"))
		return
	}
	s.writeBody(w, struct {
		Prompt string `json:"prompt"`
	}{s.decode(req.Tokens)})
}

// writeBody writes v as a 200 JSON body.
func (s *Server) writeBody(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, body)
}
