"""The page's figures: accepted drafts per round beside what alpha predicts, SpS's residual at a rejection,
and each beyond/ method's own picture of a round (the sampled tree, the oracle's blocks, the suffix match)."""

import html

from app import display
from app.page.tokens import chip, chips, last_mark, plural, probability, svg_label, token_text, visible
from beyond.suffix import continuation
from beyond.tree_sampling import check_numbers
from speedup import truncated_geometric


# ---------------------------------------------------------------------------
# Accepted drafts per round: measured, and predicted from alpha
# ---------------------------------------------------------------------------

def draft_length(r):
    """The most drafts round r could have kept: k for a line of drafts, the number of levels for a tree."""
    tree = display.tree_of(r)
    if tree is None:
        return len(r.drafted)
    depth = []
    for parent in tree.parents:  # level order: a parent comes before its children
        depth.append(1 if parent == -1 else depth[parent] + 1)
    return max(depth, default=0)


def acceptance_histogram(trace):
    """(alpha, measured, predicted) over the rounds that drafted something.

    alpha is the chance that a checked draft is kept: accepted / (accepted +
    rejections), since the drafts after a rejection are never checked (the
    acceptance at the top, accepted / drafted, counts them as lost).
    measured[i] counts the rounds that kept i drafts; predicted[i] adds up
    truncated_geometric over the rounds, each with its own draft length k
    (for a tree, whose alpha means less, its depth).
    """
    rounds = [(draft_length(r), r.accepted) for r in trace if r.drafted]
    accepted = sum(n for _, n in rounds)
    rejections = sum(n < k for k, n in rounds)
    alpha = accepted / (accepted + rejections) if accepted + rejections else 0.0
    largest_k = max(k for k, _ in rounds)
    measured, predicted = [0] * (largest_k + 1), [0.0] * (largest_k + 1)
    for k, n in rounds:
        measured[n] += 1
        for i, p in enumerate(truncated_geometric(alpha, k)):
            predicted[i] += p
    return alpha, measured, predicted


def histogram_svg(measured, predicted=None):
    """Bars of the measured counts, each beside an outlined bar of the predicted count."""
    n = len(measured)
    top = max(measured + (predicted or [])) or 1
    slot, plot_h, left, base = 96, 200, 50, 240
    parts = [f'<svg class="histogram" viewBox="0 0 {left + n * slot + 10} 290" width="{left + n * slot + 10}" '
             'role="img" aria-label="accepted drafts per round">',
             f'<line x1="{left}" y1="{base}" x2="{left + n * slot}" y2="{base}" stroke="#000" stroke-width="2"/>']
    for i in range(n):
        x = left + i * slot + 10
        bars = [(measured[i], str(measured[i]), "measured")]
        if predicted is not None:
            bars.append((predicted[i], f"{predicted[i]:.1f}", "predicted"))
        for j, (value, label, cls) in enumerate(bars):
            h = plot_h * value / top
            parts.append(f'<rect class="{cls}" x="{x + j * 38}" y="{base - h:.1f}" width="34" height="{h:.1f}">'
                         f"<title>{cls}: {label}</title></rect>"
                         f'<text x="{x + j * 38 + 17}" y="{base - h - 6:.1f}" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{x + 36}" y="{base + 28}" text-anchor="middle" class="axis">{i}</text>')
    parts.append(f'<text x="{left + n * slot / 2}" y="{base + 48}" text-anchor="middle" class="axis">'
                 "drafts accepted in the round</text>")
    return "".join(parts) + "</svg>"


# ---------------------------------------------------------------------------
# SpS: the residual a rejection draws from
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Each beyond/ method's own picture of a round
# ---------------------------------------------------------------------------

def primes(n):
    """q, q', q'', ...: the target after n rejections at one node."""
    return "q" + "\u2032" * n


TREE_KEY = (("node-path", "accepted child (the path)"), ("node-rejected", "checked and rejected"),
            ("node-unchecked", "never checked"), ("node-fix", "last token, drawn from the residual"),
            ("node-bonus", "last token, the bonus drawn from q"))


