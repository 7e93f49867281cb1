"""Trees of drafts, checked in one oracle pass with a tree attention mask: several guesses where the draft
is unsure, sharing their common prefix.

    tree          tree.py: greedy; the draft branches into its top tokens where unsure; the oracle's choices
                  are followed down the tree (Spector and Re 2023; SpecInfer)
    tree-sps      beyond/tree_sampling.py: the children sampled i.i.d. from the draft's p, checked in turn by
                  SpecInfer's multi-round rejection (q', q'', ... the residuals after rejections)
    tree-sps-wor  beyond/tree_without_replacement.py: distinct siblings, the draft's p updated after each rejection
                  (p', p'', ...; Sequoia's rule)

Letters as in Chen et al.: q is the target (the oracle), p the draft. The trace numbers the nodes from 1 in
level order, each under its parent; the page draws the tree.
"""

import html

from beyond import sequoia
from beyond.traversal import traversal_generate
from beyond.tree_sampling import tree_sample_generate
from beyond.tree_without_replacement import tree_sample_wor_generate
from roofline import check_costs, median
from stats import Stats
from tree import tree_generate
from workbench.display import cut_short, decisive_digits
from workbench.page.tokens import MARKS, chip, last_mark, probability, svg_label
from workbench.page.tokens import LETTERS
from workbench.registry import Method, Shown, register


# ---------------------------------------------------------------------------
# A greedy tree
# ---------------------------------------------------------------------------

def node_name(i, r, show):
    """Node i of a tree round as the trace names it: its index (level order, from 0, as tree.py's parents and
    exercises 18 and 24 count) and its token; -1 is the text."""
    return "the text" if i == -1 else f"node {i} {show([r.drafted[i]])}"


def tree_reasons(r, show):
    d = r.details
    parents = d.parents
    branched = sorted({p for p in parents if parents.count(p) > 1})
    where = ", ".join(node_name(p, r, show) for p in branched)
    line = (f"branched into the draft's top {d.branch} where its likeliest token had probability below "
            f"{d.confidence:g} (after {where})" if branched else
            f"no branch: the draft's likeliest token had probability at or above {d.confidence:g} at every node")
    return [line, f"kept the path the oracle's choices follow: {len(d.path)} node(s) deep"
                  f"{cut_short(d.n_draft, d.k, 'level')}"]


def tree_kept_reason(tree):
    """A tree drawn by another rule (beyond/suffix.py's): only the walk's outcome."""
    return [f"kept the path the oracle's choices follow: {len(tree.path)} node(s) deep"
            f"{cut_short(tree.n_draft, tree.k, 'level')}"]


def tree_lines(r, show, p_is="the draft's probability of the node's token after its parent", tree=None):
    """A tree round: each node, numbered, under its parent with its probability p (p_is: what p is), the
    accepted path marked, and why every other node lost: the oracle chose another token after its
    parent, or its parent was never reached. tree: the round's tree where its details hold more (suffix-tree)."""
    tree = tree or r.details
    parents, path, probs = tree.parents, set(tree.path), tree.probs
    lines = [f"  tree     {len(r.drafted)} nodes, numbered in level order from 0; * = on the accepted path; "
             f"p = {p_is}"]

    def walk(parent, depth):
        reached = parent == -1 or parent in path
        for i, p in enumerate(parents):
            if p == parent:
                chosen = r.oracle[parent + 1]  # the oracle's token after the parent
                why = ("kept: the oracle's choice after its parent" if i in path else
                       f"lost: after its parent the oracle chose {show([chosen])}" if reached else
                       "lost: its parent was not kept")
                lines.append(f"  {'  ' * depth}{'*' if i in path else '-'} {show([r.drafted[i]])} p {probs[i]:.2f}   "
                             f"({why})   = node {i}")
                walk(i, depth + 1)

    walk(-1, 1)
    lines.append(f"  kept     {r.accepted} node(s) + {show(r.new[-1:])} from the oracle")
    return lines


