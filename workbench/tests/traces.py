"""What the tests of a method's trace and page share: a run traced, shown as --trace prints it and as the page
draws it, by the method's own Shown (workbench/methods/)."""

from types import SimpleNamespace

import numpy as np

from stats import Stats
from workbench import display, methods
from workbench.page import report


def show(tokens):
    """Tokens as the tests name them: <id> each."""
    return " ".join(f"<{t}>" for t in tokens)


def token_bytes(token):
    return f"<{token}>".encode()


def trace_and_page(generate, method, related, oracle, n_draft, **settings):
    """12 tokens traced, as --trace prints them and as the page draws them, one of each per round, the method's
    Shown (method: its name) drawing them: (the rounds, the --trace lines, the rounds' section of the page)."""
    stats = Stats(trace=[])
    list(generate(related, oracle, [1, 2, 3], 12, n_draft=n_draft, rng=np.random.default_rng(2), stats=stats, **settings))
    shown = methods.get(method).shown
    lines = display.format_trace(shown, stats.trace, token_bytes, 3)
    assert sum(line.startswith("round ") for line in lines) == len(stats.trace)
    page = report.rounds_section(SimpleNamespace(token_bytes=token_bytes, method=methods.get(method)), stats.trace)
    assert page.count("<details") == len(stats.trace)
    return stats.trace, lines, page


def why_lines(lines):
    """The --trace's "why" lines, round by round: [[its lines, the prefix "why" taken off], ...]."""
    rounds = []
    for line in lines:
        if line.startswith("round "):
            rounds.append([])
        elif line.strip().startswith("why ") and rounds:
            rounds[-1].append(line.strip()[len("why"):].strip())
    return rounds