def sampled_tree_figure(run, r):
    """Tree speculative sampling: the sampled tree left to right, the accepted path marked, every child checked
    marked kept or rejected, and the round's last token hung where the walk ended; then every check in order."""
    d = r.details  # a tree_sampling.SampledTreeDetails
    parents, path, visits, last = d.parents, d.path, d.visits, d.last
    without = d.siblings == "without replacement"  # p changes after a rejection too: p', p'', ...
    draft = (lambda i: "p" + "\u2032" * i) if without else (lambda i: "p")
    n = len(parents)
    checked = {}  # node -> (how many siblings were rejected before it, its check)
    for visit in visits:
        for i, (child, check) in enumerate(zip(visit["children"], visit["checks"])):
            checked[child] = (i, check)
    end = path[-1] if path else -1
    children = {i: [] for i in range(-1, n + 1)}
    for i, parent in enumerate(parents):
        children[parent].append(i)
    children[end].append(n)  # node n: the round's last token, below where the walk ended
    depth = {-1: 0}
    for i, parent in enumerate(parents + [end]):  # level order: a parent comes before its children
        depth[i] = depth[parent] + 1
    rows, row = {}, [0]

    def place(i):  # leaves take the next row, a parent sits midway between its first and last child
        for c in children[i]:
            place(c)
        if children[i]:
            rows[i] = (rows[children[i][0]] + rows[children[i][-1]]) / 2
        else:
            rows[i], row[0] = row[0], row[0] + 1
    place(-1)

    box_w, box_h, col, line, top = 132, 28, 176, 38, 10
    ending = "fix" if last["from"] == "residual" else "bonus"
    width = 20 + col * max(depth.values()) + box_w + 250
    height = top * 2 + line * row[0]

    def at(i):
        return 10 + col * depth[i], top + line * rows[i]

    svg = [f'<svg class="sampled-tree" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           'aria-label="the sampled tree, the accepted path and the last token">']
    for i in range(n + 1):  # the edges first, under the boxes
        x, y = at(i)
        px, py = at(parents[i] if i < n else end)
        on = "on" if i in path or i == n else "off"
        svg.append(f'<line class="edge-{on}" x1="{px + box_w}" y1="{py + box_h / 2:.1f}" x2="{x}" '
                   f'y2="{y + box_h / 2:.1f}"/>')
    x, y = at(-1)
    svg.append(f'<rect class="node-root" x="{x}" y="{y:.1f}" width="{box_w}" height="{box_h}"><title>the text so far, '
               f'{r.context_length} tokens</title></rect><text x="{x + 8}" y="{y + 20:.1f}" class="axis">the text</text>')
    for i in range(n):
        x, y = at(i)
        token = r.drafted[i]
        if i in checked:
            before, c = checked[i]
            cls, mark = ("node-path", " \u2713") if c["accepted"] else ("node-rejected", " \u2717")
            r_, ratio, digits = check_numbers(c)
            note = (f"{'kept' if c['accepted'] else 'rejected'} by its test r &lt; min(1, {primes(before)}/{draft(before)}): "
                    f"{draft(before)}(x) {probability(c['p'])}, {primes(before)}(x) {probability(c['q'])}, "
                    f"{primes(before)}/{draft(before)} {ratio:.{digits}g}, r {r_:.{digits}g}")
        else:
            cls, mark, note = "node-unchecked", "", f"never checked; p(x) {probability(d.probs[i])}"
        svg.append(f'<rect class="{cls}" x="{x}" y="{y:.1f}" width="{box_w}" height="{box_h}"><title>token {int(token)}: '
                   f'{note}</title></rect><text x="{x + 6}" y="{y + 20:.1f}">{svg_label(run, token, 9)}{mark}</text>')
    x, y = at(n)
    said = (f"residual ({primes(len(visits[-1]['checks']))} after every child)" if ending == "fix" else
            "bonus from q" if path else "from q, nothing drafted")
    svg.append(f'<rect class="node-{ending}" x="{x}" y="{y:.1f}" width="{box_w}" height="{box_h}"><title>token '
               f'{int(last["token"])}: {said}, probability {probability(last["prob"])}</title></rect>'
               f'<text x="{x + 6}" y="{y + 20:.1f}">{svg_label(run, last["token"], 10)}</text>'
               f'<text x="{x + box_w + 8}" y="{y + 20:.1f}" class="axis">&larr; {html.escape(said, quote=False)}</text>')
    key = " ".join(f'<span class="swatch {cls}"></span> {html.escape(name)}' for cls, name in TREE_KEY)

    rows_html = []
    for depth_i, visit in enumerate(visits, 1):
        for i, c in enumerate(visit["checks"]):
            verdict = "&check; accepted: r &lt; min" if c["accepted"] else "&cross; rejected: r &ge; min"
            r_, ratio, digits = check_numbers(c)  # min(1, target/draft) and r with the digits that decide the test
            rows_html.append(f'<tr class="{"ok" if c["accepted"] else "miss"}"><td>{depth_i}</td><td>{i + 1}</td>'
                             f"<td>{chip(run, c['token'], 'draft' if c['accepted'] else '')}</td>"
                             f"<td>{draft(i)}</td><td>{probability(c['p'])}</td><td>{primes(i)}</td>"
                             f"<td>{probability(c['q'])}</td><td>{ratio:.{digits}g}</td>"
                             f"<td>{min(1.0, ratio):.{digits}g}</td><td>{r_:.{digits}g}</td><td>{verdict}</td></tr>")
    last_chip = chip(run, last["token"], ending if path or visits else "oracle")
    rows_html.append(f'<tr class="{ending}"><td>last</td><td></td><td>{last_chip}'
                     f'</td><td></td><td></td><td>{primes(len(visits[-1]["checks"])) if ending == "fix" else "q"}</td>'
                     f'<td>{probability(last["prob"])}</td><td></td><td></td><td></td><td>{html.escape(said)}</td></tr>')
    table = ('<table class="numbers checks"><tr><th>depth</th><th>child</th><th>token x</th><th>draft</th>'
             "<th>draft(x)</th><th>target</th><th>target(x)</th><th>target/draft</th><th>min(1, target/draft)</th>"
             "<th>r</th><th>decision</th></tr>"
             + "".join(rows_html) + "</table>")
    rule = ("drawn without replacement (siblings all different), the root on the left. The children of the node "
            "reached are checked top to bottom; a rejection turns the target into the residual for the next sibling "
            "(q&prime;, q&Prime;, ...) and takes the rejected token out of the draft's p (p&prime;, p&Prime;, ...), "
            "as the next sibling was drawn without it" if without else
            "drawn i.i.d., the root on the left. The children of the node reached are checked top to bottom; a "
            "rejection turns the target into the residual for the next sibling (q&prime;, q&Prime;, ...)")
    return (f'<figure class="sampled-tree"><figcaption>The tree the draft sampled ({n} nodes, up to {d.width} '
            f"children per node, {rule}.</figcaption>\n"
            f'<p class="key">{key}</p>\n' + "".join(svg) + "</svg>\n"
            f'<div class="scroll">{table}</div></figure>')


def layers_figure(run, r, number):
    """Self-speculative: the oracle's blocks, the draft's first L marked, one column per token fed; the draft's
    early exit proposes each next token, the oracle's verification runs from block L on and chooses at the top."""
    L, k, n = r.details.layers, len(r.drafted), r.details.n_layer  # the draft's blocks, drafts, the oracle's blocks
    trained = getattr(r.details, "trained", False)  # the exit goes through Kangaroo's trained adapter
    if not isinstance(n, int) or not 0 < L < n:
        return f'<p class="note">The draft is the oracle\'s first {int(L)} blocks; the oracle\'s depth is not recorded.</p>'
    h = max(8, min(24, 240 // n))       # one block's height
    band, stack_w, col, x0 = 30, 190, 104, 230
    y_head = 26                          # the oracle's ln_f + LM head, its choice in each column
    y_deep = y_head + band               # blocks n-1 .. L
    y_line = y_deep + h * (n - L)        # below block L: where the verification starts
    y_exit = y_line + 24                 # the draft's early exit: ln_f + LM head after block L-1
    y_draft = y_exit + band              # blocks L-1 .. 0
    y_in = y_draft + h * L               # the tokens fed
    width, height = x0 + col * (k + 1) + 10, y_in + 56
    status = ["ok" if j < r.accepted else "miss" if j == r.accepted else "unused" for j in range(k)]
    status.append(last_mark(r) if r.accepted == k else "unused")

    def block_y(layer):
        return y_deep + h * (n - 1 - layer) if layer >= L else y_draft + h * (L - 1 - layer)

    svg = [f'<svg class="layers" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           f'aria-label="the oracle\'s {n} blocks, the draft\'s first {L}">',
           f'<text x="10" y="18" class="axis">the oracle&#x27;s {n} blocks</text>']
    for layer in range(n):  # the stack: the oracle's blocks, the draft's marked
        y, who = block_y(layer), "draft" if layer < L else "oracle"
        svg.append(f'<rect class="blk-{who}" x="10" y="{y}" width="{stack_w}" height="{h}">'
                   f"<title>block {layer}: {'the draft and the oracle' if who == 'draft' else 'the oracle only'}"
                   "</title></rect>")
        if h >= 16:
            svg.append(f'<text x="16" y="{y + h - 4}" class="small">block {layer}</text>')
    if h < 16:  # too thin to name each block: name the two groups
        for first, last, y in ((0, L - 1, y_draft + h * L / 2), (L, n - 1, y_deep + h * (n - L) / 2)):
            svg.append(f'<text x="16" y="{y + 5:.1f}" class="small">'
                       f'{"block " + str(first) if first == last else f"blocks {first}&ndash;{last}"}</text>')
    svg.append(f'<rect class="head stack" x="10" y="{y_head}" width="{stack_w}" height="{band - 4}"/>'
               f'<text x="16" y="{y_head + 19}" class="small">ln_f + LM head</text>'
               f'<rect class="head exit stack" x="10" y="{y_exit + 2}" width="{stack_w}" height="{band - 4}"/>'
               f'<text x="16" y="{y_exit + 21}" class="small">{"exit: adapter, ln_f, head" if trained else "draft exit: ln_f + head"}</text>'
               f'<text x="16" y="{y_in + 22}" class="small">tokens fed</text>')
    for j in range(k + 1):
        x = x0 + j * col
        token = r.drafted[j - 1] if j else None
        for layer in range(n):
            who = "draft" if layer < L else "oracle"
            svg.append(f'<rect class="lay-{who}" x="{x}" y="{block_y(layer)}" width="{col - 8}" height="{h}"/>')
        # the oracle's choice at the top, compared with the draft's exit in the same column
        choice, s = r.oracle[j], status[j]
        mark = {"ok": " \u2713", "miss": " \u2717", "bonus": " +"}.get(s, "")
        svg.append(f'<rect class="head {s}" x="{x}" y="{y_head}" width="{col - 8}" height="{band - 4}"><title>the oracle'
                   f"&#x27;s choice after this column: token {int(choice)}</title></rect>"
                   f'<text x="{x + 4}" y="{y_head + 19}">{svg_label(run, choice, 7)}{mark}</text>')
        if j < k:  # draft pass j exits early with the next draft; pass k runs its blocks for the oracle only
            svg.append(f'<rect class="head exit {s if s != "bonus" else "ok"}" x="{x}" y="{y_exit + 2}" width="{col - 8}" '
                       f'height="{band - 4}"><title>the draft\'s exit: token {int(r.drafted[j])}</title></rect>'
                       f'<text x="{x + 4}" y="{y_exit + 21}">&rarr; {svg_label(run, r.drafted[j], 6)}</text>')
        else:
            svg.append(f'<text x="{x + 4}" y="{y_exit + 21}" class="small">no exit</text>')
        svg.append(f'<text x="{x + (col - 8) / 2}" y="{y_in + 22}" text-anchor="middle">'
                   f'{svg_label(run, token, 8) if token is not None else "text" if number > 1 else "prompt"}</text>'
                   f'<text x="{x + (col - 8) / 2}" y="{y_in + 42}" text-anchor="middle" class="small">'
                   f'{"d" + str(j) if j else "last token" if number > 1 else "whole prompt"}</text>')
    svg.append(f'<line class="start" x1="10" y1="{y_line}" x2="{width - 10}" y2="{y_line}"/>'
               f'<text x="{x0}" y="{y_line + 17}" class="small">&uarr; the oracle: verification starts at layer {L}, '
               f"over all {k + 1} columns in one pass</text>")
    draft_blocks = "block 0" if L == 1 else f"blocks 0&ndash;{L - 1}"
    adapter = (" Its exit is trained: Kangaroo's adapter, one attention layer over the state after block "
               f"{L - 1}, turns it into what ln_f and the LM head expect before they read it." if trained else "")
    return (f'<figure class="layers"><figcaption>The draft is {draft_blocks} of the oracle\'s {n}, then '
            f"{'the adapter, ' if trained else ''}ln_f and the LM head.{adapter} Column j is draft pass j: it runs {'the text' if number > 1 else 'the prompt'} (then d<sub>j</sub>) "
            f"through {draft_blocks}, their keys and values going into the one cache both share, and exits early with "
            f"the next draft; the last pass proposes nothing, its rows are for the oracle. The oracle then runs only "
            f"blocks {L}&ndash;{n - 1}, in one pass over all {k + 1} columns, from the draft's hidden states after block "
            f"{L - 1}, and chooses at the top: a draft is kept while the oracle's choice in its column equals the "
            f"draft's exit there.</figcaption>\n" + "".join(svg) + "</svg></figure>")


SUFFIX_WINDOW = 48  # a text up to this long is shown whole in a round's suffix picture; a longer one around the match


def suffix_figure(run, r):
    """Suffix drafts: the text before the round with the suffix it ends in, the latest earlier occurrence of that
    suffix (and any other earlier one in view), and what followed it there: the draft (tree: its likeliest line)."""
    m = r.details.match
    if "end" not in m:
        return ""  # nothing matched, or too short: the round's reason says so
    text = (list(getattr(run, "prompt_ids", [])) + list(getattr(run, "tokens", [])))[:r.context_length]
    n, length, end = len(text), m["length"], m["end"]
    start = end - length + 1
    if not (0 <= start and end < n - 1 and length <= n and text[start:end + 1] == text[n - length:]):
        return ('<p class="note">The match this round recorded does not fit the page\'s text (the prompt\'s ids, then '
                "the tokens generated), so it is not drawn.</p>")
    suffix = text[n - length:]
    ends = [e for e in range(length - 1, n - 1) if text[e - length + 1:e + 1] == suffix]  # every earlier occurrence
    followed = continuation(text, end, max(draft_length(r), 1))
    in_text = list(range(end + 1, min(end + 1 + len(followed), n)))  # what followed, as far as the text goes
    roles = {}
    for e in ends:
        for i in range(e - length + 1, e + 1):
            roles.setdefault(i, set()).add("sfx-other")
    for i in range(start, end + 1):
        roles.setdefault(i, set()).add("sfx-match")
    for i in in_text:
        roles.setdefault(i, set()).add("sfx-follow")
    for i in range(n - length, n):
        roles.setdefault(i, set()).add("sfx-end")
    if n <= SUFFIX_WINDOW:
        shown = list(range(n))
    else:  # around the earlier occurrence and what followed it, and the text's end
        shown = sorted({i for i in range(start - 6, min(start + 10, n))} | {i for i in range(end - 8, end + 1)}
                       | set(in_text[:16]) | set(range(end + 1 + len(in_text) - 4, end + 1 + len(in_text) + 4))
                       | set(range(n - length - 6, n - length + 8)) | set(range(n - 10, n)))
        shown = [i for i in shown if 0 <= i < n]
    parts, previous = [], -1
    for i in shown:
        if i > previous + 1:
            parts.append(f'<span class="gap">&hellip; {plural(i - previous - 1, "token")} &hellip;</span>')
        classes = " ".join(c for c in ("sfx-other", "sfx-match", "sfx-follow", "sfx-end") if c in roles.get(i, ()))
        parts.append(f'<span class="pos {classes}" title="position {i}">{chip(run, text[i])}</span>' if classes
                     else chip(run, text[i]))
        previous = i
    if shown and shown[-1] < n - 1:
        parts.append(f'<span class="gap">&hellip; {plural(n - 1 - shown[-1], "token")} &hellip;</span>')
    copied = len(followed) - len(in_text)
    copy_note = (f"; the text ends {plural(len(in_text), 'token')} after it, so the last {plural(copied, 'token')} "
                 f"{'is' if copied == 1 else 'are'} copied on from what was just copied, as LZ77 does" if copied else "")
    others = (f" It is the latest of {m['occurrences']} earlier occurrences (in lighter yellow where shown)."
              if m.get("occurrences", 1) > 1 else "")
    tree = (" The tree below gathers what followed every earlier occurrence, the most frequent first; this line is "
            "what followed the latest." if r.details.tree is not None else "")
    key = " ".join(f'<span class="swatch {cls}"></span> {html.escape(name)}' for cls, name in (
        ("sfx-end", "the suffix the text ends in"), ("sfx-match", "its latest earlier occurrence"),
        ("sfx-follow", "what followed it there: the draft"), ("sfx-other", "another earlier occurrence")))
    return (f'<figure class="suffix"><figcaption>The text before the round ends in {plural(length, "token")} '
            f"{chips(run, suffix, ['sfx-end'] * length)} that occurred earlier, ending at position {end} (positions "
            f"count from 0, the prompt included).{others} What followed there: "
            f"{chips(run, followed, ['sfx-follow'] * len(followed))}{copy_note}.{tree}</figcaption>\n"
            f'<p class="key">{key}</p>\n<div class="strip">{" ".join(parts)}</div></figure>')
