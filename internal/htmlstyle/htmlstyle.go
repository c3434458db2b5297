// Package htmlstyle is the house style of infermatrix's self-contained
// HTML pages: report.html, comparison.html and history.html. One sheet, so
// the three read as one tool's, light and dark, on a phone and on paper.
// It is inlined in each page (their Content-Security-Policy allows inline
// styles only), never fetched.
package htmlstyle

// Meta is the head's shared lines: the encoding, the viewport, and the
// Content-Security-Policy that keeps every page self-contained and inert
// (no script, no fetch; inline styles and data: images only), whatever
// text from an experiment or a server reaches it.
const Meta = `<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
`

// CSS is the shared stylesheet, without its <style> tags.
const CSS = `:root {
  --fg: #1f2328; --muted: #59636e; --bg: #ffffff; --panel: #f6f8fa; --line: #d1d9e0;
  --pass-fg: #116329; --pass-bg: #dafbe1; --fail-fg: #a40e26; --fail-bg: #ffebe9;
  --warn-fg: #7d4e00; --warn-bg: #fff8c5; --none-fg: #59636e; --none-bg: #eff2f5;
  --link: #0550ae;
}
@media (prefers-color-scheme: dark) {
  :root {
    --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --panel: #151b23; --line: #3d444d;
    --pass-fg: #7ee787; --pass-bg: #12261e; --fail-fg: #ffa198; --fail-bg: #2d1214;
    --warn-fg: #f2cc60; --warn-bg: #2b2111; --none-fg: #9198a1; --none-bg: #21262d;
    --link: #79c0ff;
  }
  figure img { background: #ffffff; }
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body {
  margin: 0 auto; max-width: 90rem; padding: 1.5rem 1.25rem 4rem;
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Liberation Sans", Arial, sans-serif;
  color: var(--fg); background: var(--bg);
}
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0 0 .5rem; }
h2 { font-size: 1.3rem; margin: 2.5rem 0 .75rem; padding-bottom: .3rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
p, ul { margin: .5rem 0 1rem; max-width: 50rem; }
li { margin: .2rem 0; }
a { color: var(--link); }
code, pre { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace; }
code { font-size: .875em; background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: .05em .3em; overflow-wrap: anywhere; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .75rem 1rem; overflow-x: auto; font-size: .875rem; }
pre code { background: none; border: 0; padding: 0; }
.lead { font-size: 1.1rem; color: var(--fg); }
.muted { color: var(--muted); }
nav.toc { font-size: .9rem; color: var(--muted); margin: .5rem 0 1.5rem; }
nav.toc a { margin-right: .9rem; white-space: nowrap; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; margin: .5rem 0 1rem; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-size: .875rem; font-variant-numeric: tabular-nums; }
th, td { text-align: left; vertical-align: top; padding: .4rem .6rem; border-bottom: 1px solid var(--line); }
th { background: var(--panel); font-weight: 600; min-width: 4.5rem; }
tr:last-child td { border-bottom: 0; }
td.num, th.num { text-align: right; }
td.num { white-space: nowrap; }
td.id, td.id code { white-space: nowrap; overflow-wrap: normal; }
tr.invalid td { color: var(--muted); font-style: italic; }
table.facts th { width: 12rem; white-space: normal; }
/* On a narrow screen a wide table scrolls in its box rather than squeezing
   its columns to a word each. */
.scroll > table:not(.facts) { min-width: 44rem; }
.badge { display: inline-block; padding: .05rem .45rem; border-radius: 999px; font-weight: 600; font-size: .8rem; white-space: nowrap; }
.pass { color: var(--pass-fg); background: var(--pass-bg); }
.fail { color: var(--fail-fg); background: var(--fail-bg); }
.incomplete, .warn { color: var(--warn-fg); background: var(--warn-bg); }
.none { color: var(--none-fg); background: var(--none-bg); }
.bad { color: var(--fail-fg); font-weight: 600; }
.verdict { border-radius: 8px; padding: .9rem 1.1rem; margin: 1.25rem 0; border: 1px solid var(--line); }
.verdict strong { font-size: 1.2rem; margin-right: .4rem; }
ul.answer { font-size: 1.05rem; margin: 0 0 1.25rem; padding-left: 1.3rem; }
ul.answer li { margin: .35rem 0; }
.callout { border-left: 4px solid var(--warn-fg); background: var(--warn-bg); color: var(--fg); padding: .6rem 1rem; border-radius: 0 6px 6px 0; margin: 1rem 0; }
figure { margin: 1.5rem 0; page-break-inside: avoid; break-inside: avoid; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
figcaption { font-size: .9rem; color: var(--muted); margin-top: .4rem; }
footer { margin-top: 3rem; font-size: .8rem; color: var(--muted); }
@media (max-width: 40rem) {
  body { padding: 1rem .75rem 3rem; font-size: 15px; }
  h1 { font-size: 1.4rem; }
}
@media print {
  :root { --fg: #000; --muted: #333; --bg: #fff; --panel: #f3f3f3; --line: #bbb; }
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav.toc { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  .scroll { overflow: visible; border: 0; }
  table { font-size: 8pt; }
  th, td { padding: .2rem .3rem; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  .badge, .verdict, .pass, .fail, .incomplete, .warn, .none, th { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  a { color: inherit; text-decoration: none; }
}
`
