package schema

import (
	"net/url"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
)

// Telemetry interval bounds: faster than 100 ms a scrape of a large
// exposition (a vLLM with many LoRA adapters, a DCGM exporter with profiling
// fields) costs the server more than it tells; slower than a minute a row
// of a few minutes has too few scrapes to say anything.
const (
	DefaultTelemetryInterval = time.Second
	MinTelemetryInterval     = 100 * time.Millisecond
	MaxTelemetryInterval     = time.Minute
	// MaxTelemetryEndpoints bounds each list: one per server instance or
	// GPU node is the use, and each is scraped every interval.
	MaxTelemetryEndpoints = 64
)

// telemetry applies the telemetry section's defaults and checks its URLs
// as the server's are checked: what would put a credential in the record
// is refused.
func (r *resolver) telemetry() TelemetryPlan {
	in := r.exp.Telemetry
	p := TelemetryPlan{Enabled: true, Interval: Duration(DefaultTelemetryInterval)}
	if in.Enabled != nil {
		p.Enabled = *in.Enabled
	}
	if in.Interval != nil {
		p.Interval = *in.Interval
		if d := in.Interval.D(); d < MinTelemetryInterval || d > MaxTelemetryInterval {
			r.problem("telemetry.interval", "give a duration from 100ms to 1m, e.g. 1s",
				"telemetry interval %s is out of range", d)
		}
	}
	for _, list := range []struct {
		key  string
		urls []string
		dst  *[]string
	}{{"telemetry.metrics", in.Metrics, &p.Metrics}, {"telemetry.gpu", in.GPU, &p.GPU}} {
		if len(list.urls) > MaxTelemetryEndpoints {
			r.tooMany(indexPath(list.key, MaxTelemetryEndpoints), "endpoints", len(list.urls), MaxTelemetryEndpoints)
			list.urls = list.urls[:MaxTelemetryEndpoints]
		}
		for i, u := range list.urls {
			path := indexPath(list.key, i)
			pu, err := url.Parse(u)
			shown := redact.URL(u)
			switch {
			case err != nil:
				r.problem(path, "", "invalid URL %q: %s", shown, urlParseError(u, err))
			case pu.Scheme != "http" && pu.Scheme != "https":
				r.problem(path, "write it as http://host:port/metrics", "URL %q must start with http:// or https://", shown)
			case pu.Host == "":
				r.problem(path, "write it as http://host:port/metrics", "URL %q has no host", shown)
			case pu.User != nil:
				r.problem(path, "scrape an endpoint that needs no credentials, or put it behind one that does not", "URL %q embeds credentials, which would be recorded in the run", shown)
			case pu.RawQuery != "" || pu.Fragment != "" || pu.ForceQuery:
				r.problem(path, "give the endpoint's URL only, e.g. http://host:9400/metrics", "URL %q has a query or fragment, which would be recorded in the run", shown)
			default:
				*list.dst = append(*list.dst, u)
			}
		}
	}
	if !p.Enabled && (len(in.Metrics) > 0 || len(in.GPU) > 0) {
		r.problem("telemetry.enabled", "remove enabled: false to scrape the endpoints listed, or remove the lists",
			"telemetry is switched off but endpoints are listed")
	}
	return p
}

// telemetryOff refuses rules and hypotheses that read server.* or gpu.*
// when the file switches telemetry off: nothing would be scraped, so they
// could never be judged.
func (r *resolver) telemetryOff(plan *Plan) {
	if plan.Telemetry.Enabled {
		return
	}
	const hint = "remove telemetry.enabled: false, or the rule's server.* and gpu.* figures"
	r.eachExpect(func(path, src string) {
		r.useProblems(path, src, hint, metrics.TelemetryUses, "reads the server's telemetry (%s), but telemetry is switched off")
	})
}
