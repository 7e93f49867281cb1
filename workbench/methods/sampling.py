"""Speculative sampling: drafts sampled from the draft's p, kept with probability min(1, q/p), the output
distributed exactly as the oracle's sampling.

    sps        sps.py: Chen et al. 2023, Algorithm 2: each draft tested in turn, the residual (q - p)+ at the first
               rejection (token verification)
    sps-block  beyond/block_verification.py: Sun et al. 2025: the whole block judged at once, its prefixes tested
               from the longest down, never fewer kept than sps

Letters as in Chen et al.: q is the target (the oracle), p the draft; Leviathan et al. and Hugging Face
name them the other way round. A round shows each draft's p(x), q(x), the test that decided it and the
numbers it compared, printed with the digits that decide the comparison (display.decisive_digits), and
where the last token was drawn from.
"""

import html
import math

import numpy as np

from batch import speculative_sample_batch
from beyond.block_verification import block_sample
from beyond.specdec_pp import specdec_sample
from sps import speculative_sample
from workbench import system
from workbench.display import decisive_digits, length_reason
from workbench.heads import head_of
from workbench.methods.vocabularies import SPS as SPS_ACROSS
from workbench.page.report import cells
from workbench.page.tokens import LETTERS, chip, last_mark, probability, svg_label, token_text, visible
from workbench.registry import Method, Option, Shown, register

CHECK, CROSS = "\u2713", "\u2717"


# ---------------------------------------------------------------------------
# sps: token verification
# ---------------------------------------------------------------------------

def sps_lines(r, show):
    """An SpS round: each draft's p(x), q(x), the acceptance probability, r and the decision (Chen et al.'s
    letters: q is the target, i.e. the oracle, p the draft)."""
    d = r.details
    lines = [f"  drafted  {show(r.drafted)}   (sampled from the draft's p)"]
    for t, step in enumerate(d.steps, 1):
        verdict = "accept" if step["accepted"] else "REJECT"
        # .3g: rare tokens' probabilities stay readable (0.00055, not 0.001 beside 0.000); r and min(1, q/p) with
        # the digits that decide the test (decisive_digits)
        a, r_ = step["accept_prob"], step["r"]
        digits = decisive_digits((r_, a), (a, 1.0), (r_, 1.0), least=3)
        lines.append(f"  x~{t} {show([step['token']]):14s} p(x) {step['p']:.3g}  q(x) {step['q']:.3g}  "
                     f"min(1, q/p) {a:.{digits}g}  r {r_:.{digits}g}  -> {verdict}")
    if d.resampled is not None:
        res = d.resampled
        drawn = next((e["residual"] for e in res["top"] if e["token"] == res["token"]), None)
        largest = sorted((e for e in res["top"] if e["residual"] > 0), key=lambda e: -e["residual"])
        top = "  ".join(f"{show([e['token']])} {e['residual']:.3g}" for e in largest)
        chance = f", where it had {drawn:.3g}" if drawn is not None else ""
        lines.append(f"  resample {show([res['token']])} from (q - p)+ renormalised{chance}; "
                     f"there, among the likeliest tokens: {top or '(none)'}")
    elif r.drafted:
        lines.append(f"  bonus    {show([d.bonus['token']])} sampled from q (q(x) {d.bonus['q']:.3g}): "
                     f"all {len(r.drafted)} accepted")
    else:
        lines.append(f"  oracle   {show([d.bonus['token']])} sampled from q (q(x) {d.bonus['q']:.3g}): nothing drafted")
    return lines


def sps_reasons(r, show):
    return [length_reason(r.details.n_draft, r.details.k, letter=" (Chen et al.'s K)")]


def sps_table(run, r):
    """Step 3 of Chen et al. at each drafted position, then the residual chart or the bonus."""
    d = r.details  # an sps.SpsDetails
    steps, columns = d.steps, []
    for t, token in enumerate(r.drafted):
        if t < len(steps):
            s = steps[t]
            decision = "&check; keep: r &lt; min" if s["accepted"] else "&cross; reject: r &ge; min"
            columns.append(("ok" if s["accepted"] else "miss", chip(run, token, "draft" if s["accepted"] else ""),
                            probability(s["p"]), probability(s["q"]), probability(s["accept_prob"]), f"{s['r']:.3f}", decision))
        else:
            columns.append(("unused", chip(run, token), "", "", "", "", "not checked"))
    if d.bonus is not None:  # all drafts kept (or none drafted): one token drawn from q
        b, mark = d.bonus, last_mark(r)
        columns.append((mark, chip(run, b["token"], mark), "", probability(b["q"]), "", "",
                        "bonus, drawn from q" if mark == "bonus" else "drawn from q, nothing drafted"))
    names = ["token x", "p(x) draft", "q(x) target", "min(1, q/p)", "r", "decision"]
    table = ('<div class="scroll"><table class="steps">'
             + cells("position", [("", str(t + 1)) for t in range(len(columns))])
             + "".join(cells(name, [(col[0], col[row + 1]) for col in columns]) for row, name in enumerate(names))
             + "</table></div>")
    if d.resampled is not None:
        table += residual_figure(run, d.resampled, len(steps))
    return table


