"""The drafters trained on the oracle's own states, on the page: Medusa's heads (beyond/medusa.py, Cai et al. 2024),
each guessing one place further from the same state, and the tree of their candidates the oracle walks."""

import html

from app.page.tokens import last_mark, probability, svg_label

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
