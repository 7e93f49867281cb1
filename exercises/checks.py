"""The checks behind `pytest exercises/`: each takes an implementation and fails with a staged hint.

A failure says first what went wrong, on a concrete input (what your function
gave, what it should give), then, on a line of its own, where to look. The
hint never gives the answer away; EXERCISES.md has the answers, folded.

EXERCISES maps each hands-on exercise's number to its file, the function you
write there, its check, and its reference: the project's own function (or a
thin adapter over it), which `pytest exercises/ --reference` checks instead of
your file. The project's test suite runs that too, so an exercise cannot drift
away from the code it teaches.
"""

import atexit
import functools
import itertools
import math
import os
import shutil
import sys
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from weights import checkpoint  # noqa: E402
import gpt2  # noqa: E402
from decoding import Stats  # noqa: E402
from gpt2 import MASKED, softmax  # noqa: E402
from kvcache import KVCache  # noqa: E402


# ---------------------------------------------------------------------------
# Running a check: "not solved yet", wrong answers, crashes
# ---------------------------------------------------------------------------

class NotSolved(AssertionError):
    """The exercise is untouched: its stub raises NotImplementedError, or the shipped bug is still there."""


class StillBuggy(Exception):
    """Raised by a check when the answer does exactly what the bug the file was shipped with does."""


def check(number, f):
    """Run exercise `number`'s check on f; AssertionError (NotSolved for an untouched exercise) if it fails."""
    exercise = EXERCISES[number]
    try:
        exercise.check(f)
    except NotImplementedError:
        raise NotSolved(not_solved(exercise)) from None
    except StillBuggy as e:
        raise NotSolved(f"{not_solved(exercise)}\n{e}") from None


def not_solved(exercise):
    return f"exercise {exercise.number} is not solved yet: see EXERCISES.md, then edit exercises/{exercise.module}.py"


def wrong(what, hint):
    """A failure in two stages: what went wrong (observed vs expected), then where to look."""
    return AssertionError(f"{what}\n  where to look: {hint}")


def attempt(call_text, f, *args, hint=None, hints=()):
    """f(*args), with a crash turned into a one-paragraph failure naming the line of your file.
    hints ((exception type, hint), ...) choose the hint by the exception's type; hint is the one otherwise."""
    try:
        return f(*args)
    except NotImplementedError:
        raise
    except Exception as e:
        raise crash(call_text, e, next((h for kind, h in hints if isinstance(e, kind)), hint)) from None


def crash(call_text, e, hint=None):
    where = in_your_file(e)
    return wrong(crashed(call_text, e), hint or ("the line named above" if where else
                                                 "call it yourself on this input and read the traceback"))


def crashed(call_text, e):
    """'f(...) raised ValueError: ... (exercises/exNN_x.py, line 12: `code`)'."""
    return f"{call_text} raised {type(e).__name__}{f': {e}' if str(e) else ''}{in_your_file(e)}"


def in_your_file(e):
    """' (exercises/exNN_x.py, line 12: `code`)' for the deepest frame in an exercise file, else ''."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.basename(f.filename).startswith("ex")
              and os.path.dirname(os.path.abspath(f.filename)) == os.path.join(ROOT, "exercises")]
    if not frames:
        return ""
    f = frames[-1]
    return f" (exercises/{os.path.basename(f.filename)}, line {f.lineno}: `{f.line}`)"


def number(call, value):
    """value as a float, or a failure saying what came back instead."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise wrong(f"{call} returned {value!r}, not a number", "what the function returns on every path") from None


def span(first, last):
    """'position 4' or 'positions 4..6'."""
    return f"position {first}" if first == last else f"positions {first}..{last}"


def show(values, digits=3):
    """A list of numbers, rounded for a message."""
    return "[" + ", ".join(f"{float(v):.{digits}g}" for v in values) + "]"


# ---------------------------------------------------------------------------
# Tiny models, made once per run in a temporary directory
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def models_dir():
    base = tempfile.mkdtemp(prefix="exercises-")
    atexit.register(shutil.rmtree, base, True)
    return base


@functools.lru_cache(maxsize=1)
def tiny_pair():
    """A tiny random oracle and a draft that is a noisy copy of it (so they agree often, not always)."""
    base = models_dir()
    config = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 1024, "vocab_size": 272}
    oracle_dir = checkpoint.random_checkpoint(os.path.join(base, "oracle"), config, seed=2, scale=0.3)
    tensors = checkpoint.load_safetensors(os.path.join(oracle_dir, "model.safetensors"))
    rng = np.random.default_rng(0)
    draft_dir = os.path.join(base, "draft")
    os.makedirs(draft_dir)
    shutil.copy(os.path.join(oracle_dir, "config.json"), draft_dir)
    checkpoint.save_safetensors(os.path.join(draft_dir, "model.safetensors"), {k: t.shape for k, t in tensors.items()},
                                lambda k: tensors[k] + np.float32(0.015) * rng.standard_normal(tensors[k].shape, dtype=np.float32))
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir)


SAMPLING_V = 6  # small enough to enumerate every 3-token continuation (6^3 of them), as tests/test_sps.py does


@functools.lru_cache(maxsize=1)
def sampling_pair():
    """A draft p and a target q over a vocabulary of 6 tokens: the SpS checks enumerate their distributions."""
    config = {"n_head": 2, "n_embd": 16, "n_positions": 16, "vocab_size": SAMPLING_V}
    return tuple(gpt2.GPT2.from_pretrained(checkpoint.random_checkpoint(
        os.path.join(models_dir(), name), {**config, "n_layer": n_layer}, seed=seed, scale=0.5))
        for name, seed, n_layer in (("p", 21, 1), ("q", 22, 2)))


# ---------------------------------------------------------------------------
# Exercise 3: the accepted prefix
# ---------------------------------------------------------------------------

def check_accepted_prefix_length(f):
    cases = [([5, 7, 9], [5, 7, 2, 4], 2), ([5, 7, 9], [5, 7, 9, 4], 3), ([5, 7, 9], [1, 7, 9, 4], 0),
             ([5, 7, 9], [5, 1, 9, 4], 1), ([], [3], 0), ([0, 0], [0, 1, 2], 1), ([4], [4, 4], 1)]
    for drafted, oracle_choice, expected in cases:
        call = f"accepted_prefix_length({drafted}, {oracle_choice})"
        all_match = expected == len(drafted)
        got = attempt(call, f, list(drafted), list(oracle_choice),
                      hint="when every draft matches, all len(drafted) of them are accepted: the count stops at the "
                           "end of drafted" if all_match else None)
        if got == expected:
            continue
        if all_match and expected > 0:
            hint = "when every draft matches the oracle, all of them are accepted: count up to len(drafted)"
        elif 0 in drafted:
            hint = "token id 0 is a token like any other (a test such as `if drafted[n]` treats it as missing)"
        elif got is not None and got > expected:
            hint = "stop at the first disagreement: a later draft that happens to match is not kept"
        else:
            hint = "count the drafts from the first for as long as drafted[i] == oracle_choice[i]"
        raise wrong(f"{call} returned {got}, expected {expected}", hint)


# ---------------------------------------------------------------------------
# Exercise 4: rolling back the KV caches
# ---------------------------------------------------------------------------

class FakeCache(KVCache):
    """A KV cache that only has a length: all rollback() may look at."""

    def __init__(self, n):
        super().__init__()
        self.length = n


def check_rollback(f):
    for lengths, n_kept, expected in [((10, 8), 9, (9, 8)), ((12, 12), 12, (12, 12)), ((5,), 0, (0,)),
                                      ((20, 17, 3), 17, (17, 17, 3)), ((7, 9), 7, (7, 7))]:
        caches = [FakeCache(n) for n in lengths]
        call = f"rollback({n_kept}, caches of {', '.join(map(str, lengths))} positions)"
        attempt(call, f, n_kept, *caches,
                hint="a cache shorter than n_kept must be left as it is: the draft's cache is one short when it never "
                     "fed its own last guess, and KVCache.truncate(n) refuses to lengthen")
        got = tuple(c.n_tokens() for c in caches)
        if got == expected:
            continue
        i = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
        what = f"{call} left {', '.join(map(str, got))}; expected {', '.join(map(str, expected))}"
        if got[i] < expected[i]:
            raise wrong(f"{what}: cache {i + 1} was cut too short. It had {lengths[i]} positions and must keep "
                        f"{expected[i]}; {span(got[i], expected[i] - 1)} "
                        f"{'belongs' if got[i] == expected[i] - 1 else 'belong'} to tokens that stay in the text, "
                        "and their keys and values are gone",
                        "how many positions truncate(n) keeps, and how many tokens n_kept counts")
        raise wrong(f"{what}: cache {i + 1} still holds {got[i] - expected[i]} position(s) past the first {expected[i]}: "
                    "keys and values of drafts the oracle rejected",
                    "every cache passed in must end up holding at most n_kept positions")


