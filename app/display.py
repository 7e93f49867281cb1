"""How a run is shown in a terminal: the text as it comes, the statistics line, the per-round trace.

Used by the command line (cli.py) and the interactive session (session.py).
The page for a browser is report.py's.
"""

import codecs
import os

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
    passes = {"drafter": "draft model passes", "beam": "steps"}.get(method, "oracle passes")  # what Stats.rounds counts
    line = (f"{method}: {stats.n_tokens} new tokens in {elapsed:.2f} s, {stats.n_tokens / max(elapsed, 1e-9):.1f} tokens/s; "
            f"{stats.rounds} {passes}, {stats.tokens_per_round:.2f} tokens per pass")
    if stats.drafted:
        line += (f"; acceptance {stats.acceptance_rate:.1%} ({stats.accepted}/{stats.drafted} drafts); "
                 f"time in draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s")
    return line


# ---------------------------------------------------------------------------
# The per-round trace (--trace)
# ---------------------------------------------------------------------------

def token_text(token_bytes, token):
    """A token as Python would write it: its text in quotes, or its bytes where they are not whole UTF-8."""
    raw = token_bytes(token)
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:  # part of a character split over several tokens
        return repr(raw)


def format_trace(trace, token_bytes, n_prompt):
    """The lines of --trace: one block per round (a decoding.Round each)."""
    def show(tokens):
        return " ".join(token_text(token_bytes, t) for t in tokens)

    lines = [f"trace: prompt of {n_prompt} tokens; in each round the oracle checks the drafts in one pass"]
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")  # across rounds: a character split over two rounds shows whole
    for i, r in enumerate(trace, 1):
        setting = "".join(f", {name} {value:.3g}" if isinstance(value, float) else f", {name} {value}"
                          for name, value in r.details.items() if name in ("threshold", "gamma"))
        lines.append(f"round {i}: context {r.context} tokens{setting}")
        if "steps" in r.details:
            lines += sps_lines(r, show)
        elif "parents" in r.details:
            lines += tree_lines(r, show)
        else:
            drafted = show(r.drafted) if "stages" not in r.details else " ".join(
                f"{show([t])}({stage})" for t, stage in zip(r.drafted, r.details["stages"]))
            lines += [f"  drafted  {drafted or '(nothing)'}",
                      f"  oracle   {show(r.oracle)}   (its choice after each draft prefix)",
                      f"  kept     {r.accepted} draft(s) + {show(r.new[-1:])} from the oracle"]
        lines += [f"  why      {reason}" for reason in round_reasons(r, show)]
        lines.append(f"  text     {text.decode(b''.join(token_bytes(t) for t in r.new), final=i == len(trace))!r}")
        caches = ", ".join(f"{name} {n}" for name, n in r.cached.items() if n is not None)
        lines.append(f"  caches   {caches} positions (context is now {r.context + len(r.new)} tokens)")
    return lines


def round_reasons(r, show):
    """Why the round drafted what it drafted, and what it chose for the next round, from the numbers that
    decided it (the round's details): the --trace's "why" lines, and the page's."""
    d = r.details
    if "cumulative" in d:  # threshold drafting
        return threshold_reasons(d, r.accepted)
    if "entropies" in d:  # adaptive drafting
        return adaptive_reasons(d, r.accepted, len(r.drafted))
    if "source" in d:  # n-gram drafts
        return [ngram_reason(d["source"], len(r.drafted))]
    if "stages" in d:
        return [staged_reason(d["stages"], r.drafted, show)]
    if "reason" in d and ("parents" not in d or "visits" in d):  # the beyond/ methods say their own reason
        return [d["reason"]]  # (tree sampling's: every child checked, q/p and r, where the last token came from)
    if "parents" in d:
        return tree_reasons(d, r, show) + ([d["reason"]] if "reason" in d else [])
    if "n_draft" in d:  # a fixed draft length
        left = d["k"] + 1
        cut = "" if d["k"] == d["n_draft"] else \
            f"; {d['k']} drafted because only {left} token{'s were' if left != 1 else ' was'} left to make"
        return [f"fixed draft length n_draft {d['n_draft']}{cut}"]
    if "steps" in d:
        return [f"fixed draft length K {len(d['steps']) if 'bonus' in d else len(r.drafted)}"]
    return []


