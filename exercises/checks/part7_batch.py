"""Part 7, many prompts and another vocabulary: exercise 26 (cutting a ragged batch's caches after a round); 27 is
part7_vocab.py. Each runs in two stages: the function alone on hand-made cases, then inside the project's decoder
(batch.speculative_generate_batch, crossvocab.crossvocab_generate) in place of the project's own step, against the
project's own run. The references are at the end: read them after the exercises."""

import contextlib
import functools

import numpy as np

from batch import rollback_rows as project_rollback_rows

from .models import tiny_pair
from .running import Exercise, attempt, fresh, span, wrong


@contextlib.contextmanager
def replaced(module, name, function):
    """module.name is function inside the block (the decoder calls it by that name), the project's own after it."""
    own = getattr(module, name)
    setattr(module, name, function)
    try:
        yield
    finally:
        setattr(module, name, own)


class Spy:
    """Stands in for a model: passes every forward on, counting the passes and the tokens each fed."""

    def __init__(self, model):
        self.model, self.passes, self.fed = model, 0, 0

    def __getattr__(self, name):  # vocab_size, n_positions, n_layer, ...
        return getattr(self.model, name)

    def forward(self, ids, *args, **kwargs):
        self.passes += 1
        self.fed += int(np.asarray(ids).size)
        return self.model.forward(ids, *args, **kwargs)



def counting(forward_batch):
    """batch.forward_batch, counting a Spy's batched passes and the rows' own new tokens (not the padding)."""
    def counted(model, ids, kvcache, n_new, *args, **kwargs):
        if isinstance(model, Spy):
            model.passes += 1
            model.fed += int(np.sum(n_new))
            model = model.model
        return forward_batch(model, ids, kvcache, n_new, *args, **kwargs)
    return counted


def work(draft, oracle):
    """What a run cost, as one line's numbers: ((draft passes, tokens fed), (oracle passes, tokens fed))."""
    return (draft.passes, draft.fed), (oracle.passes, oracle.fed)


def said(cost):
    (draft_passes, draft_fed), (oracle_passes, oracle_fed) = cost
    return (f"the draft {draft_passes} passes feeding {draft_fed} tokens, the oracle {oracle_passes} passes feeding "
       f"{oracle_fed}")


# ---------------------------------------------------------------------------
# Exercise 26: cutting a ragged batch's caches after a round
# ---------------------------------------------------------------------------

# (what the case is, cache_lengths, n_kept). After a round of k drafts a row that had L tokens holds L + k positions
# in the oracle's cache and L - 1 + k in the draft's (it never feeds its last draft); n_kept is L + a, a the drafts
# it kept.
CUT_CASES = [
    ("the oracle's caches after a round of k = 4 in which row 1 kept every draft, row 2 none and row 3 two",
     [416, 305, 292], [416, 301, 290]),
    ("the draft's caches after the same round: row 1's is one short of its n_kept, as its last draft was never fed",
     [415, 304, 291], [416, 301, 290]),
    ("one row, the oracle's cache", [37], [35]),
    ("one row, the draft's cache after a round that kept every draft", [36], [37]),
    ("rows of very different lengths, the oracle's caches", [9, 530, 66, 1019], [7, 527, 66, 1016]),
    ("every row kept every draft: the oracle's caches hold exactly n_kept", [120, 340], [120, 340]),
    ("every row kept every draft: the draft's caches, each one short", [119, 339], [120, 340]),
    ("no row kept a draft (k = 4)", [105, 209, 12], [101, 205, 8]),
    ("rows of very different lengths, the draft's caches, rows 1 and 3 kept every draft", [8, 528, 65, 1018],
     [9, 527, 66, 1016]),
    ("a row whose n_kept is 0, as exercise 4's rule allows: it keeps nothing", [3, 40], [0, 38]),
    ("a row whose cache is empty: it stays empty", [0, 12], [4, 10]),
]

ROW_HINT = ("row b keeps min(cache_lengths[b], n_kept[b]) positions: n_kept[b] at most, and never more than its "
            "cache holds")