# ---------------------------------------------------------------------------
# Exercise 5: the KV-cache bug
# ---------------------------------------------------------------------------

@dataclass
class OracleCall:
    held: int    # positions the cache held when the forward began (None: no cache)
    fed: list    # the token ids the forward was given
    text: list   # the text so far: the prompt and every token the generator had yielded


class Spy:
    """Stands in for the oracle: passes every call on, noting what the cache held and what was fed."""

    def __init__(self, model, text):
        self.model, self.text, self.calls = model, text, []

    def __getattr__(self, name):  # vocab_size, n_positions, ...
        return getattr(self.model, name)

    def forward(self, ids, kvcache=None, *args, **kwargs):
        fed = [int(t) for t in np.asarray(ids).reshape(-1)]
        self.calls.append(OracleCall(None if kvcache is None else kvcache.n_tokens(), fed, list(self.text)))
        return self.model.forward(ids, kvcache, *args, **kwargs)


def cache_problem(call):
    """What is wrong with the oracle's cache at this call, or None. The cache must hold a prefix of
    the text that leaves the newest token out, and the forward must go on from there."""
    if call.held is None:
        return None
    n = len(call.text)
    if call.held > n - 1:
        return "long"
    gap = call.text[call.held:]
    m = min(len(gap), len(call.fed))  # a forward may also feed only part of the gap (the prompt but its last token)
    if call.fed[:m] != gap[:m]:
        return "short"
    return None


def check_speculative_generate(f):
    from speculative import greedy_generate
    draft, oracle = tiny_pair()
    n_new = 30
    for seed in range(3):
        ids = np.random.default_rng(seed).integers(0, oracle.vocab_size, 5).tolist()
        expected = list(greedy_generate(oracle, ids, n_new))
        for n_draft in (2, 4, 7):
            text = list(ids)
            spy = Spy(oracle, text)
            got, error = [], None
            try:
                for token in itertools.islice(f(draft, spy, ids, n_new, n_draft), n_new + n_draft + 2):
                    got.append(int(token))
                    text.append(int(token))
            except NotImplementedError:
                raise
            except Exception as e:
                error = e
            first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), None)
            if error is None and first is None and len(got) == n_new:
                continue
            raise diagnose_generator(ids, n_new, n_draft, expected, got, first, error, spy.calls)


def diagnose_generator(ids, n_new, n_draft, expected, got, first, error, calls):
    setting = f"with n_draft={n_draft}, {n_new} new tokens after the prompt {ids}"
    if error is not None:
        what = crashed(f"{setting}: your generator, after {len(got)} tokens,", error)
    elif first is not None:
        what = (f"{setting}: token {first} is {got[first]}, but greedy decoding gives {expected[first]}"
                + (" (token 0 agrees)" if first == 1 else f" (the {first} before it agree)" if first else ""))
    elif len(got) > n_new:
        what = f"{setting}: got {len(got)} tokens (or more), {len(got) - n_new} more than asked; the first {n_new} are right"
    else:
        what = f"{setting}: got only {len(got)} tokens, all right, then the generator stopped"

    rounds = [c for c in calls if c.held is not None]
    bad = next(((r, c) for r, c in enumerate(rounds) if cache_problem(c)), None)
    if bad is not None:
        r, c = bad
        n = len(c.text)
        seen = (f"when the oracle's forward began (its call {r + 1}, the text then {n} tokens long), its cache held "
                f"{c.held} positions; it should hold {n - 1}, every token but the newest, which that forward feeds")
        never_truncated = all(b.held == a.held + len(a.fed) for a, b in zip(rounds, rounds[1:]))
        if cache_problem(c) == "long":
            if never_truncated:  # the file as shipped: say what goes wrong, not why
                raise StillBuggy(wrong(what, "run `python exercises/ex05_cache_bug.py`, then compare what each model's "
                                             "cache holds after step 4 with the text").args[0])
            return wrong(f"{what}\n{seen}. The {c.held - (n - 1)} extra position(s) hold keys and values of drafts the "
                         "oracle rejected: the next tokens attend to text that is not there, at shifted positions",
                         "step 4 of the round: what each cache must hold once the round's tokens are known")
        missing = c.text[c.held:n - 1]
        return wrong(f"{what}\n{seen}. The oracle never reads token(s) {missing} at {span(c.held, n - 2)}: its "
                     f"cache was cut {n - 1 - c.held} position(s) too short",
                     "step 4: which positions of the oracle's cache belong to tokens that stay in the text")
    if error is not None:
        return wrong(what, "KVCache.truncate(n) only shortens a cache: n must be at most n_tokens()"
                     if isinstance(error, ValueError) and "truncate" in str(error) else
                     "the line named above" if in_your_file(error) else "the traceback of your generator")
    if first is None and len(got) > n_new and rounds:
        last = rounds[-1]
        made = len(last.text) - len(ids)
        return wrong(f"{what}\nthe last round began with {made} of {n_new} tokens made, so it could add "
                     f"{n_new - made}; it drafted {len(last.fed) - 1}, and a round adds up to n_draft + 1 tokens "
                     "(the drafts it keeps, then the oracle's own)",
                     "step 1: how many tokens a round may draft when few are left")
    return wrong(f"{what}\nthe oracle's cache held the right number of positions in every round",
                 "step 3: which tokens the round keeps (the agreeing drafts, then the oracle's choice after them)")


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
    for threshold, boost, max_draft in [(0.4, 0.1, 16), (0.05, 0.3, 5), (0.05, 0.3, 2)]:
        for seed in range(2):
            ids = np.random.default_rng(seed).integers(0, oracle.vocab_size, 5).tolist()
            stats = Stats(trace=[])
            tokens = ids + list(threshold_generate(draft, oracle, ids, n_new, max_draft=max_draft, threshold=threshold,
                                                   threshold_all_correct_boost=boost, stats=stats))
            for r, record in enumerate(stats.trace, 1):
                context, t = tokens[:record.context], record.details["threshold"]
                k_max = min(max_draft, len(ids) + n_new - record.context - 1)
                call = f"draft_while_confident(draft, <text of {record.context} tokens>, k_max={k_max}, threshold={t:.3f})"
                got = [int(x) for x in attempt(call, f, draft, list(context), k_max, t)]
                if got != record.drafted:
                    raise diagnose_drafting(draft, context, k_max, t, record.drafted, got,
                                            f"round {r} of threshold.py's run (max_draft={max_draft}, starting threshold "
                                            f"{threshold}): with the text of {record.context} tokens, k_max = {k_max} and "
                                            f"threshold {t:.3f},")


def diagnose_drafting(draft, context, k_max, threshold, expected, got, where):
    what = f"{where} threshold.py drafts {expected}, your draft_while_confident {got}"
    if len(got) > k_max:
        return wrong(f"{what}: {len(got)} guess(es), but at most k_max = {k_max} are allowed",
                     "the loop's limit on the number of guesses (k_max is what max_draft and n_new leave)")
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
             ((0.1, [0.9], 1, 0.1), 0.05), ((0.95, [0.99, 0.98], 0, 0.1), 0.95)]
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
    if rejected and abs(got - clamp((threshold + cumulative[n_accepted]) / 2)) < 1e-6:
        raise wrong(f"{what}: it moved halfway toward cumulative[{n_accepted}] = {cumulative[n_accepted]}, the "
                    "cumulative probability of the first REJECTED draft. That is what seed 000's code computes, but "
                    "its comment, and threshold.py, say: the last accepted draft",
                    "exercise 8, which is about exactly this index")
    if rejected and n_accepted == 0 and abs(got - clamp((threshold + cumulative[-1]) / 2)) < 1e-6:
        raise wrong(f"{what}: with nothing accepted it moved toward cumulative[-1] = {cumulative[-1]}, Python's "
                    "LAST element. The last accepted prefix is empty here, and an empty guess has probability 1.0",
                    "what cumulative[n_accepted - 1] means when n_accepted is 0")
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
             ((0.1, [0.9], 2, 1, 0.1), 0.05)]
    results = []
    for args, expected in cases:
        call = f"update_threshold{args}"
        got = number(call, attempt(call, f, *args))
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
    if n_accepted == 1 and abs(got - clamp((threshold + probs[-1]) / 2)) < 1e-6:
        raise wrong(f"{what}: with no draft accepted (n_accepted = 1, the oracle's token alone) it moved toward "
                    f"drafted_probs[-1] = {probs[-1]}, Python's LAST element. The last accepted prefix is empty: "
                    "probability 1.0", "the index when n_accepted is 1")
    if n_accepted == n_draft + 1:
        raise wrong(f"{what}: every draft was accepted here", "the branch taken when all drafts were accepted")
    raise wrong(f"{what}: the last accepted draft is drafted_probs[{n_accepted - 2}] = {probs[n_accepted - 2]}",
                "which draft's cumulative probability the update moves toward, in the seed's counting of n_accepted")


