"""Part 2, threshold drafting (the threshold notes): exercise 6 (drafting while confident), 7 (the threshold update)
and 8 (the threshold notes' index)."""

import copy

import numpy as np

from stats import Stats
from gpt2 import softmax
from kvcache import KVCache

from .contract import in_float32, rounded
from .models import tiny_pair
from .running import Exercise, StillBuggy, attempt, confirmed, project, show, wrong


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
                k = min(n_draft, len(ids) + n_new - record.context_length - 1)
                call = (f"draft_while_confident(draft, <text of {record.context_length} tokens>, k={k}, "
                        f"threshold={t:.3f})")
                got = attempt(call, f, draft, list(context), k, t, hints=((IndexError, GUESS),))
                if got != record.drafted:
                    what, hint = explain_drafting((draft, context, k, t), got, record.drafted)
                    raise wrong(f"round {r} of threshold.py's run (n_draft={n_draft}, starting threshold {threshold}): "
                                f"with the text of {record.context_length} tokens, k = {k} and threshold "
                                f"{t:.3f}, threshold.py drafts {record.drafted}, your draft_while_confident {got}: "
                                f"{what}", hint)


GUESS = ("each guess is a token id below the vocabulary's size: np.argmax(probs) of the last row's distribution, "
         "softmax(logits[-1]) (an argmax over the whole [n, V] array counts its entries row after row)")


def explain_drafting(args, got, expected, f=None):
    """(what went wrong, where to look) for draft_while_confident(*args) = got, where threshold.py drafts expected."""
    draft, context, k, threshold = args
    if len(got) > k:
        return (f"{len(got)} guess(es), but at most k = {k} are allowed", "the loop's limit on the number "
                "of guesses (k is what threshold.py's n_draft and n_new leave)")
    guesses, cumulative = greedy_chain(draft, list(context), max(len(expected), len(got), 1) + 1)
    chain = f"the draft's greedy guesses {guesses} have cumulative probabilities {show(cumulative)}"
    before = [1.0] + cumulative  # the cumulative probability each guess is tested with
    above = next((n for n in range(min(k, len(cumulative)) + 1) if n == k or not before[n] > threshold),
                 None)
    after = next((n for n in range(1, min(k, len(cumulative)) + 1) if n == k or not before[n] > threshold), None)
    if (got == guesses[:above] and above != len(expected)) or (k and got == guesses[:after] and after != len(expected)):
        return (f"that is drafting while the cumulative probability is ABOVE the threshold: it stopped where the "
                f"probability equals the threshold (`>` in the loop's test, a break on `<=` after a guess, or a "
                f"probability computed otherwise, in logs or in float32, that rounds below it); {chain}, and "
                f"threshold.py goes on while it is at least the threshold",
                "`>=`, not `>`: the text says \"at least\"; compare the product of the probabilities itself")
    if got != guesses[:len(got)]:
        return chain, "each guess is the draft's argmax after the text and all the earlier guesses"
    if len(got) == len(expected) - 1:
        return (f"one guess short; {chain}; threshold.py also proposes the guess that takes the cumulative "
                "probability below the threshold: it is computed already, and checking it costs the oracle little",
                "when the loop tests the cumulative probability: before a new guess, or after it")
    if len(got) == len(expected) + 1:
        return (f"one guess too many; {chain}; after the guess that took the cumulative probability below the "
                "threshold, threshold.py stops", "the probability the loop tests must include the newest guess")
    return (f"{chain}; drafting goes on while the product of the guesses' probabilities so far (the probability of "
            "the whole guess) is at least the threshold", "what the loop multiplies, and what it compares with the "
                                                          "threshold")


# ---------------------------------------------------------------------------
# Exercises 7 and 8: the threshold update, and the threshold notes' index
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
        results.append((args, expected, attempt(call, f, *copy.deepcopy(args))))
    failures = [(args, expected, got) for args, expected, got in results if abs(got - expected) > 1e-6]
    if not failures:
        return
    args, expected, got = failures[0]
    if all(abs(got - notes_threshold(t, c, n, len(c), b)) < 1e-6 for (t, c, n, b), _, got in results):
        raise wrong(f"next_threshold{args} returned {got:.4g}, expected {expected}: your update is the threshold notes', copied "
                    "as it is. But the notes' n_accepted also counts the oracle's own token, one more than this "
                    "function's: copied here, the update moves toward cumulative[-1] when nothing was accepted, and "
                    "takes a round in which every draft was accepted for a rejection (n_accepted <= n_draft)",
                    "exercise 8, which is about this very line: what the notes' n_accepted counts")
    what, hint = in_float32(got, expected) or explain_threshold(args, got, expected, f)
    what, hint = (what, hint) if what else rounded(got, expected) or (what, hint)
    raise wrong(f"next_threshold{args} returned {told(got, expected)}" + (f": {what}" if what else ""), hint)