def tree_list(run, r, tree=None):
    """The tree as a nested list, the accepted path marked, the oracle's choice at the root and on the path.
    tree: the round's tree where its details hold more (suffix-tree)."""
    tree = tree or r.details
    parents, path = tree.parents, tree.path
    children = {i: [] for i in range(-1, len(parents))}
    for i, parent in enumerate(parents):
        children[parent].append(i)
    end, on_path = (path[-1] if path else -1), set(path)

    def item(i):  # i = -1 is the root, the text so far
        if i == -1:
            label = '<span class="root">the text so far</span>'
        else:
            label = chip(run, r.drafted[i], "draft" if i in on_path else "")
        if i == end:  # the oracle's choice here is the round's last token
            mark = last_mark(r, tree)
            label += f" &rarr; oracle: {chip(run, r.oracle[i + 1], mark)} ({MARKS[mark][0]})"
        elif i == -1 or i in on_path:  # the oracle's choice here is the next node on the path
            label += f" &rarr; oracle: {chip(run, r.oracle[i + 1], 'draft')} &check;"
        below = "".join(item(c) for c in children[i])
        return (f"<li>{label}" if i == -1 or i in on_path else f'<li class="unused">{label}') + (
            f"<ul>{below}</ul>" if below else "") + "</li>"

    return f'<ul class="tree">{item(-1)}</ul>'


TREE_HOW = ("Each round the draft proposes a tree of guesses; the oracle reads every node in one pass. From the root "
            "(the text so far) it follows the oracle's choices down the tree as far as the tree guessed them.")
TREE_MARKS = {"fix": ("correction", "the oracle's own token where none of the children was its choice"),
              "bonus": ("bonus", "the kept path ended at a leaf: the oracle's next token comes with the same pass")}


# ---------------------------------------------------------------------------
# A sampled tree: tree-sps and tree-sps-wor
# ---------------------------------------------------------------------------

SAMPLED_LEGEND = ("tree speculative sampling: the children of the node reached are tested in turn, child i kept if",
                 "r < min(1, q_i(x)/p_i(x)), r uniform on [0, 1). q_1 = q, the oracle's q there; after a rejection,",
                 "q_(i+1) = (q_i - p_i)+ renormalised, the residual (q', q'', ...). p_i is the draft's p that child i",
                 "was drawn from: p itself where children are drawn i.i.d. (tree-sps), p without the siblings drawn",
                 "before it (p', p'', ...), renormalised, where they are drawn without replacement (tree-sps-wor).",
                 "Each test names the q_i and p_i it used; the p beside a node is the draft's p after its parent. When",
                 "every child is rejected the last token is drawn from the last residual; at a kept leaf, the bonus",
                 "is drawn from q.")
SAMPLED_MARKS = {"draft": ("accepted draft", "sampled from the draft's p, kept by its test r < min(1, q/p) (q\u2032, "
                                             "q\u2033, ... after a sibling's rejection)"),
                 "fix": ("resampled", "drawn from the residual left after every child of the node reached was rejected"),
                 "bonus": ("bonus", "a leaf was kept: one more token drawn from q")}
IID_HOW = ("Each round the draft samples a tree: at every node it draws its children i.i.d. from its p there; the "
                "oracle computes q after the root and after every node in one pass. From the root, the children of the "
                "node reached are checked in turn, as in SpS: kept if r < min(1, q(x)/p(x)), else q becomes the residual "
                "(q \u2212 p)+ renormalised (q\u2032, q\u2033, ...) for the next sibling (SpecInfer's multi-round "
                "rejection). The walk goes down after an accepted child; when every child is rejected, the last token is "
                "drawn from the final residual, and at an accepted leaf the bonus from q itself. " + LETTERS)
WOR_HOW = ("Each round the draft samples a tree whose siblings are all different: at every node child 1 is "
                    "drawn from its p there, child 2 from p without child 1 (renormalised), and so on; the oracle "
                    "computes q after the root and after every node in one pass. From the root, the children of the "
                    "node reached are checked in turn: kept if r < min(1, q(x)/p(x)); after a rejection q becomes the "
                    "residual (q − p)+ renormalised (q′, q″, ...) AND p loses the rejected token "
                    "(p′, p″, ...), as the next sibling was drawn without it (Sequoia's rule; with p kept, "
                    "the check would be biased). The walk goes down after an accepted child; when every child is "
                    "rejected, the last token is drawn from the final residual, and at an accepted leaf the bonus from "
                    "q itself. " + LETTERS)


def names(d, i):
    """(target, draft): the names of the distributions child i + 1 of a node was tested with. The target is
    q, then q', q'', ... (the residual after i rejections there); the draft is p for i.i.d. children, and
    p, p', p'', ... (p without the i siblings drawn before) for children drawn without replacement."""
    return "q" + "'" * i, "p" + "'" * i if d.siblings == "without replacement" else "p"