# ---------------------------------------------------------------------------
# Exercise 9: temperature and top-k
# ---------------------------------------------------------------------------

def check_probabilities(f):
    logits = np.array([1.0, 3.0, 2.0, 0.0, -1.0, 2.5], np.float32)
    plain = softmax(logits)
    cases = [(logits, 1.0, None), (logits, 0.5, None), (logits, 2.0, None), (logits, 0, None),
             (np.array([1.0, 3.0, 3.0, 0.0], np.float32), 0, None), (logits * np.float32(30), 1e-40, None),
             (logits, 1.0, 2), (logits, 0.5, 3), (logits, 1.0, 6), (logits, 1.0, 10),
             (logits, 1e-50, None)]  # below the smallest float32: last, the subtlest
    reference = EXERCISES["09"].reference()
    for x, temperature, top_k in cases:
        call = f"probabilities({show(x, 3)}, temperature={temperature}, top_k={top_k})"
        with np.errstate(all="ignore"):
            got = attempt(call, f, x.copy(), temperature, top_k)
        expected = reference(x, temperature, top_k)
        got = np.asarray(got)
        if got.shape != expected.shape:
            raise wrong(f"{call} returned shape {got.shape}, expected {expected.shape}", "one probability per token")
        if got.dtype != np.float32:
            raise wrong(f"{call} returned {got.dtype} values, expected float32",
                        "which operation brings in float64 (a np.float64 scalar, np.exp of a float64 array, ...)")
        if np.allclose(got, expected, atol=1e-5):
            continue
        what = f"{call} returned {show(got)}, expected {show(expected)}"
        if not np.all(np.isfinite(got)):
            if temperature == 0:
                raise wrong(f"{what}: temperature 0 means greedy, all the mass on the argmax",
                            "temperature 0 needs its own case: dividing by it is not defined")
            if np.float32(temperature) == 0:
                raise wrong(f"{what}: {temperature} is below the smallest float32, so np.float32({temperature}) is 0, "
                            "and 0 / 0 is NaN", "divide by at least np.finfo(np.float32).smallest_subnormal")
            raise wrong(f"{what}: logits / {temperature} overflow float32 to +inf, and softmax of inf is NaN",
                        "softmax does not change when you subtract the largest logit: do that before dividing")
        if temperature == 0:
            raise wrong(f"{what}: temperature 0 puts all the mass on the argmax (the first one on a tie)", "np.argmax")
        if abs(float(got.sum()) - 1) > 1e-4:
            raise wrong(f"{what}: they add up to {float(got.sum()):.4g}, not 1", "renormalise after cutting tokens")
        if top_k is not None and top_k < len(x) and np.count_nonzero(got) != top_k:
            raise wrong(f"{what}: {np.count_nonzero(got)} tokens keep some mass, top_k = {top_k} should",
                        "everything below the k-th largest logit gets probability 0")
        if top_k is None and temperature != 1.0 and np.argmax(x) == np.argmax(got):
            top, ours = float(expected.max()), float(got.max())
            direction = "sharper" if temperature < 1 else "flatter"
            raise wrong(f"{what}: at temperature {temperature} the distribution gets {direction} than at temperature 1 "
                        f"(the top token {float(plain.max()):.3g} -> {top:.3g}); yours gives it {ours:.3g}",
                        "whether the logits are divided or multiplied by the temperature, and before or after softmax")
        raise wrong(what, "temperature first (logits / temperature), then top-k, then softmax")


# ---------------------------------------------------------------------------
# Exercises 11-13: the residual, the inverted ratio, the acceptance rate
# ---------------------------------------------------------------------------

def check_residual(f):
    from sps import residual
    rng = np.random.default_rng(0)
    pairs = [tuple(rng.dirichlet(np.ones(12)).astype(np.float32) for _ in range(2)) for _ in range(20)]
    pairs.insert(0, (np.array([0.2, 0.5, 0.3], np.float32), np.array([0.4, 0.2, 0.4], np.float32)))
    for q, p in pairs:
        call = f"residual(q={show(q)}, p={show(p)})"
        with np.errstate(all="ignore"):
            r = np.asarray(attempt(call, f, q.copy(), p.copy()))
        expected = residual(q, p)
        if r.shape == expected.shape and np.allclose(r, expected, atol=1e-6):
            continue
        what = f"{call} returned {show(r)}, expected {show(expected)}"
        if r.shape == q.shape and np.any(r[q < p] > 0):
            raise wrong(f"{what}: it puts mass on tokens the draft p over-proposes (p > q)",
                        "the residual is the mass the target q has and the draft p lacks: max(q - p, 0)")
        if r.shape == q.shape and abs(float(r.sum()) - 1) > 1e-4:
            raise wrong(f"{what}: it adds up to {float(r.sum()):.4g}, not 1", "renormalise: divide by the sum")
        raise wrong(what, "max(q - p, 0), renormalised to sum to 1")
    same = np.array([0.2, 0.5, 0.3], np.float32)
    call = f"residual(q={show(same)}, p=q)"
    with np.errstate(all="ignore"):
        r = np.asarray(attempt(call, f, same, same.copy()))
    if not np.all(np.isfinite(r)):
        raise wrong(f"{call} returned {show(r)}: here (q - p)+ is all zeros, and 0 / 0 is NaN",
                    "the case where max(q - p, 0) sums to 0: which distribution is right then? (EXERCISES.md)")
    if not np.allclose(r, same):
        raise wrong(f"{call} returned {show(r)}, expected q = {show(same)}: when (q - p)+ is all zeros, return q",
                    "why q is the right answer is in exercise 11's answer")


def emitted(p, q, keep):
    """P(one SpS step emits x) for a draft x ~ p kept with probability keep[x], else resampled from the residual."""
    from sps import residual
    keep = np.asarray(keep, np.float32)
    return p * keep + (1 - float(np.sum(p * keep))) * residual(q, p)


def check_keep_draft(f):
    """keep_draft(p, q, x, r): p the draft's distribution, q the target's, r ~ U[0, 1)."""
    from sps import acceptance_probability
    cases = [(np.array([0.6, 0.3, 0.1], np.float32), np.array([0.3, 0.3, 0.4], np.float32)),
             (np.array([0.5, 0.5, 0.0], np.float32), np.array([0.0, 0.2, 0.8], np.float32))]
    grid = (np.arange(400) + 0.5) / 400  # r spread evenly over [0, 1): the share kept is P(keep)
    seen = []
    for p, q in cases:
        kept = []
        for x in np.flatnonzero(p):
            call = f"keep_draft(p={show(p)}, q={show(q)}, x={x}, r)"
            with np.errstate(all="ignore"):
                kept.append(float(np.mean([bool(attempt(f"{call} with r = {r:.4f}", f, p, q, int(x), float(r)))
                                           for r in grid])))
        xs = np.flatnonzero(p)
        seen.append((p, q, xs, kept))
    inverted = all(abs(k - min(1.0, p[x] / q[x] if q[x] > 0 else math.inf)) < 0.01
                   for p, q, xs, kept in seen for x, k in zip(xs, kept))
    for p, q, xs, kept in seen:
        expected = [acceptance_probability(q, p, x) for x in xs]
        bad = next((i for i, (k, e) in enumerate(zip(kept, expected)) if abs(k - e) > 0.01), None)
        if bad is None:
            continue
        x = xs[bad]
        keep = np.zeros_like(p)
        keep[xs] = kept
        out = emitted(p, q, keep)
        what = (f"for draft token x = {x} with p(x) = {p[x]:.2g} (draft) and q(x) = {q[x]:.2g} (target), keep_draft "
                f"keeps it for {kept[bad]:.0%} of r in [0, 1); Algorithm 2 keeps it with probability "
                f"min(1, q(x)/p(x)) = {expected[bad]:.0%}. With your test one step emits the distribution "
                f"{show(out, 2)}, not the target's q = {show(q, 2)}")
        if inverted:
            raise StillBuggy(wrong(what, "which of the two models proposes x more often than the target wants it, "
                                         "and what the test must then do").args[0])
        if abs(kept[bad] - (1 - expected[bad])) < 0.01:
            raise wrong(f"{what}: it keeps exactly when it should reject", "the direction of the comparison with r")
        raise wrong(what, "the acceptance test of step 3 in Chen et al.'s letters: q is the target, p the draft")


