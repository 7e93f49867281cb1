"""How a run is shown in a terminal: the text as it comes, the statistics line, the per-round trace.

Used by the command line (cli.py) and the interactive session (session.py).
The page for a browser is report.py's.
"""

import codecs
import os

from beyond.block_verification import ratio_text
from beyond.tree_sampling import check_numbers
from decoding import Line, decisive_digits
from errors import printable

GREEN, RESET = "\x1b[32m", "\x1b[0m"


def use_color(setting, out):
    """--color auto|always|never: auto means a terminal, and NO_COLOR unset (no-color.org)."""
    if setting == "always":
        return True
    return setting == "auto" and out.isatty() and not os.environ.get("NO_COLOR") and ansi_works()


def ansi_works():
    """Colour codes work on POSIX terminals; on Windows only once virtual-terminal mode is on."""
    if os.name != "nt":
        return True
    try:
        import ctypes
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.GetStdHandle(-11)  # STD_OUTPUT_HANDLE
        mode = ctypes.c_uint32()
        return bool(kernel32.GetConsoleMode(handle, ctypes.byref(mode))
                    and kernel32.SetConsoleMode(handle, mode.value | 0x0004))  # ENABLE_VIRTUAL_TERMINAL_PROCESSING
    except (AttributeError, OSError):
        return False


def as_utf8(text_io, errors):
    """A pipe or a file as UTF-8, whatever the locale says; a terminal keeps its own encoding.
    errors: what a character that cannot be encoded or decoded becomes. Output uses
    "replace" (shown as ?, never an error); input "surrogateescape" (bytes that do not decode
    arrive as lone surrogates, which the prompt's check names in one line)."""
    if not hasattr(text_io, "reconfigure"):
        return
    if text_io.isatty():
        text_io.reconfigure(errors=errors)
    else:
        text_io.reconfigure(encoding="utf-8", errors=errors)


def stream(tokens, token_bytes, from_draft, color, out):
    """Write each token's text as it arrives; return the list of tokens.

    Tokens are byte sequences: a Chinese character or an emoji is often split
    over two or three of them. An incremental UTF-8 decoder holds the bytes
    back until a character is complete, so nothing prints as garbage. On a
    terminal, control characters are shown as \\xNN rather than sent to it.
    from_draft is the generator's Stats.from_draft, filled in as it runs.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    terminal = out.isatty()
    generated = []
    for token in tokens:
        generated.append(token)
        text = decoder.decode(token_bytes(token))
        if terminal:  # a generated escape character must not drive the user's terminal: show it instead
            text = printable(text)
        if color and from_draft[len(generated) - 1] and text:
            text = f"{GREEN}{text}{RESET}"
        out.write(text)
        out.flush()
    out.write(decoder.decode(b"", final=True))
    return generated


def summary(method, stats, elapsed):
    """The statistics line: tokens/s, oracle passes, tokens per pass, acceptance, where the time went."""
    # Stats.rounds, named as it is counted: a verification per round (the tree methods' prompt pass aside),
    # a step of all beams, a pass of the draft model run alone
    passes = {"draft-alone": "draft model passes", "beam": "steps"}.get(method, "oracle passes")
    line = (f"{method}: {stats.n_generated} new tokens in {elapsed:.2f} s, {stats.n_generated / max(elapsed, 1e-9):.1f} tokens/s; "
            f"{stats.rounds} {passes}, {stats.tokens_per_round:.2f} tokens per pass")
    if stats.drafted:
        line += (f"; acceptance {stats.kept_fraction:.1%} ({stats.accepted}/{stats.drafted} drafts); "
                 f"time in draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s")
    return line


# ---------------------------------------------------------------------------
# The per-round trace (--trace)
# ---------------------------------------------------------------------------

def token_text(token_bytes, token):
    """A token as Python would write it: its text in quotes, or its bytes where they are not whole UTF-8."""
    return bytes_text(token_bytes(token))


def bytes_text(raw):
    """Bytes as Python would write them: their text in quotes, or the bytes themselves where they are not whole UTF-8."""
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:  # part of a character split over several tokens
        return repr(raw)


def format_trace(trace, token_bytes, n_prompt):
    """The lines of --trace: one block per round (a decoding.Round each), drawn by its kind's renderer."""
    def show(tokens):
        return " ".join(token_text(token_bytes, t) for t in tokens)

    lines = [f"trace: prompt of {n_prompt} tokens; in each round the oracle checks the drafts in one pass"]
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")  # across rounds: a character split over two rounds shows whole
    for kind in dict.fromkeys(r.kind for r in trace):  # how to read a kind's rows, once, before the rounds
        lines += [f"  {line}" for line in LEGENDS.get(kind, ())]
    for i, r in enumerate(trace, 1):
        setting = SETTINGS[r.kind](r.details) if r.kind in SETTINGS else ""
        lines.append(f"round {i}: context {r.context_length} tokens{setting}")
        lines += DRAFTS.get(r.kind, line_lines)(r, show)
        lines += [f"  why      {reason}" for reason in round_reasons(r, show)]
        lines.append(f"  text     {text.decode(b''.join(token_bytes(t) for t in r.new), final=i == len(trace))!r}")
        caches = ", ".join(f"{name} {n}" for name, n in (r.cached or {}).items() if n is not None)
        lines.append(f"  caches   {caches} positions (context is now {r.context_length + len(r.new)} tokens)")
    return lines


