package verdict

import (
	"strings"
	"testing"
)

// TestMissingReasonTelemetry: each kind of missing figure is named with why
// it is missing, the baseline's too.
func TestMissingReasonTelemetry(t *testing.T) {
	for names, want := range map[string]string{
		"baseline.server":                   "the row has no server telemetry in the baseline run",
		"gpu":                               "the row has no GPU telemetry",
		"gpu.power_w":                       "the GPUs' exporters did not report gpu.power_w",
		"ttft,server.ttft":                  "ttft has no samples; the server did not report server.ttft",
		"baseline.server.preemptions,cache": "the server did not report server.preemptions in the baseline run; the server reported no cached prompt tokens",
	} {
		if got := missingReason(strings.Split(names, ",")); got != want {
			t.Errorf("missingReason(%s) = %q; want %q", names, got, want)
		}
	}
}
