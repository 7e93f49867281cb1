"""Every round's "why" (--trace and the page) is pinned to the numbers that produced it: across vocabularies.

The draft's own tokens, their text and the oracle's candidates; each sampling test's p', q and r; how the draft's
token list catches up with the agreed text.

Each test runs a method with a trace, then recomputes what decided each round from the models themselves, with
no cache (a fresh forward pass over the whole text): the round's details must equal the recomputed numbers, and the
reason a student reads (the method's Shown, workbench/methods/) must quote them. Helpers: recomputed.py.
"""

import re

import numpy as np
import pytest

from recomputed import GREEDY_WORDS, NEAR, NUMBER, close, is_argmax, printed, probs_after, reasons, show, traced
from workbench import display, methods
from workbench.methods.vocabularies import crossvocab_lines

ACROSS_GREEDY = methods.variant(methods.get("speculative"), other_vocabulary=True)  # the methods that ran
ACROSS_SAMPLING = methods.variant(methods.get("sps"), other_vocabulary=True)

CROSS_PROMPTS = ("the cat and the café", "If the file does not exist, the function")


@pytest.fixture(scope="module", params=["tiny random pair", pytest.param("learned pair", marks=pytest.mark.slow)])
def across(request, tiny_dirs, other_vocabulary):
    """(draft, oracle, the draft's tokenizer, the oracle's): the tiny oracle and a draft of it in another BPE
    (conftest's other_vocabulary), and in the slow tests the learned oracle and demo-draft-4k."""
    from workbench.speed.accelerate import load_fast
    from weights.tokenizer import load_tokenizer
    if request.param == "learned pair":
        dirs = request.getfixturevalue("demo_dirs")
        draft_dir, oracle_dir = dirs["draft-4k"], dirs["oracle"]
    else:
        draft_dir, oracle_dir = other_vocabulary, tiny_dirs["oracle"]
    return load_fast(draft_dir), load_fast(oracle_dir), load_tokenizer(draft_dir), load_tokenizer(oracle_dir)


def bytes_of(enc, tokens):
    return b"".join(enc.decode_single_token_bytes(t) for t in tokens)


def in_tokens(enc, text):
    """text (bytes) in enc's tokens, by the tokenizer itself where the bytes are whole UTF-8."""
    from crossvocab import encode_bytes
    try:
        return enc.encode(text.decode("utf-8"), allowed_special="all")
    except UnicodeDecodeError:  # a draft's text can end inside a character: crossvocab.encode_bytes, tested apart
        return encode_bytes(enc, text)


def shown_line(lines, start):
    [line] = [line for line in lines if line.startswith(start)]
    return line


def assert_catch_up_follows(r, draft_enc, oracle_enc, lines):
    """The draft keeps its longest run of drafts whose bytes begin the agreed text, and reads the rest in its own
    tokens; the trace's last "draft" line says both."""
    d, agreed = r.details, bytes_of(oracle_enc, r.new)
    kept, at = 0, 0
    while kept < len(d.draft_pieces) and agreed.startswith(d.draft_pieces[kept], at):
        at += len(d.draft_pieces[kept])
        kept += 1
    assert d.draft_kept == kept and bytes_of(draft_enc, d.reencoded) == agreed[at:]
    assert d.reencoded_pieces == [draft_enc.decode_single_token_bytes(t) for t in d.reencoded]
    again = " ".join(display.bytes_text(p) for p in d.reencoded_pieces) or "(nothing left)"
    assert lines[-1] == (f"  draft    keeps {kept} of its {len(d.draft_ids)} token(s) (their text begins the agreed text) "
                         f"and reads the rest of it in its own tokens: {again}")