def check_acceptance_rate(f):
    from sps import acceptance_probability, sample
    rng = np.random.default_rng(3)
    cases = [(np.array([0.5, 0.3, 0.2], np.float32), np.array([0.2, 0.3, 0.5], np.float32)),
             (np.array([0.25, 0.25, 0.5], np.float32), np.array([0.25, 0.25, 0.5], np.float32)),
             (np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)),
             (np.array([0.5, 0.5, 0.0], np.float32), np.array([0.0, 0.2, 0.8], np.float32))]
    cases += [tuple(rng.dirichlet(np.ones(10)).astype(np.float32) for _ in range(2)) for _ in range(4)]
    reference = EXERCISES["13"].reference()
    for p, q in cases:
        call = f"acceptance_rate(p={show(p, 2)}, q={show(q, 2)})"
        got = number(call, attempt(call, f, p.copy(), q.copy()))
        expected = reference(p, q)
        if abs(got - expected) < 1e-5:
            continue
        n = 20000
        kept = sum(rng.random() < acceptance_probability(q, p, sample(p, rng)) for _ in range(n))
        what = (f"{call} returned {got:.4g}, expected {expected:.4g}: one simulated SpS step (x ~ p, kept when "
                f"r < min(1, q(x)/p(x))), run {n} times, kept the draft {kept / n:.1%} of the time")
        if abs(got - float(np.dot(p, q))) < 1e-5:
            raise wrong(f"{what}; sum p(x) q(x) is the chance that two independent draws, one from each, agree",
                        "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)")
        if abs(got - (1 - float(np.abs(p - q).sum()))) < 1e-5:
            raise wrong(f"{what}; 1 - sum |p - q| counts every difference twice: the total variation distance is "
                        "half of sum |p - q|", "how often a draft is kept, given what the test keeps")
        raise wrong(what, "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)")


# ---------------------------------------------------------------------------
# Exercise 15: a whole round of Algorithm 2
# ---------------------------------------------------------------------------

def sequence_distribution(model, ids, n_new, probabilities=softmax):
    """{continuation: probability} of n_new tokens sampled from the model, by enumeration.
    probabilities: logits [n, V] -> probabilities [n, V] (softmax, or a processors.Processor)."""
    dist = {}
    for seq in itertools.product(range(model.vocab_size), repeat=n_new):
        probs = probabilities(model.forward(list(ids) + list(seq[:-1]))[len(ids) - 1:])
        dist[seq] = float(np.prod([probs[i, t] for i, t in enumerate(seq)]))
    return dist


def chi_square(counts, dist, n):
    """Pearson's test of n samples (counts) against dist: (chi2, critical value at alpha = 0.001, the
    continuation furthest above its expectation). Continuations expected fewer than 5 times are pooled."""
    seqs = list(dist)
    expected = n * np.array([dist[s] for s in seqs])
    observed = np.array([counts.get(s, 0) for s in seqs])
    rare = expected < 5
    if rare.any():
        expected = np.append(expected[~rare], expected[rare].sum())
        observed = np.append(observed[~rare], observed[rare].sum())
    impossible = sum(c for s, c in counts.items() if dist.get(s, 0) == 0)
    chi2 = math.inf if impossible else float(np.sum((observed - expected) ** 2 / np.maximum(expected, 1e-12)))
    df = len(expected) - 1
    # Wilson-Hilferty approximation of the chi-square quantile; z = 3.09 for alpha = 0.001.
    critical = df * (1 - 2 / (9 * df) + 3.0902 * math.sqrt(2 / (9 * df))) ** 3
    worst = max(seqs, key=lambda s: (counts.get(s, 0) - n * dist[s]) / math.sqrt(n * dist[s] + 1e-12))
    return chi2, critical, worst


def sps_rounds(f, p_model, q_model, ids, K):
    """f's round from ids, checked for its shape: 1 to K + 1 token ids."""
    call = f"sps_round(draft, oracle, {ids}, K={K}, rng)"

    def run(rng):
        out = [int(x) for x in attempt(call, f, p_model, q_model, list(ids), K, rng)]
        if not 1 <= len(out) <= K + 1 or not all(0 <= x < SAMPLING_V for x in out):
            raise wrong(f"{call} returned {out}: a round adds 1 to K + 1 = {K + 1} token ids in [0, {SAMPLING_V})",
                        "a round ends with exactly one token of the target's: a resample, or the bonus")
        return out
    return run


def check_sps_round(f, n_rounds=300, n_runs=500, K=2, n_new=3):
    from sps import acceptance_rate
    p_model, q_model = sampling_pair()
    ids, V = [1, 4], SAMPLING_V
    rng = np.random.default_rng(1234)

    # 1. The shape of a round: P(its first draft is kept) = alpha; P(all K kept), both exact.
    lengths = Counter(len(sps_rounds(f, p_model, q_model, ids, K)(rng)) for _ in range(n_rounds))
    p1, q1 = softmax(p_model.forward(ids)[-1]), softmax(q_model.forward(ids)[-1])
    alpha = acceptance_rate(q1, p1)
    inverted = float(sum(p1[x] * min(1.0, p1[x] / q1[x]) for x in range(V)))
    all_kept = alpha if K == 1 else sum(float(min(p1[x], q1[x])) * float(np.minimum(
        softmax(p_model.forward(ids + [x])[-1]), softmax(q_model.forward(ids + [x])[-1])).sum()) for x in range(V))
    setting = f"over {n_rounds} rounds from the prompt {ids} with K = {K} (draft p and target q over {V} tokens)"
    first_kept = n_rounds - lengths[1]
    if abs(first_kept - n_rounds * alpha) > 4.5 * math.sqrt(n_rounds * alpha * (1 - alpha)):
        looks = (f" (with the ratio inverted, min(1, p/q), it would be {inverted:.1%})"
                 if abs(first_kept / n_rounds - inverted) < abs(first_kept / n_rounds - alpha) else "")
        raise wrong(f"{setting}, your round kept its first draft in {first_kept / n_rounds:.1%} of them; Algorithm 2 "
                    f"keeps it with probability sum_x min(p(x), q(x)) = {alpha:.1%} here{looks}",
                    "step 3's test r < min(1, q(x~)/p(x~)), q the target (the oracle), p the draft")
    full = lengths[K + 1]
    if abs(full - n_rounds * all_kept) > 4.5 * math.sqrt(n_rounds * all_kept * (1 - all_kept)):
        raise wrong(f"{setting}, {full} of your rounds added K + 1 = {K + 1} tokens ({full / n_rounds:.1%}); all K "
                    f"drafts are kept with probability {all_kept:.1%} here, and then the round adds one more token "
                    "from q", "step 4: what a round does when every draft was kept")

    # 2. What comes out: rounds until n_new tokens (any prefix of the output follows q), against q exactly.
    counts = Counter()
    for _ in range(n_runs):
        new = []
        while len(new) < n_new:
            new += sps_rounds(f, p_model, q_model, ids + new, K)(rng)
        counts[tuple(new[:n_new])] += 1
    target = sequence_distribution(q_model, ids, n_new)
    chi2, critical, worst = chi_square(counts, target, n_runs)
    if chi2 > critical:
        first = Counter(seq[0] for seq in counts.elements())
        raise wrong(f"over {n_runs} runs of your rounds from the prompt {ids} (K = {K}), the first {n_new} tokens do "
                    f"not follow the target's distribution: chi-square {chi2:.0f} > {critical:.0f} (alpha = 0.001). "
                    f"The first token came out {show([first[x] / n_runs for x in range(V)], 2)}, q says "
                    f"{show(q1, 2)}; the continuation {list(worst)} came {counts.get(worst, 0)} times, where q "
                    f"expects {n_runs * target[worst]:.0f}",
                    "what each draw samples from: the drafts from p, the resample from (q - p)+ renormalised, the "
                    "bonus from q after all K drafts")


# ---------------------------------------------------------------------------
# Exercise 16: prompt lookup
# ---------------------------------------------------------------------------

