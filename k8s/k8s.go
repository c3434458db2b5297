// Package k8s writes the Kubernetes manifests of a distributed run
// (infermatrix k8s): an Indexed Job whose pods each run one shard of the
// experiment (run --shard k8s/N) from a shared start, and a merge Job that
// waits for the shards on a shared volume and judges the union once
// (docs/kubernetes.md). It only prints manifests: it talks to no cluster,
// so what runs is what a reviewer read.
package k8s

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Where the pods see things. The image's user (uid and gid 65532, see the
// Dockerfile) owns nothing on the cluster's volumes: fsGroup makes the
// results volume writable to it.
const (
	ExperimentMount = "/experiment"
	ResultsMount    = "/results"
	uid             = 65532
	// TerminationLog is where Kubernetes reads a container's termination
	// message (the default terminationMessagePath).
	TerminationLog = "/dev/termination-log"
	// ConfigMapLimit is what a ConfigMap holds at most (1 MiB, etcd's
	// object limit), less room for its metadata.
	ConfigMapLimit = 1000 * 1000
	// SimPort is the port of the built-in server deployed by --with-sim.
	SimPort = 8000
)

// File is a file the pods need beside the experiment, at Path relative to
// the experiment's directory (a trace, a dataset, a preset file).
type File struct {
	Path string
	Data []byte
}

// Options lay a distributed run out on a cluster.
type Options struct {
	// Name prefixes every object and the run's folder on the volume
	// (ResultsMount/Name); a DNS label of at most MaxNameLen characters.
	Name      string
	Namespace string
	Image     string
	// PullPolicy is the containers' imagePullPolicy; "" leaves the
	// cluster's default (Always for :latest, IfNotPresent otherwise).
	PullPolicy string
	Shards     int
	// StartAt is the instant every shard begins its first row.
	StartAt time.Time
	// Experiment is the experiment file; Files what it names, by paths
	// relative to its directory.
	Experiment File
	Files      []File
	// RunArgs are extra arguments for every shard's run (--target,
	// --rows), already checked.
	RunArgs []string
	// Env names the environment variables the experiment reads its
	// credentials from (server.api_key_env, server.header_env); Secret is
	// the Secret holding them, one key per variable name.
	Env    []string
	Secret string
	// Claim is an existing ReadWriteMany PersistentVolumeClaim for the
	// results; empty makes a new one of Storage in StorageClass ("" is
	// the cluster's default class).
	Claim        string
	StorageClass string
	Storage      string
	// CPU and Memory are each shard pod's requests (Memory its limit too).
	CPU, Memory string
	// MetricsPort serves each shard's live figures (run --metrics-addr)
	// on the pod's IP; 0 serves none.
	MetricsPort int
	// Deadline is how long after the manifests are applied the run may
	// last: the shards' activeDeadlineSeconds and merge --wait.
	Deadline time.Duration
	// Grace is the pods' terminationGracePeriodSeconds: time for a run
	// stopped by SIGTERM to give requests in flight their grace and
	// write every record.
	Grace time.Duration
	// Sim, when set, deploys the built-in server as a Service for a dry
	// run on a cluster without GPUs; RunArgs must then target SimURL.
	Sim *Sim
}

// Sim is the built-in server deployed beside the run: `infermatrix sim`
// with these arguments (a preset, a model, a preset file under
// ExperimentMount).
type Sim struct {
	Args []string
}

// MaxNameLen keeps every derived name a valid label: a Job's pods are
// named <job>-<index>-<5 characters>, and a Job's name is a label value
// (at most 63 characters) on its pods.
const MaxNameLen = 40

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dashes   = regexp.MustCompile(`-+`)
)

// NameFrom makes a default object name from an experiment's name and the
// start instant: lower-case, dashes for anything else, short enough.
func NameFrom(experiment string, at time.Time) string {
	var b strings.Builder
	for _, r := range strings.ToLower(experiment) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(dashes.ReplaceAllString(b.String(), "-"), "-")
	suffix := at.UTC().Format("0102-1504")
	if max := MaxNameLen - len(suffix) - 1; len(s) > max {
		s = strings.TrimRight(s[:max], "-")
	}
	if s == "" {
		s = "infermatrix"
	}
	return s + "-" + suffix
}