def assert_crossvocab_greedy_lines_follow(r, listed, before, n_left, draft, oracle, draft_enc, oracle_enc):
    """A greedy round across vocabularies as crossvocab_lines draws it, against the models run afresh: the draft's
    tokens are its argmaxes after its own token list (listed), shown as their own text; their text in the oracle's
    tokens, cut to the tokens left, are the candidates; the oracle's choices after each prefix; the agreeing
    prefix kept; the draft's catching up."""
    d, lines = r.details, crossvocab_lines(r, show)
    for i, x in enumerate(d.draft_ids):
        assert is_argmax(probs_after(draft, listed + d.draft_ids[:i]), x)
    assert d.draft_pieces == [draft_enc.decode_single_token_bytes(x) for x in d.draft_ids]
    assert lines[0].startswith(  # the draft's own tokens; the last line, its catching up
        f"  draft    {' '.join(display.bytes_text(p) for p in d.draft_pieces) or '(nothing)'}   ({len(d.draft_ids)} token(s)")
    assert d.text == b"".join(d.draft_pieces) and shown_line(lines, "  as text  ") == f"  as text  {display.bytes_text(d.text)}"
    assert r.drafted == in_tokens(oracle_enc, d.text)[:n_left - 1]
    assert shown_line(lines, "  checked  ").startswith(f"  checked  {show(r.drafted) or '(nothing)'}   ")
    for j, choice in enumerate(r.oracle):
        assert is_argmax(probs_after(oracle, before + r.drafted[:j]), choice)
    n = next((j for j, x in enumerate(r.drafted) if x != r.oracle[j]), len(r.drafted))
    assert r.accepted == n and r.new == r.drafted[:n] + [r.oracle[n]]
    assert shown_line(lines, "  oracle   ") == f"  oracle   {show(r.oracle)}   (its choice after each candidate prefix)"
    assert shown_line(lines, "  kept     ") == f"  kept     {n} candidate(s) + {show([r.oracle[n]])} from the oracle"
    assert_catch_up_follows(r, draft_enc, oracle_enc, lines)


@pytest.mark.parametrize("n_draft", [2, 4])
def test_crossvocab_trace_shows_the_drafts_own_tokens_their_text_and_the_oracles_candidates(across, n_draft):
    from crossvocab import crossvocab_generate
    draft, oracle, draft_enc, oracle_enc = across
    n_new, agreed = 24, 0
    for prompt in CROSS_PROMPTS:
        ids = encode_text(oracle_enc, prompt)
        tokens, trace = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft=n_draft)
        text, listed = ids + tokens, encode_text(draft_enc, prompt)
        for r in trace:
            assert_crossvocab_greedy_lines_follow(r, listed, text[:r.context_length],
                                                  n_new - (r.context_length - len(ids)), draft, oracle, draft_enc, oracle_enc)
            assert reasons(ACROSS_GREEDY, r) == display.length_reason(n_draft, len(r.details.draft_ids))
            listed += r.details.draft_ids[:r.details.draft_kept] + r.details.reencoded
            agreed += r.accepted
        assert bytes_of(draft_enc, listed) == bytes_of(oracle_enc, text)  # the draft's list spells the text
    assert agreed > 0


def test_the_crossvocab_check_catches_a_misquoted_candidate(across):
    """Negative control: a round whose candidates are shown one token short fails the check above."""
    import dataclasses as dc
    from crossvocab import crossvocab_generate
    draft, oracle, draft_enc, oracle_enc = across
    ids = encode_text(oracle_enc, CROSS_PROMPTS[0])
    tokens, trace = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, 12, n_draft=4)
    r = next(r for r in trace if len(r.drafted) > 1)
    listed = encode_text(draft_enc, CROSS_PROMPTS[0])
    for earlier in trace[:trace.index(r)]:
        listed += earlier.details.draft_ids[:earlier.details.draft_kept] + earlier.details.reencoded
    args = (listed, (ids + tokens)[:r.context_length], 12 - (r.context_length - len(ids)), draft, oracle, draft_enc,
            oracle_enc)
    assert_crossvocab_greedy_lines_follow(r, *args)
    wrong = dc.replace(r, drafted=r.drafted[:-1])
    with pytest.raises(AssertionError):
        assert_crossvocab_greedy_lines_follow(wrong, *args)


def encode_text(enc, text):
    return enc.encode(text, allowed_special="all")


def shared_mass(p_draft, draft_enc, oracle_enc):
    """The draft's mass on its tokens whose bytes the oracle has too, found token by token here."""
    shared = [d for d in range(draft_enc.n_vocab) if draft_enc.decode_single_token_bytes(d) in oracle_bytes(oracle_enc)]
    return float(p_draft[shared].sum())


def oracle_bytes(enc, seen={}):
    if enc.name not in seen:
        seen[enc.name] = {enc.decode_single_token_bytes(t) for t in range(enc.n_vocab)}
    return seen[enc.name]


