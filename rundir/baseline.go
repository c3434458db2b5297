package rundir

import (
	"time"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
)

// BaselineInfo identifies the run a run was judged against (run
// --baseline, or the experiment's baseline key), so that its record can
// be reproduced: `report` judges again against this very run directory,
// even when the folder it was picked from has newer runs since, and can
// tell a baseline that was replaced (another start time or experiment
// hash) from the one that judged the run.
type BaselineInfo struct {
	// Dir is the baseline run directory, as resolved; Given is what the
	// flag or key named when that was a folder of runs (runs/<name>).
	Dir   string `json:"dir"`
	Given string `json:"given,omitempty"`
	// ID is the run directory's name (its UTC start, or what --out named
	// it); Started its start time from its manifest.
	ID               string         `json:"id"`
	Started          time.Time      `json:"started"`
	Tool             buildinfo.Info `json:"tool"`
	Experiment       string         `json:"experiment"`
	ExperimentSHA256 string         `json:"experiment_sha256"`
}