// ShardDir and MergedDir are where the pods write, on the results volume.
// "{shard}" is replaced by run with the shard's index from 1.
func (o *Options) ShardDir() string  { return path.Join(ResultsMount, o.Name, "shard-{shard}") }
func (o *Options) MergedDir() string { return path.Join(ResultsMount, o.Name, "merged") }

// check lists every problem with the options at once.
func (o *Options) check() error {
	var errs []error
	if !dnsLabel.MatchString(o.Name) || len(o.Name) > MaxNameLen {
		errs = append(errs, fmt.Errorf("name %q: want lower-case letters, digits and dashes, at most %d characters (it prefixes the Jobs and their pods)", o.Name, MaxNameLen))
	}
	if o.Namespace != "" && !dnsLabel.MatchString(o.Namespace) {
		errs = append(errs, fmt.Errorf("namespace %q: not a valid namespace name", o.Namespace))
	}
	if o.Image == "" {
		errs = append(errs, errors.New("--image is required: an image holding the infermatrix binary (make image; docs/release.md)"))
	}
	if o.Shards < 1 {
		errs = append(errs, fmt.Errorf("--shards %d: want 1 or more", o.Shards))
	}
	if len(o.Env) > 0 && o.Secret == "" {
		errs = append(errs, fmt.Errorf("the experiment reads %s from the environment: give --secret NAME, a Secret with one key per variable (kubectl create secret generic NAME --from-literal=%s=...)", strings.Join(o.Env, ", "), o.Env[0]))
	}
	if o.Claim == "" && o.Storage == "" {
		errs = append(errs, errors.New("give --claim (an existing ReadWriteMany claim) or --storage (the size of a new one)"))
	}
	size := 0
	for _, f := range append([]File{o.Experiment}, o.Files...) {
		if f.Path == "" || path.IsAbs(f.Path) || strings.HasPrefix(path.Clean(f.Path), "..") {
			errs = append(errs, fmt.Errorf("%q: the pods see files beside the experiment only (under %s); move it into the experiment's directory", f.Path, ExperimentMount))
		}
		if isText(f.Data) {
			size += len(f.Data)
		} else {
			size += base64.StdEncoding.EncodedLen(len(f.Data))
		}
	}
	if size > ConfigMapLimit {
		errs = append(errs, fmt.Errorf("the experiment and the files it names hold %d bytes, more than a ConfigMap's %d: put the large files (a tokenizer, a trace) in the image or on the results volume and name them by absolute path", size, ConfigMapLimit))
	}
	return errors.Join(errs...)
}

// Build returns the objects of a distributed run, in the order they are
// applied: the experiment's ConfigMap, the results claim, the built-in
// server if asked for, the shards' Job and the merge Job.
func Build(o Options) ([]Object, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	var objs []Object
	cm, vol := o.configMap()
	objs = append(objs, cm)
	claim := o.Claim
	if claim == "" {
		claim = o.Name + "-results"
		objs = append(objs, o.claim(claim))
	}
	if o.Sim != nil {
		objs = append(objs, o.simDeployment(vol), o.simService())
	}
	objs = append(objs, o.shardJob(vol, claim), o.mergeJob(claim))
	return objs, nil
}

// labels are every object's; component says which part of the run.
func (o *Options) labels(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "infermatrix",
		"app.kubernetes.io/instance":  o.Name,
		"app.kubernetes.io/component": component,
	}
}

func (o *Options) meta(name, component string) Meta {
	return Meta{Name: name, Namespace: o.Namespace, Labels: o.labels(component)}
}

// configMapKey makes a ConfigMap key of a relative path: keys allow
// letters, digits, '-', '_' and '.', not '/'; the volume's items put each
// key back at its path.
func configMapKey(p string, i int) string {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return fmt.Sprintf("%d-%s", i, strings.TrimLeft(b.String(), "."))
}

