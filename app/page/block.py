"""Block verification's round on the page (beyond/block_verification.py, Sun et al. 2025): a table of every
draft's p, q, q/p, weight w and acceptance probability h, the tests from the end, and a drawing of w carried
along the block with each test's r beside its h.

Letters as in sps.py (Chen et al.): q the target (the oracle), p the draft; the paper's p_i are the weights w_i.
"""

import html

from app.page.tokens import chip, probability, svg_label
from beyond.block_verification import ratio_text
from decoding import decisive_digits

CHECK, CROSS = "\u2713", "\u2717"


def test_order(d, k):
    """{prefix i: the number of its test}: step 5 tests prefix k first, then k - 1, ..., down to the one kept."""
    order = {i: n for n, i in enumerate(range(k, d.kept, -1), 1)}
    order.setdefault(d.kept, len(order) + 1)
    return order


def step_digits(s):
    """Significant digits for a draft's q/p, h and r: enough that q/p reads as below, at or above 1 as it is, and r
    beside h as the test decided (decisive_digits)."""
    tested = ((s["r"], s["h"]), (s["r"], 1.0)) if s["r"] is not None else ()
    return decisive_digits((s["ratio"], 1.0), *tested, least=3)


def block_table(run, r):
    """One column per draft (then the last token): what decided the round, then the drawing."""
    d, k = r.details, len(r.drafted)  # a block_verification.BlockDetails
    order, columns = test_order(d, k), []
    for i, s in enumerate(d.steps, 1):
        if s["r"] is None:
            status, test = "ok", "not tested"
        elif s["passed"]:
            status, test = "ok", f"test {order[i]}: r &lt; h &check; keep {i}"
        else:
            status, test = ("miss" if i == d.kept + 1 else "unused"), f"test {order[i]}: r &ge; h &cross;"
        digits = step_digits(s)
        columns.append((status, chip(run, s["token"], "draft" if s["kept"] else ""), probability(s["p"]),
                        probability(s["q"]), f"{s['ratio']:.{digits}g}", f"{s['w']:.3g}", f"{s['h']:.{digits}g}",
                        "" if s["r"] is None else f"{s['r']:.{digits}g}", "", test, "kept" if s["kept"] else "dropped"))
    last, mark = d.last, ("bonus" if d.last["from"] == "bonus" else "fix") if k else "oracle"
    said = ("bonus, drawn from q" if last["from"] == "bonus" and k else "drawn from q, nothing drafted" if not k else
            f"drawn from the block residual max(w<sub>{d.kept}</sub> q &minus; p, 0), renormalised")
    from_residual = last["from"] == "residual"
    columns.append((mark, chip(run, last["token"], mark), "", probability(last["q"]),
                    "", "", "", "", probability(last["prob"]) if from_residual else "",
                    f"test {order[0]}: prefix 0 &check; keep 0" if k and not d.kept else "", said))
    names = ["token x", "p(x) draft", "q(x) target", "q/p", "w after it", "h of its prefix", "r",
             "its chance in the block residual", "tests, from the end", "outcome"]
    cell = lambda cls, content: f'<td class="{cls}">{content}</td>'  # noqa: E731
    table = ('<div class="scroll"><table class="steps">'
             + "<tr><th>draft</th>" + "".join(cell("", str(t + 1)) for t in range(k)) + cell("", "last token") + "</tr>"
             + "".join(f"<tr><th>{name}</th>" + "".join(cell(col[0], col[row + 1]) for col in columns) + "</tr>"
                       for row, name in enumerate(names))
             + "</table></div>")
    return table + (block_figure(run, r) if k else "")