def check_numbers(check):
    """(r, q/p, the digits to print them with) of one check: q/p as the test used it (min(1, q/p) below 1, the
    ratio itself at or above 1), and digits enough that r and min(1, q/p) read in the order that decided the
    check, and that q/p reads as below, at or above 1 as it is."""
    r, a = check["r"], check["accept_prob"]
    ratio = a if a < 1 else max(1.0, check["q"] / check["p"])
    return r, ratio, decisive_digits((r, a), (ratio, 1.0), (r, 1.0))


def sampled_reason_line(d, show):
    """A tree-sps round in one line: each child checked, its draft probability, its test r < min(1, q/p) (q', q'',
    ...: the residual after one, two rejections) with the numbers that decided it, and where the last token
    came from. show(tokens) -> text; default #id."""
    show = show or (lambda tokens: " ".join(f"#{t}" for t in tokens))
    parts = []
    for depth, visit in enumerate(d.visits, 1):
        said = []
        for i, c in enumerate(visit["checks"]):
            target, draft = names(d, i)
            r, ratio, digits = check_numbers(c)
            verdict = f"kept: r={r:.{digits}g} <" if c["accepted"] else f"rejected: r={r:.{digits}g} >="
            said.append(f"child {i + 1} {show([c['token']])} ({draft}={c['p']:.2g}) {verdict} "
                        f"min(1, {target}/{draft}={ratio:.{digits}g})")
        parts.append(f"depth {depth}: " + ", ".join(said))
    last = d.last
    if last["from"] == "residual":
        n = len(d.visits[-1]["checks"])
        every = "both children" if n == 2 else "the child" if n == 1 else f"all {n} children"
        parts.append(f"{every} rejected: {show([last['token']])} drawn from the residual {names(d, n)[0]} "
                     f"(prob {last['prob']:.2g})")
    elif d.visits:
        parts.append(f"a leaf kept: the bonus {show([last['token']])} drawn from the oracle's q "
                     f"(prob {last['prob']:.2g})")
    else:
        parts.append(f"nothing drafted: {show([last['token']])} drawn from the oracle's q (prob {last['prob']:.2g})")
    return "; ".join(parts)


def sampled_tree_lines(r, show):
    """A tree-sps round (beyond/tree_sampling.py, either draw): each node, numbered, under its parent with the
    draft's probability p of it there, and what its test did: kept or rejected by r < min(1, q/p), with the
    target and draft it met (q', q'', ... after rejections; p', p'', ... drawn without replacement), or never
    tested (its parent was not kept, or an earlier sibling was); then where the last token was drawn from."""
    d = r.details  # a tree_sampling.SampledTreeDetails
    parents, path = d.parents, set(d.path)
    tested = {child: (i, c) for v in d.visits for i, (child, c) in enumerate(zip(v["children"], v["checks"]))}
    lines = [f"  tree     {len(r.drafted)} nodes drawn {d.siblings} from the draft, numbered in level order from 0; "
             "* = kept; p = the draft's probability of the node's token after its parent"]

    def label(i):
        if i in tested:
            n, c = tested[i]
            target, draft = names(d, n)
            r_, ratio, digits = check_numbers(c)
            said = (f"{'kept' if c['accepted'] else 'rejected'} by its test r < min(1, {target}/{draft}): "
                    f"r {r_:.{digits}g}, {target}/{draft} = {c['q']:.3g} / {c['p']:.3g} = {ratio:.{digits}g}")
            repeat = next((j + 1 for j, (child, e) in enumerate(zip(visit_of[i]["children"], visit_of[i]["checks"][:n]))
                           if e["token"] == c["token"]), None)
            return said + (f"; a repeat of child {repeat}, rejected: {target} has nothing left there"
                           if repeat and c["q"] == 0 else "")
        if parents[i] != -1 and parents[i] not in path:
            return "not tested: its parent was not kept"
        kept = next(child for child in d.path if parents[child] == parents[i])
        return f"not tested: an earlier sibling, {node_name(kept, r, show)}, was kept"

    visit_of = {child: v for v in d.visits for child in v["children"]}

    def walk(parent, depth):
        for i, p in enumerate(parents):
            if p == parent:
                lines.append(f"  {'  ' * depth}{'*' if i in path else '-'} {show([r.drafted[i]])} p {d.probs[i]:.2g}   "
                             f"({label(i)})   = node {i}")
                walk(i, depth + 1)

    walk(-1, 1)
    last, token, at = d.last, show([d.last["token"]]), (d.path[-1] if d.path else -1)
    if last["from"] == "residual":
        n = len(d.visits[-1]["checks"])
        lines.append(f"  residual {token} drawn from {names(d, n)[0]}, the residual left after every child of "
                     f"{node_name(at, r, show)} was rejected (its chance there {last['prob']:.3g})")
    elif r.drafted:
        lines.append(f"  bonus    {token} drawn from q after {node_name(at, r, show)}, a leaf (q(x) {last['prob']:.3g})")
    else:
        lines.append(f"  oracle   {token} drawn from q (q(x) {last['prob']:.3g}): nothing drafted")
    return lines + [f"  kept     {r.accepted} node(s) + {token}"]


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