// configMap holds the experiment and its files; text goes in data (so a
// reviewer reads it in the manifest), anything else in binaryData.
func (o *Options) configMap() (Object, Volume) {
	cm := Object{APIVersion: "v1", Kind: "ConfigMap", Metadata: o.meta(o.Name+"-experiment", "experiment"),
		Comment: "The experiment and the files it names, mounted read-only at " + ExperimentMount + " in every pod."}
	vol := Volume{Name: "experiment", ConfigMap: &ConfigMapVolume{Name: cm.Metadata.Name}}
	for i, f := range append([]File{o.Experiment}, o.Files...) {
		key := configMapKey(f.Path, i)
		if isText(f.Data) {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = string(f.Data)
		} else {
			if cm.BinaryData == nil {
				cm.BinaryData = map[string]string{}
			}
			cm.BinaryData[key] = base64.StdEncoding.EncodeToString(f.Data)
		}
		vol.ConfigMap.Items = append(vol.ConfigMap.Items, KeyToPath{Key: key, Path: path.Clean(f.Path)})
	}
	return cm, vol
}

// isText says whether data can go in a ConfigMap's data: valid UTF-8
// without NUL bytes.
func isText(data []byte) bool {
	return !bytes.ContainsRune(data, 0) && strings.ToValidUTF8(string(data), "\uFFFD") == string(data)
}

func (o *Options) claim(name string) Object {
	spec := ClaimSpec{
		AccessModes: []string{"ReadWriteMany"},
		Resources:   Resources{Requests: map[string]string{"storage": o.Storage}},
	}
	if o.StorageClass != "" {
		spec.StorageClassName = &o.StorageClass
	}
	return Object{APIVersion: "v1", Kind: "PersistentVolumeClaim", Metadata: o.meta(name, "results"), Spec: spec,
		Comment: "Every shard writes its run directory here and the merge Job reads them all while the shards run:\n" +
			"it must be ReadWriteMany (NFS, CephFS, EFS, Filestore, Azure Files). A ReadWriteOnce volume works only\n" +
			"when every pod lands on one node. Copy the results out with a pod that mounts it (docs/kubernetes.md)."}
}

func ptr[T any](v T) *T { return &v }

// securityContexts are the restricted Pod Security Standard's: the image
// runs as its numeric non-root user, and the root filesystem is read-only
// (/tmp and /work are emptyDirs).
func podSecurity() *PodSecurityContext {
	return &PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(uid)), RunAsGroup: ptr(int64(uid)),
		FSGroup: ptr(int64(uid)), SeccompProfile: &SeccompProfile{Type: "RuntimeDefault"}}
}

func containerSecurity() *ContainerSecurityContext {
	return &ContainerSecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities: &Capabilities{Drop: []string{"ALL"}}}
}

// scratch are the writable folders a read-only root needs: /tmp (the
// workbook's stream writer spills there) and the user's home.
func scratch() ([]Volume, []VolumeMount) {
	return []Volume{{Name: "tmp", EmptyDir: &EmptyDirVolume{}}, {Name: "home", EmptyDir: &EmptyDirVolume{}}},
		[]VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "home", MountPath: "/work"}}
}

func (o *Options) env() []EnvVar {
	var env []EnvVar
	for _, name := range o.Env {
		env = append(env, EnvVar{Name: name, ValueFrom: &EnvVarSource{SecretKeyRef: &SecretKeySelector{Name: o.Secret, Key: name}}})
	}
	return env
}

// Exit codes of infermatrix (cmd/infermatrix/main.go), as the pod failure
// policies read them.
const (
	exitRuntime      = 1
	exitUsage        = 2
	exitAcceptance   = 3
	exitInvalid      = 4
	exitInconclusive = 5
	exitInterrupted  = 130
)

