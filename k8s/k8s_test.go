package k8s

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/infermatrix/infermatrix/k8s/k8stest"
)

// The strict decoder the tests rely on refuses a misplaced field, so
// that the tests above can fail.
func TestStrictDecodingRefusesMisplacedField(t *testing.T) {
	doc := "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  completionMode: Indexed\n  template:\n    spec:\n      backoffLimitPerIndex: 0\n      containers: []\n"
	if _, _, err := k8stest.StrictDecoder(t).Decode([]byte(doc), nil, nil); err == nil || !strings.Contains(err.Error(), "backoffLimitPerIndex") {
		t.Fatalf("a pod-level backoffLimitPerIndex decoded: %v", err)
	}
}

func testOptions() Options {
	return Options{
		Name: "llama-matrix-1127-2000", Namespace: "bench", Image: "registry.example.com/infermatrix:v1.2.0",
		Shards: 4, StartAt: time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC),
		Experiment: File{Path: "matrix.yaml", Data: []byte("apiVersion: infermatrix/v1\nname: matrix\n")},
		Files: []File{
			{Path: "traces/day one.jsonl", Data: []byte(`{"timestamp": 0}` + "\n")},
			{Path: "data/prompts.bin", Data: []byte{0, 1, 2, 0xff}},
		},
		RunArgs: []string{"--target", "http://vllm.inference.svc:8000/v1"},
		Env:     []string{"HF_HEADER", "OPENAI_API_KEY"}, Secret: "vllm-key",
		Storage: "5Gi", StorageClass: "nfs", CPU: "4", Memory: "3Gi", MetricsPort: 9464,
		Deadline: 40 * time.Minute, Grace: 45 * time.Second,
	}
}