def check_cut_rows(f):
    for what, cache_lengths, n_kept in CUT_CASES:
        check_one_cut(f, what, cache_lengths, n_kept)
    check_cut_rows_in_runs(f)


def expected_cut(cache_lengths, n_kept):
    return [min(c, n) for c, n in zip(cache_lengths, n_kept)]


def as_cut(call, got, n_rows):
    """got, a list of ints (the contract holds it to that), or a failure: not one length per row."""
    if len(got) != n_rows:
        raise wrong(f"{call} returned {len(got)} length{'s' if len(got) != 1 else ''}, {got}, for a batch of {n_rows} "
                    "rows", "one length per row, in the rows' order, every row's (a row with nothing to cut keeps its "
                    "length)")
    return got


def check_one_cut(f, what, cache_lengths, n_kept):
    call = f"cut_rows({cache_lengths}, {n_kept})"
    got = attempt(call, f, fresh(cache_lengths), fresh(n_kept))
    expected = expected_cut(cache_lengths, n_kept)
    if got != expected:
        said, hint = explain_cut((cache_lengths, n_kept), got, expected)
        raise wrong(f"{call} ({what}) returned {got}, expected {expected}: {said}", hint)


def rotations(values):
    """values with each entry taken from another row: shifted by one either way, and reversed."""
    return [values[-1:] + values[:-1], values[1:] + values[:1], values[::-1]]


def explain_cut(args, g, e, f=None):
    """(what went wrong, where to look) for cut_rows(*args) = g, where e is right: the usual mistakes, then row by
    row."""
    c, n = args
    rows = len(c)
    if len(g) != rows:
        return (f"{len(g)} length{'s' if len(g) != 1 else ''} for a batch of {rows} rows", "one length per row, in the "
                "rows' order, every row's (a row with nothing to cut keeps its length)")
    named = []  # the usual mistakes that give g: several can, on a small batch
    if any(e[b] == c[b] > 0 for b in range(rows)) and g == [e[b] if c[b] > n[b] else 0 for b in range(rows)]:
        b = next(b for b in range(rows) if e[b] == c[b] > 0)
        named.append((f"row {b + 1} had nothing to drop (a cache of {c[b]} positions, n_kept {n[b]}) and was emptied: "
                      "that is the cut written as dropping the last (length - kept) positions, `[:-dropped]`, which "
                      "keeps nothing when dropped is 0 (`x[:-0]` is `x[:0]`)",
                      "cut to a length, `[:n]` or min(...), not by a count from the end"))
    if rows > 1 and len(set(e)) > 1 and len(set(g)) == 1:
        value = g[0]
        which = ("the shortest row's kept length" if value == min(e) else "the longest row's kept length"
                 if value == max(e) else "one length for all")
        b = next(b for b in range(rows) if e[b] != value)
        named.append((f"every row was cut to {value}, {which}; row {b + 1} (a cache of {c[b]} positions, n_kept "
                      f"{n[b]}) keeps {e[b]} of its own", "each row keeps its own number of positions, from its own "
                      "cache_lengths[b] and n_kept[b]: this batch does not pad its rows to one length (batch.py's "
                      "docstring, the choices)"))
    if g == [c[b] - e[b] for b in range(rows)]:
        named.append(("those are the positions each row drops (cache_lengths[b] minus its new length), not the length "
                      "it keeps", "return each row's new length: what its cache holds after the cut"))
    for moved in rotations(list(range(rows))) if rows > 1 else []:
        if g == [min(c[b], n[moved[b]]) for b in range(rows)] or g == [e[moved[b]] for b in range(rows)]:
            b = next(b for b in range(rows) if g[b] != e[b])
            named.append((f"row {b + 1} was cut with row {moved[b] + 1}'s numbers (n_kept[{moved[b]}] = "
                          f"{n[moved[b]]}), not its own (n_kept[{b}] = {n[b]}): the rows are paired out of order",
                          "pair row b's cache length with row b's n_kept: zip(cache_lengths, n_kept), both in the rows' "
                          "order"))
            break
    if g == list(n) and any(n[b] > c[b] for b in range(rows)):
        b = next(b for b in range(rows) if n[b] > c[b])
        named.append((f"row {b + 1}'s cache holds only {c[b]} positions and you cut it to {g[b]}, past its end: a cut "
                      "can only shorten (BatchKVCache.truncate refuses to lengthen a row). A draft cache is one short "
                      "of n_kept after a round that kept every draft: the draft never fed its last one", ROW_HINT))
    if named:
        return "; or ".join(what for what, _ in named), "; or ".join(dict.fromkeys(hint for _, hint in named))
    b = next(b for b in range(rows) if g[b] != e[b])
    row = f"row {b + 1} (a cache of {c[b]} positions, n_kept {n[b]})"
    if g[b] > c[b]:
        return (f"{row} was cut to {g[b]}, past its cache's end: a cut can only shorten (BatchKVCache."
                "truncate refuses to lengthen a row)", ROW_HINT)
    if g[b] > e[b]:
        if g[b] == n[b] + 1:
            return (f"{row} keeps {g[b]} positions, one more than n_kept: position {n[b]} is where the "
                    "newest token goes, and what the cache holds there is a rejected draft's keys and values",
                    "the newest token (the oracle's own) is in no cache: the next round feeds it first, so each "
                    "row keeps all its tokens but the newest, n_kept[b]")
        return (f"{row} keeps {g[b] - e[b]} position(s) past n_kept, {span(e[b], g[b] - 1)}: keys and "
                "values of drafts the oracle rejected, which the row's next tokens would attend to", ROW_HINT)
    return (f"{row} was cut {e[b] - g[b]} position(s) too short: {span(g[b], e[b] - 1)} "
            f"{'belongs' if g[b] == e[b] - 1 else 'belong'} to tokens that stay in the text, and their keys and "
            "values are gone (the next round would feed them again: the same tokens, more work)", ROW_HINT)


