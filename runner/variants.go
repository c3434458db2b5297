package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/launch"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
	"github.com/infermatrix/infermatrix/tokenizer"
)

// serverSession is one server the rows run against: the experiment's, or
// one variant's (its own built-in instance, URLs or launched process),
// with its own discovery and telemetry endpoints.
type serverSession struct {
	urls    []string
	builtin *builtinRun // nil against a real server
	scrape  *scrapePlan // nil when telemetry is off
	found   rundir.Discovered
	model   string
	proc    *launch.Process // nil unless launched
	virtual *virtualServer  // the built-in server on virtual time
}

// serverSetup is what opening any server needs from the run.
type serverSetup struct {
	plan    *schema.Plan
	toks    map[string]tokenizer.Tokenizer
	truth   *truthSink
	http    *http.Client
	apiKey  string
	headers map[string]string
	logf    func(string, ...any)
	// virtual opens built-in servers on virtual time, their clocks' zero
	// at epoch.
	virtual bool
	epoch   time.Time
}

// serverTarget is the server a session opens: the experiment's when
// variant is nil.
type serverTarget struct {
	builtin bool
	sim     schema.SimSettings
	urls    []string
	model   string
	launch  *schema.LaunchPlan
}

func targetOf(plan *schema.Plan, v *schema.VariantPlan) serverTarget {
	if v == nil {
		return serverTarget{builtin: plan.Server.Builtin, sim: plan.Server.Sim, urls: plan.Server.URLs, model: plan.Server.Model}
	}
	return serverTarget{builtin: v.Builtin, sim: v.Sim, urls: v.URLs, model: v.Model, launch: v.Launch}
}

// open starts (built-in) or finds the server and asks it what it serves.
// A launched process must already be ready (startLaunch).
func (su *serverSetup) open(ctx context.Context, t serverTarget) (*serverSession, error) {
	s := &serverSession{urls: t.urls}
	hc := su.http
	if t.builtin && su.virtual {
		vs, err := openVirtual(t, su.plan, su, su.epoch)
		if err != nil {
			return nil, err
		}
		s.virtual, s.urls, hc = vs, []string{virtualBase}, vs.http
		su.logf("built-in server on virtual time")
	} else if t.builtin {
		inst, err := startBuiltinWith(t.sim, t.model, su.plan, su.toks, su.truth)
		if err != nil {
			return nil, err
		}
		s.builtin = &builtinRun{inst: inst, truth: su.truth}
		s.urls = []string{inst.BaseURL}
		su.logf("built-in server listening on %s", inst.BaseURL)
	}
	if s.virtual == nil {
		s.scrape = newScrapePlan(su.plan.Telemetry, s.urls, su.apiKey, su.headers)
	} else {
		s.scrape = s.virtual.scrapePlan(su.plan.Telemetry)
	}
	found, err := discover(ctx, hc, s.urls[0], su.apiKey, su.headers)
	if err != nil {
		s.close()
		return nil, err
	}
	s.found = found
	if s.model, err = pickModel(t.model, found, s.urls[0], su.logf); err != nil {
		s.close()
		return nil, err
	}
	if s.builtin != nil || s.virtual != nil {
		s.found.Simulated = simulatedInfo(t.sim)
		s.found.Engine, s.found.EngineVersion, s.found.EngineFrom = SimEngineName, buildinfo.Get().Version, "the built-in server"
	}
	return s, nil
}

// pickModel is the model the rows send: the declared one, or the only one
// the server lists.
func pickModel(declared string, found rundir.Discovered, url string, logf func(string, ...any)) (string, error) {
	if declared != "" {
		return declared, nil
	}
	switch len(found.Models) {
	case 1:
		logf("using model %s, the only one the server lists", found.Models[0].ID)
		return found.Models[0].ID, nil
	case 0:
		return "", fmt.Errorf("server.model is not set and %s/models lists no model (%s)", url, found.Error)
	}
	ids := make([]string, len(found.Models))
	for i, m := range found.Models {
		ids[i] = m.ID
	}
	return "", fmt.Errorf("server.model is not set and the server lists several: %s", strings.Join(ids, ", "))
}

// close stops what the session started: the built-in server and the
// telemetry scraper. A launched process is stopped by stopLaunch, which
// records how it ended.
func (s *serverSession) close() {
	if s == nil {
		return
	}
	s.scrape.close()
	if s.builtin != nil {
		_ = s.builtin.inst.Close()
	}
}

