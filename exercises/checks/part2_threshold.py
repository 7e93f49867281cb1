"""Part 2, threshold drafting (seed 000): exercise 6 (drafting while confident), 7 (the threshold update)
and 8 (seed 000's index)."""

import numpy as np

from stats import Stats
from gpt2 import softmax
from kvcache import KVCache

from .models import tiny_pair
from .running import Exercise, StillBuggy, attempt, integers, number, project, show, unchanged, wrong


# ---------------------------------------------------------------------------
# Exercise 6: drafting while confident (threshold.py, step 1)
# ---------------------------------------------------------------------------

def greedy_chain(draft, tokens, n):
    """The draft's n greedy guesses after tokens, and the cumulative probability of each prefix of them."""
    guesses, cumulative, p = [], [], 1.0
    for _ in range(n):
        probs = softmax(draft.forward(tokens + guesses)[-1])
        guesses.append(int(np.argmax(probs)))
        p *= float(probs[guesses[-1]])
        cumulative.append(p)
    return guesses, cumulative


def check_draft_while_confident(f):
    from threshold import threshold_generate
    draft, oracle = tiny_pair()
    n_new = 30
    for threshold, boost, n_draft in [(0.4, 0.1, 16), (0.05, 0.3, 5), (0.05, 0.3, 2)]:
        for seed in range(2):
            ids = np.random.default_rng(seed).integers(0, oracle.vocab_size, 5).tolist()
            stats = Stats(trace=[])
            tokens = ids + list(threshold_generate(draft, oracle, ids, n_new, n_draft=n_draft, threshold=threshold,
                                                   threshold_all_correct_boost=boost, stats=stats))
            for r, record in enumerate(stats.trace, 1):
                context, t = tokens[:record.context_length], record.details.threshold
                k_limit = min(n_draft, len(ids) + n_new - record.context_length - 1)
                call = f"draft_while_confident(draft, <text of {record.context_length} tokens>, k_limit={k_limit}, threshold={t:.3f})"
                given = list(context)
                got = attempt(call, f, draft, given, k_limit, t)
                unchanged(call, {"tokens": (context, given)})  # threshold.py's caller goes on with its tokens
                got = integers(call, got, "a token id")
                if got != record.drafted:
                    raise diagnose_drafting(draft, context, k_limit, t, record.drafted, got,
                                            f"round {r} of threshold.py's run (n_draft={n_draft}, starting threshold "
                                            f"{threshold}): with the text of {record.context_length} tokens, k_limit = {k_limit} and "
                                            f"threshold {t:.3f},")


def diagnose_drafting(draft, context, k_limit, threshold, expected, got, where):
    what = f"{where} threshold.py drafts {expected}, your draft_while_confident {got}"
    if len(got) > k_limit:
        return wrong(f"{what}: {len(got)} guess(es), but at most k_limit = {k_limit} are allowed",
                     "the loop's limit on the number of guesses (k_limit is what threshold.py's n_draft and n_new leave)")
    guesses, cumulative = greedy_chain(draft, context, max(len(expected), len(got), 1) + 1)
    chain = f"\nthe draft's greedy guesses {guesses} have cumulative probabilities {show(cumulative)}"
    if got != guesses[:len(got)]:
        return wrong(what + chain, "each guess is the draft's argmax after the text and all the earlier guesses")
    if len(got) == len(expected) - 1:
        return wrong(f"{what}: one guess short{chain}; threshold.py also proposes the guess that takes the cumulative "
                     "probability below the threshold: it is computed already, and checking it costs the oracle little",
                     "when the loop tests the cumulative probability: before a new guess, or after it")
    if len(got) == len(expected) + 1:
        return wrong(f"{what}: one guess too many{chain}; after the guess that took the cumulative probability below "
                     "the threshold, threshold.py stops",
                     "the probability the loop tests must include the newest guess")
    return wrong(f"{what}{chain}; drafting goes on while the product of the guesses' probabilities so far (the "
                 "probability of the whole guess) is at least the threshold",
                 "what the loop multiplies, and what it compares with the threshold")


# ---------------------------------------------------------------------------
# Exercises 7 and 8: the threshold update, and seed 000's index
# ---------------------------------------------------------------------------

def clamp(threshold):
    from threshold import THRESHOLD_MAX, THRESHOLD_MIN
    return min(max(threshold, THRESHOLD_MIN), THRESHOLD_MAX)


