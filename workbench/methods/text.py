"""Drafts from the text itself, no draft model: prompt lookup and n-gram tables, suffix matches, and Jacobi
guesses of the oracle's own.

    ngram        ngram.py: NASD's prompt lookup and n-gram table
    staged       ngram.py: n-gram -> draft model -> oracle: the draft model confirms the table's guesses
    suffix       beyond/suffix.py: what followed the longest earlier match, found by a suffix automaton (SuffixDecoding)
    suffix-tree  beyond/suffix.py: a tree of the most frequent continuations of that match
    lookahead    beyond/lookahead.py: n-grams from Jacobi iterations over a window of future positions, checked in
                 the same pass (Fu et al. 2024)

Each is greedy: its text is exactly the oracle's greedy text. A round says where its drafts came from.
"""

import html

from beyond.lookahead import lookahead_generate
from beyond.recycling import recycling_generate
from beyond.suffix import continuation, suffix_generate
from ngram import STORAGES, NGramDrafter, ngram_generate, staged_generate
from workbench.display import cut_short, line_lines
from workbench.methods.trees import TREE_HOW, TREE_MARKS, tree_kept_reason, tree_lines, tree_list, tree_tokens
from workbench.page.figures import draft_length
from workbench.page.report import GREEDY_HOW_TO_READ
from workbench.page.tokens import chip, chips, last_mark, plural, svg_label
from workbench.registry import Method, Option, Shown, register


# ---------------------------------------------------------------------------
# ngram and staged: prompt lookup and an n-gram table
# ---------------------------------------------------------------------------

def ngram_reasons(r, show):
    d = r.details
    said = "nothing left to draft: the oracle adds the last token alone" if d.k == 0 else \
        ngram_reason(d.source, len(r.drafted))
    return [said + cut_short(d.n_draft, d.k)]


def ngram_reason(source, n_drafted):
    if source["from"] == "prompt lookup":
        return (f"prompt lookup: the last {source['length']} token(s) of the text also stand at position {source['at']}; "
                f"the {n_drafted} draft(s) are what followed them there")
    if source["from"] == "n-gram table":
        parts = ", ".join(f"after {m} token(s), seen {count} time(s)" for m, count in source["contexts"])
        return f"the n-gram table: each draft the most frequent follower of its context ({parts})"
    return "no match in the text or the table: nothing drafted; the oracle adds its token alone"


def staged_lines(r, show):
    """A staged round's line of drafts, each with the stage that made it."""
    return line_lines(r, show, " ".join(f"{show([t])}({stage})" for t, stage in zip(r.drafted, r.details.stages)))


def staged_reasons(r, show):
    """Which stage proposed each draft: an n-gram guess the draft model confirmed, or the draft model's own token."""
    stages, drafted = r.details.stages, r.drafted
    from_table = stages.count("n-gram")
    each = " ".join(f"{show([t])}[{'n-gram' if s == 'n-gram' else 'model'}]" for t, s in zip(drafted, stages))
    return [f"{len(drafted)} draft(s) in {stages.count('draft')} draft-model pass(es): {from_table} guessed by the "
            f"n-gram table and confirmed by the draft model, {len(drafted) - from_table} the draft model's own: "
            f"{each or '(none)'}{cut_short(r.details.n_draft, r.details.k)}"]


# The n-gram table (its source document's "n-gram storage": /set_ngramstorage, /top_k_filler and
# /reset_in_between in the session, docs/USAGE.md).
NGRAM_N = Option("ngram_n", int, 4, "ngram, staged: the n-gram order", 2, 64)
STORAGE = Option("storage", str, "basic", "ngram, staged: the n-gram table, basic (back-off) or onelevel",
                 choices=tuple(STORAGES))
TOP_K_FILLER = Option("top_k_filler", int, 1, "ngram, staged: the oracle's top-k learnt by the table (1: off)", 1, 256)
RESET_IN_BETWEEN = Option("reset_in_between", bool, True, "ngram, staged: a fresh table for each generation")
NGRAM = (NGRAM_N, STORAGE, TOP_K_FILLER, RESET_IN_BETWEEN)


