// Package rundir owns the layout of a run directory: the one place a run's
// records, summaries and decision record live, written by the runner and read
// back by the reports, so that `infermatrix report` can re-render every
// artifact without sending a request.
//
// Layout (format infermatrix.run/v1):
//
//	<run>/
//	  experiment.yaml         the experiment file exactly as run
//	  experiment.yaml.sha256  its hash, in sha256sum's format
//	  manifest.json           tool, host, times, server, expanded rows
//	  summary.json            every row's summary
//	  decision.md             the decision record
//	  rows/<row id>/requests.jsonl  one record per request, appended as each completes
//	  rows/<row id>/summary.json    the row's summary
//	  rows/<row id>/trial-<k>/      with repeat: each trial's requests.jsonl and summary.json;
//	                                the row's summary.json pools them
//
// The experiment and the manifest (marked running) are written before the
// first request, each record the moment its request ends, a row's summary
// when the row ends, and summary.json and the final manifest when the run
// ends. A run killed outright keeps all but the last; package reports
// rebuilds them from the rest.
//
// Swept row ids contain a slash ("saturation/c=16"), so their directories
// nest: rows/saturation/c=16/.
package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// Format versions the run directory layout and manifest.
const Format = "infermatrix.run/v1"

// File names within a run directory.
const (
	ExperimentFile = "experiment.yaml"
	HashFile       = "experiment.yaml.sha256"
	ManifestFile   = "manifest.json"
	SummaryFile    = "summary.json"
	DecisionFile   = "decision.md"
	RecordsFile    = "requests.jsonl"
	// SimGroundTruthFile is the built-in server's own log of every token's
	// due and flush time (server.sim.ground_truth), to compute the client's
	// measurement error against.
	SimGroundTruthFile = "sim-ground-truth.jsonl"
	rowsDir            = "rows"
)