def occurrences(tokens, n):
    """Start positions of earlier occurrences of the last n tokens (not the tail itself)."""
    return [s for s in range(len(tokens) - n) if tokens[s:s + n] == tokens[-n:]]


def check_lookup(f):
    cases = [([1, 2, 3, 9, 1, 2, 3], 3, 3), ([5, 6, 7, 5, 6, 8, 5, 6], 2, 3), ([2, 3, 4, 9, 9, 3, 4, 7, 2, 3, 4], 2, 3),
             ([1, 2, 3, 4], 3, 3), ([7], 2, 3), ([0, 4, 0, 5, 0], 2, 3), ([1, 2, 1, 2], 5, 3),
             ([3, 1, 2, 8, 1, 2], 4, 1), ([4, 5, 6, 4, 5, 6, 4, 5, 6], 2, 3)]
    reference = EXERCISES["16"].reference()
    for tokens, k, max_tail in cases:
        call = f"lookup({tokens}, k={k}, max_tail={max_tail})"
        got = [int(x) for x in attempt(call, f, list(tokens), k, max_tail)]
        expected = reference(list(tokens), k, max_tail)
        if got == expected:
            continue
        what = f"{call} returned {got}, expected {expected}"
        n = next((n for n in range(min(max_tail, len(tokens) - 1), 0, -1) if occurrences(tokens, n)), None)
        if n is None:
            raise wrong(f"{what}: no earlier occurrence of even the last token, so there is nothing to propose",
                        "what lookup returns when nothing matches")
        starts = occurrences(tokens, n)
        found = f": the last {n} token(s) {tokens[-n:]} occur earlier at position(s) {starts}"
        if len(got) > k:
            raise wrong(f"{what}: more than k = {k} guesses", "the cut at k")
        if got == tokens[starts[0] + n:starts[0] + n + k] and len(starts) > 1:
            raise wrong(f"{what}{found}; prompt lookup takes the LATEST (the most recent evidence), you took the first",
                        "the direction of the search")
        if n > 1 and any(got == tokens[s + m:s + m + k] for m in range(1, n) for s in occurrences(tokens, m)):
            raise wrong(f"{what}{found}; the longest matching tail (up to max_tail) wins over shorter ones",
                        "the order in which n is tried")
        if not got:
            raise wrong(f"{what}{found}", "whether the search range excludes the tail itself (it always matches)")
        raise wrong(f"{what}{found}; propose up to k tokens that followed the latest one", "the slice after the match")


# ---------------------------------------------------------------------------
# Exercise 18: the tree attention mask
# ---------------------------------------------------------------------------

def ancestors(nodes, i):
    path = []
    while nodes[i].parent != -1:
        i = nodes[i].parent
        path.append(i)
    return path


def check_tree_mask(f):
    from tree import Node
    #        text .. root ─┬─ 0 ─┬─ 2 ── 5
    #                      │     └─ 3
    #                      └─ 1 ── 4
    nodes = [Node(11, -1, 1), Node(12, -1, 1), Node(13, 0, 2), Node(14, 0, 2), Node(15, 1, 2), Node(16, 2, 3)]
    line = [Node(21, -1, 1), Node(22, 0, 2), Node(23, 1, 3)]
    cases = [(nodes, list(range(6)), 4, 0), (nodes, [0, 1], 4, 0), (nodes, [2, 3, 4], 4, 2), (nodes, [5], 3, 5),
             (line, [0, 1, 2], 2, 0)]
    from tree import tree_mask
    for tree, new, n_text, n_fed in cases:
        call = f"tree_mask(<{len(tree)} nodes>, new={new}, n_text={n_text}, n_fed={n_fed})"
        got = np.asarray(attempt(call, f, tree, new, n_text, n_fed))
        expected = tree_mask(tree, new, n_text, n_fed)
        if got.shape != expected.shape:
            raise wrong(f"{call} returned shape {got.shape}, expected {expected.shape}",
                        "one row per new node; one column per position its keys can come from: the n_text tokens of "
                        "the text, the n_fed nodes already in the cache, then the new nodes")
        if got.dtype != np.float32:
            raise wrong(f"{call} returned {got.dtype}, expected float32", "the dtype of the array you fill")
        visible = got == 0
        hidden = got <= MASKED
        if not np.all(visible | hidden):
            row, col = np.argwhere(~(visible | hidden))[0]
            raise wrong(f"{call}: entry [{row}, {col}] is {got[row, col]}; use 0 (visible) or gpt2.MASKED (hidden)",
                        "the two values a mask holds")
        wrong_cells = np.argwhere(visible != (expected == 0))
        if len(wrong_cells) == 0:
            continue
        row, col = wrong_cells[0]
        i = new[row]
        should_see = bool(expected[row, col] == 0)
        if col < n_text:
            about = f"column {col} is text, which every node sees"
        else:
            j = col - n_text
            relation = ("itself" if j == i else f"its ancestor (node {i}'s path up: {ancestors(tree, i)})"
                        if j in ancestors(tree, i) else
                        f"not on its path to the root (node {i}'s ancestors are {ancestors(tree, i)})")
            about = f"column {col} is node {j}, {relation}"
        parent = "a child of the root" if tree[i].parent == -1 else f"child of node {tree[i].parent}"
        raise wrong(f"{call}: row {row} (node {i}, {parent}, depth {tree[i].depth}) "
                    f"{'hides' if should_see else 'sees'} column {col}; {about}",
                    "a node sees the text, its ancestors and itself, never a sibling, a cousin or a descendant; "
                    "node i's keys sit in column n_text + i")


# ---------------------------------------------------------------------------
# Part 6, on the learned pair (assets/learned-pair: English, the Python documentation)
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def learned_pair():
    """(draft, oracle, encode): the shipped learned pair, written from assets/ into this run's directory."""
    from weights.demo_pair import build_pair
    from weights.tokenizer import encode, load_tokenizer
    draft_dir, oracle_dir = build_pair(models_dir())
    enc = load_tokenizer(oracle_dir)
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir), lambda text: encode(enc, text)


@functools.lru_cache(maxsize=1)
def held_out_prompts():
    """((kind, prompt ids), ...): the first held-out prompt of each kind, cut to 24 tokens (a quick check)."""
    import json
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    encode, kinds = learned_pair()[2], {}
    for entry in prompts:
        kinds.setdefault(entry["kind"], tuple(encode(entry["prompt"])[:24]))
    return tuple(kinds.items())


# --- exercise 22: acceptance by kind of text -----------------------------------

@functools.lru_cache(maxsize=None)
def speculative_run(ids, n_new, k):
    """The Stats of greedy speculative decoding of n_new tokens after ids (a tuple), k drafts a round, on the learned pair."""
    from speculative import speculative_generate
    draft, oracle, _ = learned_pair()
    stats = Stats()
    list(speculative_generate(draft, oracle, list(ids), n_new, n_draft=k, stats=stats))
    return stats


def speculative_runs(prompts, n_new, k):
    """[(kind, Stats)]: greedy speculative decoding on each (kind, ids) of prompts, on the learned pair."""
    return [(kind, speculative_run(tuple(ids), n_new, k)) for kind, ids in prompts]


def rate(runs, top=lambda s: s.accepted, bottom=lambda s: s.drafted):
    """sum(top) / sum(bottom) over the runs' Stats (None when the bottom is 0)."""
    total = sum(bottom(s) for _, s in runs)
    return sum(top(s) for _, s in runs) / total if total else None


