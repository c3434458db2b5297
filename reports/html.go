package reports

import "io"

// ReportHTML is the self-contained page's file name in a run directory.
const ReportHTML = "report.html"

// WriteHTML writes report.html, with plots inline.
func WriteHTML(w io.Writer, in *Input, plots []Plot) error {
	return nil // implemented in a follow-up commit
}
