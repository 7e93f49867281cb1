"""How speculative sampling's rounds are shown (workbench/methods/sampling.py): block verification's trace lines,
its one-line reason and its page, each number printed with the digits that decide it; and the methods as the
registry declares them. The algorithms themselves are proven in tests/test_sps.py and
tests/test_block_verification.py, on the plain models."""

from types import SimpleNamespace

import numpy as np

import beyond.block_verification as bv
from beyond.block_verification import block_sample
from processors import Processor
from speculative import greedy_generate
from stats import Stats
from traces import show, trace_and_page, why_lines
from workbench import methods
from workbench.methods.sampling import block_lines, block_reasons, ratio_text, reason_line
from workbench.settings import Settings


def test_the_trace_and_the_page_show_the_rounds(related, oracle):
    trace, lines, page = trace_and_page(block_sample, "sps-block", related, oracle, n_draft=3)
    assert sum(line.strip().startswith("why      from the end:") for line in lines) == len(trace)
    # How to read it: block verification's rule, not token verification's "up to the first disagreement".
    how_to_read = page.split("<p>", 1)[1].split("</p>", 1)[0]
    assert "tested from the end" in how_to_read and "first disagreement" not in how_to_read


def test_each_rounds_why_ends_with_its_line_from_its_own_details(related, oracle):
    # The round's whole story in one line, made from the round's record alone: the trace's last "why" of each
    # round is reason_line of that round's details.
    trace, lines, _ = trace_and_page(block_sample, "sps-block", related, oracle, n_draft=3)
    whys = why_lines(lines)
    assert len(whys) == len(trace)
    for r, said in zip(trace, whys):
        assert isinstance(r.details, bv.BlockDetails) and said[-1] == reason_line(r.details)
        assert said == block_reasons(r, lambda tokens: " ".join(repr(f"<{t}>") for t in tokens))


def test_the_reason_line_says_why_the_round_ended():
    steps = [{"token": 7, "ratio": 0.5, "w": 0.5, "h": 0.4, "r": None, "passed": None, "kept": True},
             {"token": 8, "ratio": 3.0, "w": 1.0, "h": 0.6, "r": 0.3, "passed": True, "kept": True},
             {"token": 9, "ratio": 0.1, "w": 0.1, "h": 0.05, "r": 0.7, "passed": False, "kept": False}]
    said = reason_line(bv.BlockDetails(steps, 2, {"token": 4, "from": "residual", "prob": 0.25, "q": 0.125, "w": 1.0}))
    assert said == ("from the end: prefix 3 h=0.05 r=0.7 fails, prefix 2 h=0.6 r=0.3 passes; w_2=1 where token "
                    "verification keeps all 2 with chance 0.5: a later q/p > 1 made up for draft 1 (q/p=0.5); "
                    "2 of 3 kept: the last token drawn from the block residual max(w_2 q - p, 0), w_2=1 (prob there "
                    "0.25; q(x) 0.12)")
    steps[1]["ratio"], steps[1]["w"] = 1.0, 0.5  # nothing made up for: no such clause
    said = reason_line(bv.BlockDetails(steps[:2], 2, {"token": 4, "from": "bonus", "prob": 0.25, "q": 0.25, "w": 0.5}))
    assert said == "from the end: prefix 2 h=0.6 r=0.3 passes; all 2 kept: the bonus drawn from the oracle's q (prob 0.25)"
    steps = [dict(steps[0], r=0.9, passed=False, kept=False), dict(steps[2], kept=False)]
    said = reason_line(bv.BlockDetails(steps, 0, {"token": 5, "from": "residual", "prob": 0.5, "q": 0.5, "w": 1.0}))
    assert said == ("from the end: prefix 2 h=0.05 r=0.7 fails, prefix 1 h=0.4 r=0.9 fails, prefix 0 always passes; "
                    "0 of 2 kept: the last token drawn from the block residual max(w_0 q - p, 0), w_0=1 (prob there "
                    "0.5; q(x) 0.5)")
    assert reason_line(bv.BlockDetails([], 0, {"token": 3, "from": "bonus", "prob": 0.5, "q": 0.5, "w": 1.0})).startswith(
        "nothing")


