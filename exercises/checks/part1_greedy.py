"""Part 1, greedy speculative decoding: exercise 3 (the accepted prefix), 4 (rolling back the KV caches)
and 5 (the KV-cache bug)."""

import itertools
from dataclasses import dataclass

import numpy as np

from kvcache import KVCache

from .models import tiny_pair
from .running import (Exercise, StillBuggy, attempt, count, crashed, in_your_file, project, span, unchanged,
                      wrong)


def check_accepted_prefix_length(f):
    cases = [([5, 7, 9], [5, 7, 2, 4], 2), ([5, 7, 9], [5, 7, 9, 4], 3), ([5, 7, 9], [1, 7, 9, 4], 0),
             ([5, 7, 9], [5, 1, 9, 4], 1), ([], [3], 0), ([0, 0], [0, 1, 2], 1), ([4], [4, 4], 1)]
    for drafted, oracle_choice, expected in cases:
        call = f"accepted_prefix_length({drafted}, {oracle_choice})"
        all_match = expected == len(drafted)
        given = (list(drafted), list(oracle_choice))
        got = attempt(call, f, *given,
                      hint="when every draft matches, all len(drafted) of them are accepted: the count stops at the "
                           "end of drafted" if all_match else None)
        # speculative.py goes on with drafted[:n] and oracle_choice[n]: a sentinel left in them is drafted text
        unchanged(call, {"drafted": (drafted, given[0]), "oracle_choice": (oracle_choice, given[1])})
        if got == expected:
            count(call, got)
            continue
        if got == expected + 1 and not all_match or got == len(drafted) + 1:
            hint = ("n counts the accepted drafts only; the oracle's own token comes after them (seed 000's "
                    "n_accepted = idx + 1 counts it too: exercise 8)")
        elif all_match and expected > 0:
            hint = "when every draft matches the oracle, all of them are accepted: count up to len(drafted)"
        elif 0 in drafted:
            hint = "token id 0 is a token like any other (a test such as `if drafted[n]` treats it as missing)"
        elif got is not None and got > expected:
            hint = "stop at the first disagreement: a later draft that happens to match is not kept"
        else:
            hint = "count the drafts from the first for as long as drafted[i] == oracle_choice[i]"
        raise wrong(f"{call} returned {got!r}, expected {expected}", hint)


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


def reference_speculative_generate():
    from speculative import speculative_generate
    return lambda draft, oracle, ids, n_new, n_draft: speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft)


EXERCISES = (
    Exercise("03", "ex03_accepted_prefix", "accepted_prefix_length", check_accepted_prefix_length,
             project("speculative", "accepted_prefix_length")),
    Exercise("04", "ex04_rollback", "rollback", check_rollback, project("speculative", "rollback")),
    Exercise("05", "ex05_cache_bug", "speculative_generate", check_speculative_generate, reference_speculative_generate),
)
