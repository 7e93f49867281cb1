"""python workbench.py bench suite's page (workbench/bench/suite.py): every method's speedup on held-out text, a figure and a table."""

import html

from workbench.page.style import CSS
from workbench.page.report import ReportError
from weights import files

SUITE_COLORS = {"prose": "#4e79a7", "code": "#f28e2b", "lists": "#59a14f", "repeat": "#b07aa1"}


def suite_svg(rows):
    """Grouped bars: for each method, its speedup on each kind of text (the median of the rounds,
    a whisker from min to max), against the line at 1, the oracle alone."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    kinds = [k for k in SUITE_COLORS if any(r["kind"] == k for r in rows)]
    top = max(2.0, max(r["speedup_max"] for r in rows) * 1.1)
    bar, gap, left, base, height = 14, 22, 50, 260, 230
    slot = bar * len(kinds) + gap
    width = left + slot * len(methods) + 20

    def y(value):
        return base - height * value / top

    parts = [f'<svg class="suite" viewBox="0 0 {width} 340" width="{width}" role="img" '
             'aria-label="speedup over the oracle alone, per method and kind of text">',
             f'<line x1="{left}" y1="{y(1):.1f}" x2="{width - 10}" y2="{y(1):.1f}" stroke="#000" stroke-dasharray="4 3"/>',
             f'<text x="{left - 6}" y="{y(1) + 4:.1f}" text-anchor="end" class="axis">1x</text>',
             f'<text x="{left - 6}" y="{y(2) + 4:.1f}" text-anchor="end" class="axis">2x</text>',
             f'<line x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#000"/>']
    at = {(r["method"], r["kind"]): r for r in rows}
    for i, method in enumerate(methods):
        x0 = left + i * slot + gap / 2
        for j, kind in enumerate(kinds):
            r = at.get((method, kind))
            if r is None:
                continue
            x = x0 + j * bar
            parts.append(f'<rect x="{x:.1f}" y="{y(r["speedup"]):.1f}" width="{bar - 2}" height="{base - y(r["speedup"]):.1f}" '
                         f'fill="{SUITE_COLORS[kind]}"><title>{html.escape(method)}, {kind}: {r["speedup"]}x '
                         f'({r["speedup_min"]}-{r["speedup_max"]})</title></rect>'
                         f'<line x1="{x + bar / 2 - 1:.1f}" y1="{y(r["speedup_min"]):.1f}" x2="{x + bar / 2 - 1:.1f}" '
                         f'y2="{y(r["speedup_max"]):.1f}" stroke="#000"/>')
        parts.append(f'<text x="{x0 + bar * len(kinds) / 2:.1f}" y="{base + 14}" text-anchor="end" class="axis" '
                     f'transform="rotate(-35 {x0 + bar * len(kinds) / 2:.1f} {base + 14})">{html.escape(method)}</text>')
    for j, kind in enumerate(kinds):
        parts.append(f'<rect x="{left + j * 80}" y="8" width="12" height="12" fill="{SUITE_COLORS[kind]}"/>'
                     f'<text x="{left + j * 80 + 16}" y="19" class="axis">{kind}</text>')
    return "".join(parts) + "</svg>"


def write_suite_page(path, rows, facts, command):
    """The real-text benchmark (workbench/bench/suite.py) on one page: its figure and its table."""
    columns = list(rows[0]) if rows else []
    table = ("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" +
             "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in columns) + "</tr>" for r in rows) +
             "</table>")
    text = "\n".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Speculative decoding on held-out text</title>\n<style>{CSS}</style>\n</head>\n<body>",
        "<h1>Every method on held-out text</h1>",
        f"<p><code>{html.escape(command)}</code>: {facts['prompts']} prompts from documents the pair never saw, "
        f"{facts['n_new']} new tokens each, {facts['rounds']} rounds taking turns; c = T_draft(1) / T_oracle(1) = "
        f"{facts['c']}. A bar is the median speedup over the oracle alone (greedy decoding, or sampling for the "
        "sampling methods), its whisker the rounds' min to max; below the dashed line a method loses.</p>",
        suite_svg(rows), table, "</body>\n</html>\n"])
    try:
        files.write_text(path, text)
    except (OSError, files.WriteError) as e:  # WriteError: a directory, link or device in the way
        raise ReportError(f"cannot write the page to {path}: {getattr(e, 'strerror', None) or e}") from None
