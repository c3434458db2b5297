package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/infermatrix/infermatrix/k8s"
	"github.com/infermatrix/infermatrix/runner"
	"github.com/infermatrix/infermatrix/schema"
)

func newK8sCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		o              k8s.Options
		startAt, out   string
		startIn, slack time.Duration
		target         string
		rows           []string
		withSim        bool
		storage        string
		deadline       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "k8s FILE --shards N --image IMAGE",
		Short: "Print Kubernetes manifests that run an experiment as N shards and merge them",
		Long: `K8s prints the manifests of a distributed run; it talks to no cluster. Apply
them with kubectl apply -f. They hold:

- a ConfigMap with the experiment and the files it names (mounted at /experiment);
- a ReadWriteMany PersistentVolumeClaim for the results (or --claim, an existing one);
- an Indexed Job of N pods (completionMode Indexed, parallelism and completions N):
  pod k runs run FILE --shard k8s/N, i.e. shard k+1 of N, from one shared start
  (--start-at, default 3 minutes from now) into /results/NAME/shard-I, with its
  termination message saying what it measured;
- a merge Job, applied with them, that waits for the shards on the volume and
  merges them into /results/NAME/merged, judging the run once: its exit code is
  the run's verdict (0 pass, 3 fail, 5 inconclusive).

The API key and header_env values come from --secret, a Secret with one key per
variable the experiment names; no credential is written into the manifests.
A pod failure policy maps infermatrix's exit codes: 4 (invalid experiment) fails
the Job; any other failure fails that shard's index only, which is not retried
(it could not rejoin the shared start), and the merge names it missing
(INCONCLUSIVE). Needs Kubernetes 1.29 or later. See docs/kubernetes.md.`,
		Example: `  infermatrix k8s experiments/distributed-load.yaml --shards 4 \
      --image registry.example.com/infermatrix:v1.2.0 --secret vllm-key \
      --target http://vllm.inference.svc:8000/v1 | kubectl apply -f -

  # a dry run on any cluster, against the built-in server deployed beside it
  infermatrix k8s experiments/quickstart.yaml --rows sweep --shards 2 --image infermatrix:dev --with-sim -o run.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			var problems []error
			switch {
			case startAt != "" && cmd.Flags().Changed("start-in"):
				problems = append(problems, errors.New("--start-at and --start-in both say when to start: give one"))
			case startAt != "":
				t, err := time.Parse(time.RFC3339Nano, startAt)
				if err != nil {
					problems = append(problems, fmt.Errorf("--start-at %q: want an RFC 3339 time, e.g. 2026-11-27T20:00:00Z", startAt))
				} else if t.Before(now) {
					problems = append(problems, fmt.Errorf("--start-at %s is in the past", startAt))
				}
				o.StartAt = t
			case startIn < 30*time.Second:
				problems = append(problems, fmt.Errorf("--start-in %v: give the pods at least 30s to be scheduled and pull the image", startIn))
			default:
				o.StartAt = now.Add(startIn).Truncate(time.Second)
			}
			if target != "" && withSim {
				problems = append(problems, errors.New("--target and --with-sim both name the server: give one"))
			}
			if o.MetricsPort < 0 || o.MetricsPort > 65535 {
				problems = append(problems, fmt.Errorf("--metrics-port %d: want 1-65535, or 0 for none", o.MetricsPort))
			}
			if err := errors.Join(problems...); err != nil {
				return withCode(exitUsage, err)
			}
			plan, err := loadPlan(args[0], schema.Options{Target: target, Rows: rows}, stderr)
			if err != nil {
				return err
			}
			if err := k8sPlanProblems(plan, o.Shards, target, withSim); err != nil {
				return withCode(exitUsage, err)
			}
			if !cmd.Flags().Changed("claim") {
				o.Storage = storage
			}
			if o.Name == "" {
				o.Name = k8s.NameFrom(plan.Experiment.Name, o.StartAt)
			}
			length, bounded := runner.PlanLength(plan)
			switch {
			case deadline > 0:
				o.Deadline = deadline
			case !bounded:
				return withCode(exitUsage, fmt.Errorf("the last row is stopped by a request count, so the run has no planned length: give --deadline, how long after applying the manifests the shards may run (the rows before it take %v)", length))
			default:
				o.Deadline = (o.StartAt.Sub(now) + length + slack).Round(time.Minute) + time.Minute
			}
			o.Grace = runner.MaxGrace(plan) + 30*time.Second
			files, err := k8sFiles(plan)
			if err != nil {
				return withCode(exitUsage, err)
			}
			o.Experiment, o.Files = files[0], files[1:]
			o.Env = credentialEnv(plan.Server)
			if o.Secret != "" && len(o.Env) == 0 {
				fmt.Fprintf(stderr, "note: the experiment reads no credential from the environment (server.api_key_env, server.header_env), so --secret %s is not used\n", o.Secret)
			}
			if target != "" {
				o.RunArgs = append(o.RunArgs, "--target", target)
			}
			if len(rows) > 0 {
				o.RunArgs = append(o.RunArgs, "--rows", strings.Join(rows, ","))
			}
			if withSim {
				o.Sim = &k8s.Sim{Args: simArgs(plan.Experiment.Server.Sim)}
				o.RunArgs = append(o.RunArgs, "--target", o.SimURL())
			}
			objs, err := k8s.Build(o)
			if err != nil {
				return withCode(exitUsage, err)
			}
			header := fmt.Sprintf("infermatrix k8s: %s (%s), sha256 %s\n%d shards from %s; rows take up to %v; shards' deadline %v after apply.\n"+
				"Apply right away (the shared start is fixed): kubectl apply -f FILE. Results: %s on the claim.",
				plan.Experiment.Name, filepath.ToSlash(args[0]), plan.SHA256, o.Shards, o.StartAt.UTC().Format(time.RFC3339), length, o.Deadline,
				filepath.ToSlash(filepath.Join(k8s.ResultsMount, o.Name)))
			w := stdout
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return withCode(exitRuntime, err)
				}
				defer f.Close()
				w = f
			}
			if err := k8s.Write(w, header, objs); err != nil {
				return withCode(exitRuntime, err)
			}
			if out != "" && out != "-" {
				fmt.Fprintf(stderr, "wrote %s: %d shards of %s starting %s (in %v); kubectl apply -f %s\n", out, o.Shards, plan.Experiment.Name,
					o.StartAt.UTC().Format(time.RFC3339), o.StartAt.Sub(now).Round(time.Second), out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Shards, "shards", 0, "how many shards (pods) share the load")
	f.StringVar(&o.Image, "image", "", "the infermatrix image the pods run (make image; docs/release.md)")
	f.StringVar(&o.Name, "name", "", "prefix of every object and of the run's folder on the volume (default: the experiment's name and the start time)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of every object (default: kubectl's current one)")
	f.StringVar(&o.PullPolicy, "pull-policy", "", "the containers' imagePullPolicy: Always, IfNotPresent or Never (default: the cluster's)")
	f.StringVar(&startAt, "start-at", "", "the RFC 3339 instant every shard begins its first row")
	f.DurationVar(&startIn, "start-in", 3*time.Minute, "begin the first row this long after now: time to apply the manifests, schedule the pods and pull the image")
	f.StringVar(&target, "target", "", "the server's base URL as the pods reach it, e.g. http://vllm.inference.svc:8000/v1 (overrides the file's)")
	f.StringSliceVar(&rows, "rows", nil, "run only these rows (ids, comma-separated)")
	f.BoolVar(&withSim, "with-sim", false, "also deploy the built-in server (its preset from the experiment) as a Service and run against it: a dry run without GPUs")
	f.StringVar(&o.Secret, "secret", "", "the Secret holding the variables the experiment reads credentials from, one key per variable name")
	f.StringVar(&o.Claim, "claim", "", "an existing ReadWriteMany PersistentVolumeClaim for the results (default: a new one)")
	f.StringVar(&storage, "storage", "1Gi", "size of the new results claim")
	f.StringVar(&o.StorageClass, "storage-class", "", "storage class of the new claim; it must offer ReadWriteMany (default: the cluster's default class)")
	f.StringVar(&o.CPU, "cpu", "2", "CPU each shard pod requests (no limit is set: throttling would delay timestamps)")
	f.StringVar(&o.Memory, "memory", "2Gi", "memory each shard and the merge pod request and are limited to")
	f.IntVar(&o.MetricsPort, "metrics-port", 9464, "port of each shard's live figures (run --metrics-addr), annotated for Prometheus; 0 for none")
	f.DurationVar(&slack, "slack", 10*time.Minute, "time beyond the plan's length before the shards' Job is stopped and the merge gives up waiting")
	f.DurationVar(&deadline, "deadline", 0, "how long after applying the shards may run (default: the time to the start, the plan's length and --slack)")
	f.StringVarP(&out, "out", "o", "", "write the manifests to this file (default: standard output)")
	return cmd
}

// k8sPlanProblems lists, at once, what a distributed run on a cluster
// cannot do with this plan: what run --shard would refuse on every pod,
// and what a pod cannot reach.
func k8sPlanProblems(plan *schema.Plan, shards int, target string, withSim bool) error {
	var errs []error
	if shards < 1 {
		return fmt.Errorf("--shards %d: want 1 or more", shards)
	}
	if err := runner.CheckDistributed(plan, shards); err != nil {
		errs = append(errs, err)
	}
	if plan.Server.Builtin && target == "" && !withSim {
		errs = append(errs, errors.New("the experiment's server is the built-in one, which every pod would start for itself: give --target URL of the server under test, or --with-sim to deploy the built-in server as a Service for a dry run"))
	}
	for _, v := range plan.Server.Variants {
		if v.Launch != nil {
			errs = append(errs, fmt.Errorf("server variant %s launches a process: pods cannot launch the server under test; deploy each variant and run one experiment per variant against its URL", v.Name))
		}
	}
	if plan.Baseline != "" {
		errs = append(errs, fmt.Errorf("baseline %s: the pods cannot read a local run; drop the baseline key here and compare the merged run afterwards (infermatrix compare)", plan.Baseline))
	}
	if withSim && plan.Experiment.Server.Sim.Preset == schema.PresetFixed {
		errs = append(errs, errors.New("--with-sim: preset fixed has no batching, so sharing it among shards measures nothing; pick an engine preset"))
	}
	return errors.Join(errs...)
}

// k8sFiles returns the experiment and every file it names that the pods
// must see, by paths relative to the experiment's directory. A tokenizer
// directory brings the files tokenizer reads from it.
func k8sFiles(plan *schema.Plan) ([]k8s.File, error) {
	var paths []string
	add := func(full string) {
		if full != "" && !slices.Contains(paths, full) {
			paths = append(paths, full)
		}
	}
	for _, r := range plan.Rows {
		if r.Trace != nil {
			add(r.Trace.File)
		}
		if r.Dataset != nil {
			add(r.Dataset.File)
		}
		if r.Tokenizer != "" && r.Tokenizer != "builtin" {
			if fi, err := os.Stat(r.Tokenizer); err == nil && fi.IsDir() {
				for _, name := range []string{"tokenizer.json", "encoder.json", "vocab.bpe"} {
					if p := filepath.Join(r.Tokenizer, name); fileExists(p) {
						add(p)
					}
				}
			} else {
				add(r.Tokenizer)
			}
		}
	}
	if pf := plan.Experiment.Server.Sim.PresetFile; pf != "" {
		add(filepath.Join(plan.Dir, pf))
	}
	data, err := os.ReadFile(plan.File)
	if err != nil {
		return nil, err
	}
	files := []k8s.File{{Path: filepath.Base(plan.File), Data: data}}
	var errs []error
	var named []k8s.File
	for _, p := range paths {
		rel, err := filepath.Rel(plan.Dir, p)
		if err != nil || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
			errs = append(errs, fmt.Errorf("%s: the pods see only files beside the experiment (under %s); move it into %s or below", p, k8s.ExperimentMount, plan.Dir))
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		named = append(named, k8s.File{Path: filepath.ToSlash(rel), Data: b})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return append(files, k8s.SortedFiles(named)...), nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// credentialEnv names the environment variables the experiment's server
// reads credentials from: each becomes a Secret key in the pods.
func credentialEnv(s schema.ServerPlan) []string {
	var env []string
	if s.APIKeyEnv != "" {
		env = append(env, s.APIKeyEnv)
	}
	for _, v := range s.HeaderEnv {
		if !slices.Contains(env, v) {
			env = append(env, v)
		}
	}
	slices.Sort(env)
	return env
}

// simArgs carries the experiment's built-in server settings that infermatrix
// sim takes as flags; the rest (engine and front-end overrides) a preset
// file carries, as infermatrix calibrate writes it.
func simArgs(s schema.SimSettings) []string {
	var args []string
	if s.PresetFile != "" {
		args = append(args, "--preset-file", filepath.ToSlash(filepath.Join(k8s.ExperimentMount, s.PresetFile)))
	}
	if s.Preset != "" {
		args = append(args, "--preset", s.Preset)
	}
	if s.Model != "" {
		args = append(args, "--model", s.Model)
	}
	if s.MaxModelLen > 0 {
		args = append(args, "--max-model-len", strconv.Itoa(s.MaxModelLen))
	}
	if s.Replicas > 0 {
		args = append(args, "--replicas", strconv.Itoa(s.Replicas))
	}
	if s.Seed != 0 {
		args = append(args, "--seed", strconv.FormatInt(s.Seed, 10))
	}
	if s.Personality != "" {
		args = append(args, "--personality", s.Personality)
	}
	if s.TokensPerEvent > 0 {
		args = append(args, "--tokens-per-event", strconv.Itoa(s.TokensPerEvent))
	}
	return args
}