def line_lines(r, show, drafted=None):
    """A line of drafts: what the draft proposed (drafted: as shown, default each token), the oracle's
    choice after each prefix, what was kept."""
    drafted = show(r.drafted) if drafted is None else drafted
    lines = [f"  drafted  {drafted or '(nothing)'}"]
    if r.oracle is not None:
        lines.append(f"  oracle   {show(r.oracle)}   (its choice after each draft prefix)")
    return lines + [f"  kept     {r.accepted} draft(s) + {show(r.new[-1:])} from the oracle"]


def staged_lines(r, show):
    """A staged round's line of drafts, each with the stage that made it."""
    return line_lines(r, show, " ".join(f"{show([t])}({stage})" for t, stage in zip(r.drafted, r.details.stages)))


def round_reasons(r, show):
    """Why the round drafted what it drafted, and what it chose for the next round, from the numbers that
    decided it (the round's details, by its kind), then the round's own line (Round.reason): the --trace's
    "why" lines, and the page's."""
    own = REASONS[r.kind](r, show) if r.kind in REASONS else []
    return own + ([r.reason] if r.reason else [])


def cut_short(n_draft, most, what="draft"):
    """"" or the clause saying that the tokens left to make allowed this round at most `most` (< n_draft)."""
    if n_draft is None or most is None or most >= n_draft:
        return ""
    return (f"; at most {most} {what}{'s' if most != 1 else ''} this round (n_draft {n_draft}): only {most + 1} "
            f"token{'s were' if most + 1 != 1 else ' was'} left to make")


def length_reason(n_draft, k, letter=""):
    """A fixed draft length, and where the tokens left to make cut this round's draft short (k < n_draft)."""
    left = k + 1
    cut = "" if k == n_draft else \
        f"; {k} drafted because only {left} token{'s were' if left != 1 else ' was'} left to make"
    return f"fixed draft length n_draft{letter} {n_draft}{cut}"


def threshold_reasons(r, show):
    d, n_accepted = r.details, r.accepted
    t, c = d.threshold, d.cumulative
    probs = ", ".join(f"{p:.3g}" for p in c)
    stop = (f"{c[-1]:.3g} is below it: stopped" if c and c[-1] < t else
            f"stopped at the most drafts, {d.k_limit}" if c else "nothing left to draft") + cut_short(d.n_draft, d.k_limit)
    lines = [f"drafted while the draft's probability of its whole guess stayed at or above the threshold {t:.3g}: "
             f"{probs or '(none)'}; {stop}"]
    if c:
        after = d.next_threshold
        if n_accepted == len(c):
            rule = f"every draft kept: {t:.3g} - {d.boost:g} (guess further) = {t - d.boost:.3g}"
            raw = t - d.boost
        else:
            last = c[n_accepted - 1] if n_accepted else 1.0
            raw = (t + last) / 2
            rule = (f"draft {n_accepted + 1} rejected: halfway to {last:.3g}, the probability at the last kept draft"
                    f"{' (none kept: 1)' if not n_accepted else ''}: ({t:.3g} + {last:.3g}) / 2 = {raw:.3g}")
        clamp = f", kept within [0.05, 0.95]: {after:.3g}" if abs(raw - after) > 1e-9 else ""
        lines.append(f"next threshold {after:.3g}: {rule}{clamp}")
    return lines


