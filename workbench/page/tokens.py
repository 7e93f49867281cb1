"""Tokens on the page: escaped and made visible, boxed as chips, and marked by what they were.

A token is bytes: a Chinese character or an emoji is often split over two or
three of them, and a token can be any byte string at all. Every token's text
is escaped, and bytes that are not (yet) a whole character show as \\xNN.
"""

import html

from errors import printable

WHITESPACE_MARKS = {" ": "\u2423", "\n": "\u21b5", "\t": "\u2192"}  # ␣ ↵ →


def visible(text, in_token):  # -> [(css class or "", text)]
    """text cut into pieces a reader can see, each with its CSS class.

    What is escaped is errors.printable's (the project's one table of control characters,
    bytes that did not decode, and, in a token, every character that shows as nothing);
    each escape is a piece of its own, marked "byte". In a token (in_token) spaces,
    newlines and tabs get a visible mark instead; in running text newlines and tabs stay
    what they are. HTML's own escaping is as_html's (html.escape), on top of this.
    """
    pieces = []
    for c in text:
        escaped = printable(c, invisible=in_token)
        if in_token and c in WHITESPACE_MARKS:
            pieces.append(("ws", WHITESPACE_MARKS[c]))
        else:
            pieces.append(("byte" if escaped != c else "", escaped))
    return pieces


def as_html(pieces):  # text only, never an attribute: quotes need no escaping
    return "".join(f'<span class="{cls}">{html.escape(s, quote=False)}</span>' if cls else html.escape(s, quote=False)
                   for cls, s in pieces)


def token_text(run, token):
    return run.token_bytes(token).decode("utf-8", errors="surrogateescape")


def chip(run, token, mark=""):
    """One token as a boxed chip, its id in the tooltip; mark: its CSS class (a MARKS key, or another)."""
    return (f'<span class="{"tok " + mark if mark else "tok"}" title="token {int(token)}">'
            f'{as_html(visible(token_text(run, token), in_token=True))}</span>')


def chips(run, tokens, marks):
    return " ".join(chip(run, t, mark) for t, mark in zip(tokens, marks))


def svg_label(run, token, limit=10):
    """A token's visible text for an SVG <text>, cut to `limit` characters and an ellipsis (a chip nearby has it whole)."""
    label = "".join(s for _, s in visible(token_text(run, token), in_token=True))
    return html.escape(label if len(label) <= limit else label[:limit - 1] + "\u2026", quote=False)


def plural(n, noun):
    return f"{n} {noun}" + ("" if n == 1 else "s")


def probability(x):
    return "0" if x == 0 else f"{x:.1e}" if x < 0.001 else f"{x:.3f}"


# ---------------------------------------------------------------------------
# What each generated token was: accepted draft, correction, bonus
# ---------------------------------------------------------------------------

MARKS = {  # how a generated token is marked (its CSS class): (label, what it means)
    "draft": ("accepted draft", "proposed by the draft, kept by the oracle"),
    "fix": ("correction", "the oracle's own token at the first disagreement"),
    "bonus": ("bonus", "every draft was kept: the oracle's next token comes with the same pass"),
    "oracle": ("oracle", "nothing was drafted: the oracle's token alone"),
}
LETTERS = ("Letters as in Chen et al. 2023: q is the target (the oracle), p the draft; "
           "Leviathan et al. 2023 and Hugging Face name them the other way round.")
SAMPLING_MARKS = {  # the same marks where the drafts were sampled and tested (SpS's rule)
    "draft": ("accepted draft", "sampled from the draft's p, kept by its test r < min(1, q/p)"),
    "fix": ("resampled", "drawn from the residual (q \u2212 p)+ after a rejection"),
    "bonus": ("bonus", "every draft kept: one more token drawn from q"),
    "oracle": ("oracle", "nothing was drafted: a token drawn from the oracle's q alone"),
}


def last_mark(r, tree=None):
    """How the token the oracle adds at the end of round r is marked: "fix", "bonus" or "oracle".
    tree: the round's tree (registry.Shown.tree_of) for a tree-shaped method, else None."""
    if not r.drafted:
        return "oracle"
    if tree is not None:  # a tree: a bonus where the path ends in a leaf, else a correction
        end = tree.path[-1] if tree.path else -1
        return "fix" if end in tree.parents else "bonus"
    return "fix" if r.accepted < len(r.drafted) else "bonus"


def round_marks(r, tree=None):
    return ["draft"] * r.accepted + [last_mark(r, tree)]


def token_marks(run, trace):
    """One mark per generated token, from the rounds; from stats.from_draft where there are none."""
    shown = run.method.shown
    marks = [mark for r in trace for mark in round_marks(r, shown.tree_of(r))]
    from_draft = run.stats.from_draft
    marks += ["draft" if from_draft[i] else "oracle" for i in range(len(marks), len(from_draft))]
    return marks + ["oracle"] * (len(run.tokens) - len(marks))