def check_next_threshold(f):
    cases = [((0.4, [0.9, 0.6, 0.3], 2, 0.1), 0.5), ((0.4, [0.9, 0.6], 0, 0.1), 0.7),
             ((0.4, [0.9, 0.6], 2, 0.1), 0.3), ((0.5, [0.8, 0.4, 0.2, 0.1], 1, 0.1), 0.65),
             ((0.1, [0.9], 1, 0.1), 0.05), ((0.95, [0.99, 0.98], 0, 0.1), 0.95),
             ((0.6, [0.9, 0.8], 2, 0.25), 0.35), ((0.5, [0.7, 0.2], 1, 0.3), 0.6),  # boost varies too
             # figures that are not multiples of anything convenient, as the draft's probabilities are
             ((0.437, [0.913, 0.6271, 0.3389], 2, 0.1), 0.53205), ((0.5123, [0.8777, 0.4], 2, 0.0731), 0.4392),
             ((0.2718, [0.7391], 0, 0.1), 0.6359)]
    results = []
    for args, expected in cases:
        call = f"next_threshold{args}"
        results.append((args, expected, number(call, attempt(call, f, *args))))
    failures = [(args, expected, got) for args, expected, got in results if abs(got - expected) > 1e-6]
    if not failures:
        return
    args, expected, got = failures[0]
    threshold, cumulative, n_accepted, boost = args
    what = f"next_threshold{args} returned {got:.4g}, expected {expected}"
    if all(abs(got - seed000_threshold(t, c, n, len(c), b)) < 1e-6 for (t, c, n, b), _, got in results):
        raise wrong(f"{what}: your update is seed 000's, copied as it is. But the seed's n_accepted also counts the "
                    "oracle's own token, one more than this function's: copied here, the update moves toward "
                    "cumulative[-1] when nothing was accepted, and takes a round in which every draft was accepted "
                    "for a rejection (n_accepted <= n_draft)",
                    "exercise 8, which is about this very line: what the seed's n_accepted counts")
    rejected = n_accepted < len(cumulative)
    digits = next((d for d in range(1, 5) if abs(got - round(expected, d)) < 1e-9), None)
    if digits is not None:
        raise wrong(f"{what}: that is the threshold rounded to {digits} decimal{'s' if digits > 1 else ''}",
                    "return the threshold as computed: it is compared with products of the draft's probabilities, "
                    "which are not rounded")
    last = cumulative[n_accepted - 1] if n_accepted else 1.0
    if rejected and abs(got - clamp(last)) < 1e-6:
        raise wrong(f"{what}: it moved all the way to the cumulative probability of the last accepted draft, {last}",
                    "halfway toward it: the mean of the threshold and that probability")
    if rejected and abs(got - clamp((threshold + cumulative[n_accepted]) / 2)) < 1e-6:
        raise wrong(f"{what}: it moved halfway toward cumulative[{n_accepted}] = {cumulative[n_accepted]}, the "
                    "cumulative probability of the first REJECTED draft. That is what seed 000's code computes, but "
                    "its comment, and threshold.py, say: the last accepted draft",
                    "exercise 8, which is about exactly this index")
    if rejected and n_accepted == 0 and abs(got - clamp((threshold + cumulative[-1]) / 2)) < 1e-6:
        raise wrong(f"{what}: with nothing accepted it moved toward cumulative[-1] = {cumulative[-1]}, Python's "
                    "LAST element. The last accepted prefix is empty here, and an empty guess has probability 1.0",
                    "what cumulative[n_accepted - 1] means when n_accepted is 0")
    if not rejected and boost != 0.1 and abs(got - clamp(threshold - 0.1)) < 1e-6:
        raise wrong(f"{what}: every draft was accepted, and it lowered the threshold by 0.1 (seed 000's default), "
                    f"not by boost = {boost}", "the argument boost: the function is called with other values")
    if not 0.05 <= got <= 0.95 or expected in (0.05, 0.95):
        hint = "the threshold must stay within [0.05, 0.95]"
    elif rejected:
        hint = "after a rejection, move halfway toward the cumulative probability of the last accepted draft"
    else:
        hint = "when every draft was accepted, lower the threshold by boost"
    raise wrong(what, hint)


def seed000_threshold(threshold, drafted_probs, n_accepted, n_draft, boost):
    """What seed 000's update computes, as written there: the shipped bug the checker recognises."""
    if n_accepted <= n_draft:
        threshold = (threshold + drafted_probs[n_accepted - 1]) / 2
    else:
        threshold -= boost
    return clamp(threshold)


