package schema

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// PresetFile is a simulator preset kept in a file of its own and named by
// server.sim.preset_file: a built-in preset to start from and overrides of
// its engine and front end, with the keys of server.sim.engine and
// server.sim.front_end. `infermatrix calibrate` writes one fitted to a
// measured run, with a calibration block saying how well it fits
// (docs/calibrate.md); it can be written by hand too.
//
// Precedence, lowest first: the base preset, the file, the experiment's own
// server.sim.engine and server.sim.front_end.
type PresetFile struct {
	Base        string       `yaml:"base" json:"base" required:"true"`
	Engine      SimEngine    `yaml:"engine" json:"engine,omitempty"`
	FrontEnd    SimFrontEnd  `yaml:"front_end" json:"front_end,omitempty"`
	Calibration *Calibration `yaml:"calibration" json:"calibration,omitempty"`
}

// Calibration says where a fitted preset came from and how well it
// reproduces the run it was fitted to: per row and metric the measured and
// simulated figure and the error, and per metric the largest error over the
// rows the fit used and over the rows it held out. The held-out figure is
// the honest one: the fit never saw those rows.
type Calibration struct {
	// Source is the run directory the preset was fitted to, as given.
	Source           string   `yaml:"source" json:"source"`
	Experiment       string   `yaml:"experiment" json:"experiment"`
	ExperimentSHA256 string   `yaml:"experiment_sha256" json:"experiment_sha256,omitempty"`
	Base             string   `yaml:"base" json:"base"`
	Date             string   `yaml:"date" json:"date"` // RFC 3339, UTC
	Tool             string   `yaml:"tool" json:"tool"` // infermatrix version that fitted it
	Replicas         int      `yaml:"replicas" json:"replicas,omitempty"`
	FittedRows       []string `yaml:"fitted_rows" json:"fitted_rows"`
	HeldOutRows      []string `yaml:"held_out_rows" json:"held_out_rows"`
	// Rows is left out of the manifest (CalibrationSummary); the file
	// keeps it.
	Rows  []CalibrationRow `yaml:"rows" json:"rows,omitempty"`
	Error CalibrationError `yaml:"error" json:"error"`
	// File is the preset file the run read, set at load time (never
	// written in the file itself).
	File string `yaml:"-" json:"file,omitempty"`
}

// CalibrationRow is one row of the fitted run: its three figures as
// measured and as the fitted preset simulates them.
type CalibrationRow struct {
	ID        string          `yaml:"id" json:"id"`
	HeldOut   bool            `yaml:"held_out" json:"held_out,omitempty"`
	TTFTP50   CalibrationCell `yaml:"ttft_p50_ms" json:"ttft_p50_ms"`
	TPOTP50   CalibrationCell `yaml:"tpot_p50_ms" json:"tpot_p50_ms"`
	OutputTPS CalibrationCell `yaml:"output_tok_s" json:"output_tok_s"`
}

// CalibrationCell is one figure of one row. A figure the run did not
// measure (TPOT of one-token outputs, TTFT of a row that did not stream) is
// absent, never zero.
type CalibrationCell struct {
	Measured  *float64 `yaml:"measured" json:"measured,omitempty"`
	Simulated *float64 `yaml:"simulated" json:"simulated,omitempty"`
	ErrorPct  *float64 `yaml:"error_pct" json:"error_pct,omitempty"`
}

// CalibrationError is the fit's error per metric: the largest absolute
// error in percent over the fitted rows and over the held-out rows.
type CalibrationError struct {
	Fitted  CalibrationErrors `yaml:"fitted" json:"fitted"`
	HeldOut CalibrationErrors `yaml:"held_out" json:"held_out"`
}

// CalibrationErrors are the largest absolute errors, in percent, of one
// group of rows; absent where no row of the group had the metric.
type CalibrationErrors struct {
	TTFTP50   *float64 `yaml:"ttft_p50_pct" json:"ttft_p50_pct,omitempty"`
	TPOTP50   *float64 `yaml:"tpot_p50_pct" json:"tpot_p50_pct,omitempty"`
	OutputTPS *float64 `yaml:"output_tok_s_pct" json:"output_tok_s_pct,omitempty"`
}

// Summary is the calibration without its per-row table: what the manifest
// and the decision record carry.
func (c *Calibration) Summary() *Calibration {
	if c == nil {
		return nil
	}
	s := *c
	s.Rows = nil
	return &s
}

// ParsePresetFile decodes a preset file with the experiment format's
// decoder: unknown keys, bad values and a base that is not an engine preset
// are problems positioned in that file.
func ParsePresetFile(path string, data []byte) (*PresetFile, Problems) {
	if len(data) > MaxFileBytes {
		return nil, Problems{{File: path, Pos: Pos{1, 1}, Message: fmt.Sprintf("the file is %s, over the %s limit", byteSize(int64(len(data))), byteSize(MaxFileBytes))}}
	}
	doc, probs := parseDocument(path, data)
	if len(probs) > 0 {
		return nil, probs
	}
	d := newDecoder(path)
	if !d.checkNodes(doc) {
		return nil, d.problems.sorted()
	}
	pf := &PresetFile{}
	d.value(doc.Content[0], "", reflect.ValueOf(pf).Elem(), nil)
	if pf.Base != "" && !d.isBroken("base") {
		if p, ok := engine.LookupPreset(pf.Base); !ok {
			pos := d.pos["base"]
			d.problems = append(d.problems, Problem{File: path, Pos: pos, Path: "base",
				Message: fmt.Sprintf("unknown engine preset %q", pf.Base),
				Hint:    "name a built-in engine preset: " + strings.Join(engine.PresetNames(), ", ")})
		} else {
			pf.Base = p.Name
		}
	}
	if len(d.problems) > 0 {
		return nil, d.problems.sorted()
	}
	return pf, nil
}

