// Package diagnosis reads each row of a run, its client figures, the
// server's and GPUs' telemetry and the bandwidth prediction, and states
// what the evidence supports: the symptom, the likely regime, the figures
// that show it, and the next measurement or first response.
//
// The benchmark narrows the question; telemetry answers it. So every
// finding names the figures it rests on, and a finding whose figures the
// run does not have is not stated: a row without telemetry gets at most the
// findings its client figures and the prediction support, and the record
// says that telemetry was absent. The rules and their thresholds are
// docs/diagnosis.md's table, in the order the table gives them; the same
// input always gives the same findings in the same words.
//
// The package reads metrics and schema only: reports fills its Input from
// a judged run (which rows failed, the predictions it computed) and renders
// the findings in every format.
package diagnosis

import (
	"cmp"
	"slices"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// Input is what the diagnosis reads: every planned row with what was
// measured, in plan order, and the run's SLO.
type Input struct {
	Rows []Row
	SLO  metrics.SLO
}

// Row is one planned row and what the run knows of it.
type Row struct {
	Plan *schema.PlannedRow
	// Summary is nil, or not complete, for a row that did not run.
	Summary *metrics.RowSummary
	// Failed is set when the row failed its acceptance rules (or was
	// rejected past a sweep's operating point): its findings are then
	// offered as causes.
	Failed bool
	// Prediction is the bandwidth math for the row; nil when the
	// experiment makes none.
	Prediction *Prediction
}

// Prediction is what the bandwidth math said of a row (reports'
// RowPrediction, docs/predictions.md), as the diagnosis reads it. A zero
// figure is unknown.
type Prediction struct {
	// Regime is the regime the prediction's rules named (reports'
	// Regime* labels: "bandwidth-bound decode", "overhead-bound",
	// "compute-bound prefill", "queueing").
	Regime string
	// TPOTBoundMS is the single-stream decode bound, TTFTBoundMS the
	// prefill bound, both in ms.
	TPOTBoundMS float64
	TTFTBoundMS float64
	// TPOTRatio and TTFTRatio are the measured p50s over those bounds.
	TPOTRatio float64
	TTFTRatio float64
	// MaxConcurrency is how many sequences of the row's length the KV
	// cache holds at once.
	MaxConcurrency int
}

// The prediction's regime labels the rules read (reports' Regime*).
const (
	PredictedBandwidth = "bandwidth-bound decode"
	PredictedOverhead  = "overhead-bound"
	PredictedPrefill   = "compute-bound prefill"
	PredictedQueueing  = "queueing"
)

// Severity of a finding.
const (
	// SeverityFail marks a finding on a row that failed its rules: a
	// likely cause of the failure.
	SeverityFail = "fail"
	// SeverityWarn marks something wrong whatever the rules say: the
	// server preempted, a cache missed, counters disagree.
	SeverityWarn = "warn"
	// SeverityInfo marks a regime worth knowing that is not a fault.
	SeverityInfo = "info"
)

// Regimes a finding names, after the methodology's table.
const (
	RegimeQueueing      = "queueing"
	RegimeKVCapacity    = "KV-cache capacity"
	RegimePrefill       = "prefill cost"
	RegimeMemoryBound   = "memory-bound decode"
	RegimeNonMemory     = "non-memory bottleneck"
	RegimeBatching      = "batching trade-off"
	RegimeCacheMiss     = "cache miss or eviction"
	RegimeContamination = "cache contamination"
	RegimeOutside       = "time outside the engine"
	RegimeCounters      = "counting error"
	RegimeShared        = "another client's load"
)

// Finding is one thing the evidence supports about one row.
type Finding struct {
	Row string `json:"row"`
	// Rule names the rule of docs/diagnosis.md that made it (queueing,
	// kv_capacity, ...), for tools that filter findings.
	Rule     string `json:"rule"`
	Symptom  string `json:"symptom"`
	Regime   string `json:"regime"`
	Severity string `json:"severity"`
	// Evidence quotes the figures, with units, by the names rules use.
	Evidence []string `json:"evidence"`
	// Next is the next measurement, or the first response.
	Next string `json:"next"`
}

// Diagnosis is the run's findings, with what was examined.
type Diagnosis struct {
	// Findings in plan order of their rows, each row's in the order of
	// docs/diagnosis.md's table.
	Findings []Finding `json:"findings,omitempty"`
	// Examined lists the rows read: every row that ran and completed a
	// request.
	Examined []string `json:"examined"`
	// Telemetry lists the examined rows with server or GPU telemetry;
	// NoTelemetry those without, whose findings rest on the client's
	// figures and the prediction alone.
	Telemetry   []string `json:"telemetry,omitempty"`
	NoTelemetry []string `json:"no_telemetry,omitempty"`
	// Unexplained lists the rows that failed their rules and for which
	// no cause could be supported by the figures at hand.
	Unexplained []string `json:"unexplained,omitempty"`
}

// Rows returns the findings of one row.
func (d *Diagnosis) Rows(id string) []Finding {
	var out []Finding
	for _, f := range d.Findings {
		if f.Row == id {
			out = append(out, f)
		}
	}
	return out
}

// Diagnose applies docs/diagnosis.md's rules to every row that ran.
func Diagnose(in Input) *Diagnosis {
	d := &Diagnosis{Examined: []string{}}
	var facts []*rowFacts
	for i := range in.Rows {
		r := in.Rows[i]
		if !examinable(r) {
			continue
		}
		facts = append(facts, &rowFacts{Row: r, id: r.Plan.ID, rs: r.Summary, srv: r.Summary.Server, gpu: r.Summary.GPU,
			pred: r.Prediction, slo: in.SLO, all: in.Rows})
	}
	for _, f := range facts {
		d.Examined = append(d.Examined, f.id)
		if f.srv != nil || f.gpu != nil {
			d.Telemetry = append(d.Telemetry, f.id)
		} else {
			d.NoTelemetry = append(d.NoTelemetry, f.id)
		}
		var found []Finding
		for _, rule := range rules {
			if fd, ok := rule(f); ok {
				fd.Row = f.id
				if f.Failed && (fd.Severity == SeverityInfo || failingCause[fd.Rule]) {
					fd.Severity = SeverityFail
				}
				found = append(found, fd)
			}
		}
		if f.Failed && !slices.ContainsFunc(found, func(x Finding) bool { return x.Severity == SeverityFail }) {
			d.Unexplained = append(d.Unexplained, f.id)
		}
		d.Findings = append(d.Findings, found...)
	}
	return d
}

// failingCause lists the rules whose warning, on a failing row, is a likely
// cause of the failure rather than a fault beside it.
var failingCause = map[string]bool{ruleQueueing: true, ruleKV: true, ruleCacheMiss: true, ruleGap: true, ruleClocks: true}

// examinable reports whether a row has figures to read.
func examinable(r Row) bool {
	if r.Plan == nil || r.Summary == nil {
		return false
	}
	s := r.Summary
	return s.Status != metrics.RowNotRun && s.Status != metrics.RowFailed && s.Requests.Completed > 0
}

// rowFacts is one row as the rules read it.
type rowFacts struct {
	Row
	id   string
	rs   *metrics.RowSummary
	srv  *metrics.ServerTelemetry
	gpu  *metrics.GPUTelemetry
	pred *Prediction
	slo  metrics.SLO
	all  []Row
}

// siblings are the rows of the same sweep that differ from f's only in
// dimension dim, f's own included, in increasing order of dim, with
// figures to read. Nil when f is not part of such a sweep of two or more.
func (f *rowFacts) siblings(dim string) []Row {
	if f.Plan.ID == f.Plan.Base || f.Plan.SweepPoint[dim] == 0 {
		return nil
	}
	var out []Row
	for _, r := range f.all {
		if r.Plan == nil || r.Plan.Base != f.Plan.Base || r.Plan.SweepPoint[dim] == 0 || !examinable(r) {
			continue
		}
		same := true
		for k, v := range f.Plan.SweepPoint {
			if k != dim && r.Plan.SweepPoint[k] != v {
				same = false
			}
		}
		if same {
			out = append(out, r)
		}
	}
	if len(out) < 2 {
		return nil
	}
	slices.SortStableFunc(out, func(a, b Row) int { return cmp.Compare(a.Plan.SweepPoint[dim], b.Plan.SweepPoint[dim]) })
	return out
}