BARS = (("p", "p(x), draft"), ("q", "q(x), target"), ("min", "min(p, q)"), ("residual", "(q \u2212 p)+, renormalised"))


def residual_figure(run, resampled, position):
    """At a rejection: p, q, min(p, q) and the renormalised residual over the top tokens, the drawn token marked."""
    top = resampled["top"]
    highest = max(max(entry[key] for key, _ in BARS) for entry in top) or 1
    slot, plot_h, base = 118, 170, 200
    svg = [f'<svg class="chart" viewBox="0 0 {len(top) * slot + 20} 262" width="{len(top) * slot + 20}" role="img" '
           f'aria-label="p, q, min and residual over the top tokens">',
           f'<line x1="10" y1="{base}" x2="{len(top) * slot + 10}" y2="{base}" stroke="#000" stroke-width="2"/>']
    for g, entry in enumerate(top):
        x = 10 + g * slot
        drawn, rejected = entry["token"] == resampled["token"], entry["token"] == resampled.get("rejected")
        if drawn:
            svg.append(f'<rect class="drawn" x="{x + 2}" y="8" width="{slot - 4}" height="{base + 50}"/>')
        for j, (key, name) in enumerate(BARS):
            h = plot_h * entry[key] / highest
            svg.append(f'<rect class="{key}" x="{x + 10 + j * 25}" y="{base - h:.1f}" width="22" height="{h:.1f}">'
                       f"<title>{html.escape(name)}: {probability(entry[key])}</title></rect>")
        label = "".join(s for _, s in visible(token_text(run, entry["token"]), in_token=True))
        label = html.escape(label if len(label) <= 11 else label[:10] + "\u2026", quote=False)  # the table below has it whole
        svg.append(f'<text x="{x + slot / 2}" y="{base + 26}" text-anchor="middle" class="label">{label}</text>')
        if drawn or rejected:
            svg.append(f'<text x="{x + slot / 2}" y="{base + 50}" text-anchor="middle" class="label">'
                       f'{"drawn" if drawn else "rejected draft"}</text>')
    rows = "".join(('<tr class="drawn">' if e["token"] == resampled["token"] else "<tr>")
                   + f"<td>{chip(run, e['token'])}{' (rejected draft)' if e['token'] == resampled.get('rejected') else ''}</td>"
                   + "".join(f"<td>{probability(e[key])}</td>" for key, _ in BARS) + "</tr>" for e in top)
    key = " ".join(f'<span class="swatch {k}"></span> {html.escape(name)}' for k, name in BARS)
    rejected = (f"the draft's {chip(run, resampled['rejected'], 'miss')} (where q &lt; p, so its residual is 0) is replaced by "
                if "rejected" in resampled else "")
    return (f'<figure><figcaption>Rejected at position {position}: {rejected}a token drawn from the residual '
            f"(q &minus; p)+ renormalised, here {chip(run, resampled['token'], 'fix')}. "
            "q(x) = min(p(x), q(x)) + (q(x) &minus; p(x))+: a rejection supplies the part of q that accepted drafts cannot. "
            f"Letters as in Chen et al.: q the target, p the draft.</figcaption>\n<p class=\"key\">{key}</p>\n"
            + "".join(svg) + "</svg>\n"
            + '<table class="numbers"><tr><th>token</th>' + "".join(f"<th>{html.escape(name)}</th>" for _, name in BARS)
            + f"</tr>{rows}</table></figure>")


SPS_HOW = ("Each round the draft samples K = n_draft tokens x from p (fewer where fewer are left to make); the "
           "oracle computes q at every position in one pass. "
           "Draft t is kept if r < min(1, q(x)/p(x)), r uniform on [0, 1); at the first rejection a token is drawn from "
           "the residual (q \u2212 p)+ instead. " + LETTERS)


# ---------------------------------------------------------------------------
# sps-block: block verification
# ---------------------------------------------------------------------------

