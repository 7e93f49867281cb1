"""How the methods that draft from the text itself show their rounds (workbench/methods/text.py): lookahead's
"why" quotes the numbers of its round's record, and the workbench's --trace prints it; the suffix drafter's
reason says where its drafts came from. The algorithms are proven in tests/test_lookahead.py and
tests/test_suffix.py, on the plain models."""

import os
import subprocess
import sys

from beyond.lookahead import lookahead_generate
from beyond.suffix import SuffixDetails, SuffixDrafter, suffix_generate
from fixtures import ROOT
from stats import Stats
from test_greedy import prompt
from traces import show
from workbench.methods.text import lookahead_reasons, suffix_reason, suffix_reasons


def test_the_lookahead_reason_quotes_its_rounds_numbers(oracle):
    # The window, the n-grams made, the candidate, how far it matched, why it ended: each from the round's record
    # (tests/test_lookahead.py recomputes that record from the oracle with no cache).
    ids = prompt(oracle, 6, 0)
    stats = Stats(trace=[])
    list(lookahead_generate(oracle, ids, 40, W=5, N=4, G=5, stats=stats))
    for r in stats.trace:
        d = r.details
        window = d.window
        [why] = lookahead_reasons(r, show)
        assert why.startswith(f"window of {len(window)} level(s), {sum(len(level) for level in window)} guesses")
        assert (f"; {len(d.ngrams)} new 4-gram(s) into the pool" in why) == bool(d.ngrams)
        if d.candidates:
            assert f"candidate {d.best + 1} of {len(d.candidates)} (newest first), matched the oracle for " \
                   f"{r.accepted} of its {len(r.drafted)} token(s)" in why
            assert why.endswith("all kept, then the oracle's token after them" if r.accepted == len(r.drafted) else
                                f"the oracle chose otherwise at its token {r.accepted + 1}")
        else:
            assert "nothing to verify" in why


def test_the_command_line_traces_lookahead_rounds(tiny_dirs):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "the cat", "--method", "lookahead",
                        "-n", "24", "--oracle", tiny_dirs["oracle"], "--trace"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    why = [line for line in (r.stdout + r.stderr).splitlines() if line.strip().startswith("why")]
    assert len(why) >= 2 and "window of 1 level(s)" in why[0] and "warming up" in why[0]
    assert any("4-gram(s) into the pool" in line for line in why)  # N = 4: --n-draft 3, the registry's default


def test_the_suffix_reason_says_where_the_drafts_came_from():
    def reason(t, k, **options):  # the drafter's proposal, and the trace's words for where it came from
        drafter = SuffixDrafter(**options)
        drafter.start(t)
        drafted = drafter.propose(k)
        return drafted, suffix_reason(SuffixDetails(drafter.source, drafter.min_match), len(drafted))

    assert reason([9, 1, 2, 3, 9, 1, 2], 2) == (
        [3, 9], "longest match: 3 token(s) ending at position 2; proposed the 2 that followed")
    assert reason([1, 2, 7, 1, 2, 8, 1, 2], 1) == (
        [8], "longest match: 2 token(s) ending at position 4 (the latest of 2 earlier occurrences); proposed the 1 "
             "that followed")
    assert reason([1, 2, 3], 2) == ([], "the last token never occurred before: nothing drafted")
    assert reason([1, 2, 3, 1], 2, min_match=2) == ([], "longest match: 1 token(s), below min_match 2: nothing drafted")
    assert reason([1, 2, 1, 2], 0) == ([], "nothing left to draft: the oracle adds the last token alone")


def test_a_kept_suffix_round_says_its_longest_match(oracle):
    from test_ngram import repetitive_prompt
    for k in (1, 4):
        stats = Stats(trace=[])
        list(suffix_generate(oracle, repetitive_prompt(oracle, 0), 30, n_draft=k, stats=stats))
        kept = next(r for r in stats.trace if r.accepted)
        [why] = suffix_reasons(kept, show)
        m = kept.details.match
        assert why.startswith(f"longest match: {m['length']} token(s) ending at position {m['end']}")