def assert_crossvocab_sampling_lines_follow(r, listed, before, draft, oracle, draft_enc, oracle_enc):
    """A sampling round across vocabularies as crossvocab_lines draws it: each candidate is the draft's token of the
    same bytes; p'(x) its p renormalised on the shared tokens, q(x) the oracle's, both recomputed with no cache; the
    verdict r < min(1, q/p'), printed with the digits that decide it; the last token's origin."""
    d, lines = r.details, crossvocab_lines(r, show)
    assert len(d.tests) == min(r.accepted + 1, len(r.drafted)) and len(r.drafted) == len(d.draft_ids)  # tested until a rejection
    for t, (test, x) in enumerate(zip(d.tests, r.drafted)):
        assert test["token"] == x and oracle_enc.decode_single_token_bytes(x) == d.draft_pieces[t]
        p_draft = probs_after(draft, listed + d.draft_ids[:t])
        p_prime = float(p_draft[d.draft_ids[t]]) / shared_mass(p_draft, draft_enc, oracle_enc)
        q = float(probs_after(oracle, before + r.drafted[:t])[x])
        assert close(test["p"], p_prime) and close(test["q"], q)
        a, kept = min(1.0, q / p_prime), t < r.accepted
        if abs(test["r"] - a) > NEAR:
            assert kept == (test["r"] < a)
        line = shown_line(lines, f"  x~{t + 1} ")
        shown_p, shown_q, shown_a, shown_r = (float(v) for v in re.search(
            rf"p'\(x\) {NUMBER}  q\(x\) {NUMBER}  min\(1, q/p'\) {NUMBER}  r {NUMBER}  -> ", line).groups())
        assert printed(shown_p, p_prime) and printed(shown_q, q), line
        assert line.endswith("-> accept" if kept else "-> REJECT") and (shown_r < shown_a) == kept, line
    kept_line = shown_line(lines, "  kept     ")
    resampled = r.accepted < len(r.drafted)
    assert ("resampled from (q - p')+" in kept_line) == resampled and kept_line.startswith(
        f"  kept     {r.accepted} candidate(s) + {show(r.new[-1:])} ")
    assert_catch_up_follows(r, draft_enc, oracle_enc, lines)


def crossvocab_sampling_trace(across, prompt, seed, n_new=16):
    from crossvocab import crossvocab_sample
    draft, oracle, draft_enc, oracle_enc = across
    ids = encode_text(oracle_enc, prompt)
    tokens, trace = traced(crossvocab_sample, draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft=4,
                           rng=np.random.default_rng(seed))
    return ids + tokens, trace


def test_crossvocab_sampling_trace_quotes_each_tests_p_q_and_r(across):
    draft, oracle, draft_enc, oracle_enc = across
    endings = set()
    for prompt, seed in zip(CROSS_PROMPTS, (0, 1)):
        text, trace = crossvocab_sampling_trace(across, prompt, seed)
        listed = encode_text(draft_enc, prompt)
        for r in trace:
            assert_crossvocab_sampling_lines_follow(r, listed, text[:r.context_length], draft, oracle, draft_enc,
                                                    oracle_enc)
            listed += r.details.draft_ids[:r.details.draft_kept] + r.details.reencoded
            endings.add("resampled" if r.accepted < len(r.drafted) else "bonus" if r.drafted else "nothing")
        assert not GREEDY_WORDS.search("\n".join(display.format_trace(ACROSS_SAMPLING.shown, trace, lambda t: b"x", 3)))
    assert {"resampled", "bonus"} <= endings


def test_the_crossvocab_sampling_check_catches_a_verdict_its_numbers_contradict(across):
    """Negative control: a test whose r is set to its min(1, q/p') but still shown kept fails the check above."""
    import dataclasses as dc
    draft, oracle, draft_enc, oracle_enc = across
    text, trace = crossvocab_sampling_trace(across, CROSS_PROMPTS[0], 0)
    r = trace[0]
    listed = encode_text(draft_enc, CROSS_PROMPTS[0])
    args = (listed, text[:r.context_length], draft, oracle, draft_enc, oracle_enc)
    assert_crossvocab_sampling_lines_follow(r, *args)
    test = r.details.tests[0]
    flipped = dict(test, accepted=not test["accepted"])
    wrong = dc.replace(r, details=dc.replace(r.details, tests=[flipped] + r.details.tests[1:]))
    with pytest.raises(AssertionError):
        assert_crossvocab_sampling_lines_follow(wrong, *args)
