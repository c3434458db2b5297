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
		if bf[i].v == nf[i].v {
			continue
		}
		if bf[i].obj != nil && nf[i].obj != nil {
			// A settings object (the simulator's): the leaves that
			// differ, "server.sim.engine.bandwidth_efficiency 0.8 →
			// 0.64", not two screenfuls of JSON.
			out = append(out, leafChanges(bf[i].k, bf[i].obj, nf[i].obj)...)
			continue
		}
		out = append(out, Change{Field: bf[i].k, Base: bf[i].v, New: nf[i].v})
	}
	return out
}

// fact is one compared fact; obj holds it as decoded JSON when it is a
// settings object, to compare leaf by leaf.
type fact struct {
	k, v string
	obj  map[string]any
}

// leafChanges lists the leaves of two JSON objects that differ, by dotted
// path, in path order.
func leafChanges(prefix string, b, n map[string]any) []Change {
	bl, nl := map[string]string{}, map[string]string{}
	flatten(prefix, b, bl)
	flatten(prefix, n, nl)
	keys := map[string]bool{}
	for k := range bl {
		keys[k] = true
	}
	for k := range nl {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []Change
	for _, k := range sorted {
		if bl[k] != nl[k] {
			out = append(out, Change{Field: k, Base: bl[k], New: nl[k]})
		}
	}
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, x := range m {
			flatten(prefix+"."+k, x, out)
		}
		return
	}
	if s := compactJSON(v); s != "" {
		out[prefix] = s
	}
}

// objectFact is a fact whose value is a settings object.
func objectFact(k string, v any) fact {
	f := fact{k: k, v: compactJSON(v)}
	if f.v != "" {
		_ = json.Unmarshal([]byte(f.v), &f.obj)
	}
	return f
}

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
	sim := fact{k: "server.sim"}
	if d.Builtin {
		sim = objectFact("server.sim", d.Sim)
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
		{k: "tool.version", v: m.Tool.Version},
		{k: "tool.commit", v: m.Tool.Commit},
		{k: "tool.go", v: m.Tool.Go},
		{k: "experiment.name", v: m.Experiment.Name},
		{k: "experiment.sha256", v: m.Experiment.SHA256},
		{k: "server.target", v: target},
		{k: "server.api", v: d.API},
		{k: "server.declared.model", v: d.Model},
		{k: "server.declared.engine.name", v: d.Engine.Name},
		{k: "server.declared.engine.version", v: d.Engine.Version},
		{k: "server.declared.engine.image", v: d.Engine.Image},
		{k: "server.declared.engine.flags", v: flagsText(redact.Flags(d.Engine.Flags))},
		{k: "server.declared.hardware.gpu", v: d.Hardware.GPU},
		{k: "server.declared.hardware.count", v: countText(d.Hardware.Count)},
		{k: "server.declared.hardware.driver", v: d.Hardware.Driver},
		{k: "server.declared.hardware.cuda", v: d.Hardware.CUDA},
		{k: "server.declared.hardware.host", v: d.Hardware.Host},
		{k: "server.declared.headers", v: flagsText(anyMap(redact.Headers(d.Headers)))},
		sim,
		{k: "server.discovered.engine", v: strings.TrimSpace(engine)},
		{k: "server.discovered.server_header", v: disc.Server},
		{k: "server.discovered.models", v: strings.Join(models, ", ")},
		{k: "server.discovered.simulated", v: simulated},
		{k: "server.discovered.error", v: disc.Error},
		{k: "host.name", v: m.Host.Name},
		{k: "host.os", v: m.Host.OS + "/" + m.Host.Arch},
		{k: "host.cpus", v: countText(m.Host.CPUs)},
		{k: "semantics", v: sem},
		{k: "slo", v: compactJSON(m.SLO)},
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
