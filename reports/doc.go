// Package reports writes a judged run's decision record: decision.md,
// decision.json, summary.csv, report.html, results.xlsx, the GitHub
// summary and the AIPerf export, and re-renders a run directory's record
// long after the run (Rerender, rebuild).
//
// The judging is package verdict's, the analysis (predictions, sweeps, the
// diagnosis) package analysis's and the plots package charts'; reports
// only puts them together and renders them, so nothing below it imports
// reports.
package reports