def threshold_reasons(d, n_accepted):
    t, c = d["threshold"], d["cumulative"]
    probs = ", ".join(f"{p:.3g}" for p in c)
    stop = (f"{c[-1]:.3g} is below it: stopped" if c and c[-1] < t else
            f"stopped at the most drafts, {d['k_max']}" if c else "nothing left to draft")
    lines = [f"drafted while the draft's probability of its whole guess stayed at or above the threshold {t:.3g}: "
             f"{probs or '(none)'}; {stop}"]
    if c:
        after = d["next_threshold"]
        if n_accepted == len(c):
            rule = f"every draft kept: {t:.3g} - {d['boost']:g} (guess further) = {t - d['boost']:.3g}"
            raw = t - d["boost"]
        else:
            last = c[n_accepted - 1] if n_accepted else 1.0
            raw = (t + last) / 2
            rule = (f"draft {n_accepted + 1} rejected: halfway to {last:.3g}, the probability at the last kept draft"
                    f"{' (none kept: 1)' if not n_accepted else ''}: ({t:.3g} + {last:.3g}) / 2 = {raw:.3g}")
        clamp = f", kept within [0.05, 0.95]: {after:.3g}" if abs(raw - after) > 1e-9 else ""
        lines.append(f"next threshold {after:.3g}: {rule}{clamp}")
    return lines


def adaptive_reasons(d, n_accepted, n_drafted):
    g, entropies = d["gamma"], d["entropies"]
    shown = ", ".join(f"{e:.2f}" for e in entropies)
    if d["rule"] == "entropy":
        bound = d["entropy_bound"]
        stop = (f"{entropies[-1]:.2f} is above {bound:g}: stopped" if entropies and entropies[-1] > bound else
                f"stopped at gamma {g}" if n_drafted == g else f"stopped at the tokens left, {n_drafted}")
        lines = [f"drafted up to gamma {g}, stopping after a draft whose entropy is above {bound:g} nats: {shown}; {stop}"]
    else:
        lines = [f"drafted gamma {g}" + (f" (only {n_drafted} tokens left to draft)" if n_drafted < g else "")]
    if not n_drafted:
        return lines
    low, high = d["bounds"]
    if d["rule"] == "entropy":
        raw = round(d["average_after"]) + 1
        rule = (f"moving average of the drafts kept: {d['ema']:g} x {d['average_before']:.2f} + {1 - d['ema']:.2g} x "
                f"{n_accepted} = {d['average_after']:.2f}; round({d['average_after']:.2f}) + 1 = {raw}")
    else:
        raw = g + 2 if n_accepted == n_drafted else g - 1
        rule = f"every draft kept: {g} + 2 = {raw}" if n_accepted == n_drafted else f"a draft rejected: {g} - 1 = {raw}"
    clamp = f", kept within [{low}, {high}]" if raw != d["next_gamma"] else ""
    return lines + [f"next gamma {d['next_gamma']}: {rule}{clamp}"]


def ngram_reason(source, n_drafted):
    if source["from"] == "prompt lookup":
        return (f"prompt lookup: the last {source['length']} token(s) of the text also stand at position {source['at']}; "
                f"the {n_drafted} draft(s) are what followed them there")
    if source["from"] == "n-gram table":
        parts = ", ".join(f"after {m} token(s), seen {count} time(s)" for m, count in source["contexts"])
        return f"the n-gram table: each draft the most frequent follower of its context ({parts})"
    return "no match in the text or the table: nothing drafted; the oracle adds its token alone"


