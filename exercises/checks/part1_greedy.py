"""Part 1, greedy speculative decoding: exercise 3 (the accepted prefix), 4 (rolling back the KV caches)
and 5 (the KV-cache bug)."""

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from kvcache import KVCache

from .contract import RAN
from .models import tiny_pair
from .running import (Exercise, StillBuggy, Wrong, attempt, confirmed, crashed, fresh, in_your_file, project,
                      span, wrong)


def identical_prefix(drafted, oracle_choice):
    """What a count with `is` for `==` gives: CPython shares the int objects of -5..256 only."""
    n = 0
    while n < len(drafted) and drafted[n] is oracle_choice[n]:
        n += 1
    return n


def check_accepted_prefix_length(f):
    cases = [([5, 7, 9], [5, 7, 2, 4], 2), ([5, 7, 9], [5, 7, 9, 4], 3), ([5, 7, 9], [1, 7, 9, 4], 0),
             ([5, 7, 9], [5, 1, 9, 4], 1), ([], [3], 0), ([0, 0], [0, 1, 2], 1), ([4], [4, 4], 1),
             # real-size ids (GPT-2's " Python", <|endoftext|>, ...): above 256, each int is an object of its own
             ([2393, 50256, 257], [2393, 50256, 300, 11], 2), ([464, 3290, 318], [464, 3290, 318, 257], 3),
             ([50256, 13], [50256, 0, 13], 1),
             # a draft whose digits begin the oracle's choice is another token: 9 is not 95, 50 is not 502
             ([5, 7, 9], [5, 7, 95, 4], 2), ([464, 50, 13], [464, 502, 13, 11], 1)]
    for drafted, oracle_choice, expected in cases:
        call = f"accepted_prefix_length({drafted}, {oracle_choice})"
        given = (fresh(drafted), fresh(oracle_choice))
        got = attempt(call, f, *given,
                      hint="when every draft matches, all len(drafted) of them are accepted: the count stops at the "
                           "end of drafted" if expected == len(drafted) else None)
        if got != expected:
            what, hint = explain_prefix(given, got, expected, f)
            raise wrong(f"{call} returned {got!r}, expected {expected}" + (f": {what}" if what else ""), hint)


def counts_the_oracles_token(drafted, oracle_choice):
    """The threshold notes' n_accepted: the accepted drafts and the oracle's own token after them."""
    return next((i for i, (d, c) in enumerate(zip(drafted, oracle_choice)) if d != c), len(drafted)) + 1


def explain_prefix(args, got, expected, f=None):
    """(what more to say, where to look) for accepted_prefix_length(*args) = got, where it should be expected."""
    drafted, oracle_choice = args
    all_match = expected == len(drafted)
    if got == identical_prefix(fresh(drafted), fresh(oracle_choice)) and max(drafted + oracle_choice) > 256:
        return "", ("compare ids with ==, not `is`: `is` asks whether two ints are the same object, and CPython "
                    "shares the objects of -5..256 only, so `is` holds on small ids and fails on real ones")
    if got == len(drafted) + 1 or got == expected + 1 and confirmed(f, counts_the_oracles_token, (
            ([5, 7, 9], [5, 7, 2, 4]), ([5, 7, 9], [1, 7, 9, 4]), ([464, 3290], [464, 3290, 318]))):
        return ("that counts the oracle's own token too", "n counts the accepted drafts only; the oracle's own token "
                "comes after them (the threshold notes' n_accepted = idx + 1 counts it too: exercise 8)")
    if all_match and expected > 0 and got < expected:
        return "", "when every draft matches the oracle, all of them are accepted: count up to len(drafted)"
    if got < expected and drafted[got] == 0:
        return "", "token id 0 is a token like any other (a test such as `if drafted[n]` treats it as missing)"
    if got > expected:
        d, c = drafted[expected], oracle_choice[expected]
        if str(c).startswith(str(d)):
            return (f"draft {expected}, {d}, is not the oracle's choice there, {c}, though its digits begin it",
                    "compare the ids themselves, drafted[i] == oracle_choice[i]: a comparison of their digits (in "
                    "\",\".join(...) of the ids, or str(...)) finds 9 in 95")
        return (f"draft {expected}, {d}, is not the oracle's choice there, {c}, yet it was counted",
                "stop at the first disagreement: the drafts after it are not kept, even those that happen to match")
    return "", "count the drafts from the first for as long as drafted[i] == oracle_choice[i]"


