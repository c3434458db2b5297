package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
)

// Variant is one configuration of the server under test. A capacity
// question is rarely "how fast is this server" and usually "which of these
// settings serves the load cheapest": variants answer it in one run, every
// row measured under each configuration, in the same conditions, with one
// record that puts them side by side.
type Variant struct {
	Name        string      `yaml:"name" json:"name,omitempty" doc:"Short name, [a-z0-9_-]; every row runs as <row id>@<name>." required:"true"`
	Description string      `yaml:"description" json:"description,omitempty" doc:"What this configuration is, shown in the decision record."`
	Sim         SimSettings `yaml:"sim" json:"sim,omitempty" doc:"Built-in server only: settings that override server.sim for this variant, e.g. {engine: {max_num_seqs: 64}}; keys not written keep server.sim's."`
	URLs        []string    `yaml:"urls" json:"urls,omitempty" doc:"Base URLs of this variant's server, ending in /v1. Default: server.urls. Required with launch unless server.urls gives them."`
	Launch      *Launch     `yaml:"launch" json:"launch,omitempty" doc:"A server process infermatrix starts before this variant's rows and stops after them."`
	Engine      Engine      `yaml:"engine" json:"engine,omitempty" doc:"The engine as this variant runs it, recorded; keys written override server.engine's, flags key by key."`
}

// Launch is a server process that lives for one variant's rows. Starting
// it from the experiment keeps the configuration under test and the
// measurement in one reviewed file, and its log in the run directory.
type Launch struct {
	Command []string          `yaml:"command" json:"command,omitempty" doc:"The program and its arguments, e.g. [vllm, serve, meta-llama/Llama-3.1-8B-Instruct, --max-num-seqs, '64']; run without a shell, in its own process group. ${NAME} in an argument reads infermatrix's environment; a credential flag's value (--api-key) must be given so, and is masked in the record." required:"true"`
	Env     map[string]string `yaml:"env" json:"env,omitempty" doc:"Environment variables added to infermatrix's own for the process. A value may reference infermatrix's environment as ${NAME}; a credential must (a key named like one, e.g. HF_TOKEN, with a literal value is refused), and its value is scrubbed from the log and the record."`
	Dir     string            `yaml:"dir" json:"dir,omitempty" doc:"Working directory of the process, relative to the experiment file. Default: the experiment file's directory."`
	Ready   LaunchReady       `yaml:"ready" json:"ready,omitempty" doc:"How infermatrix knows the server is ready."`
	Stop    LaunchStop        `yaml:"stop" json:"stop,omitempty" doc:"How infermatrix stops the server after the variant's rows."`
}

// LaunchReady is the readiness probe of a launched server.
type LaunchReady struct {
	URL     string    `yaml:"url" json:"url,omitempty" doc:"URL polled (GET, with backoff) until it answers 200. Default: the variant's first URL with /models."`
	Timeout *Duration `yaml:"timeout" json:"timeout,omitempty" doc:"How long the server may take to get ready (loading weights, compiling graphs) before the variant's rows are marked not run." default:"10m"`
}

// LaunchStop is how a launched server is stopped.
type LaunchStop struct {
	Signal string    `yaml:"signal" json:"signal,omitempty" doc:"Signal sent to the server's process group first." enum:"SIGTERM,SIGINT" default:"SIGTERM"`
	Grace  *Duration `yaml:"grace" json:"grace,omitempty" doc:"How long the server may take to exit after the signal before it is killed (SIGKILL)." default:"30s"`
}

// Launch defaults.
const (
	DefaultReadyTimeout = 10 * time.Minute
	DefaultStopGrace    = 30 * time.Second
	DefaultStopSignal   = "SIGTERM"
)

// VariantPlan is a variant resolved: what server its rows run against.
type VariantPlan struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Builtin: the rows run against a built-in server started with Sim;
	// otherwise against URLs, served by Launch's process when it is set.
	Builtin bool        `json:"builtin,omitempty"`
	Sim     SimSettings `json:"sim,omitempty"`
	URLs    []string    `json:"urls,omitempty"`
	Launch  *LaunchPlan `json:"launch,omitempty"`
	// Model is the model sent (server.model, or the built-in server's);
	// empty: the one the variant's server lists.
	Model  string `json:"model,omitempty"`
	Engine Engine `json:"engine"`
}

// LaunchPlan is a launch block with defaults applied and paths resolved.
// Env keeps the values as written (${NAME} unexpanded): the expansion
// happens when the process starts and is never stored.
type LaunchPlan struct {
	Command      []string          `json:"command"`
	Env          map[string]string `json:"env,omitempty"`
	Dir          string            `json:"dir"`
	ReadyURL     string            `json:"ready_url"`
	ReadyTimeout Duration          `json:"ready_timeout"`
	StopSignal   string            `json:"stop_signal"`
	StopGrace    Duration          `json:"stop_grace"`
}

var variantNamePattern = regexp.MustCompile(`^[a-z0-9_-]+$`)

