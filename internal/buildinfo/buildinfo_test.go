package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"testing"
)

// set gives the link-time variables values for one test.
func set(t *testing.T, version, commit, date string) {
	t.Helper()
	v, c, d := Version, Commit, Date
	Version, Commit, Date = version, commit, date
	t.Cleanup(func() { Version, Commit, Date = v, c, d })
}

func TestGetPrefersLinkedValues(t *testing.T) {
	set(t, "v9.9.9-test", "0123abc", "2026-11-27T19:00:00Z")
	got := Get()
	want := Info{Version: "v9.9.9-test", Commit: "0123abc", Date: "2026-11-27T19:00:00Z", Go: runtime.Version()}
	if got != want {
		t.Errorf("Get() = %+v, want %+v", got, want)
	}
}

// Without -ldflags (go build, go test) the version is never empty: a
// manifest must always name the build that wrote it.
func TestGetWithoutLinkedValues(t *testing.T) {
	set(t, "", "", "")
	got := Get()
	if got.Version == "" || got.Date != "" || got.Go != runtime.Version() {
		t.Errorf("Get() = %+v, want a non-empty version, no date, Go %s", got, runtime.Version())
	}
}

// makefileLinkFlags returns the -X flags the Makefile links every binary
// with, values replaced by the test's own, so that the test links what
// make build and make release link.
func makefileLinkFlags(t *testing.T, values map[string]string) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`-X \$\(PKG\)/internal/buildinfo\.(\w+)=`)
	var names []string
	flags := ""
	for _, m := range re.FindAllSubmatch(mk, -1) {
		name := string(m[1])
		if slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
		flags += " -X github.com/infermatrix/infermatrix/internal/buildinfo." + name + "=" + values[name]
	}
	slices.Sort(names)
	if want := []string{"Commit", "Date", "Version"}; !slices.Equal(names, want) {
		t.Fatalf("the Makefile's LDFLAGS set buildinfo.%v, want %v", names, want)
	}
	return flags
}

// The release's version comes from the linker: this links a small program
// with the Makefile's -X flags and reads back what Get returns, so that a
// renamed variable or a wrong package path in the Makefile fails here
// instead of shipping binaries that say "(devel)".
func TestMakefileLdflagsReachGet(t *testing.T) {
	values := map[string]string{"Version": "v9.9.9-test", "Commit": "0123abc", "Date": "2026-11-27T19:00:00Z"}
	bin := filepath.Join(t.TempDir(), "printinfo")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w"+makefileLinkFlags(t, values), "-o", bin, "./testdata/printinfo")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Version != values["Version"] || got.Commit != values["Commit"] || got.Date != values["Date"] {
		t.Errorf("linked with %v, Get() = %+v", values, got)
	}
}