def sampled_reasons(r, show):
    return [sampled_reason_line(r.details, show) + cut_short(r.details.n_draft, r.details.k, "level")]


# ---------------------------------------------------------------------------
# traversal: the same sampled tree, verified from the leaves to the root
# ---------------------------------------------------------------------------

def traversal_reason_line(d, show):
    """A traversal round in one line: each node tested, leaves first, with its weight w and r, and where the last
    token came from."""
    said = []
    for t in d.tests:
        digits = decisive_digits((t["r"], t["w"]))
        after = f" (after {t['deleted']} child subtree{'s' if t['deleted'] != 1 else ''} rejected)" if t["deleted"] else ""
        said.append(f"node {t['node']} {show([t['token']])} w={t['w']:.{digits}g}{after} r={t['r']:.{digits}g} "
                    f"{'passes' if t['passed'] else 'fails'}")
    last = d.last
    if last["from"] == "oracle":
        return f"nothing drafted: {show([last['token']])} drawn from the oracle's q (prob {last['prob']:.2g})"
    kept = f"kept {len(d.path)} draft{'s' if len(d.path) != 1 else ''}"
    where = "the bonus, from the oracle's q" if last["from"] == "bonus" else \
        ("the root's residual" if last["node"] == -1 else f"node {last['node']}'s residual")
    tested = "from the leaves: " + ", ".join(said) + ("; " if said else "")
    return f"{tested}{kept}: {show([last['token']])} drawn from {where} (prob {last['prob']:.2g})"


def traversal_lines(r, show):
    """A traversal round: the tree, each node under its parent with the draft's p, then every node tested, leaves
    first, with its weight w and r (w < 1 after a rejected child: line 6's residual weight), and the last token."""
    d = r.details  # a traversal.TraversalDetails
    lines = [f"  tree     {len(r.drafted)} nodes drawn i.i.d. from the draft, numbered in level order from 0; * = kept"]

    def walk(parent, depth):
        for i, p in enumerate(d.parents):
            if p == parent:
                lines.append(f"  {'  ' * depth}{'*' if i in d.path else '-'} {show([r.drafted[i]])} p {d.probs[i]:.2g}"
                             f"   = node {i}")
                walk(i, depth + 1)

    walk(-1, 1)
    for t in d.tests:
        digits = decisive_digits((t["r"], t["w"]))
        lines.append(f"  test     node {t['node']} {show([t['token']])}: r {t['r']:.{digits}g} "
                     f"{'<' if t['passed'] else '>='} w {t['w']:.{digits}g} -> {'passes' if t['passed'] else 'fails'}")
    return lines + [f"  kept     {r.accepted} node(s) + {show(r.new[-1:])}"]


def traversal_reasons(r, show):
    return [traversal_reason_line(r.details, show) + cut_short(r.details.n_draft, r.details.k, "level")]


def traversal_table(run, r):
    """The tree as a nested list (the kept path marked), then each node tested, leaves first: its w, r, verdict."""
    d = r.details
    rows = []
    for t in d.tests:
        after = f" (after {t['deleted']} rejected)" if t["deleted"] else ""
        rows.append(f"<tr><td>node {t['node']}</td><td>{chip(run, t['token'], 'draft' if t['passed'] else '')}</td>"
                    f"<td>{t['w']:.3g}</td><td>{t['r']:.3g}</td><td>{'passes' if t['passed'] else 'fails'}{after}</td></tr>")
    table = ('<div class="scroll"><table class="steps"><tr><th>tested, from the leaves</th><th>token</th><th>w</th>'
             f"<th>r</th><th>verdict (r &lt; w)</th></tr>{''.join(rows)}</table></div>") if rows else ""
    return sampled_tree_list(run, r) + table