def check_seed_threshold(f):
    # In the seed's counting, n_accepted = accepted drafts + 1 (the oracle's own token).
    cases = [((0.4, [0.9, 0.6, 0.3], 3, 3, 0.1), 0.5), ((0.4, [0.9, 0.6], 1, 2, 0.1), 0.7),
             ((0.4, [0.9, 0.6], 3, 2, 0.1), 0.3), ((0.5, [0.8, 0.4, 0.2, 0.1], 2, 4, 0.1), 0.65),
             ((0.1, [0.9], 2, 1, 0.1), 0.05), ((0.6, [0.9, 0.8], 3, 2, 0.25), 0.35),
             ((0.437, [0.913, 0.6271, 0.3389], 3, 3, 0.1), 0.53205), ((0.2718, [0.7391], 1, 1, 0.1), 0.6359)]
    results = []
    for args, expected in cases:
        call = f"update_threshold{args}"
        got = number(call, attempt(call, f, *args, hints=(
            (IndexError, "drafted_probs has n_draft entries, and the seed's n_accepted counts the oracle's own token "
                         "too: after a round in which every draft was accepted it is n_draft + 1"),)))
        results.append((args, expected, got))
    failures = [(args, expected, got) for args, expected, got in results if abs(got - expected) > 1e-6]
    if not failures:
        return
    if all(abs(got - seed000_threshold(*args)) < 1e-6 for args, _, got in results):
        raise StillBuggy(wrong("update_threshold(0.4, [0.9, 0.6, 0.3], 3, 3, 0.1), a round in which 2 of 3 drafts "
                               "were accepted, returns 0.35; moving toward the last accepted draft, as its comment "
                               "says, gives 0.5",
                               "what n_accepted counts, then which draft drafted_probs[n_accepted - 1] is").args[0])
    args, expected, got = failures[0]
    threshold, probs, n_accepted, n_draft, boost = args
    what = (f"update_threshold{args} returned {got:.4g}, expected {expected} ({n_accepted - 1} of {n_draft} drafts "
            "accepted)")
    digits = next((d for d in range(1, 5) if abs(got - round(expected, d)) < 1e-9), None)
    if digits is not None:
        raise wrong(f"{what}: that is the threshold rounded to {digits} decimal{'s' if digits > 1 else ''}",
                    "return the threshold as computed: the seed's update does not round")
    last = probs[n_accepted - 2] if n_accepted > 1 else 1.0
    if n_accepted <= n_draft and abs(got - clamp(last)) < 1e-6:
        raise wrong(f"{what}: it moved all the way to the cumulative probability of the last accepted draft, {last}",
                    "halfway toward it, as the seed's line does: (threshold + that probability) / 2")
    if n_accepted == 1 and abs(got - clamp((threshold + probs[-1]) / 2)) < 1e-6:
        raise wrong(f"{what}: with no draft accepted (n_accepted = 1, the oracle's token alone) it moved toward "
                    f"drafted_probs[-1] = {probs[-1]}, Python's LAST element. The last accepted prefix is empty: "
                    "probability 1.0", "the index when n_accepted is 1")
    if n_accepted == n_draft + 1:
        if boost != 0.1 and abs(got - clamp(threshold - 0.1)) < 1e-6:
            raise wrong(f"{what}: every draft was accepted, and it lowered the threshold by 0.1, not by boost = {boost}",
                        "the argument boost: the function is called with other values than seed 000's default")
        raise wrong(f"{what}: every draft was accepted here", "the branch taken when all drafts were accepted")
    if abs(got - clamp(threshold - boost)) < 1e-6:
        raise wrong(f"{what}: it lowered the threshold by boost, as after a round in which every draft was accepted; "
                    f"here a draft was rejected (n_accepted = {n_accepted} of the seed's counting, n_draft = {n_draft})",
                    "the branch's test: which values of the seed's n_accepted mean a rejection, given that it counts "
                    "the oracle's own token too")
    raise wrong(f"{what}: the last accepted draft is drafted_probs[{n_accepted - 2}] = {probs[n_accepted - 2]}",
                "which draft's cumulative probability the update moves toward, in the seed's counting of n_accepted")


def reference_draft_while_confident():
    from threshold import draft_while_confident
    return lambda draft, tokens, k_limit, threshold: draft_while_confident(draft, KVCache(), tokens, k_limit, threshold, Stats())[0]


def reference_seed_threshold():
    from threshold import next_threshold
    # The seed's n_accepted counts the oracle's token too: threshold.py's is one less.
    return lambda threshold, drafted_probs, n_accepted, n_draft, boost: next_threshold(
        threshold, drafted_probs, n_accepted - 1, boost)


EXERCISES = (
    Exercise("06", "ex06_threshold_drafting", "draft_while_confident", check_draft_while_confident,
             reference_draft_while_confident),
    Exercise("07", "ex07_threshold_update", "next_threshold", check_next_threshold, project("threshold", "next_threshold")),
    Exercise("08", "ex08_seed_threshold", "update_threshold", check_seed_threshold, reference_seed_threshold),
)