// shardJob is the Indexed Job: pod k runs shard k+1 of N (run --shard
// k8s/N reads JOB_COMPLETION_INDEX). A shard that cannot run its share
// cannot be run again later (the shared start has passed), so no index is
// retried: a failed index is simply missing from the merge, which makes
// the merged verdict INCONCLUSIVE, while the other shards carry on. Only
// an invalid experiment, which fails every shard alike, fails the Job.
func (o *Options) shardJob(expVol Volume, claim string) Object {
	n := int32(o.Shards)
	args := []string{"run", path.Join(ExperimentMount, path.Clean(o.Experiment.Path)),
		"--shard", fmt.Sprintf("k8s/%d", o.Shards),
		"--start-at", o.StartAt.UTC().Format(time.RFC3339Nano),
		"--out", o.ShardDir(),
		"--progress", "lines",
		"--termination-log", TerminationLog}
	args = append(args, o.RunArgs...)
	pod := o.labels("shard")
	annotations := map[string]string{}
	var ports []ContainerPort
	if o.MetricsPort > 0 {
		args = append(args, "--metrics-addr", fmt.Sprintf("0.0.0.0:%d", o.MetricsPort), "--metrics-linger", "30s")
		ports = []ContainerPort{{Name: "metrics", ContainerPort: int32(o.MetricsPort), Protocol: "TCP"}}
		annotations["prometheus.io/scrape"] = "true"
		annotations["prometheus.io/port"] = strconv.Itoa(o.MetricsPort)
		annotations["prometheus.io/path"] = "/metrics"
	}
	vols, mounts := scratch()
	vols = append(vols, expVol, Volume{Name: "results", PersistentVolumeClaim: &ClaimVolume{ClaimName: claim}})
	mounts = append(mounts, VolumeMount{Name: "experiment", MountPath: ExperimentMount, ReadOnly: true},
		VolumeMount{Name: "results", MountPath: ResultsMount})
	c := Container{
		Name: "shard", Image: o.Image, ImagePullPolicy: o.PullPolicy, Args: args, Env: o.env(), Ports: ports,
		// No CPU limit: CFS throttling would stall the client between
		// a token's arrival and its timestamp, and every latency would
		// carry it. Memory is limited at what is requested.
		Resources:    &Resources{Requests: map[string]string{"cpu": o.CPU, "memory": o.Memory}, Limits: map[string]string{"memory": o.Memory}},
		VolumeMounts: mounts, TerminationMessagePath: TerminationLog, TerminationMessagePolicy: "FallbackToLogsOnError",
		SecurityContext: containerSecurity(),
	}
	meta := o.meta(o.Name+"-shards", "shard")
	meta.Annotations = map[string]string{"infermatrix.dev/start-at": o.StartAt.UTC().Format(time.RFC3339Nano)}
	tmeta := Meta{Labels: pod}
	if len(annotations) > 0 {
		tmeta.Annotations = annotations
	}
	spec := JobSpec{
		CompletionMode: "Indexed", Completions: &n, Parallelism: &n,
		BackoffLimitPerIndex:  ptr(int32(0)),
		ActiveDeadlineSeconds: ptr(int64(o.Deadline.Seconds())),
		PodFailurePolicy: &PodFailurePolicy{Rules: []PodFailureRule{
			{Action: "FailJob", OnExitCodes: &OnExitCodes{ContainerName: "shard", Operator: "In", Values: []int32{exitInvalid}}},
			{Action: "FailIndex", OnExitCodes: &OnExitCodes{ContainerName: "shard", Operator: "In", Values: []int32{exitRuntime, exitUsage, exitInterrupted}}},
			{Action: "FailIndex", OnPodConditions: []OnPodCondition{{Type: "DisruptionTarget", Status: "True"}}},
		}},
		Template: PodTemplate{Metadata: tmeta, Spec: PodSpec{
			RestartPolicy:                 "Never",
			TerminationGracePeriodSeconds: ptr(int64(o.Grace.Seconds())),
			SecurityContext:               podSecurity(),
			TopologySpreadConstraints: []TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
				WhenUnsatisfiable: "ScheduleAnyway", LabelSelector: LabelSelector{MatchLabels: pod}}},
			Containers: []Container{c},
			Volumes:    vols,
		}},
	}
	return Object{APIVersion: "batch/v1", Kind: "Job", Metadata: meta, Spec: spec, Comment: fmt.Sprintf(
		"%d shards, one pod each, spread over nodes. Pod k runs shard k+1/%d (run --shard k8s/%d reads\n"+
			"JOB_COMPLETION_INDEX) and begins at %s, whenever it was scheduled.\n"+
			"A shard exits 0 once its share is recorded, whatever its share's rules say (the run's verdict is the merge's);\n"+
			"its termination message says what it measured: kubectl get pods -l app.kubernetes.io/instance=%s -o \\\n"+
			"  jsonpath='{range .items[*]}{.metadata.name}: {..terminated.message}{end}'\n"+
			"Pod failure policy, by infermatrix's exit codes: 4 (invalid experiment: every shard would fail alike) fails\n"+
			"the Job; 1 (runtime error), 2 (usage, or started too late to join the shared start), 130 (interrupted) and\n"+
			"an eviction fail that index only: it is not retried, as it could not rejoin the schedule, and the merge\n"+
			"is then INCONCLUSIVE, naming the missing shard. Needs Kubernetes 1.29 or later (backoffLimitPerIndex).",
		o.Shards, o.Shards, o.Shards, o.StartAt.UTC().Format(time.RFC3339), o.Name)}
}