def staged_reason(stages, drafted, show):
    """Which stage proposed each draft: an n-gram guess the draft model confirmed, or the draft model's own token."""
    from_table = stages.count("n-gram")
    each = " ".join(f"{show([t])}[{'n-gram' if s == 'n-gram' else 'model'}]" for t, s in zip(drafted, stages))
    return (f"{len(drafted)} draft(s) in {stages.count('draft')} draft-model pass(es): {from_table} guessed by the "
            f"n-gram table and confirmed by the draft model, {len(drafted) - from_table} the draft model's own: "
            f"{each or '(none)'}")


def tree_reasons(d, r, show):
    parents = d["parents"]
    branched = sorted({p for p in parents if parents.count(p) > 1})
    where = ", ".join("the text" if p == -1 else show([r.drafted[p]]) for p in branched)
    line = (f"branched into the draft's top {d.get('branch', 2)} where its likeliest token had probability below "
            f"{d.get('confidence', 0.5):g} (after {where})" if branched else
            f"no branch: the draft's likeliest token had probability at or above {d.get('confidence', 0.5):g} at every node")
    return [line, f"kept the path the oracle's choices follow: {len(d['path'])} node(s) deep"]


def sps_lines(r, show):
    """An SpS round: each draft's p(x), q(x), the acceptance probability, r and the decision (Chen et al.'s
    letters: q is the target, i.e. the oracle, p the draft)."""
    lines = [f"  drafted  {show(r.drafted)}   (sampled from the draft's p)"]
    for t, step in enumerate(r.details["steps"], 1):
        verdict = "accept" if step["accepted"] else "REJECT"
        # .3g: rare tokens' probabilities stay readable (0.00055, not 0.001 beside 0.000)
        lines.append(f"  x~{t} {show([step['token']]):14s} p(x) {step['p']:.3g}  q(x) {step['q']:.3g}  "
                     f"min(1, q/p) {step['accept_prob']:.3g}  r {step['r']:.3g}  -> {verdict}")
    if "resampled" in r.details:
        res = r.details["resampled"]
        drawn = next((e["residual"] for e in res["top"] if e["token"] == res["token"]), None)
        largest = sorted((e for e in res["top"] if e["residual"] > 0), key=lambda e: -e["residual"])
        top = "  ".join(f"{show([e['token']])} {e['residual']:.3g}" for e in largest)
        chance = f", where it had {drawn:.3g}" if drawn is not None else ""
        lines.append(f"  resample {show([res['token']])} from (q - p)+ renormalised{chance}; "
                     f"there, among the likeliest tokens: {top or '(none)'}")
    else:
        bonus = r.details["bonus"]
        lines.append(f"  bonus    {show([bonus['token']])} sampled from q (q(x) {bonus['q']:.3g}): all {len(r.drafted)} accepted")
    return lines


def tree_lines(r, show):
    """A tree round: each node under its parent with the draft's probability for it, the accepted path
    marked, and why every other node lost: the oracle chose another token after its parent, or its
    parent was never reached."""
    parents, path = r.details["parents"], set(r.details["path"])
    probs = r.details.get("probs") or [None] * len(parents)
    lines = [f"  tree     {len(r.drafted)} nodes; * = on the accepted path"]

    def walk(parent, depth):
        reached = parent == -1 or parent in path
        for i, p in enumerate(parents):
            if p == parent:
                chosen = r.oracle[parent + 1]  # the oracle's token after the parent
                why = ("kept: the oracle's choice after its parent" if i in path else
                       f"lost: after its parent the oracle chose {show([chosen])}" if reached else
                       "lost: its parent was not kept")
                p_text = f" p {probs[i]:.2f}" if probs[i] is not None else ""
                lines.append(f"  {'  ' * depth}{'*' if i in path else '-'} {show([r.drafted[i]])}{p_text}   ({why})")
                walk(i, depth + 1)

    walk(-1, 1)
    lines.append(f"  kept     {r.accepted} node(s) + {show(r.new[-1:])} from the oracle")
    return lines