BLOCK_LEGEND = ("block verification (Sun et al. 2025): w_0 = 1, w_i = min(1, w_(i-1) q(x_i)/p(x_i)), how much of the",
                "first i drafts survives; h_i = Z_i / (Z_i + 1 - w_i), Z_i = sum over x of max(w_i q(x) - p(x), 0), the",
                "chance that prefix i's test passes. The prefixes are tested from the longest down; the first test that",
                "passes (r < h_i) decides how many drafts are kept, so a failed test does not end the round. The last",
                "token is the bonus from q, or drawn from max(w q - p, 0) after the kept drafts. q the oracle, p the draft.")
BLOCK_HOW = ("Each round the draft samples K = n_draft tokens x from p; the oracle computes q at every position in one "
             "pass. Block verification (Sun et al. 2025) weighs the whole block: w_i = min(1, w_(i-1) q(x_i)/p(x_i)) "
             "carries a shortfall along, so a later q/p > 1 can make up for an earlier one below 1. The prefixes are "
             "tested from the end, the longest first, each with its own r against its h: the first test that passes "
             "decides how many drafts are kept (a failed test does not end the round, as a rejection ends SpS's), "
             "and the next token is drawn from max(w q \u2212 p, 0), or from q after a whole block. " + LETTERS)
BLOCK_MARKS = {"draft": ("accepted draft", "sampled from the draft's p, kept in the longest prefix whose test r < h passed"),
               "fix": ("resampled", "drawn from the residual max(w q \u2212 p, 0) after the drafts kept")}
BLOCK_ALPHA = ("Here &alpha; = accepted / (accepted + rounds that dropped a draft) = {alpha}, the &alpha; under which "
               "these rounds are likeliest in that model. Block verification does not test draft by draft, though: it "
               "judges the whole block at once, testing its prefixes from the longest down, and given its first i drafts "
               "it keeps all of them with chance w<sub>i</sub>, the weight after draft i: at least SpS's product of "
               "min(1, q/p) over them, and more where a later q/p above 1 made up for an earlier one below 1. So the "
               "prediction is SpS's model, a yardstick here, not block verification's own (q the target, p the draft, "
               "as in Chen et al.).")


def block_lines(r, show):
    """A block-verification round: each draft's p(x), q(x), q/p, the weight w_i and acceptance probability h_i
    of the prefix it ends, the tests from the end (r < h_i?), and where the last token came from."""
    d, k = r.details, len(r.drafted)  # a block_verification.BlockDetails
    lines = [f"  drafted  {show(r.drafted) or '(nothing)'}   (sampled from the draft's p)"]
    order = {i: n for n, i in enumerate(range(k, d.kept, -1), 1)}  # prefix -> its test's number, from the end
    order.setdefault(d.kept, len(order) + 1)
    for i, s in enumerate(d.steps, 1):
        # r and h, and q/p beside 1, with the digits that decide them (decisive_digits)
        digits = decisive_digits((s["ratio"], 1.0), *(((s["r"], s["h"]), (s["r"], 1.0)) if s["r"] is not None else ()),
                                 least=3)
        if s["r"] is None:
            test = "not tested: a longer prefix passed"
        else:
            test = (f"test {order[i]}: r {s['r']:.{digits}g} {'<' if s['passed'] else '>='} h_{i}: "
                    f"{'passes, keep ' + str(i) if s['passed'] else 'fails'}")
        lines.append(f"  x~{i} {show([s['token']]):14s} p(x) {s['p']:.3g}  q(x) {s['q']:.3g}  "
                     f"q/p {s['ratio']:.{digits}g}  w_{i} {s['w']:.3g}  h_{i} {s['h']:.{digits}g}  {test}")
    if k and not d.kept:
        lines.append(f"  test {order[0]}: prefix 0 (no draft) always passes -> keep 0")
    last, token = d.last, show(r.new[-1:])
    if last["from"] == "bonus":
        said = f"sampled from q (q(x) {last['prob']:.3g}): " + (f"all {k} kept" if k else "nothing drafted")
        lines.append(f"  {'bonus' if k else 'oracle'}    {token} {said}")
    else:
        lines.append(f"  residual {token} drawn after draft {d.kept} from max(w_{d.kept} q - p, 0) renormalised, "
                     f"w_{d.kept} = {last['w']:.3g} (its chance there {last['prob']:.3g}; q(x) {last['q']:.3g})")
    return lines + [f"  kept     {d.kept} of {k} draft(s) + {token}"]