def block_figure(run, r):
    """The block left to right: w_0 = 1 at the text, then w after each draft (a line that q/p < 1 pulls down and
    q/p > 1 lifts again, up to 1); at each prefix its h as a bar and its r as a tick (r below the bar's top:
    the test passes); the tests numbered from the end; the kept drafts green, the last token where it went."""
    d, k, tau = r.details, len(r.drafted), r.details.kept
    order = test_order(d, k)
    left, col, box_h, plot_h = 130, 120, 28, 180
    y_tok, y_last, y_plot = 10, 48, 110
    base = y_plot + plot_h
    width = left + col * (k + 2)
    height = base + 80

    def x_of(i):  # the centre of column i: 0 is the text, i the prefix ending at draft i
        return left + col * i + col / 2

    def y_of(value):
        return base - plot_h * min(max(value, 0.0), 1.0)

    svg = [f'<svg class="block" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           'aria-label="the weights w along the block, each prefix\'s h and r, and the tests from the end">',
           f'<text x="8" y="{y_tok + 20}" class="small">drafts</text>',
           f'<text x="8" y="{y_last + 20}" class="small">last token</text>',
           f'<text x="8" y="{y_plot + 4}" class="small">1</text><text x="8" y="{base + 4}" class="small">0</text>',
           f'<line class="axis-line" x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}"/>',
           f'<line class="grid" x1="{left}" y1="{y_plot}" x2="{width - 10}" y2="{y_plot}"/>',
           f'<rect class="node-root" x="{x_of(0) - 50}" y="{y_tok}" width="100" height="{box_h}"><title>the text so far, '
           f'{r.context_length} tokens</title></rect><text x="{x_of(0)}" y="{y_tok + 20}" text-anchor="middle" class="axis">'
           "the text</text>"]
    for i, s in enumerate(d.steps, 1):
        cls = "node-path" if s["kept"] else "node-unchecked"
        svg.append(f'<rect class="{cls}" x="{x_of(i) - 54}" y="{y_tok}" width="108" height="{box_h}"><title>draft {i}, '
                   f'token {int(s["token"])}: p(x) {probability(s["p"])}, q(x) {probability(s["q"])}, '
                   f'{"kept" if s["kept"] else "dropped"}</title></rect>'
                   f'<text x="{x_of(i)}" y="{y_tok + 20}" text-anchor="middle">{svg_label(run, s["token"], 9)}</text>')
    ending = "bonus" if d.last["from"] == "bonus" else "fix"
    said = "bonus from q" if ending == "bonus" else f"from max(w{sub(tau)} q \u2212 p, 0)"
    chance = (f"q(x) {probability(d.last['prob'])}" if ending == "bonus" else
              f"its chance in the block residual {probability(d.last['prob'])}"
              + f", q(x) {probability(d.last['q'])}")
    svg.append(f'<rect class="node-{ending}" x="{x_of(tau + 1) - 54}" y="{y_last}" width="108" height="{box_h}">'
               f'<title>token {int(d.last["token"])}: {html.escape(said)}, {chance}'
               f'</title></rect><text x="{x_of(tau + 1)}" y="{y_last + 20}" text-anchor="middle">'
               f'{svg_label(run, d.last["token"], 9)}</text>'
               f'<text x="{x_of(tau + 1) + 60}" y="{y_last + 20}" class="small">&larr; {html.escape(said)}</text>')
    # h as a bar and r as a tick at each prefix tested; w as a line over all of them
    for i, s in enumerate(d.steps, 1):
        x = x_of(i)
        digits = step_digits(s)
        svg.append(f'<rect class="h-bar{"" if s["r"] is not None else " untested"}" x="{x - 16}" y="{y_of(s["h"]):.1f}" '
                   f'width="32" height="{base - y_of(s["h"]):.1f}"><title>h{sub(i)} = {s["h"]:.{digits}g}</title></rect>')
        if s["r"] is not None:
            verdict = "pass" if s["passed"] else "fail"
            svg.append(f'<line class="r-tick {verdict}" x1="{x - 26}" y1="{y_of(s["r"]):.1f}" x2="{x + 26}" '
                       f'y2="{y_of(s["r"]):.1f}"><title>r = {s["r"]:.{digits}g}</title></line>'
                       f'<text x="{x}" y="{base + 22}" text-anchor="middle" class="small">test {order[i]} '
                       f'{CHECK if s["passed"] else CROSS}</text>')
        else:
            svg.append(f'<text x="{x}" y="{base + 22}" text-anchor="middle" class="small">not tested</text>')
        svg.append(f'<text x="{x}" y="{base + 42}" text-anchor="middle" class="small">q/p {ratio_text(s["ratio"])}</text>')
    if not tau:
        svg.append(f'<text x="{x_of(0)}" y="{base + 22}" text-anchor="middle" class="small">test {order[0]} {CHECK}</text>')
    ws = [1.0] + [s["w"] for s in d.steps]
    for i in range(1, len(ws)):
        svg.append(f'<line class="w-line" x1="{x_of(i - 1):.1f}" y1="{y_of(ws[i - 1]):.1f}" x2="{x_of(i):.1f}" '
                   f'y2="{y_of(ws[i]):.1f}"/>')
    for i, w in enumerate(ws):
        svg.append(f'<rect class="w-dot" x="{x_of(i) - 5:.1f}" y="{y_of(w) - 5:.1f}" width="10" height="10">'
                   f'<title>w{sub(i)} = {w:.3g}</title></rect><text x="{x_of(i) + 8:.1f}" y="{y_of(w) - 8:.1f}" '
                   f'class="small">w{sub(i)} {w:.2g}</text>')
    svg.append(f'<text x="{left}" y="{base + 66}" class="small">tested from the right: the first test that passes '
               f"decides how many drafts are kept ({tau})</text>")
    key = ('<span class="swatch w-line"></span> w after each draft <span class="swatch h-bar"></span> h of the prefix '
           '<span class="swatch r-tick"></span> r (below the top of h: passes) '
           '<span class="swatch node-path"></span> kept <span class="swatch node-unchecked"></span> dropped')
    return (f'<figure class="block"><figcaption>The weight w starts at 1 at the text and is multiplied by q/p at each '
            f"draft, never above 1: a q/p below 1 pulls it down, a later q/p above 1 lifts it again. Each prefix i gets "
            f"a test with its own r against h<sub>i</sub>, the longest prefix first; the first that passes is kept "
            f"(here {tau} of {k}), whatever failed before it; the shorter prefixes are not tested. The last token is "
            + ("the bonus, drawn from q." if ending == "bonus" else
               f"drawn from max(w<sub>{tau}</sub> q &minus; p, 0), renormalised, in place of draft {tau + 1}.")
            + f'</figcaption>\n<p class="key">{key}</p>\n' + "".join(svg) + "</svg></figure>")


def sub(i):
    """A subscript index in SVG text, where <sub> does not exist: w₀, h₃."""
    return "".join("\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089"[int(c)] for c in str(i))