// envRef is a whole value that only references a variable: ${NAME}.
var envRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// VariantSuffix is what a row id gains under a variant.
func VariantSuffix(name string) string { return "@" + name }

// WithoutVariant strips a row id's @<variant> suffix: the id as written.
func WithoutVariant(id string) string {
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		return id[:i]
	}
	return id
}

// variants resolves server.variants. With --target, every variant runs
// against the target (the built-in server with its sim overrides, or the
// URL): its urls and launch are ignored, as server.urls are.
func (r *resolver) variants(server ServerPlan, target string) []VariantPlan {
	in := r.exp.Server.Variants
	if len(in) == 0 {
		return nil
	}
	var out []VariantPlan
	seen := map[string]bool{}
	for i, v := range in {
		path := indexPath("server.variants", i)
		switch {
		case v.Name == "":
			// required: the decoder has reported it
		case !variantNamePattern.MatchString(v.Name):
			r.problem(path+".name", "use lower-case letters, digits, '_' and '-': the name ends every row id (row@name)", "invalid variant name %q", v.Name)
		case seen[v.Name]:
			r.problem(path+".name", "give each variant its own name", "duplicate variant name %q", v.Name)
		}
		seen[v.Name] = true
		vp := VariantPlan{Name: v.Name, Description: v.Description, Model: server.Model, Engine: mergeEngine(server.Engine, v.Engine)}
		if target != "" {
			v.URLs, v.Launch = nil, nil
		}
		for j, u := range v.URLs {
			if base, ok := r.baseURL(indexPath(path+".urls", j), "URL", u); ok {
				vp.URLs = append(vp.URLs, base)
			}
		}
		simWritten := r.written(path + ".sim")
		switch {
		case len(v.URLs) > 0 || v.Launch != nil:
			if simWritten {
				r.problem(path+".sim", "remove sim: it configures the built-in server, and this variant runs its own (urls or launch)", "sim has no effect on a variant with urls or launch")
			}
			if len(vp.URLs) == 0 {
				vp.URLs = server.URLs
			}
			if len(vp.URLs) == 0 && len(v.URLs) == 0 {
				r.problem(path+".urls", "add urls: [http://127.0.0.1:8000/v1], where the launched server listens", "a launched server needs the URLs to send requests to")
			}
		case server.Builtin:
			vp.Builtin = true
			vp.Sim = r.variantSim(path, v.Sim)
			if r.exp.Server.Model == "" {
				vp.Model = vp.Sim.Model
			}
		case len(server.URLs) > 0:
			if simWritten {
				r.problem(path+".sim", "remove sim, or set server.target: builtin", "sim applies to the built-in server only")
			}
			vp.URLs = server.URLs
		default:
			r.problem(path, "give the variant urls or a launch block, or set server.target: builtin", "variant %q has no server", v.Name)
		}
		if v.Launch != nil {
			vp.Launch = r.launch(path+".launch", v.Launch, vp.URLs)
		}
		out = append(out, vp)
	}
	return out
}

// written reports whether the file wrote the value at path.
func (r *resolver) written(path string) bool {
	_, a := r.d.pos[path]
	_, b := r.d.keyPos[path]
	return a || b
}

// variantSim is server.sim with the keys the variant writes replaced, then
// resolved as server.sim is. A problem resolving it is reported at the
// variant's sim, where the file says what differs.
func (r *resolver) variantSim(path string, over SimSettings) SimSettings {
	s := r.exp.Server.Sim
	r.overlay(reflect.ValueOf(&s).Elem(), reflect.ValueOf(over), path+".sim")
	from := len(r.d.problems)
	r.resolveSim(&s)
	for i := from; i < len(r.d.problems); i++ {
		p := &r.d.problems[i]
		if rest, ok := strings.CutPrefix(p.Path, "server.sim"); ok {
			p.Path = path + ".sim" + rest
			p.Pos = r.posOf(p.Path)
		}
	}
	return s
}

// overlay copies into dst the fields of src that the file wrote under path,
// recursing into nested settings, so that a variant's false or 0 overrides
// too, and keys it does not write keep server.sim's.
func (r *resolver) overlay(dst, src reflect.Value, path string) {
	t := src.Type()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		fp := path + "." + name
		if !r.written(fp) {
			continue
		}
		f := src.Field(i)
		if f.Kind() == reflect.Struct {
			r.overlay(dst.Field(i), f, fp)
			continue
		}
		dst.Field(i).Set(f)
	}
}

// mergeEngine is server.engine with a variant's keys written over it.
func mergeEngine(base, v Engine) Engine {
	out := base
	if v.Name != "" {
		out.Name = v.Name
	}
	if v.Version != "" {
		out.Version = v.Version
	}
	if v.Image != "" {
		out.Image = v.Image
	}
	if len(v.Flags) > 0 {
		out.Flags = map[string]any{}
		for k, x := range base.Flags {
			out.Flags[k] = x
		}
		for k, x := range v.Flags {
			out.Flags[k] = x
		}
	}
	return out
}

