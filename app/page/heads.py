"""The drafters trained on the oracle's own states, on the page: Medusa's heads (beyond/medusa.py, Cai et al. 2024),
each guessing one place further from the same state, and the tree of their candidates the oracle walks."""

import html

from app.page.tokens import last_mark, probability, svg_label

FEATURE_TITLES = {True: "the oracle's own feature, the state its ln_f and LM head read the newest token from",
                  False: "the head's guess from the column before"}
MARK = {"ok": "\u2713", "miss": "\u2717", "fix": "\u2717", "bonus": "+"}


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
    sampled = r.kind == "sps"  # eagle-sps: each draft drawn from the head's p and tested by SpS's rule
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