func render(t *testing.T, o Options) []byte {
	t.Helper()
	objs, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "a header\nof two lines", objs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The manifests strictly decode into the API types and hold together as
// a cluster would need: an Indexed Job of N pods with a failure policy the
// API accepts, whose volumes, ConfigMap keys, claim and Secret references
// all resolve, running as the image's non-root user.
func TestManifestsDecodeStrictlyAndHoldTogether(t *testing.T) {
	o := testOptions()
	d := k8stest.Decode(t, render(t, o))
	if d.ConfigMap == nil || d.Claim == nil || d.Shards == nil || d.Merge == nil || d.Deployment != nil {
		t.Fatalf("objects: %+v", d)
	}
	job := d.Shards.Spec
	if *job.Completions != 4 || *job.Parallelism != 4 || *job.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completions %d parallelism %d mode %s, want an Indexed Job of 4", *job.Completions, *job.Parallelism, *job.CompletionMode)
	}
	if job.BackoffLimitPerIndex == nil || *job.BackoffLimitPerIndex != 0 {
		t.Errorf("backoffLimitPerIndex %v: a shard cannot rejoin the shared start, so none is retried", job.BackoffLimitPerIndex)
	}
	if *job.ActiveDeadlineSeconds != 2400 {
		t.Errorf("activeDeadlineSeconds %d, want the 40m deadline", *job.ActiveDeadlineSeconds)
	}
	for _, j := range []*batchv1.Job{d.Shards, d.Merge} {
		checkPod(t, j.Name, &j.Spec.Template.Spec, d)
		checkPolicy(t, j)
		for k, v := range j.Labels {
			checkLabel(t, j.Name, k, v)
		}
		if len(j.Name) > 63 {
			t.Errorf("job name %q longer than a label value", j.Name)
		}
	}
	if d.Claim.Spec.AccessModes[0] != corev1.ReadWriteMany || *d.Claim.Spec.StorageClassName != "nfs" {
		t.Errorf("claim %+v: want ReadWriteMany in class nfs", d.Claim.Spec)
	}
	if q := d.Claim.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "5Gi" {
		t.Errorf("claim size %s", q.String())
	}
	// The shard's command line: shard from the completion index, the
	// shared start, its own folder, the experiment as mounted.
	c := d.Shards.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"run /experiment/matrix.yaml", "--shard k8s/4", "--start-at 2026-11-27T20:00:00Z",
		"--out /results/llama-matrix-1127-2000/shard-{shard}", "--termination-log /dev/termination-log",
		"--target http://vllm.inference.svc:8000/v1", "--metrics-addr 0.0.0.0:9464"} {
		if !strings.Contains(args, want) {
			t.Errorf("shard args %q lack %q", args, want)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit throttles the client between a token's arrival and its timestamp")
	}
	if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("termination message %s %s", c.TerminationMessagePath, c.TerminationMessagePolicy)
	}
	var secrets []string
	for _, e := range c.Env {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "vllm-key" || e.ValueFrom.SecretKeyRef.Key != e.Name {
			t.Errorf("env %+v: credentials come from the Secret, key = variable name", e)
		}
		secrets = append(secrets, e.Name)
	}
	if !slices.Equal(secrets, []string{"HF_HEADER", "OPENAI_API_KEY"}) {
		t.Errorf("secret env %v", secrets)
	}
	// The merge waits for exactly the N shard folders.
	margs := d.Merge.Spec.Template.Spec.Containers[0].Args
	var dirs []string
	for _, a := range margs {
		if strings.HasPrefix(a, "/results/llama-matrix-1127-2000/shard-") {
			dirs = append(dirs, a)
		}
	}
	if len(dirs) != 4 || dirs[0] != "/results/llama-matrix-1127-2000/shard-1" || dirs[3] != "/results/llama-matrix-1127-2000/shard-4" {
		t.Errorf("merge reads %v, want shard-1..shard-4", dirs)
	}
	if !strings.Contains(strings.Join(margs, " "), "-o /results/llama-matrix-1127-2000/merged --wait 40m45s") {
		t.Errorf("merge args %v", margs)
	}
	// Text stays readable in data; anything else is binaryData.
	if _, ok := d.ConfigMap.BinaryData["2-data_prompts.bin"]; !ok || string(d.ConfigMap.BinaryData["2-data_prompts.bin"]) != "\x00\x01\x02\xff" {
		t.Errorf("binary file: %v", d.ConfigMap.BinaryData)
	}
	if d.ConfigMap.Data["0-matrix.yaml"] == "" {
		t.Errorf("experiment not in data: %v", d.ConfigMap.Data)
	}
}

// checkPod holds a pod spec to what the API server and kubelet require of
// it beyond its shape.
func checkPod(t *testing.T, name string, p *corev1.PodSpec, d *k8stest.Decoded) {
	t.Helper()
	if (strings.HasSuffix(name, "-shards") || strings.HasSuffix(name, "-merge")) && p.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %s; a pod failure policy needs Never", name, p.RestartPolicy)
	}
	sc := p.SecurityContext
	if sc == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || *sc.FSGroup != 65532 {
		t.Errorf("%s: security context %+v: want the image's numeric non-root user and fsGroup for the volume", name, sc)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range p.Volumes {
		vols[v.Name] = v
	}
	for _, c := range p.Containers {
		if !*c.SecurityContext.ReadOnlyRootFilesystem || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: container security %+v", name, c.Name, c.SecurityContext)
		}
		for res, q := range c.Resources.Requests {
			if _, err := resource.ParseQuantity(q.String()); err != nil {
				t.Errorf("%s: %s %v", name, res, err)
			}
		}
		for _, m := range c.VolumeMounts {
			v, ok := vols[m.Name]
			if !ok {
				t.Errorf("%s/%s: mount %s names no volume", name, c.Name, m.Name)
				continue
			}
			if v.ConfigMap != nil {
				if v.ConfigMap.Name != d.ConfigMap.Name {
					t.Errorf("%s: configMap volume names %s, not %s", name, v.ConfigMap.Name, d.ConfigMap.Name)
				}
				for _, it := range v.ConfigMap.Items {
					_, inData := d.ConfigMap.Data[it.Key]
					_, inBinary := d.ConfigMap.BinaryData[it.Key]
					if !inData && !inBinary || strings.Contains(it.Path, "..") || strings.HasPrefix(it.Path, "/") {
						t.Errorf("%s: item %+v", name, it)
					}
					if !regexp.MustCompile(`^[-._a-zA-Z0-9]+$`).MatchString(it.Key) {
						t.Errorf("%s: configMap key %q is not a valid key", name, it.Key)
					}
				}
			}
			if v.PersistentVolumeClaim != nil && d.Claim != nil && v.PersistentVolumeClaim.ClaimName != d.Claim.Name {
				t.Errorf("%s: claim %s, not %s", name, v.PersistentVolumeClaim.ClaimName, d.Claim.Name)
			}
		}
	}
	for _, tsc := range p.TopologySpreadConstraints {
		for k, v := range tsc.LabelSelector.MatchLabels {
			checkLabel(t, name, k, v)
		}
	}
}