func (r *resolver) launch(path string, l *Launch, urls []string) *LaunchPlan {
	lp := &LaunchPlan{Command: l.Command, Env: l.Env, Dir: r.dir, ReadyURL: l.Ready.URL,
		ReadyTimeout: Duration(DefaultReadyTimeout), StopSignal: l.Stop.Signal, StopGrace: Duration(DefaultStopGrace)}
	if len(l.Command) == 0 || l.Command[0] == "" {
		r.problem(path+".command", "give the program and its arguments as a list, e.g. [vllm, serve, MODEL]", "launch needs a command")
	}
	for i, a := range l.Command {
		name, ok := redact.CredentialFlag(a)
		if !ok {
			continue
		}
		value, j := "", i
		if _, v, has := strings.Cut(a, "="); has {
			value = v
		} else if i+1 < len(l.Command) {
			value, j = l.Command[i+1], i+1
		}
		if value != "" && !envRef.MatchString(value) {
			// Not quoted back: it may be the credential itself.
			r.problem(indexPath(path+".command", j), "pass it from infermatrix's environment, e.g. --"+name+" ${VLLM_API_KEY}: the experiment file is copied into every run",
				"--%s is given a literal value", name)
		}
	}
	if l.Dir != "" {
		lp.Dir = l.Dir
		if !filepath.IsAbs(l.Dir) {
			lp.Dir = filepath.Join(r.dir, l.Dir)
		}
		if st, err := os.Stat(lp.Dir); !r.skipFiles && (err != nil || !st.IsDir()) {
			r.problem(path+".dir", "give an existing directory, relative to the experiment file", "launch directory %q is not a directory", l.Dir)
		}
	}
	for k, v := range l.Env {
		if !envNamePattern.MatchString(k) {
			r.problem(path+".env", "name variables with letters, digits and _", "%q is not an environment variable name", k)
		}
		if redact.SecretName(k) && !envRef.MatchString(v) {
			// Not quoted back: it may be the credential itself.
			r.problem(path+".env."+k, "reference it from infermatrix's environment, e.g. "+k+": ${"+k+"}: the experiment file is copied into every run", "%s looks like a credential and is written literally", k)
		}
	}
	if lp.ReadyURL == "" && len(urls) > 0 {
		lp.ReadyURL = urls[0] + "/models"
	} else if lp.ReadyURL != "" {
		if u, ok := r.baseURL(path+".ready.url", "ready URL", lp.ReadyURL); ok {
			lp.ReadyURL = u
		}
	}
	if t := l.Ready.Timeout; t != nil {
		lp.ReadyTimeout = *t
		if *t <= 0 {
			r.problem(path+".ready.timeout", "give a duration such as 10m", "ready timeout must be positive")
		}
	}
	if lp.StopSignal == "" {
		lp.StopSignal = DefaultStopSignal
	}
	if g := l.Stop.Grace; g != nil {
		lp.StopGrace = *g
		if *g < 0 {
			r.problem(path+".stop.grace", "give a duration such as 30s", "grace must not be negative")
		}
	}
	return lp
}

// expandVariants runs every row once per variant, variant by variant (all
// of the first variant's rows, then the second's): each variant's server
// is started once, and its rows see it in the same order the file gives.
func (r *resolver) expandVariants(rows []PlannedRow, variants []VariantPlan) []PlannedRow {
	if len(variants) == 0 {
		return rows
	}
	if n := len(rows) * len(variants); n > MaxRows {
		r.problem("server.variants", fmt.Sprintf("an experiment expands to at most %d rows, variants included; run fewer variants or rows, or split the experiment", MaxRows),
			"%d rows × %d variants make %d rows", len(rows), len(variants), n)
		return rows
	}
	out := make([]PlannedRow, 0, len(rows)*len(variants))
	for _, v := range variants {
		for _, row := range rows {
			row.ID += VariantSuffix(v.Name)
			row.Base += VariantSuffix(v.Name)
			row.Variant = v.Name
			out = append(out, row)
		}
	}
	return out
}

// Variant returns the variant with this name, or nil.
func (p *Plan) Variant(name string) *VariantPlan {
	for i := range p.Server.Variants {
		if p.Server.Variants[i].Name == name {
			return &p.Server.Variants[i]
		}
	}
	return nil
}

// RowPricing is what a row's cost is computed from: the plan's price,
// except that a built-in variant with its own replicas runs on that many
// GPUs, and a price per GPU hour scales with them. A GPU count the file
// declares (server.hardware.count) holds for every variant.
func (p *Plan) RowPricing(r *PlannedRow) metrics.Pricing {
	pr := p.Cost.Pricing()
	v := p.Variant(r.Variant)
	if v == nil || !v.Builtin || v.Sim.Replicas == 0 || v.Sim.Replicas == pr.GPUs || p.Cost.GPUsFrom == "server.hardware.count" {
		return pr
	}
	if c := p.Experiment.Cost; c != nil && c.USDPerGPUHour != nil {
		pr.USDPerHour = *c.USDPerGPUHour * float64(v.Sim.Replicas)
	}
	pr.GPUs = v.Sim.Replicas
	return pr
}
