package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium finds a Chromium or Chrome binary: $INFERMATRIX_CHROMIUM, or
// the first of the usual names on $PATH.
func chromium() string {
	if p := os.Getenv("INFERMATRIX_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// pageCheck is run in the page after load, before the DOM is dumped. It
// runs before the page's Content-Security-Policy is read, so the policy
// applies to everything in the report and not to the check. It records
// every error event (a resource that failed included), every CSP
// violation, each image's intrinsic size (zero when it did not decode),
// every fetched resource that is not a data: URL, the section order, and
// whether the page is wider than the window.
const pageCheck = `<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) {
    var t = e.target || {};
    errors.push("error: " + (e.message || t.src || t.href || String(t.tagName)));
  }, true);
  document.addEventListener("securitypolicyviolation", function (e) {
    errors.push("csp: " + e.violatedDirective + " blocked " + e.blockedURI);
  });
  window.addEventListener("load", function () {
    var out = {
      loaded: true,
      errors: errors,
      images: Array.prototype.map.call(document.images, function (i) {
        return {alt: i.alt, width: i.complete ? i.naturalWidth : 0, height: i.complete ? i.naturalHeight : 0};
      }),
      resources: performance.getEntriesByType("resource").map(function (r) { return r.name; })
        .filter(function (n) { return n.indexOf("data:") !== 0; }),
      sections: Array.prototype.map.call(document.querySelectorAll("section[id]"), function (s) { return s.id; }),
      overflow: document.documentElement.scrollWidth > window.innerWidth
    };
    var pre = document.createElement("pre");
    pre.id = "im-check";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  });
})();
</script>
`

type pageResult struct {
	Loaded bool     `json:"loaded"`
	Errors []string `json:"errors"`
	Images []struct {
		Alt           string
		Width, Height int
	} `json:"images"`
	Resources []string `json:"resources"`
	Sections  []string `json:"sections"`
	Overflow  bool     `json:"overflow"`
	// Console holds the console messages and network errors Chromium
	// logged.
	Console []string `json:"-"`
}

var (
	checkOut   = regexp.MustCompile(`(?s)<pre id="im-check">(.*?)</pre>`)
	consoleMsg = regexp.MustCompile(`(?m)^.*(:CONSOLE|net::ERR_|Refused to ).*$`)
)

// openInChromium loads page, as a file, in headless Chromium with a
// window width px wide, with every network request sent to a closed port
// and every host name unresolvable, and returns what the check saw.
func openInChromium(t *testing.T, bin string, page []byte, width int) pageResult {
	t.Helper()
	dir := t.TempDir()
	i := bytes.Index(page, []byte("<head>"))
	if i < 0 {
		t.Fatal("the page has no <head>")
	}
	i += len("<head>")
	checked := append(append(append([]byte(nil), page[:i]...), pageCheck...), page[i:]...)
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, checked, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless=new", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-default-apps",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		// Nothing may leave the file; if anything tries, it fails and
		// says so in the log.
		"--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
		"--enable-logging=stderr", "--v=0",
		fmt.Sprintf("--window-size=%d,900", width),
		"--virtual-time-budget=5000", "--dump-dom", "file://"+file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	m := checkOut.FindSubmatch(stdout.Bytes())
	if m == nil {
		t.Fatalf("the page check did not run; Chromium's log:\n%s\nDOM:\n%.2000s", stderr.String(), stdout.String())
	}
	var res pageResult
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &res); err != nil {
		t.Fatalf("page check output: %v: %s", err, m[1])
	}
	res.Console = consoleMsg.FindAllString(stderr.String(), -1)
	return res
}

// problems lists what is wrong with a page as the check saw it.
func (r pageResult) problems() []string {
	var out []string
	if !r.Loaded {
		out = append(out, "the page did not finish loading")
	}
	for _, e := range r.Errors {
		out = append(out, "page error: "+e)
	}
	for _, c := range r.Console {
		out = append(out, "Chromium logged: "+strings.TrimSpace(c))
	}
	for _, n := range r.Resources {
		out = append(out, "the page fetched "+n)
	}
	for _, img := range r.Images {
		if img.Width == 0 || img.Height == 0 {
			out = append(out, fmt.Sprintf("image %q did not render", img.Alt))
		}
	}
	return out
}

// TestHTMLInChromium opens report.html in headless Chromium: every plot
// renders, nothing is logged to the console, no request leaves the file,
// and in a narrow window the tables scroll inside their boxes instead of
// widening the page. A page with an external image and stylesheet is
// opened too, to show the check would catch them.
//
// It is skipped when no Chromium is installed, unless
// INFERMATRIX_REQUIRE_CHROMIUM=1, as .ci/run sets (and installs Debian's
// chromium).
func TestHTMLInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		if os.Getenv("INFERMATRIX_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("INFERMATRIX_REQUIRE_CHROMIUM=1 and no Chromium found: install Debian's chromium (apt-get install -y chromium) or set INFERMATRIX_CHROMIUM to its path")
		}
		t.Skip("no Chromium found (chromium, chromium-browser, google-chrome or $INFERMATRIX_CHROMIUM): report.html is not checked in a browser; .ci/run installs Debian's chromium")
	}
	in, plots := htmlInput(t)
	page := renderHTML(t, in, plots)

	t.Run("desktop", func(t *testing.T) {
		r := openInChromium(t, bin, page, 1280)
		for _, p := range r.problems() {
			t.Error(p)
		}
		if len(r.Images) != len(plots) {
			t.Errorf("%d images in the page; want %d", len(r.Images), len(plots))
		}
		want := []string{"verdict", "hypotheses", "operating-point", "validity", "server-and-run", "workload-matrix", "results",
			"predictions", "acceptance", "rejected-rows", "diagnosis", "client-self-check", "plots", "reproduce"}
		if strings.Join(r.Sections, " ") != strings.Join(want, " ") {
			t.Errorf("sections %v; want %v", r.Sections, want)
		}
	})
	// 500 px is the narrowest window headless Chromium makes.
	t.Run("narrow", func(t *testing.T) {
		r := openInChromium(t, bin, page, 500)
		for _, p := range r.problems() {
			t.Error(p)
		}
		if r.Overflow {
			t.Error("the page is wider than a 500 px window: a table or a code block does not scroll inside its box")
		}
	})
	t.Run("the check catches external resources", func(t *testing.T) {
		bad := bytes.Replace(page, []byte("</main>"),
			[]byte(`<img src="http://example.com/pixel.png" alt="remote"><link rel="stylesheet" href="https://fonts.example.com/a.css"></main>`), 1)
		r := openInChromium(t, bin, bad, 1280)
		got := strings.Join(r.problems(), "\n")
		for _, want := range []string{"csp: img-src blocked http://example.com/pixel.png", `image "remote" did not render`,
			"csp: style-src-elem blocked https://fonts.example.com/a.css", "Chromium logged:"} {
			if !strings.Contains(got, want) {
				t.Errorf("problems lack %q; got:\n%s", want, got)
			}
		}
	})
}
