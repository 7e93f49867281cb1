"""Drafts from the oracle itself: its own first layers, or small heads trained on its states. No second model.

    self-speculative  beyond/self_speculative.py: the oracle's first L blocks, then its ln_f and LM head, draft; the
                      oracle verifies from block L on (Draft & Verify, LayerSkip)
    early-exit        beyond/early_exit.py: the same, through a trained adapter after block L - 1 (Kangaroo)
    eagle             beyond/eagle.py: a one-layer head guesses the oracle's next feature; the oracle's own LM head
                      reads the draft from it (EAGLE, Li et al. 2024); greedy
    eagle-sps         the same drafts, sampled and checked by SpS's rule (sps.py)
    medusa            beyond/medusa.py: heads on the oracle's last state guess 2, 3, 4 tokens ahead; a tree of their
                      top candidates checked in one pass (Medusa, Cai et al. 2024)

The heads are read from the oracle's directory (ORACLE/heads/NAME, weights/heads.py), once per oracle.
"""

import html

from beyond.ddtree import ddtree_generate
from beyond.eagle import eagle_generate, eagle_sample
from beyond.eagle2 import eagle2_generate, eagle2_sample
from beyond.early_exit import early_exit_generate
from beyond.medusa import medusa_generate
from beyond.self_speculative import draft_name, self_speculative_generate
from decoding import GenerationError
from sps import SpsDetails
from workbench.heads import head_of
from workbench.display import cut_short, length_reason
from workbench.methods.lines import line_reasons
from workbench.methods.sampling import SPS_HOW, sps_lines, sps_reasons, sps_table
from workbench.methods.trees import (SAMPLED_LEGEND, SAMPLED_MARKS, TREE_MARKS, sampled_reason_line, sampled_tree_figure,
                                     sampled_tree_lines, tree_lines, tree_list)
from workbench.page.report import GREEDY_HOW_TO_READ
from workbench.page.tokens import last_mark, probability, svg_label
from workbench.registry import Method, Option, Shown, register


# ---------------------------------------------------------------------------
# self-speculative and early-exit: the oracle's first layers
# ---------------------------------------------------------------------------

def layers_reasons(r, show):
    d = r.details  # a self_speculative.LayersDetails
    lines = [length_reason(d.n_draft, d.k), f"draft = {draft_name(d.layers, d.n_layer, d.trained)}; {r.accepted} of "
                                           f"{len(r.drafted)} accepted"]
    if d.trained:
        lines.append(f"the early exit after block {d.layers - 1} is trained (Kangaroo's adapter: one attention layer that "
                     "maps that block's state to what ln_f and the LM head expect); untrained, they would read it as it is")
    return lines


LAYERS_HOW = (GREEDY_HOW_TO_READ + " " + "The draft is the oracle itself cut short: its first L blocks, then its ln_f and LM head. Each round's "
              "picture shows the oracle's blocks with the draft's marked, one column per token fed: the draft runs "
              "blocks 0 to L \u2212 1 (their keys and values are the oracle's too), exits early to propose the next "
              "token, and the oracle verifies from block L on, over the draft's own hidden states.")
TRAINED_EXIT = (" Here the early exit is trained (Kangaroo, Liu et al. 2024): between block L \u2212 1 and ln_f sits a small "
                "adapter, trained on the oracle's own choices, so the first L blocks guess what the whole oracle would; "
                "the verification is the same, so the text is still greedy decoding's.")


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


# ---------------------------------------------------------------------------
# eagle and eagle-sps: a head that guesses the oracle's next feature
# ---------------------------------------------------------------------------

EAGLE = (" There is no draft model: the drafts come from the EAGLE head (Li et al. 2024), one small layer trained on the "
         "oracle's own top states (its features): from a feature and the token after it, it guesses the next feature, "
         "and the oracle's own LM head reads the draft from that guess. Each round's picture shows that chain.")


