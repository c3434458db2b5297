package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/infermatrix/infermatrix/k8s/k8stest"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/runner"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
)

// pod is one pod of a decoded Job as this test runs it: the container's
// command line and environment, with every mount path mapped to a folder
// on this machine.
type pod struct {
	name     string
	args     []string
	env      []string
	termLog  string
	exitCode int
}

// kubelet plays the kubelet's part for one pod spec on this machine: it
// materializes the ConfigMap's items under the experiment mount, maps the
// claim and emptyDirs to folders, resolves secretKeyRefs from secrets,
// expands $(VAR) in args as Kubernetes does, and points the termination
// message path at a file.
func kubelet(t *testing.T, root, name string, spec *corev1.PodSpec, d *k8stest.Decoded, secrets map[string]string, extraEnv map[string]string) *pod {
	t.Helper()
	c := spec.Containers[0]
	mounts := map[string]string{}
	for _, v := range spec.Volumes {
		var host string
		switch {
		case v.PersistentVolumeClaim != nil:
			host = filepath.Join(root, "claim-"+v.PersistentVolumeClaim.ClaimName)
		case v.ConfigMap != nil:
			host = filepath.Join(root, name, "configmap")
			for _, it := range v.ConfigMap.Items {
				data, ok := d.ConfigMap.Data[it.Key]
				if !ok {
					data = string(d.ConfigMap.BinaryData[it.Key])
				}
				p := filepath.Join(host, filepath.FromSlash(it.Path))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		default:
			host = filepath.Join(root, name, "emptydir-"+v.Name)
		}
		if err := os.MkdirAll(host, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts[v.Name] = host
	}
	p := &pod{name: name, termLog: filepath.Join(root, name, "termination-log")}
	env := map[string]string{}
	for k, v := range extraEnv {
		env[k] = v
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v, ok := secrets[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("%s: secret key %s not in the Secret", name, e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name] = v
		default:
			env[e.Name] = e.Value
		}
	}
	for k, v := range env {
		p.env = append(p.env, k+"="+v)
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, a := range c.Args {
		a = expand.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		if a == c.TerminationMessagePath {
			p.args = append(p.args, p.termLog)
			continue
		}
		for _, m := range c.VolumeMounts {
			if a == m.MountPath || strings.HasPrefix(a, m.MountPath+"/") {
				a = mounts[m.Name] + strings.TrimPrefix(a, m.MountPath)
				break
			}
		}
		p.args = append(p.args, a)
	}
	return p
}

// start runs the pod's command line as a separate process: the test
// binary, which runs Main for it (TestMain), with only the pod's
// environment beside PATH and HOME.
func (p *pod) start(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), mainArgsEnv + "=" + strings.Join(p.args, "\x1f")}, p.env...)
	out, err := os.Create(p.termLog + ".out")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer out.Close()
		_ = cmd.Wait()
		p.exitCode = cmd.ProcessState.ExitCode()
	}()
}

