package release

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	op   string // upper case: FROM, COPY, USER, ...
	args string
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{start, strings.ToUpper(op), strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The image must build without a registry and run as a non-root user:
// FROM scratch only (no base image to pull, no second stage that would
// pull a Go image), no RUN (a scratch image has no shell, and a RUN that
// downloads would make the build depend on the network), no ADD of a URL,
// a numeric non-root USER (Kubernetes' runAsNonRoot checks the number),
// and the binary as the entrypoint.
func TestDockerfileInvariants(t *testing.T) {
	ins := parseDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	var froms, users []instruction
	var entrypoint string
	copied := map[string]bool{}
	for _, in := range ins {
		switch in.op {
		case "FROM":
			froms = append(froms, in)
		case "RUN":
			t.Errorf("line %d: RUN %s: the image is FROM scratch and builds without running anything", in.line, in.args)
		case "ADD":
			t.Errorf("line %d: ADD %s: use COPY; ADD fetches URLs and unpacks archives", in.line, in.args)
		case "USER":
			users = append(users, in)
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			for _, f := range strings.Fields(in.args) {
				if strings.HasPrefix(f, "--from") {
					t.Errorf("line %d: COPY %s: no other image or stage", in.line, in.args)
				}
				if !strings.HasPrefix(f, "--") {
					copied[f] = true
				}
			}
		}
	}
	if len(froms) != 1 || froms[0].args != "scratch" {
		t.Errorf("FROM: %+v, want exactly one, FROM scratch", froms)
	}
	if len(users) == 0 {
		t.Fatal("no USER: the container would run as root")
	}
	last := users[len(users)-1].args
	if !regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`).MatchString(last) || strings.HasPrefix(last, "0") {
		t.Errorf("USER %s: want a numeric uid other than 0 (e.g. 65532:65532)", last)
	}
	if entrypoint != `["/infermatrix"]` {
		t.Errorf(`ENTRYPOINT %s, want ["/infermatrix"]`, entrypoint)
	}
	for _, want := range []string{"rootfs/", "home/", "infermatrix"} {
		if !copied[want] {
			t.Errorf("nothing COPY'd from %s (the context make image-context prepares)", want)
		}
	}
}

// make image-context must prepare every path the Dockerfile copies, and
// the user the Dockerfile names must be the one its /etc/passwd holds.
func TestImageContextMatchesDockerfile(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := string(mk)
	for _, want := range []string{
		"$(DIST)/image/rootfs/etc/ssl/certs", "$(DIST)/image/rootfs/tmp", "$(DIST)/image/home/work",
		"-o $(DIST)/image/infermatrix ", "$(DIST)/image/rootfs/etc/passwd", "infermatrix:x:65532:65532:",
		"chmod 1777 $(DIST)/image/rootfs/tmp", "CGO_ENABLED=0 GOOS=linux",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("Makefile's image-context lacks %q", want)
		}
	}
}
