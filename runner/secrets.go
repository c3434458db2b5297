package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// credentials are the values a run reads from the environment: the API key
// (server.api_key_env) and the headers of server.header_env. They are sent
// and never stored: secrets scrubs them from anything the server echoes
// before it is written or printed.
type credentials struct {
	apiKey  string
	headers map[string]string // header_env's headers with their values
	secrets redact.Secrets
	values  []string // what secrets scrubs, to add the launch blocks' to
}

// readCredentials reads the variables the plan names. A variable that is
// not set fails the run before anything is sent, with the variable's name:
// a request without its credential would only measure the server's 401.
// The built-in server checks no credential, so with it nothing is read.
func readCredentials(s schema.ServerPlan) (credentials, error) {
	var c credentials
	if s.Builtin {
		return c, nil
	}
	var missing []error
	if env := s.APIKeyEnv; env != "" {
		c.apiKey = os.Getenv(env)
		if c.apiKey == "" {
			missing = append(missing, fmt.Errorf("server.api_key_env names %s, but it is not set", env))
		}
	}
	values := []string{c.apiKey}
	for _, h := range slices.Sorted(maps.Keys(s.HeaderEnv)) {
		env := s.HeaderEnv[h]
		v := os.Getenv(env)
		if v == "" {
			missing = append(missing, fmt.Errorf("server.header_env.%s names %s, but it is not set", h, env))
			continue
		}
		if c.headers == nil {
			c.headers = map[string]string{}
		}
		c.headers[h] = v
		values = append(values, v)
	}
	if err := errors.Join(missing...); err != nil {
		return credentials{}, err
	}
	c.secrets, c.values = redact.NewSecrets(values...), values
	return c, nil
}

// checkURLs refuses a URL that carries credentials (user info, a query or
// a fragment). schema refuses them in experiment files; a plan built some
// other way must not send one either, nor echo it: every net/http error
// quotes the URL of its request.
func checkURLs(urls []string) error {
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("server URL %q does not parse", redact.URL(s))
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return fmt.Errorf("server URL %q carries credentials or a query; give the base URL only and put keys in api_key_env or header_env", redact.URL(s))
		}
	}
	return nil
}

// scrubRecord removes secrets from the text a server put into a record (an
// error body that echoes the key, a response id) before it is written or
// summarised.
func scrubRecord(s redact.Secrets, rec *metrics.Record) {
	if s.Empty() {
		return
	}
	rec.ResponseID = s.String(rec.ResponseID)
	rec.FinishReason = s.String(rec.FinishReason)
	rec.URL = s.String(rec.URL)
	if rec.Error != nil {
		rec.Error.Message = s.String(rec.Error.Message)
		rec.Error.Detail = s.String(rec.Error.Detail)
	}
}

// scrubJSON removes secrets from every string of v, a plain data struct,
// by a round trip through JSON.
func scrubJSON[T any](s redact.Secrets, v *T) {
	if s.Empty() {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	var clean T
	if json.Unmarshal(s.Bytes(b), &clean) == nil {
		*v = clean
	}
}
