package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/infermatrix/infermatrix/internal/redact"
)

// TelemetryFile holds a row's raw telemetry samples: one JSON line per
// scrape of one endpoint, on the records' clock (docs/telemetry.md).
const TelemetryFile = "telemetry.jsonl"

// LineWriter appends JSON lines to a file as they come, each written
// through to the operating system at once, as RecordWriter does: a scrape
// taken before an interrupt is on disk when the run stops.
type LineWriter struct {
	f       *os.File
	buf     bytes.Buffer
	enc     *json.Encoder
	secrets redact.Secrets
	name    string
}

// CreateLines creates the file rel (relative to the run) for appending
// JSON lines; it must not exist.
func (d *Dir) CreateLines(rel string) (*LineWriter, error) {
	p := filepath.Join(d.Path, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", rel, err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", rel, err)
	}
	w := &LineWriter{f: f, secrets: d.secrets, name: rel}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w, nil
}

// Write appends v as one line, with the run's secrets scrubbed. It is not
// safe for concurrent use.
func (w *LineWriter) Write(v any) error {
	w.buf.Reset()
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s line: %w", w.name, err)
	}
	if _, err := w.f.Write(w.secrets.Bytes(w.buf.Bytes())); err != nil {
		return fmt.Errorf("write %s: %w", w.name, err)
	}
	return nil
}

// Close flushes the file to stable storage and closes it.
func (w *LineWriter) Close() error {
	serr := w.f.Sync()
	cerr := w.f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("close %s: %w", w.name, err)
	}
	return nil
}
