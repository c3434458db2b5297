package reports

// Plot is one rendered chart, in both formats.
type Plot struct {
	// Name is the file name without extension, e.g. "latency-throughput-saturation".
	Name  string
	Title string
	PNG   []byte
	SVG   []byte
}

// RenderPlots draws every chart the run supports.
func RenderPlots(in *Input) ([]Plot, error) {
	return nil, nil // implemented in a follow-up commit
}
