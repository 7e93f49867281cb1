"""Lookahead decoding's round on the page (beyond/lookahead.py, Fu et al. 2024): the one pass drawn as its rows,
each under the place after the text's last token that it guesses. Above the line, the lookahead branch: the
Jacobi window, a level per iteration, and the n-grams its diagonals make; below it, the verification branch: the
pool's n-grams that start with the text's last token, the best one against the oracle's choices."""

import html

from app import display
from app.page.tokens import last_mark, plural, svg_label

STATUS = {"ok": "\u2713", "miss": "\u2717"}


def lookahead_figure(run, r):
    d = r.details  # a lookahead.LookaheadDetails
    cells = display.window_offsets(d.window)
    n_levels = len(d.window)
    outputs = [g[-1] for g in d.ngrams]  # the top level's argmaxes, known where the full window made n-grams
    longest = max([len(c) for c in d.candidates] + [len(r.oracle or [])])
    far = max([offset for _, offset, _ in cells] + [n_levels + len(outputs) - 1 if outputs else 0, longest, 1])
    left, col, box_w, box_h, line = 170, 104, 96, 26, 34
    rows = (1 if outputs else 0) + n_levels + 1 + len(d.candidates) + 1  # (new level), levels, the text, candidates, oracle
    width, height = left + col * (far + 1) + 10, 30 + line * rows + 10

    def x_of(offset):  # offset 0: the text's last token
        return left + col * offset

    svg = [f'<svg class="lookahead" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           'aria-label="the one pass: the Jacobi window above, the n-grams checked below">']
    for o in range(far + 1):
        svg.append(f'<text x="{x_of(o) + box_w / 2}" y="18" text-anchor="middle" class="small">'
                   f'{"last token" if o == 0 else "+" + str(o)}</text>')
    y = 30
    level_y = {}
    if outputs:  # the pass's argmaxes after the top level: the next Jacobi iteration, each n-gram's last token
        svg.append(f'<text x="8" y="{y + 18}" class="small">argmax: next level</text>')
        for c, token in enumerate(outputs):
            svg.append(box(run, x_of(c + n_levels), y, box_w, box_h, "la-next", token, "the oracle's argmax after the "
                           "top level's guess: next round's top level, and the last token of an n-gram"))
        level_y[n_levels] = y
        y += line
    for l in reversed(range(n_levels)):  # the newest level on top, as the iterations stack up
        level_y[l] = y
        svg.append(f'<text x="8" y="{y + 18}" class="small">level {l}{" (oldest)" if l == 0 else ""}</text>')
        for level, offset, token in cells:
            if level == l:
                svg.append(box(run, x_of(offset), y, box_w, box_h, "la-guess", token, f"level {l}'s guess for +{offset}"))
        y += line
    level_y[-1] = y  # the text's last token: column 0 of level 0, and the first token of every checked n-gram
    text = list(getattr(run, "prompt_ids", [])) + list(getattr(run, "tokens", []))
    last = text[r.context_length - 1] if 0 < r.context_length <= len(text) else None
    svg.append(f'<text x="8" y="{y + 18}" class="small">the text</text>'
               f'<rect class="node-root" x="{x_of(0)}" y="{y}" width="{box_w}" height="{box_h}"><title>the text\'s '
               f'last token, {r.context_length} tokens in all</title></rect>'
               f'<text x="{x_of(0) + 6}" y="{y + 18}">{svg_label(run, last, 8) if last is not None else "&hellip;"}</text>')
    diagonals = []  # each n-gram is a diagonal: column c of every level, one place further each, then the argmax
    for c in range(len(d.ngrams)):
        points = [(x_of(c), level_y[-1] if c == 0 else level_y[0])] + \
                 [(x_of(c + l), level_y[l]) for l in range(1, n_levels + 1)]
        for (x1, y1), (x2, y2) in zip(points, points[1:]):
            diagonals.append(f'<line class="ngram" x1="{x1 + box_w / 2}" y1="{y1 + box_h / 2}" x2="{x2 + box_w / 2}" '
                             f'y2="{y2 + box_h / 2}"/>')
    svg[1:1] = diagonals  # under the boxes
    y += line + 6
    svg.append(f'<line class="start" x1="8" y1="{y - 8}" x2="{width - 10}" y2="{y - 8}"/>')
    n_accepted = r.accepted
    status = ["ok" if j < n_accepted else "miss" if j == n_accepted else "unused" for j in range(len(r.drafted))]
    for g, candidate in enumerate(d.candidates):
        best = g == d.best
        svg.append(f'<text x="8" y="{y + 18}" class="small">n-gram {g + 1}{" (best)" if best else ""}</text>')
        for m, token in enumerate(candidate):
            cls = ("la-" + status[m]) if best else "la-other"
            svg.append(box(run, x_of(m + 1), y, box_w, box_h, cls, token,
                           f"n-gram {g + 1}, token {m + 1}" + (f": {'kept' if status[m] == 'ok' else 'not kept'}"
                                                               if best else "")))
            if best and status[m] in STATUS:
                svg.append(f'<text x="{x_of(m + 1) + box_w - 16}" y="{y + 18}">{STATUS[status[m]]}</text>')
        y += line
    svg.append(f'<text x="8" y="{y + 18}" class="small">the oracle&#x27;s choice</text>')
    mark = last_mark(r)
    for j, token in enumerate(r.oracle or []):
        cls = "la-" + (mark if j == n_accepted else "ok" if j < n_accepted else "unused")
        svg.append(box(run, x_of(j + 1), y, box_w, box_h, cls, token, "the oracle's choice here, after the text and "
                       f"the n-gram's {plural(j, 'token')} before it" + (": the round's last token" if j == n_accepted else "")))
    checked = (f"{plural(len(d.candidates), 'n-gram')} of the pool that start with the text's last token, checked in the "
               f"same pass: the best kept {plural(n_accepted, 'token')}, then the oracle added its own" if d.candidates else
               "no n-gram of the pool starts with the text's last token: nothing to check, the oracle adds its token")
    made = (f" The window is full ({n_levels} levels = N &minus; 1), so each diagonal, from a place of level 0 up through "
            f"the levels to the argmax above the top one, is a new {n_levels + 1}-gram for the pool "
            f"({plural(len(d.ngrams), 'diagonal')} drawn)." if d.ngrams else
            f" The window is warming up ({plural(n_levels, 'level')}): no n-gram is made yet.")
    key = " ".join(f'<span class="swatch {cls}"></span> {html.escape(name)}' for cls, name in (
        ("la-guess", "a Jacobi guess"), ("la-next", "the pass's argmax above it"), ("la-ok", "kept"),
        ("la-miss", "not the oracle's choice"), ("la-other", "another n-gram checked")))
    return (f'<figure class="lookahead"><figcaption>One pass of {plural(d.rows, "row")}, every token under the place '
            f"after the text's last token where it stands. Above the dashed line, the lookahead branch: "
            f"{plural(n_levels, 'level')} of Jacobi guesses (each row sees the text, then level 0 up to its column and the "
            f"levels below it in the same column). Below it, the verification branch: {checked}.{made}</figcaption>\n"
            f'<p class="key">{key}</p>\n' + "".join(svg) + "</svg></figure>")


def box(run, x, y, w, h, cls, token, title):
    return (f'<rect class="{cls}" x="{x}" y="{y}" width="{w}" height="{h}"><title>token {int(token)}: '
            f'{html.escape(title)}</title></rect><text x="{x + 6}" y="{y + 18}">{svg_label(run, token, 8)}</text>')