// readPresetFile reads server.sim.preset_file the way Load reads the
// experiment: a regular file of bounded size.
func readPresetFile(full string) ([]byte, error) {
	if err := checkRegular(full, os.Stat); err != nil {
		return nil, err
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// presetFile applies server.sim.preset_file to s: the file's base becomes
// the preset unless the experiment names one (then they must agree), and
// each engine and front-end key the experiment leaves unset takes the
// file's value. Problems in the file are reported at the experiment's
// preset_file key, quoting the file's own position, so that `validate`
// points at the line that brought the file in.
func (r *resolver) presetFile(s *SimSettings) {
	const path = "server.sim.preset_file"
	full := r.resolvePath(s.PresetFile)
	data, err := readPresetFile(full)
	if err != nil {
		if r.skipFiles {
			return // re-rendering: the manifest carries what ran
		}
		var ps Problems
		if asProblems(err, &ps) {
			r.nested(path, ps)
			return
		}
		if msg := fmt.Sprintf("cannot read preset file %q: %v", s.PresetFile, err); !r.reported(msg) {
			r.problem(path, "paths are relative to the experiment file's directory; infermatrix calibrate RUN -o FILE writes one", "%s", msg)
		}
		return
	}
	pf, probs := ParsePresetFile(s.PresetFile, data)
	if len(probs) > 0 {
		r.nested(path, probs)
		return
	}
	switch {
	case s.Preset == "":
		s.Preset = pf.Base
	case s.Preset == PresetFixed:
		r.problem(path, "remove preset: fixed to run the preset file, or remove preset_file",
			"preset_file has no effect with preset fixed, which has no engine")
		return
	case !strings.EqualFold(s.Preset, pf.Base):
		r.problem(path, fmt.Sprintf("remove server.sim.preset (the file says base: %s), or set it to %s", pf.Base, pf.Base),
			"preset %s contradicts the preset file's base %s", s.Preset, pf.Base)
		return
	}
	fillUnset(reflect.ValueOf(&s.Engine).Elem(), reflect.ValueOf(pf.Engine))
	fillUnset(reflect.ValueOf(&s.FrontEnd).Elem(), reflect.ValueOf(pf.FrontEnd))
	if c := pf.Calibration.Summary(); c != nil {
		c.File = s.PresetFile
		s.Calibration = c
	}
}

// fillUnset copies into dst each field of src that dst leaves at its zero
// value (unset, for the override structs, whose keys are pointers or
// positive numbers).
func fillUnset(dst, src reflect.Value) {
	for i := 0; i < dst.NumField(); i++ {
		if dst.Field(i).IsZero() {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// nested reports a file's problems as problems of the experiment at path,
// each quoting its own file, line and column.
func (r *resolver) nested(path string, ps Problems) {
	for _, p := range ps {
		msg := p.File
		if p.Pos.Line > 0 {
			msg += fmt.Sprintf(":%d:%d", p.Pos.Line, p.Pos.Col)
		}
		msg += ": "
		if p.Path != "" {
			msg += p.Path + ": "
		}
		hint := p.Hint
		if hint == "" {
			hint = "docs/calibrate.md describes the preset file"
		}
		if r.reported(msg + p.Message) {
			// A variant inheriting server.sim's file: said once, at
			// the line that named it.
			continue
		}
		r.problem(path, hint, "%s%s", msg, p.Message)
	}
}

// reported says whether a problem with this message is already listed.
func (r *resolver) reported(msg string) bool {
	for _, p := range r.d.problems {
		if p.Message == msg {
			return true
		}
	}
	return false
}

// asProblems unwraps a Problems error (checkRegular's size limit).
func asProblems(err error, out *Problems) bool {
	ps, ok := err.(Problems)
	if ok {
		*out = ps
	}
	return ok
}

// ApplyPresetFile applies the preset file at path to settings given outside
// an experiment (infermatrix sim --preset-file), with the same precedence:
// keys already set in s win over the file's. An empty s.Preset takes the
// file's base; another preset is an error.
func (s *SimSettings) ApplyPresetFile(path string) error {
	data, err := readPresetFile(path)
	if err != nil {
		return fmt.Errorf("preset file: %w", err)
	}
	pf, probs := ParsePresetFile(path, data)
	if len(probs) > 0 {
		return probs
	}
	switch {
	case s.Preset == "":
		s.Preset = pf.Base
	case !strings.EqualFold(s.Preset, pf.Base):
		return fmt.Errorf("preset %s contradicts the preset file's base %s", s.Preset, pf.Base)
	}
	fillUnset(reflect.ValueOf(&s.Engine).Elem(), reflect.ValueOf(pf.Engine))
	fillUnset(reflect.ValueOf(&s.FrontEnd).Elem(), reflect.ValueOf(pf.FrontEnd))
	if c := pf.Calibration.Summary(); c != nil {
		c.File = path
		s.Calibration = c
	}
	return nil
}