# ---------------------------------------------------------------------------
# Exercise 4: rolling back the KV caches
# ---------------------------------------------------------------------------

class FakeCache(KVCache):
    """A KV cache that only has a length: all rollback() may look at."""

    def __init__(self, n):
        super().__init__()
        self.length = n


def check_rollback(f):
    for lengths, n_kept, expected in [((10, 8), 9, [9, 8]), ((12, 12), 12, [12, 12]), ((5,), 0, [0]),
                                      ((20, 17, 3), 17, [17, 17, 3]), ((7, 9), 7, [7, 7]),
                                      ((10, 12), 8, [8, 8])]:  # both caches longer than n_kept
        caches = [FakeCache(n) for n in lengths]
        call = f"rollback({n_kept}, caches of {', '.join(map(str, lengths))} positions)"
        attempt(call, f, n_kept, *caches,
                hint="a cache shorter than n_kept must be left as it is: the draft's cache is one short when it never "
                     "fed its own last guess, and KVCache.truncate(n) refuses to lengthen")
        got = [c.n_tokens() for c in caches]
        if got != expected:
            what, hint = explain_rollback((n_kept, *lengths), got, expected)
            raise wrong(f"{call} left {', '.join(map(str, got))}; expected {', '.join(map(str, expected))}: {what}",
                        hint)


def explain_rollback(args, got, expected, f=None):
    """(what went wrong, where to look) for caches of args[1:] positions left at got by rollback(args[0], ...)."""
    lengths = args[1:]
    i = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
    if got[i] > lengths[i]:
        return (f"cache {i + 1} had {lengths[i]} positions and was lengthened to {got[i]}: positions whose keys and "
                "values were never computed", "a cut only shortens: KVCache.truncate(n) refuses to lengthen, and "
                "truncate is the one way to cut a cache")
    if got[i] < expected[i]:
        return (f"cache {i + 1} was cut too short. It had {lengths[i]} positions and must keep {expected[i]}; "
                f"{span(got[i], expected[i] - 1)} {'belongs' if got[i] == expected[i] - 1 else 'belong'} to tokens that "
                "stay in the text, and their keys and values are gone",
                "how many positions truncate(n) keeps, and how many tokens n_kept counts")
    return (f"cache {i + 1} still holds {got[i] - expected[i]} position(s) past the first {expected[i]}: keys and "
            "values of drafts the oracle rejected", "every cache passed in must end up holding at most n_kept positions")


# ---------------------------------------------------------------------------
# Exercise 5: the KV-cache bug
# ---------------------------------------------------------------------------

@dataclass
class Call:
    held: int      # positions the cache held when the forward began (None: no cache)
    fed: list      # the token ids the forward was given
    text: list     # the text so far: the prompt and every token the generator had yielded
    content: list  # the tokens whose keys and values the cache held, position by position (None: no cache)

    def reading(self):
        """What the model reads in this forward: what its cache held, then what it was fed."""
        return (self.content or []) + self.fed

    def verifies(self):
        """Whether this oracle forward checks drafts: it reads through the newest token (a round's pass, not the
        prompt's pass that stops one short)."""
        return len(self.reading()) >= len(self.text)


class Spy:
    """Stands in for a model: passes every call on, noting what its cache held and what was fed."""

    def __init__(self, model, text):
        self.model, self.text, self.calls = model, text, []
        self.caches = {}  # id(cache) -> (cache, the tokens at its positions as this spy fed them)

    def __getattr__(self, name):  # vocab_size, n_positions, ...
        return getattr(self.model, name)

    def forward(self, ids, kvcache=None, *args, **kwargs):
        fed = [int(t) for t in np.asarray(ids).reshape(-1)]
        held = content = None
        if kvcache is not None:
            held = kvcache.n_tokens()
            _, before = self.caches.get(id(kvcache), (kvcache, []))
            content = before[:held] if held <= len(before) else None  # truncate() cut it to held
            self.caches[id(kvcache)] = (kvcache, (content or []) + fed)
        self.calls.append(Call(held, fed, list(self.text), content))
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


def draft_misread(call):
    """(position, token read, token of the text) where the draft reads something else than the text, or None.
    In a round the draft reads the text, then its own drafts: the first len(text) tokens it reads are the text."""
    if call.held is not None and call.content is None:
        return None  # a cache this spy did not fill: nothing to compare
    reading = call.reading()
    j = next((j for j, (a, b) in enumerate(zip(reading, call.text)) if a != b), None)
    return None if j is None else (j, reading[j], call.text[j])