// Run statuses in the manifest.
const (
	StatusRunning     = "running"
	StatusComplete    = "complete"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// Manifest describes a run: what ran, where, when, against what.
type Manifest struct {
	Format     string         `json:"format"`
	Tool       buildinfo.Info `json:"tool"`
	Host       Host           `json:"host"`
	Command    []string       `json:"command"`
	Experiment ExperimentInfo `json:"experiment"`
	Started    time.Time      `json:"started"`
	Ended      *time.Time     `json:"ended,omitempty"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	Server     ServerInfo     `json:"server"`
	SLO        metrics.SLO    `json:"slo"`
	// Semantics names whose metric definitions the run's summaries follow
	// (report.semantics): the same records mean different numbers under
	// vLLM's or AIPerf's definitions.
	Semantics string              `json:"semantics"`
	Rows      []schema.PlannedRow `json:"rows"`
	// Baseline is the run this one's rules were judged against, if any.
	Baseline *BaselineInfo `json:"baseline,omitempty"`
	// Virtual says the run ran on the built-in server's virtual clock
	// (run --virtual): its times are simulated, not measured on a socket.
	Virtual bool `json:"virtual,omitempty"`
	// Shard says the run is one shard of a distributed run (run --shard
	// I/N): which one, of how many, and the plan every shard derived its
	// share from. Nil for a run that is not sharded.
	Shard *ShardInfo `json:"shard,omitempty"`
	// Merged says the run was put together by infermatrix merge from
	// the shards of a distributed run; nil for a run that ran as one.
	Merged *MergeInfo `json:"merged,omitempty"`
	// Variants are the server variants the rows ran under, in run order
	// (server.variants); none for a run without them.
	Variants []*VariantInfo `json:"variants,omitempty"`
}

// ShardInfo places one shard of a distributed run (issue 15). Every shard
// of one run has the same Count and PlanSHA256; infermatrix merge refuses
// shards that differ and calls a merge with a missing Index INCONCLUSIVE.
type ShardInfo struct {
	// Index is the shard's number, from 1; Count how many shards the run
	// has.
	Index int `json:"index"`
	Count int `json:"count"`
	// PlanSHA256 is the hash of the global plan (the experiment as run,
	// before any shard took its share): equal hashes, equal schedules.
	PlanSHA256 string `json:"plan_sha256"`
	// StartAt is the instant every shard began its first row
	// (--start-at), nil when the shard started when it was launched.
	StartAt *time.Time `json:"start_at,omitempty"`
	// StartSkewNS is how late this shard began its first row against
	// StartAt: its own clock's view, for the self-check.
	StartSkewNS int64 `json:"start_skew_ns,omitempty"`
	// RowStarts are the rows' planned and actual starts under StartAt,
	// in run order: a row that began late (the row before overran its
	// slot) is out of step with the other shards for that long, which
	// merge reports (and judges) per row. Empty without StartAt.
	RowStarts []RowStart `json:"row_starts,omitempty"`
}

// RowStart is one row's start against the schedule --start-at fixes.
type RowStart struct {
	// Row is the row's id (a repeated row's trials each have one).
	Row string `json:"row"`
	// Planned is the instant the plan fixed for the row's start.
	Planned time.Time `json:"planned"`
	// LateNS is how late, by this shard's clock, the row began against
	// Planned (0 or more; a row never starts early).
	LateNS int64 `json:"late_ns"`
}

// Host is the machine the client ran on.
type Host struct {
	Name string `json:"name"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus"`
}

// ExperimentInfo identifies the experiment file.
type ExperimentInfo struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	File        string         `json:"file"` // the path it was run from
	SHA256      string         `json:"sha256"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// ServerInfo is the server as the experiment declared it and as the run
// found it. The two can differ (a model name, a context limit), and a
// reviewer should see both.
type ServerInfo struct {
	Declared   schema.ServerPlan `json:"declared"`
	Discovered Discovered        `json:"discovered"`
}

// Discovered is what the server said of itself: GET /models, the
// response headers, and the engine's own endpoint where it has one.
type Discovered struct {
	URL    string  `json:"url,omitempty"`
	Models []Model `json:"models,omitempty"`
	Server string  `json:"server_header,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Engine and EngineVersion are the engine that answered, as it named
	// itself; EngineFrom says where that was read (vLLM's /version,
	// llama.cpp's /props, TGI's /info, SGLang's /get_server_info,
	// /models' owned_by, the Server header). Empty when it could not be
	// told.
	Engine        string `json:"engine,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	EngineFrom    string `json:"engine_from,omitempty"`
	// Properties are what the engine reported of its limits and
	// parallelism, by discovery's names (max_model_len, max_running,
	// tensor_parallel, ...), from its self-description endpoint and
	// /models.
	Properties map[string]string `json:"properties,omitempty"`
	// GPUModels names each GPU the DCGM exporters reported during the
	// run (their modelName label), one entry per GPU.
	GPUModels []string `json:"gpu_models,omitempty"`
	// Simulated describes the built-in server when it served the run:
	// what actually answered, whatever the experiment declares.
	Simulated *Simulated `json:"simulated,omitempty"`
}

// Simulated is the built-in server's configuration as it ran.
type Simulated struct {
	Preset      string `json:"preset"`
	Model       string `json:"model"`
	GPU         string `json:"gpu,omitempty"`
	Replicas    int    `json:"replicas,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	// Calibration is the calibration block of the preset file the run
	// used (server.sim.preset_file), without its per-row table: where the
	// preset came from and its error on held-out rows.
	Calibration *schema.Calibration `json:"calibration,omitempty"`
}

