package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// AbandonedFile marks a shard's output directory as one that will never
// hold a run: the shard refused to start (too late for the shared start,
// a bad shard) or failed before it created its run directory. A merge
// waiting for the shards (merge --wait) reads it as that shard missing, at
// once, rather than waiting out its deadline for a directory that will not
// come.
const AbandonedFile = "abandoned.json"

// Abandoned is what AbandonedFile holds.
type Abandoned struct {
	// Index and Count are the shard's (run --shard I/N).
	Index int `json:"index"`
	Count int `json:"count"`
	// Reason is the error that stopped the shard; At when it stopped.
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// WriteAbandoned writes the mark into dir, creating it; a dir that already
// holds a run (a manifest) is left alone, since its records say more.
func WriteAbandoned(dir string, a Abandoned) error {
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("rundir: marking %s abandoned: %w", dir, err)
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, AbandonedFile), append(b, '\n'), 0o644)
}

// ReadAbandoned reads the mark in dir: nil, and no error, when there is none.
func ReadAbandoned(dir string) (*Abandoned, error) {
	b, err := os.ReadFile(filepath.Join(dir, AbandonedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a Abandoned
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("rundir: %s: %w", filepath.Join(dir, AbandonedFile), err)
	}
	return &a, nil
}
