package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// TestManifestMasksCredentials: whatever reaches the manifest, a credential
// header's value, a secret-named engine flag and a URL's user info and
// query are written masked, and the rest as is.
func TestManifestMasksCredentials(t *testing.T) {
	d, err := Create("", "exp", t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{
		Command: []string{"infermatrix", "run", "x.yaml", "--target", "https://alice:pw-SEKRIT1@h/v1?key=SEKRIT2"},
		Server: ServerInfo{Declared: schema.ServerPlan{
			URLs:      []string{"http://h/v1"},
			Headers:   map[string]string{"X-Goog-Api-Key": "SEKRIT3", "X-Team": "capacity"},
			HeaderEnv: map[string]string{"Private-Token": "GITLAB_TOKEN"},
			Engine:    schema.Engine{Flags: map[string]any{"api-key": "SEKRIT4", "max-num-batched-tokens": 8192}},
		}},
		Rows: []schema.PlannedRow{{ID: "a", Headers: map[string]string{"Cookie": "SEKRIT5", "X-Row": "r"}}},
	}
	if err := d.WriteJSON(ManifestFile, m); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(d.Path, ManifestFile))
	text := string(b)
	if strings.Contains(text, "SEKRIT") || strings.Contains(text, "alice") {
		t.Errorf("manifest.json holds a credential:\n%s", text)
	}
	back, err := d.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	decl := back.Server.Declared
	if decl.Headers["X-Team"] != "capacity" || decl.Headers["X-Goog-Api-Key"] != redact.Mask ||
		decl.HeaderEnv["Private-Token"] != "GITLAB_TOKEN" || decl.Engine.Flags["max-num-batched-tokens"] != float64(8192) ||
		decl.Engine.Flags["api-key"] != redact.Mask || back.Rows[0].Headers["X-Row"] != "r" || back.Rows[0].Headers["Cookie"] != redact.Mask {
		t.Errorf("manifest read back: %+v, rows %+v", decl, back.Rows)
	}
	if got := strings.Join(back.Command, " "); got != "infermatrix run x.yaml --target https://***@h/v1?key=***" {
		t.Errorf("command = %q", got)
	}
	// The manifest in memory is left as it was: masking is on the way out.
	if m.Server.Declared.Headers["X-Goog-Api-Key"] != "SEKRIT3" {
		t.Error("MarshalJSON changed the manifest it wrote")
	}
}

// TestScrubCoversEveryWrite: once a run knows its secrets, no file it
// writes holds one, records included, even in JSON's escaped form.
func TestScrubCoversEveryWrite(t *testing.T) {
	d, err := Create("", "exp", t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const secret = "SEKRIT-<abc>123"
	d.Scrub(redact.NewSecrets(secret))
	if err := d.WriteFile("notes.txt", []byte("server said "+secret)); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteJSON("x.json", map[string]string{"echo": secret}); err != nil {
		t.Fatal(err)
	}
	w, err := d.CreateRecords("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&metrics.Record{ID: "1", Error: &metrics.Error{Class: "http_4xx", Message: "401: bad key " + secret}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var recs []metrics.Record
	if err := d.ReadRecords("a", func(r *metrics.Record) error { recs = append(recs, *r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Error.Message != "401: bad key "+redact.Mask {
		t.Errorf("records = %+v", recs)
	}
	filepath.WalkDir(d.Path, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "SEKRIT") {
			t.Errorf("%s holds the secret:\n%s", p, b)
		}
		return nil
	})
}