def sampled_tree_list(run, r):
    """A sampled tree as a nested list, the kept path marked (no oracle's choice: it sampled)."""
    d = r.details
    children = {i: [c for c, parent in enumerate(d.parents) if parent == i] for i in range(-1, len(d.parents))}

    def item(i):
        label = '<span class="root">the text so far</span>' if i == -1 else \
            chip(run, r.drafted[i], "draft" if i in d.path else "") + f" (node {i})"
        below = "".join(item(c) for c in children[i])
        return (f"<li>{label}" if i == -1 or i in d.path else f'<li class="unused">{label}') + (
            f"<ul>{below}</ul>" if below else "") + "</li>"

    return f'<ul class="tree">{item(-1)}</ul>'


TRAVERSAL_HOW = ("Each round the draft samples a tree as tree-sps does (width children a node, i.i.d. from its p); the "
                 "oracle computes q after the root and every node in one pass. Traversal verification (Weng et al. 2025) "
                 "then walks the tree from the leaves to the root: a node's weight w is min(1, w of its parent times "
                 "q/p) along its path, as block verification's along a line; a node passes its test when r < w, and "
                 "a subtree that fails is deleted, its parent's weight and target becoming the residual's (w' = Z / (Z + "
                 "1 \u2212 w)). The deepest path that passes is kept, then the last token is drawn from the target "
                 "where the walk stopped. Lossless, and on a chain it is block verification. " + LETTERS)


# ---------------------------------------------------------------------------
# sequoia and sequoia-sps: the tree's shape chosen for the machine it runs on
# ---------------------------------------------------------------------------

CALIBRATION_TOKENS = 24  # tokens of a fixed tree run once per pair, whose rounds give the acceptance per child rank
_shapes = {}  # (draft, oracle, sampling) -> (parents, acceptance, cost): Sequoia's shape, chosen once per pair


def sequoia_shape_for(c, sampling):
    """Sequoia's shape for this pair on the machine it runs on, chosen once per process: the acceptance per child rank from
    a fixed tree's rounds on the prompt (tree or tree-sps-wor, CALIBRATION_TOKENS of them, not part of the run), the
    oracle's T(n)/T(1) and the draft's pass over it (measured, taking turns), then beyond/sequoia.py's program."""
    key = (id(c.draft), id(c.oracle), sampling)
    if key not in _shapes:
        calibration = Stats(trace=[])
        run = tree_sample_wor_generate(c.draft, c.oracle, c.ids, CALIBRATION_TOKENS, n_draft=c.n_draft, width=2, rng=c.rng,
                                       processor=c.settings.processor, stats=calibration) if sampling else \
            tree_generate(c.draft, c.oracle, c.ids, CALIBRATION_TOKENS, n_draft=c.n_draft, stats=calibration)
        for _ in run:
            pass
        acceptance = sequoia.acceptance_by_rank(calibration.trace, max_rank=4)[0]
        oracle_costs, draft_costs = check_costs(c.oracle, range(1, 34), repeats=3), check_costs(c.draft, [1], repeats=3)
        t1 = median(oracle_costs[1])
        cost = [median(oracle_costs[n]) / t1 for n in range(1, 34)]
        parents, _, _ = sequoia.sequoia_shape(acceptance, cost, max_depth=c.n_draft,
                                              draft_cost=median(draft_costs[1]) / t1)
        _shapes[key] = (parents, acceptance, cost)
    return _shapes[key]


def run_sequoia(c):
    parents, _, _ = sequoia_shape_for(c, sampling=False)
    if not parents:  # no tree beats the oracle alone here: Sequoia drafts nothing
        return tree_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, max_nodes=1, confidence=0.0,
                             stats=c.stats)
    return tree_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=sequoia.depth(parents), shape=parents, stats=c.stats)


def run_sequoia_sps(c):
    parents, _, _ = sequoia_shape_for(c, sampling=True)
    shape = parents or [-1]
    return tree_sample_wor_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=sequoia.depth(shape), shape=shape,
                                    rng=c.rng, processor=c.settings.processor, stats=c.stats)


def shape_line(d):
    return f"Sequoia's shape for the machine: {len(d.parents)} node(s), depth {max(levels(d.parents), default=0)}"


def sequoia_reasons(r, show):
    """The shape in place of tree.py's branching rule, then the walk's outcome."""
    return [shape_line(r.details)] + tree_kept_reason(r.details)


def sequoia_sps_reasons(r, show):
    return [shape_line(r.details)] + sampled_reasons(r, show)


def levels(parents):
    depth = {-1: 0}
    for i, parent in enumerate(parents):
        depth[i] = depth[parent] + 1
    return list(depth.values())