UPDATES = [(0.4, [0.9, 0.6, 0.3], 1, 0.1), (0.5123, [0.8777, 0.4], 1, 0.0731),  # a draft kept, then one rejected
           (0.2718, [0.7391, 0.5], 0, 0.2), (0.3, [0.6], 0, 0.15),  # nothing kept
           (0.6, [0.9, 0.8, 0.7], 3, 0.25), (0.45, [0.8], 1, 0.05)]  # every draft kept: a diagnosis holds on these too


def reference_threshold(threshold, cumulative, n_accepted, boost):
    if n_accepted == len(cumulative):
        return clamp(threshold - boost)
    return clamp((threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2)


def explain_threshold(args, got, expected, f=None):
    """(what went wrong, where to look) for next_threshold(*args) = got: the usual mistakes that give exactly got
    here and, where f is given, on other rounds too (all of them where several do)."""
    threshold, cumulative, n_accepted, boost = args
    rejected = n_accepted < len(cumulative)
    last = cumulative[n_accepted - 1] if n_accepted else 1.0
    digits = next((d for d in range(1, 5) if abs(got - round(expected, d)) < 1e-9), None)

    def otherwise(rule, when):  # the update with `rule` where `when` holds, right elsewhere
        return lambda t, c, n, b: rule(t, c, n, b) if when(t, c, n, b) else reference_threshold(t, c, n, b)
    clean = (lambda t, c, n, b: n == len(c))
    toward_rejected = lambda t, c, n, b: clamp((t + c[n]) / 2)  # noqa: E731
    lower = lambda t, c, n, b: clamp(t - b)  # noqa: E731
    said = [  # (whether it can be, [its rules: any one of them], what it is, where to look)
        (digits is not None, [lambda *a: round(reference_threshold(*a), digits)],
         f"that is the threshold rounded to {digits} decimal{'s' if digits != 1 else ''}",
         "return the threshold as computed: it is compared with products of the draft's probabilities, which are "
         "not rounded"),
        (bool(cumulative), [lambda t, c, n, b: notes_threshold(t, c, n, len(c), b) if c else reference_threshold(t, c, n, b)],
         "that is the threshold notes' update, copied as it is; but the notes' n_accepted also counts the oracle's own token, "
         "one more than this function's", "exercise 8, which is about this very line: what the notes' n_accepted "
                                          "counts"),
        (rejected, [otherwise(lambda t, c, n, b: clamp(c[n - 1] if n else 1.0), lambda t, c, n, b: n < len(c))],
         f"it moved all the way to the cumulative probability of the last accepted draft, {last}",
         "halfway toward it: the mean of the threshold and that probability"),
        (rejected, [otherwise(toward_rejected, lambda t, c, n, b: n < len(c)),
                    otherwise(toward_rejected, lambda t, c, n, b: n == 0 < len(c))],
         f"it moved halfway toward cumulative[{n_accepted}] = {cumulative[n_accepted] if rejected else None}, the "
         "cumulative probability of the first REJECTED draft. That is what the threshold notes' code computes, but its comment, "
         "and threshold.py, say: the last accepted draft", "exercise 8, which is about exactly this index"),
        (rejected and n_accepted == 0, [otherwise(lambda t, c, n, b: clamp((t + c[-1]) / 2), lambda t, c, n, b: n == 0 < len(c))],
         f"with nothing accepted it moved toward cumulative[-1] = {cumulative[-1] if cumulative else None}, Python's "
         "LAST element. The last accepted prefix is empty here, and an empty guess has probability 1.0",
         "what cumulative[n_accepted - 1] means when n_accepted is 0"),
        (not rejected and boost != 0.1, [otherwise(lambda t, c, n, b: clamp(t - 0.1), clean)], f"every draft was "
         f"accepted, and it lowered the threshold by 0.1 (the threshold notes' default), not by boost = {boost}",
         "the argument boost: the function is called with other values"),
        (not rejected, [otherwise(lambda t, c, n, b: clamp(t + b), clean)], "every draft was accepted, and it RAISED "
         "the threshold by boost", "after a clean sweep the threshold goes down, so that the next round drafts further"),
        (rejected, [otherwise(lower, lambda t, c, n, b: n >= len(c) - 1), otherwise(lower, lambda t, c, n, b: True)],
         f"it lowered the threshold by boost, as after a round in which every draft was accepted; here a draft was "
         f"rejected (n_accepted = {n_accepted}, of {len(cumulative)} drafts)", "the test for a clean sweep: "
         "every draft accepted is n_accepted == len(cumulative), nothing less"),
        (rejected, [otherwise(lambda t, c, n, b: clamp(t - ((c[n - 1] if n else 1.0) - t) / 2),
                              lambda t, c, n, b: n < len(c))],
         f"it moved AWAY from the cumulative probability of the last accepted draft, {last}, not toward it",
         "halfway toward it: (threshold + that probability) / 2"),
        (got in (0.05, 0.95), [lambda t, c, n, b: got], f"it gives the clamp's bound {got} whatever the round: the "
         "clamp's min and max swapped", "keep it within [0.05, 0.95]: min(max(threshold, 0.05), 0.95)"),
    ]
    matches = [(what, hint) for found, rules, what, hint in said  # each rule says what it does on every round
               if found and any(abs(rule(*args) - got) < 1e-9 and confirmed(f, rule, UPDATES, near_enough)
                                for rule in rules)]
    if matches:
        return "; or ".join(what for what, _ in matches), "; or ".join(hint for _, hint in matches)
    if not 0.05 <= got <= 0.95 or expected in (0.05, 0.95):
        return "", "the threshold must stay within [0.05, 0.95]"
    if rejected:
        return "", "after a rejection, move halfway toward the cumulative probability of the last accepted draft"
    return "", "when every draft was accepted, lower the threshold by boost"


def told(got, expected):
    """'0.53, expected 0.53205', in as many digits as tell the two apart."""
    said = f"{got:.4g}", f"{expected:.6g}"
    return f"{said[0]}, expected {said[1]}" if float(said[0]) != float(said[1]) else f"{got!r}, expected {expected!r}"


def near_enough(a, b):
    return abs(a - b) < 1e-9


def notes_threshold(threshold, drafted_probs, n_accepted, n_draft, boost):
    """What the threshold notes' update computes, as written there: the shipped bug the checker recognises."""
    if n_accepted <= n_draft:
        threshold = (threshold + drafted_probs[n_accepted - 1]) / 2
    else:
        threshold -= boost
    return clamp(threshold)


# In the notes' counting, n_accepted = accepted drafts + 1 (the oracle's own token).
SEED_CASES = [((0.4, [0.9, 0.6, 0.3], 3, 3, 0.1), 0.5), ((0.4, [0.9, 0.6], 1, 2, 0.1), 0.7),
              ((0.4, [0.9, 0.6], 3, 2, 0.1), 0.3), ((0.5, [0.8, 0.4, 0.2, 0.1], 2, 4, 0.1), 0.65),
              ((0.1, [0.9], 2, 1, 0.1), 0.05), ((0.6, [0.9, 0.8], 3, 2, 0.25), 0.35),
              ((0.437, [0.913, 0.6271, 0.3389], 3, 3, 0.1), 0.53205), ((0.2718, [0.7391], 1, 1, 0.1), 0.6359),
              # the clamp after a rejection too: halfway toward 0.99 is above 0.95, toward 0.02 below 0.05
              ((0.95, [0.99, 0.5], 2, 2, 0.1), 0.95), ((0.06, [0.02, 0.01], 2, 2, 0.1), 0.05)]


def check_notes_index(f):
    results = []
    for args, expected in SEED_CASES:
        call = f"update_threshold{args}"
        got = attempt(call, f, *copy.deepcopy(args), hints=(
            (IndexError, "drafted_probs has n_draft entries, and the notes' n_accepted counts the oracle's own token "
                         "too: after a round in which every draft was accepted it is n_draft + 1"),))
        results.append((args, expected, got))
    failures = [(args, expected, got) for args, expected, got in results if abs(got - expected) > 1e-6]
    if not failures:
        return
    args, expected, got = failures[0]
    what, hint = in_float32(got, expected) or explain_seed(args, got, expected)
    what, hint = (what, hint) if what else rounded(got, expected) or (what, hint)
    raise wrong(f"update_threshold{args} returned {told(got, expected)} ({args[2] - 1} of {args[3]} drafts "
                f"accepted)" + (f": {what}" if what else ""), hint)


def explain_seed(args, got, expected, f=None):
    """(what went wrong, where to look) for update_threshold(*args) = got, the notes' n_accepted counting the
    oracle's own token too."""
    threshold, probs, n_accepted, n_draft, boost = args
    digits = next((d for d in range(1, 5) if abs(got - round(expected, d)) < 1e-9), None)
    if digits is not None:
        return (f"that is the threshold rounded to {digits} decimal{'s' if digits != 1 else ''}",
                "return the threshold as computed: the notes' update does not round")
    if 1 <= n_accepted <= n_draft and abs(got - clamp((threshold + probs[n_accepted - 1]) / 2)) < 1e-9:
        return (f"it moved halfway toward drafted_probs[{n_accepted - 1}] = {probs[n_accepted - 1]}, the cumulative "
                "probability of the first REJECTED draft: the notes' index as it is (or threshold.py's update given "
                "the notes' n_accepted, which counts the oracle's own token too)",
                "what the notes' n_accepted counts, then which draft drafted_probs[n_accepted - 1] is")
    last = probs[n_accepted - 2] if n_accepted > 1 else 1.0
    if not 0.05 <= got <= 0.95:
        return (f"{got:.6g} is outside [0.05, 0.95]", "the clamp, after either branch: min(max(threshold, 0.05), 0.95) "
                "(the notes' last lines)")
    if n_accepted <= n_draft and abs(got - clamp(threshold - (last - threshold) / 2)) < 1e-9 and last != threshold:
        return (f"it moved AWAY from the cumulative probability of the last accepted draft, {last}, not toward it",
                "halfway toward it, as the notes' line does: (threshold + that probability) / 2")
    if n_accepted <= n_draft and abs(got - clamp(last)) < 1e-6:
        return (f"it moved all the way to the cumulative probability of the last accepted draft, {last}",
                "halfway toward it, as the notes' line does: (threshold + that probability) / 2")
    if n_accepted == 1 and abs(got - clamp((threshold + probs[-1]) / 2)) < 1e-6:
        return (f"with no draft accepted (n_accepted = 1, the oracle's token alone) it moved toward drafted_probs[-1] "
                f"= {probs[-1]}, Python's LAST element. The last accepted prefix is empty: probability 1.0",
                "the index when n_accepted is 1")
    if n_accepted == n_draft + 1:
        if boost != 0.1 and abs(got - clamp(threshold - 0.1)) < 1e-6:
            return (f"every draft was accepted, and it lowered the threshold by 0.1, not by boost = {boost}",
                    "the argument boost: the function is called with other values than the threshold notes' default")
        return "every draft was accepted here", "the branch taken when all drafts were accepted"
    if abs(got - clamp(threshold - boost)) < 1e-6:
        return (f"it lowered the threshold by boost, as after a round in which every draft was accepted; here a draft "
                f"was rejected (n_accepted = {n_accepted} of the notes' counting, n_draft = {n_draft})",
                "the branch's test: which values of the notes' n_accepted mean a rejection, given that it counts the "
                "oracle's own token too")
    if n_accepted == 1:
        return (f"no draft was accepted (n_accepted = 1, the oracle's token alone), so the accepted prefix is empty "
                f"and its probability is 1.0: halfway from {threshold} to 1.0 is {expected:.6g}",
                "the index when n_accepted is 1: there is no last accepted draft")
    return (f"the last accepted draft is drafted_probs[{n_accepted - 2}] = {probs[n_accepted - 2]}",
            "which draft's cumulative probability the update moves toward, in the notes' counting of n_accepted")


def shipped_notes_index(f):
    """StillBuggy if f is the threshold notes' update as shipped: it gives what the notes' line gives on every case."""
    for args, _ in SEED_CASES:
        if abs(attempt(f"update_threshold{args}", f, *copy.deepcopy(args)) - notes_threshold(*args)) > 1e-9:
            return
    raise StillBuggy(wrong("update_threshold(0.4, [0.9, 0.6, 0.3], 3, 3, 0.1), a round in which 2 of 3 drafts were "
                           "accepted, returns 0.35; moving toward the last accepted draft, as its comment says, gives 0.5",
                           "what n_accepted counts, then which draft drafted_probs[n_accepted - 1] is").args[0])


def reference_draft_while_confident():
    from threshold import draft_while_confident
    return lambda draft, tokens, k, threshold: draft_while_confident(draft, KVCache(), tokens, k, threshold, Stats())[0]


def reference_notes_index():
    from threshold import next_threshold
    # The notes' n_accepted counts the oracle's token too: threshold.py's is one less.
    return lambda threshold, drafted_probs, n_accepted, n_draft, boost: next_threshold(
        threshold, drafted_probs, n_accepted - 1, boost)


EXERCISES = (
    Exercise("06", "ex06_threshold_drafting", "draft_while_confident", check_draft_while_confident,
             reference_draft_while_confident),
    Exercise("07", "ex07_threshold_update", "next_threshold", check_next_threshold, project("threshold", "next_threshold")),
    Exercise("08", "ex08_notes_index", "update_threshold", check_notes_index, reference_notes_index,
             shipped_notes_index),
)
