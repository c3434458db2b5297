// Package reports writes a judged run's decision record: decision.md,
// decision.json, summary.csv, report.html, results.xlsx (through package
// workbook), the GitHub summary and the AIPerf export, and re-renders a
// run directory's record long after the run (Rerender, rebuild).
//
// The judging is package verdict's, the analysis (predictions, sweeps, the
// diagnosis) package analysis's, the plots package charts', the
// spreadsheet package workbook's and the sentences every format shares
// package record's; reports only puts them together and renders them, so
// nothing below it imports reports.
package reports