def check_acceptance_by_kind(f):
    draft, oracle, _ = learned_pair()
    prompts = list(held_out_prompts())
    n_new, k = 16, 4
    # One kind gets a second prompt whose drafts differ from the first prompt's in number and in rate: then
    # pooling the kind's counts and averaging its prompts' rates give different figures.
    first = speculative_run(prompts[0][1], n_new, k)

    def differs(ids):
        other = speculative_run(ids, n_new, k)
        return other.drafted != first.drafted and other.accepted * first.drafted != first.accepted * other.drafted
    second = next((ids for _, ids in prompts[1:] if differs(ids)), prompts[1][1])
    cases = prompts + [(prompts[0][0], second)]
    kinds = list(dict.fromkeys(kind for kind, _ in cases))
    call = (f"acceptance_by_kind(draft, oracle, <{len(cases)} prompts of the kinds "
            f"{', '.join(kind for kind, _ in cases)}>, n_new={n_new}, k={k})")
    got = attempt(call, f, draft, oracle, [(kind, list(ids)) for kind, ids in cases], n_new, k, hints=(
        (ZeroDivisionError, "speculative_generate is a generator: it decodes, and fills its Stats, only as you "
                            "iterate over it (list(...) or a for loop); until then stats.drafted is 0"),))
    if not isinstance(got, dict) or set(got) != set(kinds):
        raise wrong(f"{call} returned {got!r}; expected a dict with one entry per kind: {kinds}",
                    "the kinds are the keys, one entry per kind however many prompts it has")
    runs = speculative_runs(cases, n_new, k)
    for kind in kinds:
        mine = [(kd, s) for kd, s in runs if kd == kind]
        expected = rate(mine)
        value = number(f"{call}[{kind!r}]", got[kind])
        if math.isclose(value, expected, abs_tol=1e-9):
            continue
        drafted, accepted = sum(s.drafted for _, s in mine), sum(s.accepted for _, s in mine)
        what = (f"{call}: for {kind!r} ({len(mine)} prompt{'s' if len(mine) > 1 else ''}) you gave {value:.4f}, "
                f"expected {expected:.4f}: {accepted} of its {drafted} drafts were kept")
        last = max(i for i, (kd, _) in enumerate(runs) if kd == kind)
        suspects = [
            (len(mine) > 1 and sum(rate([r]) for r in mine) / len(mine),
             f"that is the mean of its prompts' rates, {show([rate([r]) for r in mine], 4)}, which weighs a prompt "
             "with few drafts like one with many", "pool the kind's counts (its accepted, its drafted), then divide once"),
            (len(mine) > 1 and rate(mine[-1:]), "that is its last prompt's rate alone: the earlier prompt's counts were "
             "replaced, not added to", "add each prompt's counts to its kind's running totals"),
            (len(mine) > 1 and rate(mine[:1]), "that is its first prompt's rate alone: the later prompt's counts were "
             "dropped", "add each prompt's counts to its kind's running totals"),
            (rate(runs[:last + 1]), f"that is the acceptance of the first {last + 1} prompts together, up to this kind's "
             "last one: one Stats carried over from prompt to prompt mixes the kinds",
             "a fresh decoding.Stats() for each prompt"),
            (rate(mine, bottom=lambda s: s.n_tokens), f"that is the share of its {sum(s.n_tokens for _, s in mine)} new "
             "tokens that were drafts", "divide by the drafts proposed (stats.drafted): every round adds one token of "
             "the oracle's own, whether its drafts were kept or not"),
            (rate(mine, bottom=lambda s: s.accepted + s.rejections), "that is accepted / (accepted + rejections), "
             "Leviathan et al.'s alpha (exercise 23's)", "the drafts kept over ALL the drafts proposed: stats.drafted"),
        ]
        for candidate, said, hint in suspects:
            if candidate is not False and candidate is not None and not math.isclose(candidate, expected, abs_tol=1e-9) \
                    and math.isclose(value, candidate, abs_tol=1e-9):
                raise wrong(f"{what}; {said}", hint)
        default = rate(speculative_runs([case for case in cases if case[0] == kind], n_new, 8))
        if default is not None and not math.isclose(default, expected, abs_tol=1e-9) \
                and math.isclose(value, default, abs_tol=1e-9):
            raise wrong(f"{what}; that is its acceptance with 8 drafts per round, speculative_generate's default",
                        "pass the draft length: n_draft=k")
        raise wrong(what, "a kind's acceptance is stats.accepted over stats.drafted, added up over its prompts, each "
                          "decoded with n_new tokens and n_draft=k")


# --- exercise 23: the best draft length ------------------------------------------

@functools.lru_cache(maxsize=1)
def learned_alpha():
    """The learned pair's alpha on the held-out prompts, as Leviathan et al. define it (each draft kept with
    probability alpha once the ones before it were): accepted / (accepted + rejections), a rejection ending a round."""
    runs = speculative_runs(held_out_prompts(), 16, 4)
    return rate(runs, bottom=lambda s: s.accepted + s.rejections)


def best_by(score, Ks):
    """The K with the highest score, the smallest on a tie."""
    return max(Ks, key=lambda K: (score(K), -K))


def check_best_draft_length(f):
    from speed.predict import expected_tokens_per_round, predicted_speedup
    flat = {k: 10.0 for k in range(1, 12)}
    steep = {k: 10.0 * (1 + 0.25 * (k - 1)) for k in range(1, 12)}
    cpu = {1: 4.0, 2: 4.3, 3: 4.6, 4: 5.1, 5: 5.4, 6: 6.0, 7: 6.3, 8: 6.9, 9: 7.4}  # a small model's, uneven
    step = {1: 10.0, 2: 10.0, 3: 20.0, 4: 20.0}  # a kernel that changes at 3 rows
    cases = [(0.8, 0.1, {1: 10.0, 2: 12.0, 3: 13.0}), (0.5, 0.2, steep), (0.9, 0.05, flat), (0.7, 0.25, cpu),
             (0.8, 0.1, step),
             (1.0, 0.1, steep), (0.0, 0.1, flat), (0.0, 0.0, flat), "learned", "learned flat"]
    for case in cases:
        if isinstance(case, str):  # the learned pair's alpha, measured here, with a CPU-like curve and a flat one
            case = (learned_alpha(), 0.3, cpu) if case == "learned" else (learned_alpha(), 0.1, flat)
        alpha, c, T = case
        Ks = range(1, max(T))
        call = f"best_draft_length(alpha={alpha:.4g}, c={c}, T={{{', '.join(f'{k}: {v:g}' for k, v in T.items())}}})"
        got = attempt(call, f, alpha, c, dict(T), hints=(
            (ZeroDivisionError, "with alpha = 1 every draft is kept: a round yields K + 1 tokens, and the formula's "
                                "(1 - alpha^(K+1)) / (1 - alpha) is 0 / 0 there"),
            (KeyError, f"K runs from 1 to max(T) - 1 = {max(T) - 1}: the check of K drafts reads K + 1 tokens, and "
                       "T[K + 1] must be measured")))
        tokens = lambda K: expected_tokens_per_round(alpha, K)  # noqa: E731
        speed = {K: predicted_speedup(alpha, K, c, T[K + 1] / T[1]) for K in Ks}
        best = best_by(speed.get, Ks)
        if isinstance(got, (float, np.floating)) and float(got).is_integer():
            got = int(got)
        if got == best and not isinstance(got, bool):
            continue
        what = f"{call} returned {got!r}, expected K = {best} (predicted speedup {speed[best]:.4f})"
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise wrong(what, "return the draft length K itself, not its score or a list")
        if got not in speed:
            raise wrong(f"{what}: {got} is outside 1..{max(T) - 1}",
                        "K runs from 1 to max(T) - 1: the check of K drafts reads K + 1 tokens, so T[K + 1] must exist")
        what = what[:-1] + f", {speed[got]:.4f} at K = {got})"
        if speed[got] == speed[best]:
            raise wrong(f"{what}: the two tie", "on a tie, the smallest K")
        variants = [
            (lambda K: predicted_speedup(alpha, K, c), "that is the best K if checking were free, T[K + 1] = T[1]",
             "the cost of the check, T[K + 1] / T[1], grows with K"),
            (lambda K: tokens(K) / (K * c + T[K] / T[1]), "that is the best K with the check of K drafts costed at "
             "T[K]", "the oracle's pass over K drafts reads K + 1 tokens (the last kept token, then the drafts): T[K + 1]"),
            (lambda K: tokens(K) / (T[K + 1] / T[1]), "that is the best K with the drafting free",
             "a round also runs the draft K times: K * c, in oracle passes"),
            (lambda K: tokens(K) / (K * c + T[K + 1]), "that is the best K with T[K + 1] in milliseconds next to K * c, "
             "in oracle passes", "T[K + 1] / T[1]: the check in single-token oracle passes, the unit of c"),
            (lambda K: tokens(K) / (K * c + T[K + 1] / T[1]) if K < max(T) - 1 else -1, "that is the best K below "
             f"{max(T) - 1}: the range stopped one short", f"K runs up to max(T) - 1 = {max(T) - 1} inclusive"),
        ]
        matches = [(said, hint) for score, said, hint in variants if best_by(score, Ks) == got]
        if matches:  # several mistakes can give the same K: name them all
            raise wrong(f"{what}; " + "; or ".join(said for said, _ in matches), "; or ".join(hint for _, hint in matches))
        raise wrong(what, "score each K by tokens per round, (1 - alpha^(K+1)) / (1 - alpha), over the round's cost in "
                          "oracle passes, K * c + T[K + 1] / T[1]")