def test_the_reason_line_prints_the_digits_that_decide():
    """r beside h, q/p beside 1 and w beside token verification's chance: each pair that differs reads different,
    in the order it has (a q/p of 1.046 that made up a shortfall is 1.05, not 1; r 0.6012 beside h 0.6049)."""
    steps = [{"token": 7, "p": 0.5, "q": 0.45, "ratio": 0.9, "w": 0.9, "h": 0.5, "r": None, "passed": None, "kept": True},
             {"token": 8, "p": 0.5, "q": 0.523, "ratio": 1.046, "w": 0.9414, "h": 0.6049, "r": 0.6012, "passed": True,
              "kept": True},
             {"token": 9, "p": 0.2, "q": 0.1, "ratio": 0.5, "w": 0.47, "h": 0.47, "r": 0.9996, "passed": False,
              "kept": False}]
    details = bv.BlockDetails(steps, 2, {"token": 4, "from": "residual", "prob": 0.25, "q": 0.125, "w": 0.9414})
    said = reason_line(details)
    assert "prefix 3 h=0.47 r=0.9996 fails" in said  # r is never shown as 1
    assert "prefix 2 h=0.605 r=0.601 passes" in said
    assert "w_2=0.94 where token verification keeps all 2 with chance 0.9" in said
    r = SimpleNamespace(details=details, drafted=[7, 8, 9], new=[7, 8, 4])
    lines = "\n".join(block_lines(r, show))
    assert "q/p 1.05 " in lines and "q/p 1 " not in lines and "r 0.9996 >= h_3" in lines
    assert "(its chance there 0.25; q(x) 0.125)" in lines  # q is q; the residual's chance beside it, by name
    assert "draft 2 (q/p 1.05) made up for the shortfall of draft 1 (q/p 0.9)" in "\n".join(block_reasons(r, show))
    # the rule's negative control: two significant digits, the old format, hide the ratio above 1
    assert f"{1.046:.2g}" == "1" and ratio_text(1.046) == "1.05" and ratio_text(0.9996) == "0.9996"


def test_the_reason_names_only_the_shortfalls_a_later_draft_made_up_for():
    # q/p = 0.5, 2, 0.7, all three kept: w = 0.5, 1, 0.7 against token verification's 0.5 * 1 * 0.7 = 0.35.
    # Draft 2's q/p > 1 made up for draft 1; nothing after draft 3 made up for its 0.7.
    steps = [{"token": t, "p": 0.4, "q": 0.4 * ratio, "ratio": ratio, "w": w, "h": w, "r": r, "passed": passed,
              "kept": True} for t, ratio, w, r, passed in ((1, 0.5, 0.5, None, None), (2, 2.0, 1.0, None, None),
                                                           (3, 0.7, 0.7, 0.1, True))]
    line = reason_line(bv.BlockDetails(steps, 3, {"token": 4, "from": "bonus", "prob": 0.3, "q": 0.3, "w": 0.7}))
    assert "made up for draft 1 (q/p=0.5)" in line and "3 (q/p=0.7)" not in line, line


def greedy_call(method, related, oracle):
    """A Call of `method` at temperature 0: 10 tokens after [1, 2, 3], 3 drafts a round."""
    return methods.Call(method, related, oracle, [1, 2, 3], 10, 3,
                        Settings(method=method.name, processor=Processor(temperature=0)), Stats(),
                        np.random.default_rng(0))


def test_the_block_method_is_registered(related, oracle):
    m = methods.get("sps-block")
    assert m.samples and m.verifies and m.n_draft == 4 and m.baseline == "sample"
    assert list(m.run(greedy_call(m, related, oracle))) == list(greedy_generate(oracle, [1, 2, 3], 10))