// mergeJob waits on the volume for every shard to finish (merge --wait),
// then merges and judges the run once. It is applied with the shards, so
// the run needs no second step; its exit code is the run's verdict.
func (o *Options) mergeJob(claim string) Object {
	args := []string{"merge"}
	for i := 1; i <= o.Shards; i++ {
		args = append(args, strings.ReplaceAll(o.ShardDir(), "{shard}", strconv.Itoa(i)))
	}
	// A shard stopped at the Job's deadline still takes its grace to
	// write its records and mark itself interrupted: the merge waits for
	// that too, so it merges the shard rather than call it missing.
	wait := o.Deadline + o.Grace
	args = append(args, "-o", o.MergedDir(), "--wait", wait.String(), "--termination-log", TerminationLog)
	vols, mounts := scratch()
	vols = append(vols, Volume{Name: "results", PersistentVolumeClaim: &ClaimVolume{ClaimName: claim}})
	mounts = append(mounts, VolumeMount{Name: "results", MountPath: ResultsMount})
	c := Container{
		Name: "merge", Image: o.Image, ImagePullPolicy: o.PullPolicy, Args: args,
		Resources:    &Resources{Requests: map[string]string{"cpu": "500m", "memory": o.Memory}, Limits: map[string]string{"memory": o.Memory}},
		VolumeMounts: mounts, TerminationMessagePath: TerminationLog, TerminationMessagePolicy: "FallbackToLogsOnError",
		SecurityContext: containerSecurity(),
	}
	spec := JobSpec{
		Completions: ptr(int32(1)), Parallelism: ptr(int32(1)), BackoffLimit: ptr(int32(0)),
		ActiveDeadlineSeconds: ptr(int64((wait + 15*time.Minute).Seconds())),
		PodFailurePolicy: &PodFailurePolicy{Rules: []PodFailureRule{
			{Action: "FailJob", OnExitCodes: &OnExitCodes{ContainerName: "merge", Operator: "In",
				Values: []int32{exitRuntime, exitUsage, exitAcceptance, exitInvalid, exitInconclusive, exitInterrupted}}},
		}},
		Template: PodTemplate{Metadata: Meta{Labels: o.labels("merge")}, Spec: PodSpec{
			RestartPolicy: "Never", SecurityContext: podSecurity(), Containers: []Container{c}, Volumes: vols,
		}},
	}
	return Object{APIVersion: "batch/v1", Kind: "Job", Metadata: o.meta(o.Name+"-merge", "merge"), Spec: spec, Comment: fmt.Sprintf(
		"Waits (up to %v) until every shard's run directory is finished, then merges them into %s and judges\n"+
			"the run once. Its exit code is the run's verdict: the Job completes on PASS; on FAIL (3), INCONCLUSIVE (5,\n"+
			"e.g. a shard missing) or an error it fails at once, not retried, with the code in its condition:\n"+
			"  kubectl wait --for=condition=complete --timeout=%v job/%s-merge\n"+
			"  kubectl get pods -l job-name=%s-merge -o jsonpath='{..terminated.message}'",
		wait, o.MergedDir(), wait+15*time.Minute, o.Name, o.Name)}
}