// The manifests infermatrix k8s prints run as a cluster would run them:
// two shard pods (each a separate process with only its pod's environment,
// JOB_COMPLETION_INDEX and the Secret's key) and the merge pod beside them,
// against one server. The shards exit 0 with their share in their
// termination messages, the merge waits for them and merges the union,
// and the API key is in no file the run wrote.
func TestK8sManifestsRunAsPods(t *testing.T) {
	cfg, err := runner.BuiltinConfig(schema.SimSettings{Preset: "llama-3.1-8b-h100"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := sim.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := sim.StartOn(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	dir := t.TempDir()
	exp := filepath.Join(dir, "exp", "dist.yaml")
	if err := os.MkdirAll(filepath.Dir(exp), 0o755); err != nil {
		t.Fatal(err)
	}
	const key = "sk-k8s-test-3f9a1c"
	writeFileT(t, exp, `apiVersion: infermatrix/v1
name: dist
server: {target: builtin, api: chat, api_key_env: BENCH_API_KEY, sim: {preset: llama-3.1-8b-h100}}
defaults: {input_tokens: 32, output_tokens: 8, body: {ignore_eos: true}}
rows:
  - id: open
    rate: {per_second: 20, arrival: poisson}
    duration: 1500ms
    grace: 2s
  - id: closed
    concurrency: 2
    duration: 1500ms
    grace: 2s
`)
	manifests := filepath.Join(dir, "run.yaml")
	start := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	r := cli(t, context.Background(), "k8s", exp, "--shards", "2", "--image", "infermatrix:test", "--name", "dist-test",
		"--target", inst.BaseURL, "--secret", "bench", "--start-at", start, "--metrics-port", "0", "-o", manifests)
	if r.code != exitOK {
		t.Fatalf("k8s: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	stream, err := os.ReadFile(manifests)
	if err != nil {
		t.Fatal(err)
	}
	d := k8stest.Decode(t, stream)
	if strings.Contains(string(stream), key) {
		t.Fatal("the manifests hold the API key")
	}
	secrets := map[string]string{"BENCH_API_KEY": key}
	root := filepath.Join(dir, "cluster")
	var pods []*pod
	for k := 0; k < int(*d.Shards.Spec.Completions); k++ {
		pods = append(pods, kubelet(t, root, fmt.Sprintf("shard-%d", k), &d.Shards.Spec.Template.Spec, d, secrets,
			map[string]string{"JOB_COMPLETION_INDEX": fmt.Sprint(k)}))
	}
	merge := kubelet(t, root, "merge", &d.Merge.Spec.Template.Spec, d, secrets, nil)
	var wg sync.WaitGroup
	for _, p := range append(pods, merge) {
		p.start(t, &wg)
	}
	wg.Wait()
	for _, p := range append(pods, merge) {
		out, _ := os.ReadFile(p.termLog + ".out")
		if p.exitCode != exitOK {
			t.Errorf("%s: exit %d\n%s", p.name, p.exitCode, out)
		}
	}
	for k, p := range pods {
		msg := readFile(t, p.termLog)
		if want := fmt.Sprintf("shard %d/2: share recorded", k+1); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "Exit 0.") {
			t.Errorf("%s termination message %q, want it to begin %q and end with the exit", p.name, msg, want)
		}
	}
	results := filepath.Join(root, "claim-dist-test-results", "dist-test")
	if msg := readFile(t, merge.termLog); !strings.Contains(msg, filepath.Join(results, "merged")) || !strings.Contains(msg, "Exit 0") && !strings.Contains(msg, "exit 0") {
		t.Errorf("merge termination message %q: want the merged directory and the exit", msg)
	}
	var merged metrics.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(results, "merged", "summary.json"))), &merged); err != nil {
		t.Fatal(err)
	}
	for _, row := range merged.Rows {
		sum := 0
		for i := 1; i <= 2; i++ {
			var s metrics.Summary
			if err := json.Unmarshal([]byte(readFile(t, filepath.Join(results, fmt.Sprintf("shard-%d", i), "summary.json"))), &s); err != nil {
				t.Fatal(err)
			}
			sum += s.Row(row.ID).Requests.Sent
		}
		if row.Requests.Sent != sum || sum == 0 {
			t.Errorf("row %s: merged %d requests, shards %d together", row.ID, row.Requests.Sent, sum)
		}
	}
	_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), key) {
				t.Errorf("%s holds the API key", path)
			}
		}
		return nil
	})
}

// A pod scheduled after the shared start refuses its share (exit 2, which
// the pod failure policy turns into a failed index) and leaves a mark in
// its output directory, so that the merge waiting for it does not wait out
// the deadline: it merges the other shards at once, INCONCLUSIVE.
func TestLateShardLeavesAbandonedMark(t *testing.T) {
	exp := filepath.Join(t.TempDir(), "late.yaml")
	writeFileT(t, exp, "apiVersion: infermatrix/v1\nname: late\nserver: {target: builtin}\nrows:\n  - {id: open, rate: {per_second: 5}, duration: 1s, input_tokens: 16, output_tokens: 4}\n")
	out := filepath.Join(t.TempDir(), "shard-{shard}")
	late := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	t.Setenv(completionIndexEnv, "1")
	term := filepath.Join(t.TempDir(), "termination-log")
	r := cli(t, context.Background(), "run", exp, "--shard", "k8s/2", "--start-at", late, "--out", out, "--termination-log", term)
	if r.code != exitUsage {
		t.Fatalf("exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	dir := strings.ReplaceAll(out, "{shard}", "2")
	a, err := rundir.ReadAbandoned(dir)
	if err != nil || a == nil || a.Index != 2 || a.Count != 2 || !strings.Contains(a.Reason, "in the past") {
		t.Fatalf("mark %+v, %v: want shard 2/2 marked with why", a, err)
	}
	if msg := readFile(t, term); !strings.HasPrefix(msg, "shard 2/2: Exit 2: --start-at") {
		t.Errorf("termination message %q", msg)
	}
}