def adaptive_reasons(r, show):
    d, n_accepted, n_drafted = r.details, r.accepted, len(r.drafted)
    g, entropies = d.n_draft, d.entropies
    shown = ", ".join(f"{e:.2f}" for e in entropies)
    if d.rule == "egag":
        bound = d.entropy_bound
        stop = (f"{entropies[-1]:.2f} is above {bound:g}: stopped" if entropies and entropies[-1] > bound else
                f"stopped at n_draft {g}" if n_drafted == g else f"stopped at {n_drafted}")
        lines = [f"rule egag: drafted up to n_draft {g}, stopping after a draft whose entropy is above {bound:g} "
                 f"nats: {shown}; {stop}{cut_short(g, d.k_limit)}"]
    else:
        lines = [f"rule heuristic: drafted n_draft {g}{cut_short(g, d.k_limit)}"]
    if not n_drafted:
        return lines
    low, high = d.bounds
    if d.rule == "egag":
        raw = round(d.average_after) + 1
        rule = (f"moving average of the drafts kept: {d.ema:g} x {d.average_before:.2f} + {1 - d.ema:.2g} x "
                f"{n_accepted} = {d.average_after:.2f}; round({d.average_after:.2f}) + 1 = {raw}")
    else:
        raw = g + 2 if n_accepted == n_drafted else g - 1
        rule = f"every draft kept: {g} + 2 = {raw}" if n_accepted == n_drafted else f"a draft rejected: {g} - 1 = {raw}"
    clamp = f", kept within [{low}, {high}]" if raw != d.next_n_draft else ""
    return lines + [f"next n_draft {d.next_n_draft}: {rule}{clamp}"]


def ngram_reasons(r, show):
    d = r.details
    said = "nothing left to draft: the oracle adds the last token alone" if d.room == 0 else \
        ngram_reason(d.source, len(r.drafted))
    return [said + cut_short(d.n_draft, d.room)]


def ngram_reason(source, n_drafted):
    if source["from"] == "prompt lookup":
        return (f"prompt lookup: the last {source['length']} token(s) of the text also stand at position {source['at']}; "
                f"the {n_drafted} draft(s) are what followed them there")
    if source["from"] == "n-gram table":
        parts = ", ".join(f"after {m} token(s), seen {count} time(s)" for m, count in source["contexts"])
        return f"the n-gram table: each draft the most frequent follower of its context ({parts})"
    return "no match in the text or the table: nothing drafted; the oracle adds its token alone"


def staged_reasons(r, show):
    """Which stage proposed each draft: an n-gram guess the draft model confirmed, or the draft model's own token."""
    stages, drafted = r.details.stages, r.drafted
    from_table = stages.count("n-gram")
    each = " ".join(f"{show([t])}[{'n-gram' if s == 'n-gram' else 'model'}]" for t, s in zip(drafted, stages))
    return [f"{len(drafted)} draft(s) in {stages.count('draft')} draft-model pass(es): {from_table} guessed by the "
            f"n-gram table and confirmed by the draft model, {len(drafted) - from_table} the draft model's own: "
            f"{each or '(none)'}{cut_short(r.details.n_draft, r.details.k)}"]


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
                  f"{cut_short(d.n_draft, d.depth, 'level')}"]


def tree_kept_reason(r, show):  # a tree drawn by another rule (beyond/): only the walk's outcome
    tree = tree_of(r)
    return [f"kept the path the oracle's choices follow: {len(tree.path)} node(s) deep"
            f"{cut_short(tree.n_draft, tree.depth, 'level')}"]


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


def tree_of(r):
    """The tree a tree-shaped round drafted (a tree.TreeDetails), None for a line of drafts."""
    return r.details.tree if r.kind == "suffix-tree" else r.details if r.kind in ("tree", "tree-sps", "medusa") else None


def medusa_lines(r, show):
    """A Medusa round: the tree of the heads' candidates, each node's p its head's probability for it."""
    return tree_lines(r, show, p_is="the probability its head gave it (level k is head k's; a head does not see the "
                                    "node above it)")


def medusa_reasons(r, show):
    d = r.details  # a medusa.MedusaDetails
    widths = d.widths[:d.depth]
    if not widths:
        return [f"the heads drafted nothing: the oracle adds the last token alone{cut_short(d.n_draft, d.depth, 'level')}"]
    product = " x ".join(str(w) for w in widths)
    levels = ", ".join(f"head {k} its top {w} for token +{k}" for k, w in enumerate(widths, 1))
    n_branches = 1
    for w in widths:
        n_branches *= w
    return [f"the heads read one state, the oracle's top state where its LM head chose the newest token, and guess "
            f"past it at once (+1: the next token): {levels}; the tree is every combination: {product} = "
            f"{n_branches} branches",
            f"kept the branch the oracle's choices follow: {len(d.path)} node(s) deep"
            f"{cut_short(d.n_draft, d.depth, 'level')}"]