def eagle_reasons(r, show, chosen="its argmax"):
    """The prompt's pass (no details: nothing drafted yet), or a round of the head's drafts."""
    if r.details is None:
        return [f"the prompt's pass: the oracle's features of the prompt, and {chosen} after it; no draft yet, the head "
                "reads those features from the next round"]
    return line_reasons(r, show) + ["drafts from the EAGLE head's guessed features, read by the oracle's own LM head"]


def eagle_sps_reasons(r, show):
    if r.details is None:
        return eagle_reasons(r, show, chosen="a token drawn from its q")
    return sps_reasons(r, show) + ["drafts sampled from the EAGLE head's p, read by the oracle's own LM head from its "
                                   "guessed features"]


def eagle_sps_lines(r, show):
    return sps_lines(r, show) if r.details is not None else [f"  oracle   {show(r.new)}   (the prompt's pass)"]


def eagle_sps_table(run, r):
    return sps_table(run, r) if r.details is not None else ""


FEATURE_TITLES = {True: "the oracle's own feature, the state its ln_f and LM head read the newest token from",
                  False: "the head's guess from the column before"}


MARK = {"ok": "\u2713", "miss": "\u2717", "fix": "\u2717", "bonus": "+"}


def eagle_figure(run, r, number):
    """EAGLE's drafting: the head reads a feature and a token, guesses the next feature, and the oracle's own LM head
    turns the guess into the next draft, which goes back in with the guess; then the oracle's one pass checks them."""
    k = len(r.drafted)
    if not k:
        return ""
    text = list(getattr(run, "prompt_ids", [])) + list(getattr(run, "tokens", []))
    newest = text[r.context_length - 1] if 0 < r.context_length <= len(text) else None
    left, col, box_w, box_h = 150, 150, 124, 26
    y_feat, y_tok, y_head, y_out, y_draft, y_check = 30, 64, 112, 160, 194, 250
    width, height = left + col * k + 10, y_check + box_h + 14
    status = ["ok" if j < r.accepted else "miss" if j == r.accepted else "unused" for j in range(k)]
    sampled = isinstance(r.details, SpsDetails)  # eagle-sps: each draft drawn from the head's p, SpS's test
    svg = [f'<svg class="eagle" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           'aria-label="the EAGLE head\'s chain of guessed features and the drafts read from them">']
    for label, y in (("feature in", y_feat), ("token in", y_tok), ("head", y_head), ("feature out", y_out),
                     ("LM head: draft", y_draft), ("the oracle", y_check)):
        svg.append(f'<text x="8" y="{y + 18}" class="small">{label}</text>')
    for j in range(k):
        x = left + col * j
        if j:  # the guess and the draft of the column before go back in
            svg.insert(1, f'<line class="feeds" x1="{x - col + box_w}" y1="{y_out + box_h / 2}" x2="{x}" '
                          f'y2="{y_feat + box_h / 2}"/><line class="feeds" x1="{x - col + box_w}" '
                          f'y1="{y_draft + box_h / 2}" x2="{x}" y2="{y_tok + box_h / 2}"/>')
        feature_in = ("true f (oracle)", "state") if j == 0 else (f"guess {j}", "guess")
        svg.append(f'<rect class="{feature_in[1]}" x="{x}" y="{y_feat}" width="{box_w}" height="{box_h}"><title>'
                   f'{FEATURE_TITLES[j == 0]}'
                   f'</title></rect><text x="{x + 6}" y="{y_feat + 18}" class="small">{feature_in[0]}</text>')
        token = newest if j == 0 else r.drafted[j - 1]
        label = svg_label(run, token, 9) if token is not None else "newest"
        svg.append(f'<rect class="cand-reached" x="{x}" y="{y_tok}" width="{box_w}" height="{box_h}"><title>'
                   f'{"the newest token" if j == 0 else "draft " + str(j)}</title></rect>'
                   f'<text x="{x + 6}" y="{y_tok + 18}">{label}</text>'
                   f'<rect class="head-layer" x="{x}" y="{y_head}" width="{box_w}" height="{box_h + 8}"/>'
                   f'<text x="{x + 6}" y="{y_head + 22}" class="small">fc + 1 block</text>'
                   f'<rect class="guess" x="{x}" y="{y_out}" width="{box_w}" height="{box_h}"/>'
                   f'<text x="{x + 6}" y="{y_out + 18}" class="small">guess {j + 1}</text>')
        cls = "cand-kept" if status[j] == "ok" else "cand-reached" if status[j] == "miss" else "cand-off"
        svg.append(f'<rect class="{cls}" x="{x}" y="{y_draft}" width="{box_w}" height="{box_h}"><title>token '
                   f'{int(r.drafted[j])}: draft {j + 1}</title></rect>'
                   f'<text x="{x + 6}" y="{y_draft + 18}">{svg_label(run, r.drafted[j], 9)}</text>')
        said = ({"ok": "kept \u2713", "miss": "rejected \u2717", "unused": "not tested"} if sampled else
                {"ok": "kept \u2713", "miss": "not kept \u2717", "unused": "after a miss"})[status[j]]
        svg.append(f'<text x="{x + 6}" y="{y_check + 18}" class="small">{said}</text>')
    drawn = "a token drawn from that distribution, the head's p" if sampled else "the likeliest token"
    checked = (", each by SpS's test r &lt; min(1, q/p), q the oracle's, p the head's" if sampled else
               ", up to the first that is not the oracle's argmax")
    return (f'<figure class="eagle"><figcaption>How the EAGLE head drafted this round. It reads a feature (the '
            f"oracle's top state, before ln_f) and the token that followed it, and guesses the next feature; the oracle's "
            f"own ln_f and LM head read that guess as they would read a real state, and give the draft ({drawn}). The "
            f"guess and the draft go back in for the next: {k} drafts in {k} passes of one small layer, from one true "
            f"feature (the true features the last check gave, of the tokens before, go in first, in the first pass). "
            f"The oracle's one pass then checks the drafts ({r.accepted} kept{checked}) and gives the true features of "
            f"the kept rows, which replace the guesses next round.</figcaption>\n" + "".join(svg) + "</svg></figure>")


# ---------------------------------------------------------------------------
# medusa: heads that guess further, a tree of their candidates
# ---------------------------------------------------------------------------

def medusa_lines(r, show):
    """A Medusa round: the tree of the heads' candidates, each node's p its head's probability for it."""
    if r.details is None:
        return [f"  oracle   {show(r.new)}   (the prompt's pass)"]
    return tree_lines(r, show, p_is="the probability its head gave it (level k is head k's; a head does not see the "
                                    "node above it)")


def medusa_reasons(r, show):
    d = r.details  # a medusa.MedusaDetails; None: the prompt's pass
    if d is None:
        return ["the prompt's pass: the oracle's last state after the prompt, which the heads read next"]
    widths = d.widths[:d.k]
    if not widths:
        return [f"the heads drafted nothing: the oracle adds the last token alone{cut_short(d.n_draft, d.k, 'level')}"]
    product = " x ".join(str(w) for w in widths)
    levels = ", ".join(f"head {k} its top {w} for token +{k}" for k, w in enumerate(widths, 1))
    n_branches = 1
    for w in widths:
        n_branches *= w
    return [f"the heads read one state, the oracle's top state where its LM head chose the newest token, and guess "
            f"past it at once (+1: the next token): {levels}; the tree is every combination: {product} = "
            f"{n_branches} branches",
            f"kept the branch the oracle's choices follow: {len(d.path)} node(s) deep"
            f"{cut_short(d.n_draft, d.k, 'level')}"]


MEDUSA_HOW = ("There is no draft model: Medusa's heads, small layers trained on the oracle's own top state, each guess "
              "one more place ahead from the state that gave the newest token. Their top candidates make a tree (every "
              "combination), and the oracle reads every node in one pass, each node seeing only the text and its own "
              "ancestors. From the root (the newest token) it follows the oracle's choices down the tree as far as "
              "the heads guessed them, then adds its own token: greedy decoding's text.")


def levels_of(parents):
    """Each node's level (1 under the root), from level-ordered parents."""
    depth = []
    for parent in parents:
        depth.append(1 if parent == -1 else depth[parent] + 1)
    return depth


def medusa_figure(run, r, number):
    """One state, K heads: head k's top candidates for token +k in column k, the one the oracle kept marked; below,
    the oracle's choice at each place along the kept branch, where the walk stopped and what it added."""
    d = r.details  # a medusa.MedusaDetails
    depth_of = levels_of(d.parents)
    depth = max(depth_of, default=0)
    if not depth:
        return ""
    heads = []  # heads[k - 1]: [(token, p)], head k's candidates in its order (the first node of level k - 1's children)
    for k in range(1, depth + 1):
        first_parent = next(d.parents[i] for i in range(len(d.parents)) if depth_of[i] == k)
        heads.append([(r.drafted[i], d.probs[i]) for i in range(len(d.parents))
                      if depth_of[i] == k and d.parents[i] == first_parent])
    kept = [r.drafted[i] for i in d.path]
    n_kept, mark = len(kept), last_mark(r)
    choices = []  # the oracle's choice at +1, +2, ...: after the root, then after each kept node
    for k, at in enumerate([-1] + d.path, start=1):
        choices.append((r.oracle[at + 1], "ok" if k <= n_kept else mark))
    left, col, box_w, box_h, line = 230, 150, 136, 28, 36
    n_rows = max(len(h) for h in heads)
    y_head, y_top = 56, 80
    y_oracle = y_top + line * n_rows + 24
    width = left + col * (max(depth, len(choices)) + 1) + 10
    height = y_oracle + box_h + 16
    svg = [f'<svg class="medusa" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           'aria-label="the oracle\'s state, its heads\' candidates, and the oracle\'s choices along the kept branch">',
           f'<rect class="state" x="8" y="{y_top}" width="{left - 40}" height="{box_h * 2}"><title>the oracle\'s top '
           f'state where its LM head chose the newest token</title></rect>'
           f'<text x="16" y="{y_top + 19}" class="small">the oracle&#x27;s state</text>'
           f'<text x="16" y="{y_top + 41}" class="small">that chose the newest token</text>']
    for k, candidates in enumerate(heads, start=1):
        x = left + col * (k - 1) + 20
        svg.insert(1, f'<line class="feeds" x1="{left - 32}" y1="{y_top}" x2="{x}" y2="{y_head - 6}"/>')
        svg.append(f'<text x="{x}" y="{y_head - 10}" class="small">head {k}: token +{k}</text>')
        for j, (token, p) in enumerate(candidates):
            y = y_top + line * j
            on = k <= n_kept and token == kept[k - 1]
            cls = "cand-kept" if on else "cand-reached" if k <= n_kept + 1 else "cand-off"
            svg.append(f'<rect class="{cls}" x="{x}" y="{y}" width="{box_w}" height="{box_h}"><title>token {int(token)}: '
                       f'head {k}\'s candidate {j + 1}, probability {probability(p)}'
                       f'{", kept" if on else ""}</title></rect>'
                       f'<text x="{x + 6}" y="{y + 19}">{svg_label(run, token, 8)}</text>'
                       f'<text x="{x + box_w - 6}" y="{y + 19}" text-anchor="end" class="small">{p:.2f}</text>')
    svg.append(f'<text x="16" y="{y_oracle + 19}" class="small">the oracle&#x27;s choice</text>')
    for k, (token, status) in enumerate(choices, start=1):
        x = left + col * (k - 1) + 20
        last = "" if status == "ok" else ", the round's last token"
        svg.append(f'<rect class="head {status}" x="{x}" y="{y_oracle}" width="{box_w}" height="{box_h}"><title>token '
                   f"{int(token)}: the oracle's choice for token +{k}{last}"
                   f'</title></rect><text x="{x + 6}" y="{y_oracle + 19}">{svg_label(run, token, 9)} '
                   f'{MARK.get(status, "")}</text>')
    widths = " &times; ".join(str(len(h)) for h in heads)
    ending = ("none of head " + str(n_kept + 1) + "'s candidates was its choice there, so its own token ends the round"
              if mark == "fix" else "every level was kept, and its token after the last comes free with the same pass")
    return (f'<figure class="medusa"><figcaption>The heads read ONE state and guess past it at once, head k the token k '
            f"places after the text; their top candidates, {widths}, make the tree above (every combination), checked in "
            f"one tree-masked pass. The oracle's choice at each place, after the text and the kept tokens before it, "
            f"picks the candidate to keep in the next column: {n_kept} kept here; {html.escape(ending)}. A head does "
            "not see the candidates before it, so its probabilities are the same under every parent.</figcaption>\n"
            + "".join(svg) + "</svg></figure>")


# ---------------------------------------------------------------------------
# eagle2 and eagle2-sps: EAGLE-2's dynamic tree; ddtree: the best-first tree of the Medusa heads' marginals
# ---------------------------------------------------------------------------

def prompt_pass(r, show):
    return [f"  oracle   {show(r.new)}   (the prompt's pass)"]


def eagle2_grown(d):
    return (f"EAGLE-2: {d.candidates} nodes drafted, the {len(d.parents)} most confident kept (expected kept "
            f"{sum(d.confidences):.2f})")


def eagle2_lines(r, show):
    if r.details is None:
        return prompt_pass(r, show)
    return tree_lines(r, show, p_is="the head's probability of the node's token after its parent")


def eagle2_reasons(r, show):
    if r.details is None:
        return eagle_reasons(r, show)
    return [f"{eagle2_grown(r.details)}; the oracle's argmax kept {len(r.details.path)}"]


def eagle2_sps_lines(r, show):
    return prompt_pass(r, show) if r.details is None else sampled_tree_lines(r, show)


def eagle2_sps_reasons(r, show):
    if r.details is None:
        return eagle_reasons(r, show, chosen="a token drawn from its q")
    return [f"{eagle2_grown(r.details)}; {sampled_reason_line(r.details, show)}"]


def ddtree_lines(r, show):
    if r.details is None:
        return prompt_pass(r, show)
    return tree_lines(r, show, p_is="its position's marginal p_k from its head")


def ddtree_reasons(r, show):
    d = r.details
    if d is None:
        return medusa_reasons(r, show)
    return [f"DDTree: the {len(d.parents)} likeliest prefixes of the heads' marginals, best first (expected kept "
            f"{sum(d.chances):.2f}), checked in one tree-masked oracle pass; kept {len(d.path)} node(s)"
            f"{cut_short(d.n_draft, d.k, 'level')}"]


def confidence_tokens(rounds):
    """EAGLE-2's and DDTree's own prediction: each node kept with about its path's confidence (the product of the
    drafter's probabilities along it), so a round makes 1 + their sum (beyond/eagle2.py, beyond/ddtree.py)."""
    trees = [r.details for r in rounds if r.details is not None]
    chances = [getattr(d, "confidences", None) or getattr(d, "chances", None) or [] for d in trees]
    return sum(1.0 + sum(c) for c in chances) / len(chances) if chances else 1.0


def table_after_prompt(table):
    def shown(run, r):
        return table(run, r) if r.details is not None else ""
    return shown


EAGLE2_HOW = (" The tree is EAGLE-2's (Li et al. 2024): grown where the head is confident (the top-k of the most "
              "confident nodes, level by level), then reranked by each node's path confidence, the best kept, and "
              "checked in one tree-masked pass.")
EAGLE2_SPS_HOW = ("Each round the head drafts EAGLE-2's tree of its top-k tokens (deterministic: each child drafted "
                  "with chance 1), and the oracle computes q after the root and every node in one pass. The children of "
                  "the node reached are tested in turn: child x kept with chance q(x), else q loses x, renormalised, "
                  "for the next sibling (sampling without replacement with the draft's chance 1, tree-sps-wor's rule); "
                  "the last token from the target left, or the bonus from q at a kept leaf. Letters as in Chen et al.")
DDTREE_HOW = ("There is no draft model: Medusa's heads each give a distribution over the token k places ahead. DDTree "
              "(arXiv 2604.12989) takes the B prefixes of highest product of those marginals, found best first with a "
              "heap, as the tree; the oracle reads every node in one pass and its choices are followed down the tree, "
              "then its own token is added: greedy decoding's text.")


# ---------------------------------------------------------------------------
# The methods
# ---------------------------------------------------------------------------

MEDUSA_WIDTHS = (2, 1, 1, 1, 1, 1, 1, 1)  # head k's candidates under every node of level k - 1: two branches


def run_self_speculative(c):
    return self_speculative_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, n_layers_draft=c.option("draft_layers"),
                                     stats=c.stats)


