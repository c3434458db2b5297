package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

func TestCreateNamesRunsByTime(t *testing.T) {
	base := t.TempDir()
	now := time.Date(2026, 11, 21, 15, 4, 5, 0, time.FixedZone("CET", 3600))
	a, err := Create(base, "exp", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "exp", "20261121T140405Z"); a.Path != want {
		t.Errorf("Path = %s; want %s (UTC)", a.Path, want)
	}
	b, err := Create(base, "exp", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if b.Path != a.Path+"-1" {
		t.Errorf("second run in the same second: %s; want %s-1", b.Path, a.Path)
	}
	if target, err := os.Readlink(filepath.Join(base, "exp", "latest")); err != nil || target != filepath.Base(b.Path) {
		t.Errorf("latest -> %q (%v); want the newest run", target, err)
	}
}

func TestCreateExactRefusesUsedDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create("", "exp", dir, time.Now()); err != nil {
		t.Errorf("empty directory: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "summary.json"), []byte("{}"), 0o644)
	if _, err := Create("", "exp", dir, time.Now()); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("used directory: err = %v; want a refusal that keeps earlier results", err)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	d := &Dir{Path: t.TempDir()}
	w, err := d.CreateRecords("sweep/c=4")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Write(&metrics.Record{ID: "x", Row: "sweep/c=4", Seq: int64(i), Events: []int64{1, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, "rows", "sweep", "c=4", RecordsFile)); err != nil {
		t.Errorf("swept row's records not nested under rows/sweep/c=4: %v", err)
	}
	// A run killed mid-write leaves a torn last line: reading skips it.
	f, _ := os.OpenFile(d.RecordsPath("sweep/c=4"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"x","row":"sweep/c=4","se`)
	f.Close()
	var seqs []int64
	if err := d.ReadRecords("sweep/c=4", func(r *metrics.Record) error { seqs = append(seqs, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || seqs[2] != 2 {
		t.Errorf("read seqs %v; want 0 1 2", seqs)
	}
	// ScanRecords says which line it skipped, for the report to say so.
	if torn, err := d.ScanRecords("sweep/c=4", func(*metrics.Record) error { return nil }); err != nil || torn != 4 {
		t.Errorf("ScanRecords = torn line %d, %v; want line 4, nil", torn, err)
	}
	// A bad last line that ends in a newline was not cut short by a kill.
	os.WriteFile(d.RecordsPath("sweep/c=4"), []byte("{\"seq\":1}\n{\"seq\":2,\n"), 0o644)
	if torn, err := d.ScanRecords("sweep/c=4", func(*metrics.Record) error { return nil }); err == nil || torn != 0 || !strings.Contains(err.Error(), "line 2 is not a record") {
		t.Errorf("ScanRecords = torn line %d, %v; want an error naming line 2", torn, err)
	}
	// A corrupt line in the middle is an error, not silently skipped.
	os.WriteFile(d.RecordsPath("sweep/c=4"), []byte("{\"seq\":1}\nnot json\n{\"seq\":2}\n"), 0o644)
	err = d.ReadRecords("sweep/c=4", func(*metrics.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v; want the corrupt line named", err)
	}
}

func TestWriteFileIsAtomicAndReadable(t *testing.T) {
	d := &Dir{Path: t.TempDir()}
	if err := d.WriteJSON("rows/a/summary.json", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Path, "rows", "a", "summary.json")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v; want 0644", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("%d files; want no temporary file left behind", len(entries))
	}
	b, _ := os.ReadFile(p)
	if string(b) != "{\n  \"n\": 1\n}\n" {
		t.Errorf("content %q", b)
	}
}