func (o *Options) simDeployment(expVol Volume) Object {
	sel := o.labels("sim")
	vols, mounts := scratch()
	vols = append(vols, expVol)
	mounts = append(mounts, VolumeMount{Name: "experiment", MountPath: ExperimentMount, ReadOnly: true})
	args := append([]string{"sim", "--listen-any", "--addr", fmt.Sprintf("0.0.0.0:%d", SimPort)}, o.Sim.Args...)
	c := Container{
		Name: "sim", Image: o.Image, ImagePullPolicy: o.PullPolicy, Args: args,
		Ports:           []ContainerPort{{Name: "http", ContainerPort: SimPort, Protocol: "TCP"}},
		Resources:       &Resources{Requests: map[string]string{"cpu": "2", "memory": "1Gi"}, Limits: map[string]string{"memory": "1Gi"}},
		VolumeMounts:    mounts,
		ReadinessProbe:  &Probe{HTTPGet: &HTTPGetAction{Path: "/health", Port: SimPort}, PeriodSeconds: 2},
		SecurityContext: containerSecurity(),
	}
	spec := DeploymentSpec{Replicas: ptr(int32(1)), Selector: LabelSelector{MatchLabels: sel},
		Template: PodTemplate{Metadata: Meta{Labels: sel}, Spec: PodSpec{SecurityContext: podSecurity(), Containers: []Container{c}, Volumes: vols}}}
	return Object{APIVersion: "apps/v1", Kind: "Deployment", Metadata: o.meta(o.Name+"-sim", "sim"), Spec: spec,
		Comment: "The built-in simulated server (--with-sim), for a dry run on a cluster without GPUs: the shards\n" +
			"target it instead of a real server. It runs in real time, so give it the CPUs it asks for."}
}

func (o *Options) simService() Object {
	return Object{APIVersion: "v1", Kind: "Service", Metadata: o.meta(o.Name+"-sim", "sim"),
		Spec: ServiceSpec{Selector: o.labels("sim"), Ports: []ServicePort{{Name: "http", Port: SimPort, TargetPort: SimPort}}}}
}

// SimURL is the base URL the shards reach the --with-sim server at.
func (o *Options) SimURL() string {
	return fmt.Sprintf("http://%s-sim:%d/v1", o.Name, SimPort)
}

// Write prints the objects as one YAML stream, each under its comment.
func Write(w io.Writer, header string, objs []Object) error {
	var buf bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		fmt.Fprintf(&buf, "# %s\n", line)
	}
	for _, obj := range objs {
		buf.WriteString("---\n")
		if obj.Comment != "" {
			for _, line := range strings.Split(obj.Comment, "\n") {
				fmt.Fprintf(&buf, "# %s\n", line)
			}
		}
		var doc bytes.Buffer
		enc := yaml.NewEncoder(&doc)
		enc.SetIndent(2)
		if err := enc.Encode(obj); err != nil {
			return fmt.Errorf("k8s: encoding %s %s: %w", obj.Kind, obj.Metadata.Name, err)
		}
		_ = enc.Close()
		buf.Write(doc.Bytes())
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// SortedFiles orders files by path, so the manifests do not depend on the
// order the experiment named them in.
func SortedFiles(files []File) []File {
	out := append([]File(nil), files...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
