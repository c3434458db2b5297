// Package record holds the pieces of a decision record that every format
// states in the same words: the verdict's sentence, each row's validity,
// what the experiment declared beside what the run found, the simulated
// banner, the Server and GPU table and the diagnosis's scope. They are
// written here once, as text with `code` spans, so that decision.md and
// report.html (package reports) and results.xlsx (package workbook) cannot
// tell a reader different things.
//
// It imports neither reports nor workbook, which both read it.
package record