// Model is one entry of GET /models.
type Model struct {
	ID          string `json:"id"`
	OwnedBy     string `json:"owned_by,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

// Dir is a run directory.
type Dir struct {
	Path string
	// secrets are scrubbed from every file written (Scrub).
	secrets redact.Secrets
}

// DefaultBase is where runs go unless --out says otherwise.
const DefaultBase = "runs"

// TimestampLayout names run directories: sortable, and free of ':' so the
// names work on every filesystem.
const TimestampLayout = "20060102T150405Z"

// Create makes a new run directory. With exact set, that path is used and
// must not already hold files; otherwise the directory is
// base/<name>/<UTC timestamp>, with a numeric suffix if two runs start in
// the same second.
func Create(base, name, exact string, now time.Time) (*Dir, error) {
	if exact != "" {
		entries, err := os.ReadDir(exact)
		if err == nil && len(entries) > 0 {
			return nil, fmt.Errorf("output directory %s is not empty; choose a new one so earlier results are kept", exact)
		}
		if err := os.MkdirAll(exact, 0o755); err != nil {
			return nil, fmt.Errorf("create run directory: %w", err)
		}
		return &Dir{Path: exact}, nil
	}
	if base == "" {
		base = DefaultBase
	}
	parent := filepath.Join(base, name)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	stamp := now.UTC().Format(TimestampLayout)
	for i := 0; i < 1000; i++ {
		p := filepath.Join(parent, stamp)
		if i > 0 {
			p = fmt.Sprintf("%s-%d", p, i)
		}
		err := os.Mkdir(p, 0o755)
		if err == nil {
			d := &Dir{Path: p}
			d.linkLatest(parent, filepath.Base(p))
			return d, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create run directory: %w", err)
		}
	}
	return nil, fmt.Errorf("create run directory: too many runs named %s in %s", stamp, parent)
}

// linkLatest points base/<name>/latest at the newest run, as a convenience
// for people; nothing reads it, so failure (say, no symlinks on this
// filesystem) is ignored.
func (d *Dir) linkLatest(parent, leaf string) {
	link := filepath.Join(parent, "latest")
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if os.Symlink(leaf, tmp) == nil {
		_ = os.Rename(tmp, link)
	}
}

// Open opens an existing run directory, checking its format.
func Open(path string) (*Dir, error) {
	d := &Dir{Path: path}
	m, err := d.Manifest()
	if err != nil {
		return nil, err
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%s: run directory format %q, this build reads %q", path, m.Format, Format)
	}
	return d, nil
}

// RowDir is the directory of a row's files.
func (d *Dir) RowDir(rowID string) string {
	return filepath.Join(d.Path, rowsDir, filepath.FromSlash(rowID))
}

// RecordsPath is the path of a row's requests.jsonl.
func (d *Dir) RecordsPath(rowID string) string {
	return filepath.Join(d.RowDir(rowID), RecordsFile)
}

// WriteFile writes a file atomically (write to a temporary file, then
// rename), so a reader or an interrupted run never sees half a summary.
func (d *Dir) WriteFile(rel string, data []byte) error {
	p := filepath.Join(d.Path, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	_, werr := tmp.Write(d.secrets.Bytes(data))
	// CreateTemp makes the file private; run artifacts are meant to be read
	// and shared like any file the user writes.
	perr := tmp.Chmod(0o644)
	cerr := tmp.Close()
	if werr != nil || perr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", rel, errors.Join(werr, perr, cerr))
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// WriteJSON writes v as indented JSON with a final newline.
func (d *Dir) WriteJSON(rel string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return d.WriteFile(rel, append(b, '\n'))
}

// RowFile is the path, relative to the run, of a file in a row's directory.
func RowFile(rowID, name string) string {
	return filepath.Join(rowsDir, filepath.FromSlash(rowID), name)
}

// Manifest reads manifest.json.
func (d *Dir) Manifest() (*Manifest, error) {
	var m Manifest
	if err := d.readJSON(ManifestFile, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Summary reads summary.json.
func (d *Dir) Summary() (*metrics.Summary, error) {
	var s metrics.Summary
	if err := d.readJSON(SummaryFile, &s); err != nil {
		return nil, err
	}
	if s.Format != metrics.SummaryFormat {
		return nil, fmt.Errorf("%s: summary format %q, this build reads %q", d.Path, s.Format, metrics.SummaryFormat)
	}
	return &s, nil
}

func (d *Dir) readJSON(rel string, v any) error {
	b, err := os.ReadFile(filepath.Join(d.Path, rel))
	if err != nil {
		return fmt.Errorf("read run: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read run: %s: %w", rel, err)
	}
	return nil
}

// ReadRecords calls fn for each record of a row, in file order, and for a
// repeated row each trial's in turn (Record.Trial tells them apart). A
// final line cut short (the process was killed mid-write) is skipped; any
// other bad line is an error, since it means the file was edited or
// corrupted.
func (d *Dir) ReadRecords(rowID string, fn func(*metrics.Record) error) error {
	return d.readRecords(rowID, false, fn)
}

// ReadRecordsLean is ReadRecords with every record's Events and
// EventTokens left out, for readers that need a request's times and counts
// but not the arrival of each token: those arrays are most of a streamed
// record's bytes, and most of the time it takes to decode one.
func (d *Dir) ReadRecordsLean(rowID string, fn func(*metrics.Record) error) error {
	return d.readRecords(rowID, true, fn)
}

func (d *Dir) readRecords(rowID string, lean bool, fn func(*metrics.Record) error) error {
	parts, err := d.RecordParts(rowID)
	if err != nil {
		return err
	}
	for _, p := range parts {
		f, err := os.Open(d.RecordsPath(p))
		if err != nil {
			return fmt.Errorf("read records: %w", err)
		}
		_, err = scanRecords(f, d.RecordsPath(p), lean, fn) // scan.go
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// ScanRecords is ReadRecords that also says which line it skipped: torn is
// the number of a final line cut short, 0 when there is none.
//
// Each record is written with one write call, its newline last, the moment
// its request ends (RecordWriter), so a run killed mid-write (SIGKILL, a
// second Ctrl-C, a full disk) can leave at most its last line partial, with
// no newline. That line is torn and skipped. A bad line anywhere else, or a
// bad last line that did end in a newline, was not written by a run cut
// short: it is an error with its line number.
func (d *Dir) ScanRecords(rowID string, fn func(*metrics.Record) error) (torn int, err error) {
	f, err := os.Open(d.RecordsPath(rowID))
	if err != nil {
		return 0, fmt.Errorf("read records: %w", err)
	}
	defer f.Close()
	return scanRecords(f, d.RecordsPath(rowID), false, fn) // scan.go
}

// RecordWriter appends records to a row's requests.jsonl.
//
// Each record goes to the file in its own write call the moment it is
// handed over, with no user-space buffer, so every completed request is in
// the operating system's hands even if the process is killed. A record is a
// few hundred bytes to a few kilobytes; one write per completed request costs
// microseconds, negligible beside the request itself.
type RecordWriter struct {
	f       *os.File
	buf     bytes.Buffer
	enc     *json.Encoder
	secrets redact.Secrets
}

// CreateRecords creates a row's requests.jsonl.
func (d *Dir) CreateRecords(rowID string) (*RecordWriter, error) {
	if err := os.MkdirAll(d.RowDir(rowID), 0o755); err != nil {
		return nil, fmt.Errorf("create records: %w", err)
	}
	f, err := os.OpenFile(d.RecordsPath(rowID), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create records: %w", err)
	}
	w := &RecordWriter{f: f, secrets: d.secrets}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w, nil
}

// Write appends one record. It is not safe for concurrent use: the runner
// funnels records through one goroutine.
func (w *RecordWriter) Write(r *metrics.Record) error {
	w.buf.Reset()
	if err := w.enc.Encode(r); err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if _, err := w.f.Write(w.secrets.Bytes(w.buf.Bytes())); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}

// Close flushes the file to stable storage and closes it.
func (w *RecordWriter) Close() error {
	serr := w.f.Sync()
	cerr := w.f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("close records: %w", err)
	}
	return nil
}