# --- exercise 24: which path a tree round keeps --------------------------------------

def check_tree_path(f):
    from tree import Node, accepted_path, tree_generate
    #   root ─┬─ 0 (11) ─┬─ 2 (13) ── 5 (16)
    #         │          └─ 3 (14)
    #         └─ 1 (12) ── 4 (15)
    parents, tokens = [-1, -1, 0, 0, 1, 2], [11, 12, 13, 14, 15, 16]
    cases = [(parents, tokens, [12, 15, 0, 0, 0, 0, 0]),  # choice[i] read after node i would go on to node 4
             (parents, tokens, [12, 0, 15, 0, 0, 0, 0]), (parents, tokens, [11, 13, 0, 16, 0, 0, 0]),
             (parents, tokens, [11, 14, 0, 0, 0, 0, 0]), (parents, tokens, [11, 15, 0, 0, 0, 0, 0]),
             ([-1, 0, 1], [5, 6, 7], [5, 6, 7, 8]), ([-1, 0, 1], [5, 6, 7], [9, 6, 7, 8]), ([], [], [3]),
             "learned"]
    shift_ruled_out = False
    for case in cases:
        if case == "learned":  # the rounds of two tree runs on the learned pair, each with the path it kept
            draft, oracle, _ = learned_pair()
            stats = Stats(trace=[])
            for _, ids in held_out_prompts()[:2]:
                list(tree_generate(draft, oracle, list(ids), 12, max_depth=4, branch=2, confidence=0.6, stats=stats))
            rounds = [(r.details["parents"], r.drafted, r.oracle, r.details["path"]) for r in stats.trace]
        else:
            rounds = [case]
        for parents, tokens, choice, *kept in rounds:
            expected = accepted_path([Node(t, p, 0) for t, p in zip(tokens, parents)], choice)
            assert not kept or kept[0] == expected  # the reference is the round's own path
            diagnose_tree_path(f, parents, tokens, choice, expected, shift_ruled_out)
            # passed: if reading choice[i] after node i gives another path here, that was not the mistake
            shift_ruled_out = shift_ruled_out or expected not in shifted_paths(parents, tokens, choice)


def shifted_paths(parents, tokens, choice):
    """The paths of two misreadings of choice: choice[i] after node i (choice[0] or choice[-1] after the root)."""
    return [path_after(parents, tokens, lambda i: choice[max(i, 0)]), path_after(parents, tokens, lambda i: choice[i])]


def path_after(parents, tokens, choice_after):
    """The root path that follows choice_after(i), the token wanted after node i (-1: the root)."""
    path, at = [], -1
    while (child := next((j for j, p in enumerate(parents) if p == at and tokens[j] == choice_after(at)), None)) is not None:
        path.append(child)
        at = child
    return path


def diagnose_tree_path(f, parents, tokens, choice, expected, shift_ruled_out=False):
    call = f"accepted_path(parents={list(parents)}, tokens={list(tokens)}, choice={list(choice)})"
    got = attempt(call, f, list(parents), list(tokens), list(choice), hints=(
        (IndexError, "choice has one entry more than there are nodes: choice[0] after the root, choice[i + 1] after "
                     "node i"),))
    try:
        got = [int(i) for i in got]
    except (TypeError, ValueError):
        raise wrong(f"{call} returned {got!r}; expected the list {expected}", "a list of node indices, root first") from None
    if got == expected:
        return
    what = f"{call} returned {got}, expected {expected}"
    if got == [tokens[i] for i in expected] or not all(0 <= i < len(parents) for i in got):
        raise wrong(f"{what}: {'those are the path tokens' if got == [tokens[i] for i in expected] else 'not node indices'}",
                    f"return the nodes' indices (0 to {len(parents) - 1}), root first, not their tokens")
    d = next(d for d in range(len(got) + 1) if d == len(got) or d == len(expected) or got[d] != expected[d])
    at = got[d - 1] if d else -1
    here = "the root" if at == -1 else f"node {at}"
    want = int(choice[at + 1])
    index_hint = ("the oracle's choice after node i is choice[i + 1], after the root choice[0]"
                  if not shift_ruled_out and got in shifted_paths(parents, tokens, choice) else None)
    if d == len(got):
        raise wrong(f"{what}: after {here} the oracle chose {want} (choice[{at + 1}]), and node {expected[d]}, a child of "
                    f"{here}, has that token: the path goes on", index_hint or "keep stepping down while a child of "
                    "the last node has the oracle's choice: stop only when none has")
    g = got[d]
    if parents[g] != at:
        raise wrong(f"{what}: node {g} is not a child of {here} (its parent is "
                    f"{'the root' if parents[g] == -1 else f'node {parents[g]}'})",
                    index_hint or "each step goes to a child of the last node kept: parents[j] == that node")
    if d == len(expected):
        raise wrong(f"{what}: after {here} the oracle chose {want} (choice[{at + 1}]), and no child of {here} has it "
                    f"(node {g}'s token is {tokens[g]}): the round keeps nothing more",
                    index_hint or "a node is kept only when its token is the oracle's choice after its parent")
    raise wrong(f"{what}: after {here} the oracle chose {want} (choice[{at + 1}]): node {expected[d]} has that token, "
                f"node {g} has {tokens[g]}",
                index_hint or "among the children of the last node kept, the one whose token is the oracle's choice")


# --- exercise 25: prompt lookup, replayed from the text ------------------------------

class Stuck(BaseException):
    """A replay that reads its text without end (not an Exception: a student's `except Exception` lets it through)."""


class GuardedTokens(list):
    """A list of token ids that gives up when read far more often than a replay of it needs (an endless loop)."""

    def __init__(self, tokens, limit):
        super().__init__(tokens)
        self.reads, self.limit = 0, limit

    def read(self):
        self.reads += 1
        if self.reads > self.limit:
            raise Stuck()

    def __len__(self):
        self.read()
        return super().__len__()

    def __getitem__(self, index):
        self.read()
        return super().__getitem__(index)


def replay(tokens, n_prompt, k, max_tail=3, step=1, room=1, prefix=True, start=None, see=0, empty_rounds=True):
    """The replay of prompt lookup, and the usual ways to get it wrong: step (how far i moves past the kept
    drafts), room (the cut min(k, len(tokens) - i - room), None: no cut), prefix (False: count every match),
    start (None: n_prompt), see (tokens past i the lookup reads), empty_rounds (False: a round without drafts
    is not counted)."""
    from ngram import NGramDrafter
    drafter = NGramDrafter(n=max_tail + 1)
    drafted = accepted = rounds = 0
    i = n_prompt if start is None else start
    while i < len(tokens) and rounds < 10 * len(tokens):
        guesses = drafter.lookup(tokens[:i + see], k if room is None else min(k, len(tokens) - i - room))
        matches = [g == t for g, t in zip(guesses, tokens[i:])]
        n = (matches.index(False) if False in matches else len(matches)) if prefix else sum(matches)
        drafted, accepted, rounds = drafted + len(guesses), accepted + n, rounds + (1 if guesses or empty_rounds else 0)
        i += max(n + step, 1)
    return drafted, accepted, rounds


def reference_replay_lookup():
    def replay_lookup(tokens, n_prompt, k, max_tail=3):
        return replay(tokens, n_prompt, k, max_tail)
    return replay_lookup