def drafter_of(c):
    """The call's n-gram drafter (the session keeps one between generations), or a new one from its options."""
    return c.drafter or new_drafter(c.option)


def new_drafter(option):
    """An NGramDrafter of the options option(name) gives."""
    return NGramDrafter(n=option("ngram_n"), storage=option("storage"), top_k_filler=option("top_k_filler"),
                        reset_in_between=option("reset_in_between"))


# ---------------------------------------------------------------------------
# suffix and suffix-tree: the longest earlier match
# ---------------------------------------------------------------------------

def suffix_reason(d, n_drafted):
    """Where a suffix round's drafts came from (its details' match), or why it drafted nothing."""
    m = d.match
    if not m:
        return "nothing left to draft: the oracle adds the last token alone"
    if "end" not in m:
        return ("the last token never occurred before: nothing drafted" if m["length"] == 0 else
                f"longest match: {m['length']} token(s), below min_match {d.min_match}: nothing drafted")
    others = f" (the latest of {m['occurrences']} earlier occurrences)" if m["occurrences"] > 1 else ""
    found = f"longest match: {m['length']} token(s) ending at position {m['end']}{others}"
    if d.tree is None:
        return f"{found}; proposed the {n_drafted} that followed"
    return f"{found}; a tree of {n_drafted} node(s), the most frequent of what followed them"


def suffix_reasons(r, show):
    return [suffix_reason(r.details, len(r.drafted)) + cut_short(r.details.n_draft, r.details.k)]


def suffix_tree_reasons(r, show):
    return [suffix_reason(r.details, len(r.drafted))] + tree_kept_reason(r.details.tree)


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


SUFFIX_HOW = ("There is no draft model: each round looks for the longest suffix of the text that occurred earlier, and "
              "drafts what followed its latest earlier occurrence. Each round's picture shows that suffix at the end "
              "of the text, its earlier occurrence, and what followed it.")


# ---------------------------------------------------------------------------
# lookahead: Jacobi iterations and their n-grams
# ---------------------------------------------------------------------------

LOOKAHEAD_LEGEND = ("lookahead decoding (Fu et al. 2024): no draft model. The window keeps the last N - 1 Jacobi",
                  "iterations, one level each, every guess under the place after the text's last token it guesses. One",
                  "pass of the oracle reads the text's last token, the window and the pool's n-grams that follow that",
                  "token, each row seeing only its own line. A checked n-gram is kept while it equals the oracle's",
                  "choice (greedy decoding's rule), then the oracle adds its token. The pass's argmax after each top-level",
                  "guess is the next Jacobi iteration; once the window is full, the diagonal from the text's last token",
                  "up through the levels, then that argmax, is a new n-gram for the pool (pool +).")
LOOKAHEAD_HOW = ("There is no draft model. Each round is one pass of the oracle over two branches: the lookahead "
                 "branch, a window of Jacobi iterations that guess the next few places at once (each pass improves every "
                 "guess, and the diagonals of the window become n-grams for a pool), and the verification branch, the "
                 "pool's n-grams that start with the text's last token. The best n-gram is kept up to its first "
                 "disagreement with the oracle's choice, then the oracle's token is added: greedy decoding's text.")


def window_offsets(window):
    """[(level, offset, token)] of a lookahead window: level 0's token i guesses the token i + 1 places after the
    text's last token (its column 0 is that token), level l's column c the token c + l places after it."""
    return [(l, c + (l if l else 1), t) for l, level in enumerate(window) for c, t in enumerate(level)]


