package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// TrialRow is the id under which trial k (from 1) of a repeated row keeps
// its files: rows/<id>/trial-<k>/requests.jsonl and summary.json. Every
// method taking a row id takes it too. A row without repeat keeps its
// files in rows/<id>/ as before, so nothing changes for it.
func TrialRow(rowID string, k int) string { return fmt.Sprintf("%s/trial-%d", rowID, k) }

// Trials counts the trials of a row that have records: trial-1, trial-2,
// … up to the first missing one. 0 for a row without repeat (or one whose
// first trial never started).
func (d *Dir) Trials(rowID string) int {
	n := 0
	for {
		if _, err := os.Stat(d.RecordsPath(TrialRow(rowID, n+1))); err != nil {
			return n
		}
		n++
	}
}

// RecordParts lists the ids whose requests.jsonl hold a row's records, in
// order: the row's own file, or, for a repeated row, each trial's. A row
// with neither gives its own id, whose file is then missing.
func (d *Dir) RecordParts(rowID string) ([]string, error) {
	if _, err := os.Stat(d.RecordsPath(rowID)); err == nil {
		return []string{rowID}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read records: %w", err)
	}
	n := d.Trials(rowID)
	if n == 0 {
		return []string{rowID}, nil
	}
	parts := make([]string, n)
	for k := 1; k <= n; k++ {
		parts[k-1] = TrialRow(rowID, k)
	}
	return parts, nil
}