@dataclass
class Cost:
    """What a run cost: the oracle's passes that checked drafts, the drafts it kept, and the tokens of the text each
    model read again, though it had read them before (a cache does that work once)."""
    oracle_passes: int
    drafted: int
    accepted: int
    oracle_rereads: int
    draft_rereads: int
    draft_newest_rereads: int  # of draft_rereads, those of the newest token (read, cut off, read again)
    most_drafted: int          # the most drafts one round checked
    oracle_text_rereads: int   # of oracle_rereads, those of tokens it had read as text (not as drafts)


def rereads(calls, newest=False, text_only=False):
    """How many times the calls fed a token of the text at a position where they had fed that same token before:
    the newest token too (a catch-up that feeds it, then cuts it off again, makes the next round read it twice).
    newest: count only the rereads of the text's newest token. text_only: only where the earlier feed was of the
    text already, not of a draft that happened to be the token kept there (a draft rejected by `is`)."""
    seen, again = {}, 0
    for c in calls:
        start = c.held or 0
        for position, token in enumerate(c.fed, start):
            if (position < len(c.text) and token == c.text[position] and token in seen.get(position, ())
                    and (not newest or position == len(c.text) - 1)):
                again += 1
            if not text_only or position < len(c.text):
                seen.setdefault(position, set()).add(token)
    return again


def cost(draft_calls, oracle_calls, end_text):
    rounds = [c for c in oracle_calls if c.verifies()]
    after = [c.text for c in rounds[1:]] + [end_text]
    drafted = sum(len(c.reading()) - len(c.text) for c in rounds)
    accepted = sum(len(next_text) - len(c.text) - 1 for c, next_text in zip(rounds, after))
    return Cost(len(rounds), drafted, accepted, rereads(oracle_calls), rereads(draft_calls),
                rereads(draft_calls, newest=True), max((len(c.reading()) - len(c.text) for c in rounds), default=0),
                rereads(oracle_calls, text_only=True))


@functools.lru_cache(maxsize=None)
def reference_cost(ids, n_new, n_draft):
    """The Cost of speculative.py's own run: a right draft cache, one oracle pass a round."""
    from speculative import speculative_generate
    draft, oracle = tiny_pair()
    text = list(ids)
    draft_spy, oracle_spy = Spy(draft, text), Spy(oracle, text)
    for token in speculative_generate(draft_spy, oracle_spy, list(ids), n_new, n_draft=n_draft):
        text.append(int(token))
    return cost(draft_spy.calls, oracle_spy.calls, text)


def check_speculative_generate(f, seeds=range(3), n_drafts=(2, 4, 7)):
    from speculative import greedy_generate
    draft, oracle = tiny_pair()
    n_new = 30
    for seed in seeds:
        ids = np.random.default_rng(seed).integers(0, oracle.vocab_size, 5).tolist()
        expected = list(greedy_generate(oracle, ids, n_new))
        for n_draft in n_drafts:
            text = list(ids)
            draft_spy, spy = Spy(draft, text), Spy(oracle, text)
            got, error = [], None
            call = f"speculative_generate(draft, oracle, {ids}, n_new={n_new}, n_draft={n_draft})"
            try:
                for token in itertools.islice(attempt(call, f, draft_spy, spy, list(ids), n_new, n_draft),
                                              n_new + n_draft + 2):
                    got.append(int(token))
                    text.append(int(token))
            except (NotImplementedError, Wrong):
                raise
            except Exception as e:
                error = e
            first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), None)
            if error is not None or first is not None or len(got) != n_new:
                raise diagnose_generator(ids, n_new, n_draft, expected, got, first, error, spy.calls)
            check_speed(ids, n_new, n_draft, draft_spy.calls, spy.calls, text)


def shipped_generator(f):
    """StillBuggy if f is still the file as shipped: its first case fails as the shipped file does."""
    try:
        check_speculative_generate(f, seeds=(0,), n_drafts=(2,))
    except StillBuggy:
        raise
    except Wrong:
        pass