def tree_lines(r, show, p_is="the draft's probability of the node's token after its parent"):
    """A tree round: each node, numbered, under its parent with its probability p (p_is: what p is), the
    accepted path marked, and why every other node lost: the oracle chose another token after its
    parent, or its parent was never reached."""
    tree = tree_of(r)
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
            target, draft = d.names(n)
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
        lines.append(f"  residual {token} drawn from {d.names(n)[0]}, the residual left after every child of "
                     f"{node_name(at, r, show)} was rejected (its chance there {last['prob']:.3g})")
    elif r.drafted:
        lines.append(f"  bonus    {token} drawn from q after {node_name(at, r, show)}, a leaf (q(x) {last['prob']:.3g})")
    else:
        lines.append(f"  oracle   {token} drawn from q (q(x) {last['prob']:.3g}): nothing drafted")
    return lines + [f"  kept     {r.accepted} node(s) + {token}"]


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
    what the residual is."""
    d = r.details
    if not d.steps:
        return []
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
    return lines


def naming(drafts, steps):
    """'draft 2 (q/p 1.3)', 'drafts 1 (q/p 0.5) and 3 (q/p 0.8)': each q/p with the digits that tell it from 1."""
    named = [f"{i} (q/p {ratio_text(steps[i - 1]['ratio'])})" for i in drafts]
    return ("draft " if len(named) == 1 else "drafts ") + (", ".join(named[:-1]) + " and " if len(named) > 1 else "") \
        + named[-1]


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


def crossvocab_lines(r, show):
    """A round across vocabularies (crossvocab.py): the draft's own tokens shown as text, their text, the
    oracle's candidates (that text in its tokens), the oracle's choices (greedy) or each test's p', q and r
    (sampling), what was kept, and how the draft's token list caught up with the agreed text."""
    d = r.details  # a crossvocab.CrossVocabDetails
    own = " ".join(bytes_text(piece) for piece in d.draft_pieces)
    how = "sampled from p', its p on the tokens both vocabularies share" if d.tests is not None else "greedy"
    lines = [f"  draft    {own or '(nothing)'}   ({len(d.draft_ids)} token(s) of the draft's own vocabulary, {how})",
             f"  as text  {bytes_text(d.text)}",
             f"  checked  {show(r.drafted) or '(nothing)'}   (that text in the oracle's tokens: the candidates)"]
    if d.tests is None:
        if r.oracle is not None:
            lines.append(f"  oracle   {show(r.oracle)}   (its choice after each candidate prefix)")
        lines.append(f"  kept     {r.accepted} candidate(s) + {show(r.new[-1:])} from the oracle")
    else:
        for t, test in enumerate(d.tests, 1):
            a = min(1.0, test["q"] / test["p"])
            digits = decisive_digits((test["r"], a), (a, 1.0), (test["r"], 1.0), least=3)
            lines.append(f"  x~{t} {show([test['token']]):14s} p'(x) {test['p']:.3g}  q(x) {test['q']:.3g}  "
                         f"min(1, q/p') {a:.{digits}g}  r {test['r']:.{digits}g}  -> "
                         f"{'accept' if test['accepted'] else 'REJECT'}")
        last = show(r.new[-1:])
        drawn = (f"resampled from (q - p')+ renormalised, after candidate {r.accepted + 1} was rejected"
                 if r.accepted < len(r.drafted) else
                 f"drawn from q: all {len(r.drafted)} kept" if r.drafted else "drawn from q: nothing drafted")
        lines.append(f"  kept     {r.accepted} candidate(s) + {last} {drawn}")
    again = " ".join(bytes_text(piece) for piece in d.reencoded_pieces)
    lines.append(f"  draft    keeps {d.draft_kept} of its {len(d.draft_ids)} token(s) (their text begins the agreed "
                 f"text) and reads the rest of it in its own tokens: {again or '(nothing left)'}")
    return lines


def crossvocab_reasons(r, show):
    d = r.details
    k = len(d.draft_ids)
    if d.stopped:
        return [f"drafted {k} of n_draft {d.n_draft}: {d.stopped}"]
    return [length_reason(d.n_draft, k)]


def sps_reasons(r, show):
    return [length_reason(r.details.n_draft, r.details.k, letter=" (Chen et al.'s K)")]


