package rundir

import (
	"encoding/json"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/schema"
)

// Scrub makes every file written into the run from now on (WriteFile,
// WriteJSON, records) carry Mask in place of each secret: the credentials
// the run read from its environment, which a server may echo back in an
// error body, a model id or a header. It is a second line of defence: the
// runner scrubs what it keeps in memory too.
func (d *Dir) Scrub(s redact.Secrets) { d.secrets = s }

// MarshalJSON writes the manifest with credentials masked, whoever writes
// it: the value of every credential header and of every engine flag named
// like a credential, and URLs' user info and query values in the command
// line. Literal credential headers are refused when the experiment is
// loaded; this keeps one that slipped through (a plan built in code, a
// future key) out of a file meant to be shared.
func (m Manifest) MarshalJSON() ([]byte, error) {
	type plain Manifest // without this method
	c := plain(m)
	c.Command = redact.Args(m.Command)
	c.Server.Declared.Headers = redact.Headers(m.Server.Declared.Headers)
	c.Server.Declared.Engine.Flags = redact.Flags(m.Server.Declared.Engine.Flags)
	c.Server.Declared.Variants = redactVariants(m.Server.Declared.Variants)
	c.Variants = nil
	for _, v := range m.Variants {
		x := *v
		x.Engine.Flags = redact.Flags(v.Engine.Flags)
		x.Command = redact.Command(v.Command)
		c.Variants = append(c.Variants, &x)
	}
	urls := make([]string, len(m.Server.Declared.URLs))
	for i, u := range m.Server.Declared.URLs {
		urls[i] = redact.URL(u)
	}
	if m.Server.Declared.URLs == nil {
		urls = nil
	}
	c.Server.Declared.URLs = urls
	c.Server.Discovered.URL = redact.URL(m.Server.Discovered.URL)
	if m.Rows != nil {
		c.Rows = append(c.Rows[:0:0], m.Rows...)
		for i := range c.Rows {
			c.Rows[i].Headers = redact.Headers(c.Rows[i].Headers)
		}
	}
	return json.Marshal(c)
}

// redactVariants masks what a variant may carry of a credential: engine
// flags and a launched command line's credential flags.
func redactVariants(vs []schema.VariantPlan) []schema.VariantPlan {
	if vs == nil {
		return nil
	}
	out := append(vs[:0:0], vs...)
	for i := range out {
		out[i].Engine.Flags = redact.Flags(out[i].Engine.Flags)
		if l := out[i].Launch; l != nil {
			c := *l
			c.Command = redact.Command(l.Command)
			out[i].Launch = &c
		}
	}
	return out
}