def check_speed(ids, n_new, n_draft, draft_calls, oracle_calls, text):
    """The tokens are right: now what they cost. A bug in the draft's cache, or a round that does more work than
    it needs, leaves the text as it is and only costs time, measured here against speculative.py's own run."""
    RAN["05"].add("passes")
    mine, ref = cost(draft_calls, oracle_calls, text), reference_cost(tuple(ids), n_new, n_draft)
    setting = f"with n_draft={n_draft}, {n_new} new tokens after the prompt {ids}: your tokens are right, but"
    price = (f"The oracle checked drafts in {mine.oracle_passes} passes and kept {mine.accepted} of your "
             f"{mine.drafted}; with a right draft cache it needs {ref.oracle_passes} passes and keeps {ref.accepted} "
             f"of {ref.drafted}. A bug in the draft's cache never changes the text, only the speed")
    misread = next(((r, c, m) for r, c in enumerate(draft_calls, 1) if (m := draft_misread(c))), None)
    if misread is not None:
        r, c, (j, token, should) = misread
        if c.held is not None and j < c.held:
            seen = (f"its cache held {c.held} positions, and position {j} holds the keys and values of token {token}, "
                    f"where the text has {should}: a draft the oracle rejected")
            hint = "step 4 for the draft's cache: cut it to the kept tokens, as the oracle's"
        elif c.held is None:
            seen = f"it read token {token} at position {j}, where the text has {should}"
            hint = "what the draft reads: the text, then its own drafts of the round"
        else:
            seen = (f"its cache held {c.held} positions, and it fed token {token} at position {j}, where the text has "
                    f"{should}: token(s) {c.text[c.held:j + 1]} at {span(c.held, j)} were never read by the draft")
            hint = ("step 4 for the draft's cache: it must hold every kept token but the newest, including the last "
                    "draft when all were accepted (the draft never read its own last guess)")
        raise wrong(f"{setting} the draft's cache is wrong: when its forward {r} began (the text then {len(c.text)} "
                    f"tokens long), {seen}. So the draft guessed from a text that is not there.\n{price}", hint)
    if mine.most_drafted != ref.most_drafted:
        raise wrong(f"{setting} your rounds drafted up to {mine.most_drafted} tokens each; with n_draft = {n_draft} a "
                    f"round drafts up to {ref.most_drafted}.\n{price}", "step 1: a round drafts k = min(n_draft, tokens "
                    "left - 1) tokens, n_draft the argument (the checker calls with 2, 4 and 7)")
    reread = ("step 4: truncate the oracle's cache to n_kept, the kept tokens but the newest, so that the next round "
              "feeds it only the last token and the drafts; a new cache, or one cut shorter and fed again, makes the "
              "oracle read again what it had read")
    if mine.oracle_text_rereads > ref.oracle_text_rereads:  # before the passes: a pass that reads the text is no check
        raise wrong(f"{setting} the oracle read {mine.oracle_text_rereads} tokens of the text again, though it had read "
                    "them before: its cache already holds all the text but the newest token", reread)
    if mine.oracle_passes > ref.oracle_passes and mine.accepted < ref.accepted:
        raise wrong(f"{setting} the oracle kept {mine.accepted} of your {mine.drafted} drafts, where a right round "
                    f"keeps {ref.accepted} of the same draft's {ref.drafted}: it checked drafts in "
                    f"{mine.oracle_passes} passes where {ref.oracle_passes} suffice",
                    "step 3: a draft equal to the oracle's choice must be kept (compare ids with ==: `is` asks "
                    "whether two objects are one, and the oracle's choices are NumPy ints)")
    if mine.oracle_rereads > ref.oracle_rereads:
        raise wrong(f"{setting} the oracle read {mine.oracle_rereads} tokens of the text again, though it had read "
                    "them before: its cache already holds all the text but the newest token", reread)
    if mine.oracle_passes > ref.oracle_passes:
        raise wrong(f"{setting} the oracle checked drafts in {mine.oracle_passes} passes for {n_new} tokens, where "
                    f"one a round ({ref.oracle_passes}) suffices",
                    "step 2: ONE oracle forward over the last token and all k drafts")
    older = mine.draft_rereads - mine.draft_newest_rereads, ref.draft_rereads - ref.draft_newest_rereads
    if older[0] > older[1]:  # tokens before the newest read again: a cache started anew, or none
        raise wrong(f"{setting} the draft read {mine.draft_rereads} tokens of the text again, though it had read "
                    "them before: its cache already holds them",
                    "step 4: cut the draft's cache back to the kept tokens (truncate), and catch it up after a clean "
                    "sweep, so that a round feeds it only the last token and its own guesses; a new cache, or none, "
                    "feeds it the whole text again")
    if mine.draft_newest_rereads > ref.draft_newest_rereads:
        raise wrong(f"{setting} the draft read the newest token a second time {mine.draft_newest_rereads} times: fed "
                    "once (by a catch-up that goes past n_kept), cut off again, and read again by the next round",
                    "step 4's catch-up feeds the draft the kept tokens its cache lacks, tokens[n_tokens():n_kept]: "
                    "never the newest, which the next round reads first")

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
    never_truncated = all(b.held == a.held + len(a.fed) for a, b in zip(rounds, rounds[1:]))
    bad = next((c for c in rounds if cache_problem(c)), None)
    if bad is not None and cache_problem(bad) == "long" and never_truncated:
        # the file as shipped: say what goes wrong, not why
        raise StillBuggy(wrong(what, "run `python exercises/ex05_cache_bug.py`, then compare what each model's "
                                     "cache holds after step 4 with the text").args[0])
    said, hint = explain_generator(ids, n_new, got, error, calls)
    return wrong(f"{what}\n{said}" if said else what, hint)


