package compare

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/rundir"
)

// Change is one fact that differs between two runs' manifests: the tool,
// the experiment file, the server as declared and as discovered, the host.
// Base and New are display text, credentials already masked; an empty side
// is "(none)" in every rendering.
type Change struct {
	// Field names the fact as a path: "tool.version",
	// "server.declared.engine.flags", "host.cpus".
	Field string `json:"field"`
	Base  string `json:"base"`
	New   string `json:"new"`
}

// ManifestChanges lists what differs between two manifests, in a fixed
// order: tool, experiment, declared server, discovered server, host, the
// run's settings. These are the candidate causes of any change in the
// figures ("did the driver upgrade make it worse?"), so a fact that can
// hold a credential (engine flags, URLs, headers) is masked with the same
// rules as the manifest itself (internal/redact) before it is compared or
// shown. Start and end times, the command line and the run's status always
// differ and are left out.
func ManifestChanges(base, new *rundir.Manifest) []Change {
	var out []Change
	bf, nf := manifestFacts(base), manifestFacts(new)
	for i := range bf {
		if bf[i].v != nf[i].v {
			out = append(out, Change{Field: bf[i].k, Base: bf[i].v, New: nf[i].v})
		}
	}
	return out
}

type fact struct{ k, v string }

// manifestFacts flattens a manifest into the facts ManifestChanges
// compares, always the same keys in the same order.
func manifestFacts(m *rundir.Manifest) []fact {
	d, disc := m.Server.Declared, m.Server.Discovered
	target := "builtin"
	if !d.Builtin {
		urls := make([]string, len(d.URLs))
		for i, u := range d.URLs {
			urls[i] = redact.URL(u)
		}
		target = strings.Join(urls, ", ")
	}
	var models []string
	for _, mo := range disc.Models {
		s := mo.ID
		if mo.MaxModelLen > 0 {
			s += fmt.Sprintf(" (max_model_len %d)", mo.MaxModelLen)
		}
		models = append(models, s)
	}
	sim := ""
	if d.Builtin {
		sim = compactJSON(d.Sim)
	}
	simulated := ""
	if s := disc.Simulated; s != nil {
		simulated = fmt.Sprintf("%s: %s on %s, %d replica%s", s.Preset, s.Model, s.GPU, s.Replicas, plural(s.Replicas))
	}
	engine := disc.Engine
	if disc.EngineVersion != "" {
		engine += " " + disc.EngineVersion
	}
	sem := m.Semantics
	if sem == "" {
		sem = "infermatrix"
	}
	return []fact{
		{"tool.version", m.Tool.Version},
		{"tool.commit", m.Tool.Commit},
		{"tool.go", m.Tool.Go},
		{"experiment.name", m.Experiment.Name},
		{"experiment.sha256", m.Experiment.SHA256},
		{"server.target", target},
		{"server.api", d.API},
		{"server.declared.model", d.Model},
		{"server.declared.engine.name", d.Engine.Name},
		{"server.declared.engine.version", d.Engine.Version},
		{"server.declared.engine.image", d.Engine.Image},
		{"server.declared.engine.flags", flagsText(redact.Flags(d.Engine.Flags))},
		{"server.declared.hardware.gpu", d.Hardware.GPU},
		{"server.declared.hardware.count", countText(d.Hardware.Count)},
		{"server.declared.hardware.driver", d.Hardware.Driver},
		{"server.declared.hardware.cuda", d.Hardware.CUDA},
		{"server.declared.hardware.host", d.Hardware.Host},
		{"server.declared.headers", flagsText(anyMap(redact.Headers(d.Headers)))},
		{"server.sim", sim},
		{"server.discovered.engine", strings.TrimSpace(engine)},
		{"server.discovered.server_header", disc.Server},
		{"server.discovered.models", strings.Join(models, ", ")},
		{"server.discovered.simulated", simulated},
		{"server.discovered.error", disc.Error},
		{"host.name", m.Host.Name},
		{"host.os", m.Host.OS + "/" + m.Host.Arch},
		{"host.cpus", countText(m.Host.CPUs)},
		{"semantics", sem},
		{"slo", compactJSON(m.SLO)},
	}
}

func countText(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func anyMap(m map[string]string) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// flagsText writes flags as "k=v, k=v" in key order, so that the same
// flags read the same in both runs.
func flagsText(flags map[string]any) string {
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + compactJSON(flags[k])
	}
	return strings.Join(parts, ", ")
}

// compactJSON is v as one line of JSON, with map keys sorted (which
// encoding/json does), "" for an empty value.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if s == "{}" || s == "null" || s == `""` || s == "[]" {
		return ""
	}
	return strings.Trim(s, `"`)
}