def block_reasons(r, show):
    """In words: how w carried the block (and where a q/p above 1 made up for an earlier one below 1), and
    what the residual is; then the whole round in one line (reason_line)."""
    d = r.details
    if not d.steps:
        return [reason_line(d)]
    ws = " -> ".join(f"{w:.2g}" for w in [1.0] + [s["w"] for s in d.steps])
    lines = [f"w along the block: {ws}"]
    tau = d.kept
    token_chance = 1.0
    for s in d.steps[:tau]:
        token_chance *= min(1.0, s["ratio"])
    w_before = [1.0] + [s["w"] for s in d.steps]
    refilled = [i for i, s in enumerate(d.steps[:tau], 1) if s["ratio"] > 1 and w_before[i - 1] < 1]
    if refilled:
        short = [i for i, s in enumerate(d.steps[:max(refilled)], 1) if s["ratio"] < 1]
        w = d.steps[tau - 1]["w"]
        digits = decisive_digits((token_chance, w))
        lines.append(f"token verification would keep these {tau} drafts with chance {token_chance:.{digits}g} (the "
                     f"product of min(1, q/p)); block verification with chance w_{tau} = {w:.{digits}g}, as "
                     f"{naming(refilled, d.steps)} made up for the shortfall of {naming(short, d.steps)}")
    if d.last["from"] == "residual":
        w, dropped = d.last["w"], d.steps[tau]  # the first draft not kept: its q and p are the residual's there
        left = w * dropped["q"] - dropped["p"]
        lines.append(f"the last token replaces draft {tau + 1}: it is drawn from what the oracle's q, scaled by "
                     f"w_{tau} = {w:.2g}, has beyond the draft's p" + (" (w = 1: SpS's residual (q - p)+)" if w >= 1 else "")
                     + f"; there draft {tau + 1} {show([dropped['token']])} has w q - p = {left:.2g} <= 0, so the "
                     f"residual never draws it again (had w_{tau} q/p reached 1 at it, w_{tau + 1} would be 1 and its "
                     f"prefix would have passed)")
    return lines + [reason_line(d)]


def reason_line(details):
    """The round in one line: step 5's tests from the end, where a later q/p > 1 made up for
    an earlier q/p < 1 (what token verification could not do), and where the last token came from. Drafts are
    named by their position: the trace shows their text on the line above. Numbers a rule compared (r and h,
    q/p and 1, w and token verification's chance) print with the digits that tell them apart."""
    steps, tau, last = details.steps, details.kept, details.last
    if not steps:
        return f"nothing drafted: the token drawn from the oracle's q (prob {last['prob']:.2g})"
    tests = []
    for i, s in reversed(list(enumerate(steps, 1))):
        if s["r"] is not None:
            digits = decisive_digits((s["r"], s["h"]), (s["r"], 1.0))
            tests.append(f"prefix {i} h={s['h']:.{digits}g} r={s['r']:.{digits}g} "
                         f"{'passes' if s['passed'] else 'fails'}")
    parts = ["from the end: " + ", ".join(tests) + ("" if tau else ", prefix 0 always passes")]
    # Token verification keeps all tau drafts with chance prod min(1, q/p); the block's w_tau is at least that,
    # and more where a later q/p > 1 made up for an earlier q/p < 1: say so.
    token_chance = float(np.prod([min(1.0, s["ratio"]) for s in steps[:tau]]))
    made_up = [i for i, s in enumerate(steps[:tau], 1)  # a shortfall that a later kept draft's q/p > 1 made up for
               if s["ratio"] < 1 and any(later["ratio"] > 1 for later in steps[i:tau])]
    if tau and made_up and steps[tau - 1]["w"] > token_chance + 1e-6:
        short = ", ".join(f"{i} (q/p={ratio_text(steps[i - 1]['ratio'])})" for i in made_up)
        w = steps[tau - 1]["w"]
        digits = decisive_digits((w, token_chance))
        parts.append(f"w_{tau}={w:.{digits}g} where token verification keeps all {tau} with chance "
                     f"{token_chance:.{digits}g}: a later q/p > 1 made up for draft {short}")
    if last["from"] == "bonus":
        parts.append(f"all {tau} kept: the bonus drawn from the oracle's q (prob {last['prob']:.2g})")
    else:
        parts.append(f"{tau} of {len(steps)} kept: the last token drawn from the block residual max(w_{tau} q - p, 0), "
                     f"w_{tau}={last['w']:.2g} (prob there {last['prob']:.2g}; q(x) {last['q']:.2g})")
    return "; ".join(parts)


def naming(drafts, steps):
    """'draft 2 (q/p 1.3)', 'drafts 1 (q/p 0.5) and 3 (q/p 0.8)': each q/p with the digits that tell it from 1."""
    named = [f"{i} (q/p {ratio_text(steps[i - 1]['ratio'])})" for i in drafts]
    return ("draft " if len(named) == 1 else "drafts ") + (", ".join(named[:-1]) + " and " if len(named) > 1 else "") \
        + named[-1]