def run_early_exit(c):
    return early_exit_generate(head_of(c.oracle, "exit"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_eagle(c):
    return eagle_generate(head_of(c.oracle, "eagle"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_eagle_sps(c):
    return eagle_sample(head_of(c.oracle, "eagle"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                        processor=c.settings.processor, stats=c.stats)


def run_medusa(c):
    heads = head_of(c.oracle, "medusa")
    if not 1 <= c.n_draft <= len(heads.heads):
        raise GenerationError(f"medusa's draft length is its tree's depth: from 1 to {len(heads.heads)} "
                              f"(the oracle's heads), got {c.n_draft}")
    return medusa_generate(heads, c.oracle, c.ids, c.n_new, widths=MEDUSA_WIDTHS[:c.n_draft], stats=c.stats)


def run_eagle2(c):
    return eagle2_generate(head_of(c.oracle, "eagle"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft,
                           total_tokens=c.option("total_tokens"), stats=c.stats)


def run_eagle2_sps(c):
    return eagle2_sample(head_of(c.oracle, "eagle"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft,
                         total_tokens=c.option("total_tokens"), rng=c.rng, processor=c.settings.processor, stats=c.stats)


def run_ddtree(c):
    return ddtree_generate(head_of(c.oracle, "medusa"), c.oracle, c.ids, c.n_new, budget=c.option("budget"),
                           stats=c.stats)


def medusa_tree(r):
    return r.details


def medusa_table(run, r):
    return tree_list(run, r) if r.details is not None else ""


def medusa_picture(run, r, number):
    return medusa_figure(run, r, number) if r.details is not None else ""


def sampled(r):
    return r.details is not None


TOTAL_TOKENS = Option("total_tokens", int, 12, "eagle2, eagle2-sps: the nodes EAGLE-2's rerank keeps", 1, 64)
BUDGET = Option("budget", int, 8, "ddtree: the nodes of DDTree's best-first tree", 1, 64)
DRAFT_LAYERS = Option("draft_layers", int, None, "self-speculative: the oracle's first layers that draft, fewer than it "
                                                 "has (default: half of them)", 1, 127)
LAYERS = Shown(reasons=layers_reasons, how_to_read=LAYERS_HOW, page_after=layers_figure)
register(
    Method("self-speculative", "greedy, the oracle's own first layers draft for it, no second model (Draft & Verify, "
                               "LayerSkip; beyond/self_speculative.py)", run_self_speculative, draft_model=False,
           n_draft=4, needs_cache=True, options=(DRAFT_LAYERS,), shown=LAYERS),
    Method("early-exit", "greedy, the oracle's first layers draft through a trained adapter (Kangaroo, Liu et al. "
                         "2024; beyond/early_exit.py); self-speculative's exit, trained", run_early_exit,
           draft_model=False, n_draft=4, needs_cache=True, head="exit",
           shown=Shown(reasons=layers_reasons, how_to_read=LAYERS_HOW + TRAINED_EXIT, page_after=layers_figure)),
    Method("eagle", "greedy, drafts from a one-layer head trained on the oracle's own features, read by its LM head "
                    "(EAGLE, Li et al. 2024; beyond/eagle.py); no draft model", run_eagle, draft_model=False, n_draft=4,
           needs_cache=True, head="eagle",
           shown=Shown(reasons=eagle_reasons, how_to_read=GREEDY_HOW_TO_READ + EAGLE, page_after=eagle_figure)),
    Method("eagle-sps", "speculative sampling with the EAGLE head's drafts (beyond/eagle.py); output ~ the oracle's "
                        "distribution", run_eagle_sps, draft_model=False, n_draft=4, samples=True, needs_cache=True,
           head="eagle", shown=Shown(drafts=eagle_sps_lines, reasons=eagle_sps_reasons, how_to_read=SPS_HOW + EAGLE,
                                     page_table=eagle_sps_table, page_after=eagle_figure, sampled=sampled)),
    Method("medusa", "greedy, heads on the oracle's last state guess 2, 3, 4 tokens ahead; a tree of their top "
                     "candidates checked in one pass (Medusa, Cai et al. 2024; beyond/medusa.py); --n-draft is the "
                     "depth", run_medusa, draft_model=False, n_draft=3, needs_cache=True, head="medusa",
           shown=Shown(drafts=medusa_lines, reasons=medusa_reasons, how_to_read=MEDUSA_HOW, page_table=medusa_table,
                       page_after=medusa_picture, marks=TREE_MARKS, tree=medusa_tree)),
    Method("eagle2", "greedy, EAGLE-2's dynamic draft tree on the EAGLE head: grown where the head is confident, "
                     "reranked, checked in one pass (Li et al. 2024, arXiv 2406.16858; beyond/eagle2.py); --n-draft is "
                     "its depth", run_eagle2, draft_model=False, n_draft=4, needs_cache=True, head="eagle",
           predict_tokens=confidence_tokens,
           options=(TOTAL_TOKENS,), shown=Shown(drafts=eagle2_lines, reasons=eagle2_reasons,
                                                how_to_read=GREEDY_HOW_TO_READ + EAGLE + EAGLE2_HOW,
                                                page_table=table_after_prompt(tree_list), marks=TREE_MARKS,
                                                tree=medusa_tree)),
    Method("eagle2-sps", "speculative sampling over EAGLE-2's dynamic tree (beyond/eagle2.py): the drafts are the "
                         "head's top-k, checked without replacement with chance 1; output ~ the oracle's distribution",
           run_eagle2_sps, draft_model=False, n_draft=4, samples=True, needs_cache=True, head="eagle",
           predict_tokens=confidence_tokens,
           options=(TOTAL_TOKENS,), shown=Shown(legend=SAMPLED_LEGEND, drafts=eagle2_sps_lines, reasons=eagle2_sps_reasons,
                                                how_to_read=EAGLE2_SPS_HOW + EAGLE,
                                                page_table=table_after_prompt(sampled_tree_figure), marks=SAMPLED_MARKS,
                                                sampled=sampled, tree=medusa_tree)),
    Method("ddtree", "greedy, DDTree's best-first tree of the Medusa heads' marginals: the budget likeliest prefixes, "
                     "checked in one pass (arXiv 2604.12989; beyond/ddtree.py)", run_ddtree, draft_model=False,
           n_draft=3, needs_cache=True, head="medusa", options=(BUDGET,), predict_tokens=confidence_tokens,
           shown=Shown(drafts=ddtree_lines, reasons=ddtree_reasons, how_to_read=DDTREE_HOW,
                       page_table=table_after_prompt(tree_list), marks=TREE_MARKS, tree=medusa_tree)),
)
