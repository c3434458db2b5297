package reports

import "io"

// ResultsXLSX is the spreadsheet's file name in a run directory.
const ResultsXLSX = "results.xlsx"

// WriteXLSX writes results.xlsx.
func WriteXLSX(w io.Writer, in *Input) error {
	return nil // implemented in a follow-up commit
}