// startBuiltinWith starts a built-in server with these settings on a
// loopback port. It counts tokens with the tokenizer of the plan's first
// row, so its usage agrees with what the rows meant to send.
func startBuiltinWith(settings schema.SimSettings, model string, plan *schema.Plan, toks map[string]tokenizer.Tokenizer, truth *truthSink) (*sim.Instance, error) {
	cfg, err := BuiltinConfig(settings)
	if err != nil {
		return nil, fmt.Errorf("start built-in server: %w", err)
	}
	cfg.Model = model
	if len(plan.Rows) > 0 {
		cfg.Tokenizer = toks[plan.Rows[0].Tokenizer]
	}
	if truth != nil {
		cfg.GroundTruth = truth
	}
	inst, err := sim.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("start built-in server: %w", err)
	}
	return inst, nil
}

// rowGroup is rows that run against one server: every row of an
// experiment without variants, or one variant's.
type rowGroup struct {
	variant *schema.VariantPlan // nil without variants
	rows    []int               // indices into plan.Rows
}

// rowGroups splits the plan's rows by variant, in plan order (the plan
// lists each variant's rows together).
func rowGroups(plan *schema.Plan) []rowGroup {
	if len(plan.Server.Variants) == 0 {
		g := rowGroup{}
		for i := range plan.Rows {
			g.rows = append(g.rows, i)
		}
		return []rowGroup{g}
	}
	var out []rowGroup
	for i := range plan.Server.Variants {
		v := &plan.Server.Variants[i]
		g := rowGroup{variant: v}
		for j := range plan.Rows {
			if plan.Rows[j].Variant == v.Name {
				g.rows = append(g.rows, j)
			}
		}
		if len(g.rows) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// variantRun is one variant's server while its rows run.
type variantRun struct {
	info    *rundir.VariantInfo
	session *serverSession
}

// enterVariant starts a variant's server (launching its process and
// waiting until it is ready when it has one), points the run state at it,
// and records it in the manifest. An error means the variant's rows cannot
// run; info says why, and the run goes on to the next variant.
func (rs *runState) enterVariant(ctx context.Context, su *serverSetup, v *schema.VariantPlan, man *rundir.Manifest) (*variantRun, error) {
	info := &rundir.VariantInfo{Name: v.Name, Description: v.Description, Builtin: v.Builtin,
		URLs: redactURLs(v.URLs), Engine: v.Engine}
	if v.Builtin {
		info.Sim = &v.Sim
	}
	man.Variants = append(man.Variants, info)
	vr := &variantRun{info: info}
	rs.logf("variant %s", v.Name)
	t := targetOf(rs.plan, v)
	fail := func(err error) (*variantRun, error) {
		err = rs.secrets.Error(err)
		info.Error = err.Error()
		rs.leaveVariant(vr)
		return vr, err
	}
	if v.Launch != nil {
		proc, err := rs.startLaunch(ctx, su, v, info)
		vr.session = &serverSession{proc: proc}
		if err != nil {
			return fail(err)
		}
	}
	s, err := su.open(ctx, t)
	if err != nil {
		return fail(err)
	}
	if vr.session != nil {
		s.proc = vr.session.proc
	}
	vr.session = s
	scrubJSON(rs.secrets, &s.found)
	info.Discovered = s.found
	info.Model = rs.secrets.String(s.model)
	if man.Server.Discovered.URL == "" && len(man.Server.Discovered.Models) == 0 {
		// Readers of runs without variants look here; the first variant's
		// server stands for the run's.
		man.Server.Discovered = s.found
	}
	rs.urls, rs.builtin, rs.scrape, rs.model, rs.virtual = s.urls, s.builtin, s.scrape, s.model, s.virtual
	rs.gate = newGate(rs.plan.Server.UnreachableAfter.D(), rs.nonce)
	if rs.gate.giveUp <= 0 {
		rs.gate.giveUp = schema.DefaultUnreachableAfter
	}
	_ = rs.dir.WriteJSON(rundir.ManifestFile, man)
	return vr, nil
}

// startLaunch starts a variant's server process, its log in
// variants/<name>/server.log, and waits until it answers.
func (rs *runState) startLaunch(ctx context.Context, su *serverSetup, v *schema.VariantPlan, info *rundir.VariantInfo) (*launch.Process, error) {
	l := v.Launch
	logRel := filepath.Join("variants", v.Name, "server.log")
	if err := os.MkdirAll(filepath.Join(rs.dir.Path, "variants", v.Name), 0o755); err != nil {
		return nil, err
	}
	env, _ := launch.Env(l.Env)
	argv, _ := launch.Args(l.Command)
	info.Command, info.Dir, info.Log = redact.Command(l.Command), l.Dir, logRel
	info.Env = l.Env // as written: a credential only as ${NAME} (schema refuses a literal one)
	hdr := http.Header{}
	for k, x := range su.headers {
		hdr.Set(k, x)
	}
	if su.apiKey != "" {
		hdr.Set("Authorization", "Bearer "+su.apiKey)
	}
	proc, err := launch.Start(launch.Spec{
		Command: argv, Env: env, Dir: l.Dir, Log: filepath.Join(rs.dir.Path, logRel),
		ReadyURL: l.ReadyURL, ReadyTimeout: l.ReadyTimeout.D(), Header: hdr,
		StopSignal: l.StopSignal, StopGrace: l.StopGrace.D(),
	})
	if err != nil {
		return nil, err
	}
	started := proc.Started.UTC()
	info.Started, info.PID = &started, proc.PID()
	rs.logf("variant %s: started %s (pid %d), waiting for %s", v.Name, strings.Join(info.Command, " "), proc.PID(), redact.URL(l.ReadyURL))
	if err := proc.WaitReady(ctx, su.http); err != nil {
		return proc, err
	}
	ready := proc.Ready.UTC()
	info.Ready = &ready
	info.ReadyAfterS = proc.Ready.Sub(proc.Started).Seconds()
	rs.logf("variant %s: ready after %.1fs", v.Name, info.ReadyAfterS)
	return proc, nil
}

// leaveVariant stops what enterVariant started and records how the
// launched process ended; its log stays in the run directory, scrubbed of
// the run's secrets.
func (rs *runState) leaveVariant(vr *variantRun) {
	if vr == nil || vr.session == nil {
		return
	}
	vr.session.close()
	if p := vr.session.proc; p != nil {
		if err := p.Stop(); err != nil {
			vr.info.StopError = rs.secrets.String(err.Error())
		}
		stopped := time.Now().UTC()
		vr.info.Stopped = &stopped
		if !rs.secrets.Empty() {
			path := filepath.Join(rs.dir.Path, vr.info.Log)
			if b, err := os.ReadFile(path); err == nil {
				_ = os.WriteFile(path, rs.secrets.Bytes(b), 0o644)
			}
		}
	}
	vr.session = nil
}

// notRun is the summary of a row its variant's server never served.
func notRun(row *schema.PlannedRow, why error) metrics.RowSummary {
	s := metrics.RowSummary{ID: row.ID, Base: row.Base, Status: metrics.RowNotRun}
	if why != nil {
		s.Error = why.Error()
	}
	return s
}

// variantStops reports whether a row's error ends its variant only: with
// variants, a server that stops answering fails that variant's remaining
// rows, and the next variant (its own server) still runs.
func variantStops(g rowGroup, err error) bool {
	return g.variant != nil && errors.Is(err, ErrServerUnreachable)
}

func redactURLs(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redact.URL(u)
	}
	return out
}

// launchSecrets are the credentials the launch blocks read from the
// environment, scrubbed like the API key from everything the run keeps.
func launchSecrets(plan *schema.Plan) []string {
	var out []string
	for _, v := range plan.Server.Variants {
		if v.Launch != nil {
			_, s := launch.Env(v.Launch.Env)
			_, a := launch.Args(v.Launch.Command)
			out = append(append(out, s...), a...)
		}
	}
	return out
}

// wantsTruth reports whether any built-in server of the run writes its
// ground truth (server.sim.ground_truth, or a variant's).
func wantsTruth(plan *schema.Plan) bool {
	if plan.Server.Builtin && plan.Server.Sim.GroundTruth {
		return true
	}
	for _, v := range plan.Server.Variants {
		if v.Builtin && v.Sim.GroundTruth {
			return true
		}
	}
	return false
}
