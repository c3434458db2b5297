package reports

// predictRows computes the bandwidth-math predictions of every row of a
// plan with a predict section, and compares them with the measurements.
// It returns nil when the experiment makes no prediction.
func predictRows(in *Input) []RowPrediction {
	return nil // implemented in a follow-up commit
}