# Each kind of round (decoding.Round.kind): how to read its rows (once, before the rounds), the setting beside
# its number, how its drafts are drawn, and why it drafted them. A kind missing here is drawn as a line of drafts
# with its Round.reason.
LEGENDS = {
    "block": ["block verification (Sun et al. 2025): w_0 = 1, w_i = min(1, w_(i-1) q(x_i)/p(x_i)), how much of the",
              "first i drafts survives; h_i = Z_i / (Z_i + 1 - w_i), Z_i = sum over x of max(w_i q(x) - p(x), 0), the",
              "chance that prefix i's test passes. The prefixes are tested from the longest down; the first test that",
              "passes (r < h_i) decides how many drafts are kept, so a failed test does not end the round. The last",
              "token is the bonus from q, or drawn from max(w q - p, 0) after the kept drafts. q the oracle, p the draft."],
    "tree-sps": ["tree speculative sampling: the children of the node reached are tested in turn, child i kept if",
                 "r < min(1, q_i(x)/p_i(x)), r uniform on [0, 1). q_1 = q, the oracle's q there; after a rejection,",
                 "q_(i+1) = (q_i - p_i)+ renormalised, the residual (q', q'', ...). p_i is the draft's p that child i",
                 "was drawn from: p itself where children are drawn i.i.d. (tree-sps), p without the siblings drawn",
                 "before it (p', p'', ...), renormalised, where they are drawn without replacement (tree-sps-wor).",
                 "Each test names the q_i and p_i it used; the p beside a node is the draft's p after its parent. When",
                 "every child is rejected the last token is drawn from the last residual; at a kept leaf, the bonus",
                 "is drawn from q."],
    "crossvocab": ["across vocabularies (crossvocab.py): the draft writes in its own tokens; their text, in the oracle's",
                   "tokens, is what the oracle checks (the candidates). Greedy: the candidates are kept up to the first",
                   "one the oracle would not write itself. Sampling: x is kept when r < min(1, q(x)/p'(x)), r uniform on",
                   "[0, 1), p' the draft's p on the tokens both vocabularies share, renormalised, q the oracle's; at a",
                   "rejection the last token is drawn from (q - p')+. Then the draft keeps its tokens whose text begins",
                   "the agreed text and reads the rest in its own tokens. Each cache counts its own model's tokens."],
    "lookahead": ["lookahead decoding (Fu et al. 2024): no draft model. The window keeps the last N - 1 Jacobi",
                  "iterations, one level each, every guess under the place after the text's last token it guesses. One",
                  "pass of the oracle reads the text's last token, the window and the pool's n-grams that follow that",
                  "token, each row seeing only its own line. A checked n-gram is kept while it equals the oracle's",
                  "choice (greedy decoding's rule), then the oracle adds its token. The pass's argmax after each top-level",
                  "guess is the next Jacobi iteration; once the window is full, the diagonal from the text's last token",
                  "up through the levels, then that argmax, is a new n-gram for the pool (pool +)."],
}
SETTINGS = {"threshold": lambda d: f", threshold {d.threshold:.3g}", "adaptive": lambda d: f", n_draft {d.n_draft}"}
DRAFTS = {"crossvocab": crossvocab_lines, "sps": sps_lines, "block": block_lines, "lookahead": lookahead_lines, "staged": staged_lines, "tree": tree_lines, "tree-sps": sampled_tree_lines, "suffix-tree": tree_lines,
          "medusa": medusa_lines}
REASONS = {
    "line": lambda r, show: [length_reason(r.details.n_draft, r.details.k)] if isinstance(r.details, Line) else [],
    "layers": lambda r, show: [length_reason(r.details.n_draft, r.details.k)] + ([
        f"the early exit after block {r.details.layers - 1} is trained (Kangaroo's adapter: one attention layer that maps "
        f"that block's state to what ln_f and the LM head expect); untrained, they would read it as it is"]
        if getattr(r.details, "trained", False) else []),
    "sps": sps_reasons,
    "crossvocab": crossvocab_reasons,
    "block": block_reasons,
    "threshold": threshold_reasons,
    "adaptive": adaptive_reasons,
    "ngram": ngram_reasons,
    "staged": staged_reasons,
    "tree": tree_reasons,
    "medusa": medusa_reasons,
    "tree-sps": lambda r, show: [r.details.reason_line(show) + cut_short(r.details.n_draft, r.details.depth, "level")],
    "suffix": lambda r, show: [r.details.reason + cut_short(r.details.n_draft, r.details.room)],
    "suffix-tree": lambda r, show: [r.details.reason] + tree_kept_reason(r, show),
}
