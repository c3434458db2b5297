package rundir

import (
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// VariantInfo is one server variant as the run found and ran it
// (server.variants): what was started, when, what it said of itself, and
// why its rows did not run if they did not.
type VariantInfo struct {
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Builtin     bool                `json:"builtin,omitempty"`
	Sim         *schema.SimSettings `json:"sim,omitempty"`
	URLs        []string            `json:"urls,omitempty"`
	Engine      schema.Engine       `json:"engine"`
	// Command is the launched process's command line, credentials masked;
	// Env its environment as written (credentials only as ${NAME}).
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	PID     int               `json:"pid,omitempty"`
	// Log is the process's output, relative to the run directory.
	Log         string     `json:"log,omitempty"`
	Started     *time.Time `json:"started,omitempty"`
	Ready       *time.Time `json:"ready,omitempty"`
	ReadyAfterS float64    `json:"ready_after_s,omitempty"`
	Stopped     *time.Time `json:"stopped,omitempty"`
	StopError   string     `json:"stop_error,omitempty"`
	Discovered  Discovered `json:"discovered"`
	Model       string     `json:"model,omitempty"`
	// Error says why the variant's rows did not run (its server never got
	// ready, exited, or could not be reached).
	Error string `json:"error,omitempty"`
}