def lookahead_lines(r, show):
    """A lookahead round: the Jacobi window (a line per level, each guess under the position it guesses), the pool's
    n-grams checked in the same pass, the best one against the oracle's choices, and the n-grams the pass made."""
    d = r.details  # a lookahead.LookaheadDetails
    cells = window_offsets(d.window)
    width = max([len(show([t])) for _, _, t in cells] + [4]) + 1
    far = max([offset for _, offset, _ in cells], default=0)
    lines = [f"  window   {len(d.window)} level(s) of Jacobi guesses, oldest first, each under the place it guesses "
             f"(+1: the next token); one pass of {d.rows} rows"]
    if cells:
        lines.append(("           " + "".join(f"+{o}".ljust(width) for o in range(1, far + 1))).rstrip())
        for l in range(len(d.window)):
            row = {offset: show([t]) for level, offset, t in cells if level == l}
            lines.append(f"  level {l:<2} " + "".join(row.get(o, "").ljust(width) for o in range(1, far + 1)).rstrip())
    if d.candidates:
        each = "; ".join(f"{g + 1}{' (best)' if g == d.best else ''}: {show(c)}" for g, c in enumerate(d.candidates))
        lines.append(f"  checked  in the same pass, the pool's n-grams that start with the text's last token (the "
                     f"tokens after it), newest first: {each}")
    lines += line_lines(r, show)
    if d.ngrams:
        lines.append(f"  pool +   {len(d.ngrams)} n-gram(s), a window column each, then the oracle's guess after it: "
                     + " | ".join(show(g) for g in d.ngrams))
    return lines


def lookahead_reason(window, W, N, candidates, g, n_accepted, n_ngrams, pool_size, left):
    """The trace's "why": what the window held, which n-gram was verified, how many were kept, why it ended."""
    levels = f"window of {len(window)} level(s), {sum(len(level) for level in window)} guesses"
    if len(window) < N - 1:
        levels += f" (warming up: n-grams once there are N - 1 = {N - 1})"
    elif n_ngrams:
        levels += f"; {n_ngrams} new {N}-gram(s) into the pool (it holds {pool_size})"
    if any(len(level) < (W - 1 if l == 0 else W) for l, level in enumerate(window)):
        levels += f" (cut: {left} token(s) left to make)"
    if not candidates:
        check = ("no n-gram in the pool starts with the text's last token: nothing to verify" if left > 1 else
                 "one token left to make: nothing to verify")
        return f"{levels}; {check}, the oracle's next token"
    best = candidates[g]
    kept = (f"the best, candidate {g + 1} of {len(candidates)} (newest first), matched the oracle for {n_accepted} "
            f"of its {len(best)} token(s)")
    end = ("all kept, then the oracle's token after them" if n_accepted == len(best) else
           f"the oracle chose otherwise at its token {n_accepted + 1}")
    return f"{levels}; verified {len(candidates)} n-gram(s) starting with the text's last token: {kept}; {end}"


def lookahead_reasons(r, show):
    d = r.details
    return [lookahead_reason(d.window, d.W, d.N, d.candidates, d.best, r.accepted, len(d.ngrams), d.pool_size, d.left)]


STATUS = {"ok": "\u2713", "miss": "\u2717"}


def lookahead_figure(run, r):
    d = r.details  # a lookahead.LookaheadDetails
    cells = window_offsets(d.window)
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


# ---------------------------------------------------------------------------
# recycling: Token Recycling's table of the oracle's own past successors
# ---------------------------------------------------------------------------

def recycling_lines(r, show):
    return tree_lines(r, show, p_is="1: the table keeps ranks, not probabilities; a node's rank in its parent's row "
                                    "is its template place")


def recycling_reasons(r, show):
    d = r.details  # a recycling.RecyclingDetails
    skipped = f" ({d.skipped} template node(s) skipped: their parent's row was still empty)" if d.skipped else ""
    return [f"Token Recycling: {len(d.parents)} of the template's {d.template} nodes drafted from the table of the "
            f"oracle's past top-{d.n_successors} successors{skipped}; {d.updated} rows rewritten from this pass's logits",
            f"kept the path the oracle's choices follow: {len(d.path)} node(s) deep{cut_short(d.n_draft, d.k, 'level')}"]


