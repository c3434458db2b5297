package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/runner"
	"github.com/infermatrix/infermatrix/verdict"
)

// shardPlaceholder in run --out stands for the shard's index, so that the
// pods of one Indexed Job, which share one command line, write to
// different directories.
const shardPlaceholder = "{shard}"

// completionIndexEnv is the variable Kubernetes sets in every pod of an
// Indexed Job: the pod's index, from 0.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// parseShardFlag reads --shard: I/N, or k8s/N, which takes I from the pod's
// completion index (I = index + 1): a Job's pods share one spec, so the
// index can only come from the environment Kubernetes gives each.
func parseShardFlag(s string) (runner.Shard, error) {
	rest, ok := strings.CutPrefix(s, "k8s/")
	if !ok {
		return runner.ParseShard(s)
	}
	v, set := os.LookupEnv(completionIndexEnv)
	if !set {
		return runner.Shard{}, fmt.Errorf("%w %q: k8s/N reads %s, which Kubernetes sets in an Indexed Job's pods; it is not set here (use I/N outside Kubernetes)", runner.ErrBadShard, s, completionIndexEnv)
	}
	k, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || k < 0 {
		return runner.Shard{}, fmt.Errorf("%w %q: %s=%q is not an index from 0", runner.ErrBadShard, s, completionIndexEnv, v)
	}
	return runner.ParseShard(fmt.Sprintf("%d/%s", k+1, rest))
}

// shardVerdict turns a shard's FAIL or INCONCLUSIVE into exit 0: the
// shard judged only its share of the load (a throughput rule sees 1/N of
// the rate), so its verdict is provisional and the run's is merge's. What
// the exit still says is whether the share was recorded: a runtime error,
// an interruption or a run whose requests mostly failed keep their codes.
func shardVerdict(stdout io.Writer, s runner.Shard, err error) error {
	var ee *exitError
	if !errors.As(err, &ee) || (ee.code != exitAcceptance && ee.code != exitInconclusive) {
		return err
	}
	fmt.Fprintf(stdout, "shard %s: its share is recorded; the verdict above judges this shard's share alone and is provisional: the run's verdict is infermatrix merge's (exit 0)\n", s)
	return nil
}

// runEnding gathers what a run's termination message says, filled in as
// the run goes: whatever is known when it ends is reported.
type runEnding struct {
	shard    runner.Shard
	dir      string
	summary  *metrics.Summary
	decision *verdict.Decision
}

// message is one paragraph: the verdict (a shard's marked provisional),
// the requests, and where the records are; or the error that ended it.
func (e *runEnding) message(err error) string {
	var b strings.Builder
	if e.shard != (runner.Shard{}) {
		fmt.Fprintf(&b, "shard %s: ", e.shard)
	}
	if e.decision != nil {
		v := strings.ToUpper(e.decision.Verdict)
		if e.shard != (runner.Shard{}) {
			fmt.Fprintf(&b, "share recorded; its own verdict %s (provisional: the run's verdict is the merge's)", v)
		} else {
			fmt.Fprintf(&b, "verdict %s", v)
		}
		if len(e.decision.Why) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(e.decision.Why, "; "))
		}
		b.WriteString(". ")
	}
	if e.summary != nil {
		var sent, ok, failed, invalid int
		for _, r := range e.summary.Rows {
			sent += r.Requests.Sent
			ok += r.Requests.Completed
			failed += r.Requests.Failed
		}
		if e.decision != nil {
			for _, rv := range e.decision.Rows {
				if rv.Verdict != verdict.NotRun && rv.Verdict != verdict.Skipped && !rv.Validity.Valid {
					invalid++
				}
			}
		}
		fmt.Fprintf(&b, "%d rows, %d requests sent, %d completed, %d failed", len(e.summary.Rows), sent, ok, failed)
		if invalid > 0 {
			fmt.Fprintf(&b, ", %d rows INVALID", invalid)
		}
		if e.summary.Interrupted {
			b.WriteString(", interrupted")
		}
		b.WriteString(". ")
	}
	if e.dir != "" {
		fmt.Fprintf(&b, "Records in %s. ", e.dir)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if msg := strings.TrimSpace(fmt.Sprint(ee.err)); ee.err != nil && msg != "" {
			fmt.Fprintf(&b, "Exit %d: %s", ee.code, msg)
		} else {
			fmt.Fprintf(&b, "Exit %d.", ee.code)
		}
	} else if err != nil {
		fmt.Fprintf(&b, "Exit %d: %v", exitRuntime, err)
	} else {
		b.WriteString("Exit 0.")
	}
	return b.String()
}