def ratio_text(ratio):
    """q/p as the trace prints it: with the digits that tell it from 1 (1.046 is 1.05, never 1)."""
    return f"{ratio:.{decisive_digits((ratio, 1.0))}g}"


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


# ---------------------------------------------------------------------------
# specdec: SpecDec++'s stop, the draft's acceptance head deciding how far to draft
# ---------------------------------------------------------------------------

def specdec_reason_line(details):
    """Why drafting stopped, in one line (the checks themselves are sps.py's, drawn by its renderer)."""
    said = ", ".join(f"a_{i}={a:.2f}" for i, a in enumerate(details.chances, 1))
    risk = 1.0 - math.prod(details.chances)
    if details.stop == "head":
        return (f"SpecDec++: {said}: 1 - Π a = {risk:.2f} > γ = {details.max_risk:g}, drafting stopped after "
                f"{details.k} draft{'s' if details.k != 1 else ''}")
    why = f"{details.n_draft} drafts, the most a round" if details.stop == "n_draft" else "the tokens left"
    return f"SpecDec++: {said or 'no draft read'}: 1 - Π a = {risk:.2f} <= γ = {details.max_risk:g}; {why}"


def specdec_reasons(r, show):
    return [specdec_reason_line(r.details)] + sps_reasons(r, show)


SPECDEC_HOW = ("Each round the draft samples tokens x from p, and after each one SpecDec++'s acceptance head (a small "
               "head trained on the draft's own states) gives a, its chance that the draft will be kept; drafting stops "
               "once 1 \u2212 \u03a0 a passes the threshold \u03b3 (max_risk), or at n_draft. The oracle then computes "
               "q at every position in one pass and checks the drafts as SpS does: kept if r < min(1, q(x)/p(x)), else "
               "the residual (q \u2212 p)+. The stop reads only what the round knew before each draw, so the text is "
               "still distributed as the oracle's. " + LETTERS)


# ---------------------------------------------------------------------------
# The methods
# ---------------------------------------------------------------------------

def run_sps(c):
    return speculative_sample(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                              processor=c.settings.processor, stats=c.stats)


def run_sps_batch(c, batch_ids):
    return speculative_sample_batch(c.draft, c.oracle, batch_ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                                    processor=c.settings.processor, stats=c.stats, budget=system.memory_budget())


def run_sps_block(c):
    return block_sample(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng, processor=c.settings.processor,
                        stats=c.stats)


def run_specdec(c):
    return specdec_sample(c.draft, c.oracle, c.ids, c.n_new, head_of(c.draft, "accept"), n_draft=c.n_draft,
                          max_risk=c.option("max_risk"), rng=c.rng, processor=c.settings.processor, stats=c.stats)


def always(r):
    return True


MAX_RISK = Option("max_risk", float, 0.5, "specdec: the stop's threshold on the chance that some draft so far is "
                                          "rejected (1: never stop early, sps)", 0.0, 1.0)


SPS = Shown(drafts=sps_lines, reasons=sps_reasons, how_to_read=SPS_HOW, page_table=sps_table, sampled=always)
register(
    Method("sps", "speculative sampling, Chen et al. 2023 Algorithm 2 (sps.py); output ~ the oracle's distribution; a "
                  "draft of another vocabulary: crossvocab.py", run_sps, n_draft=4, samples=True, shown=SPS,
           across=SPS_ACROSS, batched=run_sps_batch),
    Method("sps-block", "speculative sampling with block verification: the whole draft judged at once, never fewer "
                        "kept than sps (Sun et al. 2025; beyond/block_verification.py); output ~ the oracle's "
                        "distribution", run_sps_block, n_draft=4, samples=True,
           shown=Shown(legend=BLOCK_LEGEND, drafts=block_lines, reasons=block_reasons, how_to_read=BLOCK_HOW,
                       page_table=block_table, marks=BLOCK_MARKS, sampled=always, alpha_note=BLOCK_ALPHA)),
    Method("specdec", "speculative sampling whose drafting stops when a trained head on the draft's states says a "
                      "draft will likely be rejected (SpecDec++, Huang et al. 2024; beyond/specdec_pp.py); output ~ "
                      "the oracle's distribution", run_specdec, n_draft=8, samples=True, draft_head="accept",
           options=(MAX_RISK,), shown=Shown(drafts=sps_lines, reasons=specdec_reasons, how_to_read=SPECDEC_HOW,
                                            page_table=sps_table, sampled=always)),
)