// checkPolicy holds a Job's pod failure policy to the API's validation:
// FailIndex only with backoffLimitPerIndex, exit code 0 never under In,
// containerName naming a container, restartPolicy Never.
func checkPolicy(t *testing.T, j *batchv1.Job) {
	t.Helper()
	pfp := j.Spec.PodFailurePolicy
	if pfp == nil || len(pfp.Rules) == 0 {
		t.Fatalf("%s: no pod failure policy", j.Name)
	}
	names := map[string]bool{}
	for _, c := range j.Spec.Template.Spec.Containers {
		names[c.Name] = true
	}
	for i, r := range pfp.Rules {
		if r.Action == batchv1.PodFailurePolicyActionFailIndex && j.Spec.BackoffLimitPerIndex == nil {
			t.Errorf("%s rule %d: FailIndex needs backoffLimitPerIndex", j.Name, i)
		}
		if (r.OnExitCodes == nil) == (len(r.OnPodConditions) == 0) {
			t.Errorf("%s rule %d: exactly one of onExitCodes and onPodConditions", j.Name, i)
		}
		if e := r.OnExitCodes; e != nil {
			if e.ContainerName != nil && !names[*e.ContainerName] {
				t.Errorf("%s rule %d: container %s does not exist", j.Name, i, *e.ContainerName)
			}
			if e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Contains(e.Values, 0) {
				t.Errorf("%s rule %d: 0 under In", j.Name, i)
			}
			if !slices.IsSorted(e.Values) {
				t.Errorf("%s rule %d: values must be sorted", j.Name, i)
			}
		}
	}
}

var labelRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

func checkLabel(t *testing.T, obj, k, v string) {
	t.Helper()
	if len(v) > 63 || !labelRE.MatchString(v) {
		t.Errorf("%s: label %s=%q is not a valid label value", obj, k, v)
	}
}

// The shard pods' failure policy is infermatrix's exit codes: an invalid
// experiment (4) fails the whole Job, since every shard fails alike; a
// runtime error, a usage error (a pod started too late) or an
// interruption fails that index only. The merge Job fails on any verdict
// but PASS, with the code in its condition.
func TestFailurePoliciesMapExitCodes(t *testing.T) {
	d := k8stest.Decode(t, render(t, testOptions()))
	action := func(j *batchv1.Job, code int32) batchv1.PodFailurePolicyAction {
		for _, r := range j.Spec.PodFailurePolicy.Rules {
			if r.OnExitCodes != nil && slices.Contains(r.OnExitCodes.Values, code) == (r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
				return r.Action
			}
		}
		return "Count"
	}
	for code, want := range map[int32]batchv1.PodFailurePolicyAction{
		4: batchv1.PodFailurePolicyActionFailJob, 1: batchv1.PodFailurePolicyActionFailIndex,
		2: batchv1.PodFailurePolicyActionFailIndex, 130: batchv1.PodFailurePolicyActionFailIndex,
	} {
		if got := action(d.Shards, code); got != want {
			t.Errorf("shard exit %d: %s, want %s", code, got, want)
		}
	}
	for _, code := range []int32{1, 2, 3, 4, 5, 130} {
		if got := action(d.Merge, code); got != batchv1.PodFailurePolicyActionFailJob {
			t.Errorf("merge exit %d: %s, want FailJob", code, got)
		}
	}
	var evicted bool
	for _, r := range d.Shards.Spec.PodFailurePolicy.Rules {
		for _, c := range r.OnPodConditions {
			evicted = evicted || c.Type == corev1.DisruptionTarget && r.Action == batchv1.PodFailurePolicyActionFailIndex
		}
	}
	if !evicted {
		t.Error("an evicted shard's index is not failed: a retry could not rejoin the shared start")
	}
}

