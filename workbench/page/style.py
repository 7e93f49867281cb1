"""The page's stylesheet: large type for a projector, colours that survive printing, one class per mark."""

CSS = """
:root { color-scheme: light; }
body { font: 20px/1.5 "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #000; background: #fff;
       max-width: 1240px; margin: 0 auto; padding: 0.5em 1.2em 2em; }
h1 { font-size: 1.7em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.35em; border-bottom: 3px solid #000; margin: 1.4em 0 0.5em; }
table.facts th { text-align: left; vertical-align: top; padding: 0.1em 1em 0.1em 0; }
table.facts td.prompt { white-space: pre-wrap; font-weight: bold; }
.cards { display: flex; gap: 0.8em; flex-wrap: wrap; margin: 0.8em 0; }
.card { border: 3px solid #000; border-radius: 8px; padding: 0.3em 0.9em; min-width: 11em; }
.card b { display: block; font-size: 2em; line-height: 1.2; }
.card small { display: block; font-size: 0.8em; color: #333; }
.text { font-size: 1.2em; line-height: 2; white-space: pre-wrap; overflow-wrap: anywhere; border: 2px solid #000;
        padding: 0.5em 0.8em; }
.text .prompt { color: #444; }
.draft { background: #bdecbd; }
.fix { background: #ffd4c2; }
.bonus { background: #c9dbff; }
span.draft { border-bottom: 3px solid #0b6b0b; }
span.fix { border-bottom: 3px dashed #b02a00; }
span.bonus { border-bottom: 4px double #133f9e; }
td.bonus { background: #e4edff; }
.text .draft, .text .fix, .text .bonus { box-shadow: inset -1px 0 #fff; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 0.4em 1.6em; }
ul.legend span { font-weight: bold; padding: 0 0.3em; }
.tok { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; white-space: pre; border: 1px solid #666;
       border-radius: 4px; padding: 0 0.2em; display: inline-block; min-width: 0.6em; line-height: 1.4; }
.ws { color: #777; }
.byte { color: #a00000; font-family: "DejaVu Sans Mono", monospace; font-size: 0.9em; white-space: nowrap; }
details.round { border: 2px solid #888; border-radius: 6px; margin: 0.4em 0; padding: 0.2em 0.7em; }
details.round[open] { border-color: #000; }
summary { cursor: pointer; }
.context { color: #444; font-size: 0.85em; }
.scroll { overflow-x: auto; }
table.steps { border-collapse: collapse; margin: 0.4em 0; }
table.steps th { text-align: right; padding: 0.15em 0.6em 0.15em 0; font-weight: normal; color: #333; white-space: nowrap; }
table.steps td { text-align: center; padding: 0.15em 0.4em; border-left: 1px solid #bbb; white-space: nowrap; }
td.miss { background: #ffe9e0; font-weight: bold; }
td.unused, li.unused > .tok { color: #666; }
td.unused .tok, li.unused > .tok { border-style: dotted; }
.caches { color: #222; margin: 0.3em 0; }
ul.tree, ul.tree ul { list-style: none; margin: 0.2em 0; padding-left: 1.4em; }
ul.tree ul { border-left: 2px solid #888; }
ul.tree li { margin: 0.2em 0; }
.root { font-style: italic; }
figure { margin: 0.6em 0; }
figcaption { margin-bottom: 0.3em; }
svg { max-width: 100%; height: auto; display: block; margin: 0.3em 0; }
svg text { font: 16px "DejaVu Sans Mono", monospace; fill: #000; }
svg text.axis { font-family: "DejaVu Sans", sans-serif; }
rect.measured { fill: #1b4f9c; }
rect.predicted { fill: #fff; stroke: #000; stroke-width: 2; stroke-dasharray: 5 3; }
rect.p { fill: #e69f00; } rect.q { fill: #0072b2; } rect.min { fill: #999; } rect.residual { fill: #b0407a; }
rect.drawn { fill: #fff2b3; stroke: #000; stroke-width: 2; }
.swatch { display: inline-block; width: 1em; height: 1em; vertical-align: -0.15em; border: 1px solid #000; }
.swatch.measured { background: #1b4f9c; } .swatch.predicted { background: #fff; border: 2px dashed #000; }
.swatch.p { background: #e69f00; } .swatch.q { background: #0072b2; } .swatch.min { background: #999; }
.swatch.residual { background: #b0407a; }
.key { margin: 0.2em 0; }
table.numbers { border-collapse: collapse; }
table.numbers td, table.numbers th { padding: 0.1em 0.6em; text-align: right; border-bottom: 1px solid #ccc; }
table.numbers tr.drawn { background: #fff2b3; font-weight: bold; }
.note { font-weight: bold; }
svg text.small { font: 13px "DejaVu Sans", sans-serif; }
rect.node-root { fill: #fff; stroke: #000; stroke-width: 2; stroke-dasharray: 4 3; }
rect.node-path { fill: #bdecbd; stroke: #0b6b0b; stroke-width: 3; }
rect.node-rejected { fill: #ffd4c2; stroke: #b02a00; stroke-width: 2; stroke-dasharray: 6 3; }
rect.node-unchecked { fill: #f2f2f2; stroke: #999; stroke-width: 1; stroke-dasharray: 2 2; }
rect.node-fix { fill: #ffd4c2; stroke: #b02a00; stroke-width: 3; }
rect.node-bonus { fill: #c9dbff; stroke: #133f9e; stroke-width: 3; }
line.edge-on { stroke: #0b6b0b; stroke-width: 4; } line.edge-off { stroke: #aaa; stroke-width: 1.5; }
.swatch.node-path { background: #bdecbd; border: 2px solid #0b6b0b; }
.swatch.node-rejected { background: #ffd4c2; border: 2px dashed #b02a00; }
.swatch.node-unchecked { background: #f2f2f2; border: 1px dotted #999; } .swatch.node-fix { background: #ffd4c2; }
.swatch.node-bonus { background: #c9dbff; }
table.checks td { text-align: center; } table.checks tr.miss { background: #ffe9e0; }
table.checks tr.fix { background: #ffd4c2; } table.checks tr.bonus { background: #e4edff; }
rect.blk-draft, rect.lay-draft { fill: #bdecbd; stroke: #0b6b0b; }
rect.blk-oracle, rect.lay-oracle { fill: #c9dbff; stroke: #133f9e; }
rect.head { fill: #fff; stroke: #000; } rect.head.exit { fill: #f4fff4; stroke: #0b6b0b; }
rect.head.ok { fill: #bdecbd; } rect.head.miss, rect.head.fix { fill: #ffd4c2; } rect.head.bonus { fill: #c9dbff; }
rect.head.unused { fill: #eee; stroke: #999; stroke-dasharray: 2 2; }
line.start { stroke: #000; stroke-width: 3; stroke-dasharray: 8 4; }
.strip { line-height: 2.2; overflow-wrap: anywhere; }
.strip .gap { color: #555; font-style: italic; padding: 0 0.3em; }
.pos { padding: 0.15em 0.05em; border-radius: 4px; }
.sfx-other { background: #fff7d6; }
.sfx-match { background: #ffe066; outline: 2px solid #8a6d00; }
.sfx-follow { background: #e3cff5; outline: 2px dashed #6a2c91; }
.sfx-end { background: #ffe066; outline: 3px solid #000; }
.swatch.sfx-other { background: #fff7d6; } .swatch.sfx-match { background: #ffe066; }
.swatch.sfx-follow { background: #e3cff5; } .swatch.sfx-end { background: #ffe066; border: 3px solid #000; }
line.axis-line { stroke: #000; stroke-width: 2; } line.grid { stroke: #bbb; stroke-width: 1; stroke-dasharray: 4 4; }
rect.h-bar { fill: #c9dbff; stroke: #133f9e; stroke-width: 1.5; } rect.h-bar.untested { fill: #f2f2f2; stroke: #999; }
line.r-tick { stroke-width: 4; } line.r-tick.pass { stroke: #0b6b0b; } line.r-tick.fail { stroke: #b02a00; }
line.w-line { stroke: #6a2c91; stroke-width: 3; } rect.w-dot { fill: #6a2c91; }
.swatch.w-line { background: #6a2c91; height: 0.3em; vertical-align: 0.2em; } .swatch.h-bar { background: #c9dbff; }
.swatch.r-tick { background: #b02a00; height: 0.3em; vertical-align: 0.2em; }
rect.la-guess { fill: #fff7d6; stroke: #8a6d00; } rect.la-next { fill: #fff; stroke: #8a6d00; stroke-dasharray: 5 3; }
rect.la-ok { fill: #bdecbd; stroke: #0b6b0b; stroke-width: 2; } rect.la-miss, rect.la-fix { fill: #ffd4c2; stroke: #b02a00; stroke-width: 2; }
rect.la-bonus { fill: #c9dbff; stroke: #133f9e; stroke-width: 2; } rect.la-oracle { fill: #fff; stroke: #000; stroke-width: 2; }
rect.la-unused, rect.la-other { fill: #f2f2f2; stroke: #999; stroke-dasharray: 2 2; }
line.ngram { stroke: #8a6d00; stroke-width: 2; stroke-opacity: 0.6; }
.swatch.la-guess { background: #fff7d6; } .swatch.la-next { background: #fff; border: 2px dashed #8a6d00; }
.swatch.la-ok { background: #bdecbd; } .swatch.la-miss { background: #ffd4c2; } .swatch.la-other { background: #f2f2f2; }
rect.state { fill: #c9dbff; stroke: #133f9e; stroke-width: 2; } line.feeds { stroke: #133f9e; stroke-width: 1.5; }
rect.cand-kept { fill: #bdecbd; stroke: #0b6b0b; stroke-width: 3; } rect.cand-reached { fill: #fff; stroke: #000; }
rect.cand-off { fill: #f2f2f2; stroke: #999; stroke-dasharray: 2 2; }
rect.guess { fill: #f4fff4; stroke: #0b6b0b; stroke-dasharray: 5 3; } rect.head-layer { fill: #e3cff5; stroke: #6a2c91; }
button { font-size: 0.9em; padding: 0.2em 0.8em; }
@media print {
  .noprint { display: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  .scroll { overflow: visible; }
  details.round { break-inside: avoid; }
  body { max-width: none; font-size: 14px; }
}
"""