RECYCLING_HOW = ("There is no draft model: Token Recycling (Luo et al. 2024) keeps, for every token, the top-k tokens the "
                 "oracle's own logits put after it the last time it was read (a table of vocabulary x k). Each round "
                 "drafts a fixed tree template through that table from the text's last token, the oracle reads every "
                 "node in one pass with a tree mask, its choices are followed down the tree, and every token the pass "
                 "read gets its row rewritten from the logits after it. Greedy: the text is greedy decoding's.")


# ---------------------------------------------------------------------------
# The methods
# ---------------------------------------------------------------------------

def run_ngram(c):
    return ngram_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, drafter=drafter_of(c), stats=c.stats)


def run_staged(c):
    return staged_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, drafter=drafter_of(c), stats=c.stats)


def run_suffix(c):
    return suffix_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_suffix_tree(c):
    return suffix_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=3, stats=c.stats)


def run_lookahead(c):
    return lookahead_generate(c.oracle, c.ids, c.n_new, N=c.n_draft + 1, stats=c.stats)


def run_recycling(c):
    return recycling_generate(c.oracle, c.ids, c.n_new, stats=c.stats)


def its_details(r):
    return r.details


def suffix_tree_of(r):
    return r.details.tree


def suffix_tree_lines(r, show):
    return tree_lines(r, show, tree=r.details.tree)


def suffix_tree_list(run, r):
    return tree_list(run, r, tree=r.details.tree)


register(
    Method("ngram", "greedy, drafts from the text itself (NASD): prompt lookup and an n-gram table, no draft model "
                    "(ngram.py)", run_ngram, draft_model=False, n_draft=8, options=NGRAM,
           shown=Shown(reasons=ngram_reasons)),
    Method("staged", "greedy, n-gram -> draft -> oracle: the draft's own drafts come from the n-gram drafter (ngram.py)",
           run_staged, n_draft=4, options=NGRAM, shown=Shown(drafts=staged_lines, reasons=staged_reasons)),
    Method("suffix", "greedy, drafts what followed the longest earlier match in the text, found by a suffix "
                     "automaton; no draft model (SuffixDecoding; beyond/suffix.py)", run_suffix, draft_model=False,
           n_draft=8, shown=Shown(reasons=suffix_reasons, how_to_read=GREEDY_HOW_TO_READ + " " + SUFFIX_HOW,
                                  page_before=suffix_figure)),
    Method("suffix-tree", "greedy, a tree of the most frequent continuations of the longest earlier match, checked "
                          "in one pass; no draft model (SuffixDecoding; beyond/suffix.py)", run_suffix_tree,
           draft_model=False, n_draft=6, needs_cache=True,
           shown=Shown(drafts=suffix_tree_lines, reasons=suffix_tree_reasons, how_to_read=TREE_HOW + " " + SUFFIX_HOW,
                       page_before=suffix_figure, page_table=suffix_tree_list, marks=TREE_MARKS, tree=suffix_tree_of)),
    Method("lookahead", "greedy, n-grams guessed by Jacobi iteration over a window of future positions and checked in "
                        "the same pass; no draft model (beyond/lookahead.py); --n-draft is N - 1", run_lookahead,
           draft_model=False, n_draft=3, needs_cache=True,
           shown=Shown(legend=LOOKAHEAD_LEGEND, drafts=lookahead_lines, reasons=lookahead_reasons,
                       how_to_read=LOOKAHEAD_HOW, page_table=lookahead_figure)),
    Method("recycling", "greedy, a tree template drafted from a table of the oracle's own past top-k successors, no "
                        "draft model (Token Recycling, Luo et al. 2024; beyond/recycling.py)", run_recycling,
           draft_model=False, needs_cache=True, predict_tokens=tree_tokens,
           shown=Shown(drafts=recycling_lines, reasons=recycling_reasons, how_to_read=RECYCLING_HOW,
                       page_table=tree_list, marks=TREE_MARKS, tree=its_details)),
)