// --with-sim adds the built-in server as a Deployment and Service that the
// shards' --target names; an existing claim replaces the new one.
func TestWithSimAndExistingClaim(t *testing.T) {
	o := testOptions()
	o.Claim, o.Storage = "shared-results", ""
	o.Sim = &Sim{Args: []string{"--preset", "llama-3.1-8b-h100"}}
	o.RunArgs = []string{"--target", o.SimURL()}
	o.MetricsPort = 0
	d := k8stest.Decode(t, render(t, o))
	if d.Claim != nil || d.Deployment == nil || d.Service == nil {
		t.Fatalf("claim %v deployment %v service %v", d.Claim, d.Deployment, d.Service)
	}
	if v := d.Shards.Spec.Template.Spec.Volumes; v[len(v)-1].PersistentVolumeClaim.ClaimName != "shared-results" {
		t.Errorf("shards use %+v", v[len(v)-1])
	}
	if d.Service.Name+":8000" != strings.TrimPrefix(strings.TrimSuffix(o.SimURL(), "/v1"), "http://") {
		t.Errorf("service %s does not serve %s", d.Service.Name, o.SimURL())
	}
	if fmt.Sprint(d.Service.Spec.Selector) != fmt.Sprint(d.Deployment.Spec.Template.Labels) {
		t.Errorf("service selects %v, pods are %v", d.Service.Spec.Selector, d.Deployment.Spec.Template.Labels)
	}
	if a := d.Shards.Spec.Template.Annotations; a["prometheus.io/scrape"] != "" || strings.Contains(strings.Join(d.Shards.Spec.Template.Spec.Containers[0].Args, " "), "--metrics-addr") {
		t.Errorf("metrics port 0 still serves metrics: %v", a)
	}
	checkPod(t, d.Deployment.Name, &d.Deployment.Spec.Template.Spec, d)
}

// Every problem with the options is reported at once, with what to do.
func TestOptionsProblemsAllAtOnce(t *testing.T) {
	o := testOptions()
	o.Name, o.Image, o.Secret = "Bad_Name", "", ""
	o.Files = append(o.Files, File{Path: "../outside.jsonl", Data: []byte("x")}, File{Path: "big.jsonl", Data: bytes.Repeat([]byte("x"), ConfigMapLimit)})
	_, err := Build(o)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`name "Bad_Name"`, "--image is required", "--secret NAME", "../outside.jsonl", "more than a ConfigMap's"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestNameFrom(t *testing.T) {
	at := time.Date(2026, 11, 27, 20, 5, 0, 0, time.UTC)
	for in, want := range map[string]string{
		"Llama 8B / H100 matrix": "llama-8b-h100-matrix-1127-2005",
		"":                       "infermatrix-1127-2005",
		strings.Repeat("a", 80):  strings.Repeat("a", 30) + "-1127-2005",
	} {
		if got := NameFrom(in, at); got != want || len(got) > MaxNameLen || !dnsLabel.MatchString(got) {
			t.Errorf("NameFrom(%q) = %q, want %q", in, got, want)
		}
	}
}