# End to end: the function cuts every cache of batched speculative decoding, in batch.rollback_rows's place.
# (prompt lengths, n_new, n_draft): rows of very different lengths, one row, one draft a round, long drafts.
RUNS = [((3, 41, 230), 24, 4), ((17,), 20, 3), ((5, 9, 6), 12, 1), ((12, 60, 12, 25), 16, 6)]


def run_prompts(lengths, seed):
    oracle = tiny_pair()[1]
    rng = np.random.default_rng(seed)
    return [rng.integers(0, oracle.vocab_size, n).tolist() for n in lengths]


@functools.lru_cache(maxsize=None)
def reference_run(lengths, n_new, n_draft, seed):
    """(rows, cost, greedy rows) of batch.py's own run (its own rollback_rows), and greedy decoding of each row."""
    import batch
    from speculative import greedy_generate
    draft, oracle = tiny_pair()
    spies = Spy(draft), Spy(oracle)
    prompts = run_prompts(lengths, seed)
    with replaced(batch, "forward_batch", counting(batch.forward_batch)):
        rows = batch.speculative_generate_batch(*spies, prompts, n_new, n_draft=n_draft)
    return rows, work(*spies), [list(greedy_generate(oracle, ids, n_new)) for ids in prompts]


def cutting_with(f, cuts):
    """A batch.rollback_rows that cuts each cache to what f says, noting (role, round, lengths, n_kept, cut)."""
    def rollback_rows(n_kept, *caches):
        round_number = 1 + sum(role == "draft" for role, *_ in cuts)
        for role, cache in zip(("draft", "oracle"), caches):
            lengths, given = cache.n_tokens().tolist(), fresh(n_kept)
            call = f"cut_rows({lengths}, {given})"
            got = as_cut(call, attempt(call, f, list(lengths), list(given)), len(lengths))
            cuts.append((role, round_number, lengths, list(given), got))
            past = [b for b in range(len(got)) if not 0 <= got[b] <= lengths[b]]
            if past:
                b = past[0]
                raise wrong(f"in round {round_number}, {call} (the {role}'s cache) returned {got}: row {b + 1} holds "
                            f"{lengths[b]} positions, and a cut to {got[b]} is past its end (BatchKVCache.truncate "
                            "refuses it)", ROW_HINT)
            cache.truncate(np.array(got, dtype=np.int64))
    return rollback_rows