def explain_generator(ids, n_new, got, error, calls):
    """(what each cache held, where to look) for a generator whose tokens or run went wrong (calls: the oracle's)."""
    rounds = [c for c in calls if c.held is not None]
    bad = next(((r, c) for r, c in enumerate(rounds) if cache_problem(c)), None)
    if bad is not None:
        r, c = bad
        n = len(c.text)
        seen = (f"when the oracle's forward began (its call {r + 1}, the text then {n} tokens long), its cache held "
                f"{c.held} positions; it should hold {n - 1}, every token but the newest, which that forward feeds")
        if cache_problem(c) == "long":
            return (f"{seen}. The {c.held - (n - 1)} extra position(s) hold keys and values of drafts the oracle "
                    "rejected: the next tokens attend to text that is not there, at shifted positions",
                    "step 4 of the round: what each cache must hold once the round's tokens are known")
        return (f"{seen}. The oracle never reads token(s) {c.text[c.held:n - 1]} at {span(c.held, n - 2)}: its cache "
                f"was cut {n - 1 - c.held} position(s) too short",
                "step 4: which positions of the oracle's cache belong to tokens that stay in the text")
    if error is not None:
        return "", ("KVCache.truncate(n) only shortens a cache: n must be at most n_tokens()"
                    if isinstance(error, ValueError) and "truncate" in str(error) else
                    "the line named above" if in_your_file(error) else "the traceback of your generator")
    if len(got) > n_new and rounds:
        last = rounds[-1]
        made = len(last.text) - len(ids)
        return (f"the last round began with {made} of {n_new} tokens made, so it could add {n_new - made}; it drafted "
                f"{len(last.fed) - 1}, and a round adds up to n_draft + 1 tokens (the drafts it keeps, then the "
                "oracle's own)", "step 1: how many tokens a round may draft when few are left")
    return ("the oracle's cache held the right number of positions in every round",
            "step 3: which tokens the round keeps (the agreeing drafts, then the oracle's choice after them)")


def spied(pair, ids, n_new, n_draft):
    """(args, what the run did: its calls) for a boundary of exercise 5: the models as Spies of one shared text,
    which generated() below extends with each token the answer yields."""
    text = list(ids)
    draft, oracle = pair()
    spies = Spy(draft, text), Spy(oracle, text)
    return (*spies, list(ids), n_new, n_draft), spies


def generated(args, result):
    """Exercise 5's outcome: the tokens the generator yields (a few past n_new at most), each added to the spies' text."""
    text, tokens = args[0].text, []
    for token in itertools.islice(result, args[3] + args[4] + 2):
        tokens.append(token)
        text.append(int(token))
    return tokens


def reference_speculative_generate():
    from speculative import speculative_generate
    return lambda draft, oracle, ids, n_new, n_draft: speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft)


EXERCISES = (
    Exercise("03", "ex03_accepted_prefix", "accepted_prefix_length", check_accepted_prefix_length,
             project("speculative", "accepted_prefix_length")),
    Exercise("04", "ex04_rollback", "rollback", check_rollback, project("speculative", "rollback")),
    Exercise("05", "ex05_cache_bug", "speculative_generate", check_speculative_generate, reference_speculative_generate,
             shipped_generator),
)