def check_lookup_replay(f):
    from ngram import NGramDrafter, ngram_generate
    from speculative import greedy_generate

    class LookupOnly(NGramDrafter):  # prompt lookup alone: no n-gram table behind it
        def from_table(self, tokens, k):
            return []

    n_new, k = 20, 4
    # A hand-made text first: prompt lookup guesses [3, 4, 5, 6] where the text goes on [3, 9, 5, 6].
    hand_made = [1, 2, 3, 4, 5, 6, 1, 2, 3, 9, 5, 6, 7, 8, 2, 3]
    for text in ["hand-made", "import os\nimport sys\nimport json\nimport os\nimport sys\nimport"] + \
            [ids for _, ids in held_out_prompts()]:
        if text == "hand-made":
            ids, tokens = hand_made[:8], hand_made
            measured = replay(tokens, len(ids), k)
            source = f"the replay of this hand-made text, {tokens}, counts {measured}"
        else:
            draft, oracle, encode = learned_pair()
            ids = encode(text) if isinstance(text, str) else list(text)  # a text that repeats, then the prompts
            tokens = list(ids) + list(greedy_generate(oracle, list(ids), n_new))
            stats = Stats()
            list(ngram_generate(oracle, list(ids), n_new, n_draft=k, drafter=LookupOnly(n=4), stats=stats))
            measured = (stats.drafted, stats.accepted, stats.rounds)
            assert replay(tokens, len(ids), k) == measured  # the replay predicts the run exactly
            source = (f"prompt lookup's run on the learned oracle, {n_new} tokens after a prompt of {len(ids)}, "
                      f"counted {measured}")
        call = f"replay_lookup(<{len(tokens)} tokens>, n_prompt={len(ids)}, k={k})"
        try:
            got = attempt(call, f, GuardedTokens(tokens, 200 * len(tokens) + 10000), len(ids), k)
        except Stuck:
            raise wrong(f"{call} did not finish: it read the text {200 * len(tokens) + 10000} times, and the replay of "
                        f"{len(tokens) - len(ids)} tokens takes at most {len(tokens) - len(ids)} rounds",
                        "a round moves i past the accepted drafts AND the oracle's own token: at least one token a "
                        "round") from None
        try:
            got = tuple(int(x) for x in got)
        except (TypeError, ValueError):
            got = None
        if got is None or len(got) != 3:
            raise wrong(f"{call} returned {got!r}; expected three counts (drafted, accepted, rounds), here {measured}",
                        "return (drafted, accepted, rounds)")
        if got == measured:
            continue
        what = f"{call} returned {got} (drafted, accepted, rounds); {source}"
        variants = [
            (dict(start=0), "that is a replay from the start of the prompt",
             "the run begins after the prompt: i = n_prompt"),
            (dict(see=1), "that is a replay whose lookup also sees tokens[i], the token the round is about to guess",
             "lookup(tokens[:i], ...): the text so far, never what the oracle has not written yet"),
            (dict(see=len(tokens)), "that is a replay whose lookup reads the whole text, the future included",
             "lookup(tokens[:i], ...): the text so far, never what the oracle has not written yet"),
            (dict(prefix=False), "that is a replay that counts every draft matching its position",
             "the oracle keeps the drafts only up to the first one that differs from tokens[i:]"),
            (dict(room=0), "that is a replay whose last round may draft up to the end of the text",
             "the cut is min(k, len(tokens) - i - 1): the oracle's own token must still fit, as in ngram_generate"),
            (dict(room=None), "that is a replay that always asks for k drafts",
             "the cut is min(k, len(tokens) - i - 1): near the end, fewer drafts fit"),
            (dict(empty_rounds=False), "that is a replay that does not count the rounds whose lookup found nothing",
             "a round without drafts is still an oracle pass, and adds the oracle's one token"),
            (dict(step=2), "that is a replay that moves i two tokens past the kept drafts",
             "i moves past the kept drafts and the oracle's one token: n + 1"),
        ]
        for settings, said, hint in variants:
            if replay(tokens, len(ids), k, **settings) == got:
                raise wrong(f"{what}; {said}", hint)
        if got[2] != measured[2]:
            hint = "one round per oracle pass: it keeps the matching drafts, then adds the oracle's own token"
        elif got[0] != measured[0]:
            hint = ("each round drafts lookup(tokens[:i], min(k, len(tokens) - i - 1)) (your own lookup from exercise "
                    "16 too: does `pytest exercises/ -k ex16` pass?)")
        else:
            hint = "count the drafts that match tokens[i:] from the first, stopping at the first miss"
        raise wrong(what, hint)


# ---------------------------------------------------------------------------
# References: the project's functions, or thin adapters over them
# ---------------------------------------------------------------------------

def reference_speculative_generate():
    from speculative import speculative_generate
    return lambda draft, oracle, ids, n_new, n_draft: speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft)


def reference_draft_while_confident():
    from threshold import draft_while_confident
    return lambda draft, tokens, k_max, threshold: draft_while_confident(draft, KVCache(), tokens, k_max, threshold, Stats())[0]


def reference_seed_threshold():
    from threshold import next_threshold
    # The seed's n_accepted counts the oracle's token too: threshold.py's is one less.
    return lambda threshold, drafted_probs, n_accepted, n_draft, boost: next_threshold(
        threshold, drafted_probs, n_accepted - 1, boost)


def reference_probabilities():
    from processors import Processor
    return lambda logits, temperature=1.0, top_k=None: Processor(temperature=temperature, top_k=top_k)(logits)


def reference_keep_draft():
    from sps import acceptance_probability
    return lambda p, q, x, r: r < acceptance_probability(q, p, x)


def reference_acceptance_rate():
    from sps import acceptance_rate
    return lambda p, q: acceptance_rate(q, p)


def reference_sps_round():
    # sps.py runs rounds inline in speculative_sample; its trace records the first round's new tokens.
    from sps import speculative_sample

    def sps_round(draft, oracle, tokens, K, rng):
        stats = Stats(trace=[])
        next(speculative_sample(draft, oracle, tokens, K + 1, K=K, rng=rng, stats=stats))
        return stats.trace[0].new
    return sps_round


def reference_lookup():
    from ngram import NGramDrafter
    # NGramDrafter(n) tries tails of n - 1 tokens down to 1 (an n-gram is a context and its follower)
    return lambda tokens, k, max_tail=3: NGramDrafter(n=max_tail + 1).lookup(tokens, k)


def reference_acceptance_by_kind():
    from speculative import speculative_generate

    def acceptance_by_kind(draft, oracle, prompts, n_new, k):
        counts = {}
        for kind, ids in prompts:
            stats = Stats()
            list(speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=stats))
            drafted, accepted = counts.get(kind, (0, 0))
            counts[kind] = (drafted + stats.drafted, accepted + stats.accepted)
        return {kind: accepted / drafted for kind, (drafted, accepted) in counts.items()}
    return acceptance_by_kind


def reference_best_draft_length():
    from speed.predict import predicted_speedup
    return lambda alpha, c, T: max(range(1, max(T)), key=lambda K: (predicted_speedup(alpha, K, c, T[K + 1] / T[1]), -K))


def reference_tree_path():
    from tree import Node, accepted_path
    return lambda parents, tokens, choice: accepted_path([Node(t, p, 0) for t, p in zip(tokens, parents)], choice)


def project(module, name):
    return lambda: getattr(__import__(module), name)


@dataclass(frozen=True)
class Exercise:
    number: str      # as in EXERCISES.md, two digits
    module: str      # exercises/<module>.py
    function: str    # what you write there
    check: callable  # check(f) raises AssertionError (NotImplementedError, StillBuggy) if f is wrong
    reference: callable  # () -> the project's own function, which --reference checks instead


EXERCISES = {e.number: e for e in [
    Exercise("03", "ex03_accepted_prefix", "accepted_prefix_length", check_accepted_prefix_length,
             project("speculative", "accepted_prefix_length")),
    Exercise("04", "ex04_rollback", "rollback", check_rollback, project("speculative", "rollback")),
    Exercise("05", "ex05_cache_bug", "speculative_generate", check_speculative_generate, reference_speculative_generate),
    Exercise("06", "ex06_threshold_drafting", "draft_while_confident", check_draft_while_confident,
             reference_draft_while_confident),
    Exercise("07", "ex07_threshold_update", "next_threshold", check_next_threshold, project("threshold", "next_threshold")),
    Exercise("08", "ex08_seed_threshold", "update_threshold", check_seed_threshold, reference_seed_threshold),
    Exercise("09", "ex09_temperature_top_k", "probabilities", check_probabilities, reference_probabilities),
    Exercise("11", "ex11_residual", "residual", check_residual, project("sps", "residual")),
    Exercise("12", "ex12_inverted_ratio", "keep_draft", check_keep_draft, reference_keep_draft),
    Exercise("13", "ex13_acceptance_rate", "acceptance_rate", check_acceptance_rate, reference_acceptance_rate),
    Exercise("15", "ex15_sps_round", "sps_round", check_sps_round, reference_sps_round),
    Exercise("16", "ex16_prompt_lookup", "lookup", check_lookup, reference_lookup),
    Exercise("18", "ex18_tree_mask", "tree_mask", check_tree_mask, project("tree", "tree_mask")),
    Exercise("22", "ex22_acceptance_by_kind", "acceptance_by_kind", check_acceptance_by_kind,
             reference_acceptance_by_kind),
    Exercise("23", "ex23_best_draft_length", "best_draft_length", check_best_draft_length, reference_best_draft_length),
    Exercise("24", "ex24_tree_path", "accepted_path", check_tree_path, reference_tree_path),
    Exercise("25", "ex25_lookup_replay", "replay_lookup", check_lookup_replay, reference_replay_lookup),
]}