def first_wrong_cut(cuts):
    """' The first cut that differs from min(...): ...' for the run's cuts, or ''."""
    for role, round_number, lengths, n_kept, got in cuts:
        expected = expected_cut(lengths, n_kept)
        if got != expected:
            return (f" The first cut that differs: round {round_number}, the {role}'s cache, rows of {lengths} "
               f"positions, n_kept {n_kept}: you cut to {got}, where min(...) keeps {expected}.")
    return ""


def check_cut_rows_in_runs(f):
    """Stage two: batched speculative decoding on the tiny pair with f cutting the caches. Every row must be greedy
    decoding's, and the run must cost what batch.py's own run costs: a cut too short changes no token, but makes
    the next forward feed the dropped tokens again."""
    import batch
    draft, oracle = tiny_pair()
    for seed, (lengths, n_new, n_draft) in enumerate(RUNS):
        own_rows, own_cost, greedy_rows = reference_run(lengths, n_new, n_draft, seed)
        prompts = run_prompts(lengths, seed)
        setting = (f"batch.speculative_generate_batch with your cut_rows in place of its rollback_rows, on prompts of "
                   f"{', '.join(map(str, lengths))} tokens, {n_new} new tokens each, n_draft={n_draft}")
        spies, cuts = (Spy(draft), Spy(oracle)), []
        try:
            with replaced(batch, "rollback_rows", cutting_with(f, cuts)), \
                    replaced(batch, "forward_batch", counting(batch.forward_batch)):
                rows = batch.speculative_generate_batch(*spies, prompts, n_new, n_draft=n_draft)
        except (AssertionError, NotImplementedError):
            raise
        except Exception as e:
            raise wrong(f"{setting}: the run raised {type(e).__name__}: {e}.{first_wrong_cut(cuts)}",
                        "a row cut to n_kept + 1 or more leaves a row with no new token to feed, or past a rejected "
                        f"draft; {ROW_HINT}") from None
        for b, (mine, greedy, own) in enumerate(zip(rows, greedy_rows, own_rows)):
            if mine != greedy and mine != own:  # own differs from greedy only at a float near-tie of the oracle
                i = next(i for i, (x, y) in enumerate(zip(mine, greedy)) if x != y)
                raise wrong(f"{setting}: row {b + 1}'s new token {i} is {mine[i]}, but greedy decoding gives "
                            f"{greedy[i]}.{first_wrong_cut(cuts)}",
                            "a row that keeps positions past n_kept keeps a rejected draft's keys, which the next "
                            f"tokens attend to; {ROW_HINT}")
        cost = work(*spies)
        if cost != own_cost:
            raise wrong(f"{setting}: every row's tokens are right, but the run cost {said(cost)}, where batch.py's own "
                        f"run costs {said(own_cost)}. A cut that drops positions of kept tokens changes no token: "
                        "the next forward feeds them again, and that is work a right cut never does."
                        f"{first_wrong_cut(cuts)}", ROW_HINT)


def reference_cut_rows():
    """batch.rollback_rows on a BatchKVCache whose rows hold cache_lengths: the lengths it leaves, a list of ints.
    (The project's rollback_rows as imported above: the runs above put another in batch's namespace.)"""
    from batch import BatchKVCache

    def cut_rows(cache_lengths, n_kept):
        cache = BatchKVCache(len(cache_lengths))
        cache.lengths = np.array(cache_lengths, dtype=np.int64)
        project_rollback_rows(list(n_kept), cache)
        return cache.n_tokens().tolist()
    return cut_rows


EXERCISES = (
    Exercise("26", "ex26_cut_rows", "cut_rows", check_cut_rows, reference_cut_rows),
)