SEQUOIA_HOW = (" The tree's shape is Sequoia's (Chen et al. 2024): a dynamic program over the acceptance per child rank "
               "(measured on a short run of the fixed tree) and the oracle's cost of checking n tokens on the machine "
               "(T(n)/T(1), measured) chooses the tree that makes the most tokens per unit of time.")


# ---------------------------------------------------------------------------
# The methods
# ---------------------------------------------------------------------------

def run_traversal(c):
    return traversal_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=2, rng=c.rng,
                              processor=c.settings.processor, stats=c.stats)


def run_tree(c):
    return tree_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_tree_sps(c):
    return tree_sample_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=2, rng=c.rng,
                                processor=c.settings.processor, stats=c.stats)


def run_tree_sps_wor(c):
    return tree_sample_wor_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=2, rng=c.rng,
                                    processor=c.settings.processor, stats=c.stats)


def its_details(r):
    return r.details


def tree_tokens(rounds):
    """Sequoia's F(T) for each round's tree, from the acceptance per child rank measured over the same rounds: the
    tokens a tree of that shape should make (beyond/sequoia.py), averaged over the rounds."""
    trees = [r for r in rounds if getattr(r.details, "parents", None) is not None]
    if not trees:
        return 1.0
    acceptance = sequoia.acceptance_by_rank(trees)[0]
    return sum(sequoia.expected_tokens(r.details.parents, acceptance) for r in trees) / len(trees)


def always(r):
    return True


def sampled_tree(how):
    return Shown(legend=SAMPLED_LEGEND, drafts=sampled_tree_lines, reasons=sampled_reasons, how_to_read=how,
                 page_table=sampled_tree_figure, marks=SAMPLED_MARKS, sampled=always, tree=its_details)


GREEDY_TREE = Shown(drafts=tree_lines, reasons=tree_reasons, how_to_read=TREE_HOW, page_table=tree_list, marks=TREE_MARKS,
                    tree=its_details)
register(
    Method("tree", "greedy, tree-shaped drafts checked in one pass with a tree attention mask (tree.py)",
           run_tree, n_draft=6, needs_cache=True, shown=GREEDY_TREE, predict_tokens=tree_tokens),
    Method("tree-sps", "speculative sampling over a tree of sampled drafts, SpecInfer's multi-round rejection "
                       "(beyond/tree_sampling.py); output ~ the oracle's distribution", run_tree_sps, n_draft=4,
           samples=True, needs_cache=True, shown=sampled_tree(IID_HOW)),
    Method("tree-sps-wor", "tree-sps with each node's children drawn without replacement (distinct siblings) and the "
                           "draft updated after each rejection (Sequoia; beyond/tree_without_replacement.py); output ~ "
                           "the oracle's distribution", run_tree_sps_wor, n_draft=4, samples=True, needs_cache=True,
           shown=sampled_tree(WOR_HOW), predict_tokens=tree_tokens),
    Method("traversal", "speculative sampling over tree-sps's sampled trees, verified from the leaves to the root "
                        "(traversal verification, Weng et al. 2025; beyond/traversal.py); output ~ the oracle's "
                        "distribution", run_traversal, n_draft=4, samples=True, needs_cache=True,
           shown=Shown(drafts=traversal_lines, reasons=traversal_reasons, how_to_read=TRAVERSAL_HOW,
                       page_table=traversal_table, marks=SAMPLED_MARKS, sampled=always, tree=its_details)),
    Method("sequoia", "greedy, a tree whose shape Sequoia's dynamic program chooses for the machine from the "
                      "acceptance per child rank and the cost of a check (Chen et al. 2024; beyond/sequoia.py, tree.py)",
           run_sequoia, n_draft=6, needs_cache=True, predict_tokens=tree_tokens,
           shown=Shown(drafts=tree_lines, reasons=sequoia_reasons, how_to_read=TREE_HOW + SEQUOIA_HOW,
                       page_table=tree_list, marks=TREE_MARKS, tree=its_details)),
    Method("sequoia-sps", "tree-sps-wor over a tree of Sequoia's shape for the machine (Chen et al. 2024; "
                          "beyond/sequoia.py); output ~ the oracle's distribution", run_sequoia_sps, n_draft=4,
           samples=True, needs_cache=True, predict_tokens=tree_tokens,
           shown=Shown(legend=SAMPLED_LEGEND, drafts=sampled_tree_lines,
                       reasons=sequoia_sps_reasons,
                       how_to_read=WOR_HOW + SEQUOIA_HOW, page_table=sampled_tree_figure, marks=SAMPLED_MARKS,
                       sampled=always, tree=its_details)),
)
