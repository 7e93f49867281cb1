"""Part 7, many prompts and another vocabulary: exercise 26 (cutting a ragged batch's caches after a round) and 27
(aligning a re-tokenized suffix). Each runs in two stages: the function alone on hand-made cases, then inside the
project's decoder (batch.speculative_generate_batch, crossvocab.crossvocab_generate) in place of the project's own
step, against the project's own run. The references are at the end: read them after the exercises."""

import contextlib
import functools

import numpy as np

from batch import rollback_rows as project_rollback_rows
from crossvocab import align_suffix as project_align_suffix

from .models import crossvocab_pair, tiny_pair
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

    def forward_batch(self, ids, kvcache, n_new, *args, **kwargs):
        self.passes += 1
        self.fed += int(np.sum(n_new))  # the rows' own new tokens, not the padding
        return self.model.forward_batch(ids, kvcache, n_new, *args, **kwargs)


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
    got = as_cut(call, attempt(call, f, fresh(cache_lengths), fresh(n_kept)), len(cache_lengths))
    expected = expected_cut(cache_lengths, n_kept)
    if got != expected:
        raise diagnose_cut(f"{call} ({what}) returned {got}, expected {expected}", cache_lengths, n_kept, expected, got)


def rotations(values):
    """values with each entry taken from another row: shifted by one either way, and reversed."""
    return [values[-1:] + values[:-1], values[1:] + values[:1], values[::-1]]


def diagnose_cut(what, c, n, e, g):
    """The failure for a wrong cut g of caches of c positions (expected e): the usual mistakes, then row by row."""
    rows = len(c)
    if rows > 1 and len(set(e)) > 1 and len(set(g)) == 1:
        value = g[0]
        which = ("the shortest row's kept length" if value == min(e) else "the longest row's kept length"
                 if value == max(e) else "one length for all")
        b = next(b for b in range(rows) if e[b] != value)
        return wrong(f"{what}: every row was cut to {value}, {which}; row {b + 1} (a cache of {c[b]} positions, "
                     f"n_kept {n[b]}) keeps {e[b]} of its own",
                     "each row keeps its own number of positions, from its own cache_lengths[b] and n_kept[b]: this "
                     "batch does not pad its rows to one length (batch.py's docstring, the choices)")
    if any(e[b] == c[b] > 0 for b in range(rows)) and g == [e[b] if c[b] > n[b] else 0 for b in range(rows)]:
        b = next(b for b in range(rows) if e[b] == c[b] > 0)
        return wrong(f"{what}: row {b + 1} had nothing to drop (a cache of {c[b]} positions, n_kept {n[b]}) and was "
                     "emptied: that is the cut written as dropping the last (length - kept) positions, `[:-dropped]`, "
                     "which keeps nothing when dropped is 0 (`x[:-0]` is `x[:0]`)",
                     "cut to a length, `[:n]` or min(...), not by a count from the end")
    if g == [c[b] - e[b] for b in range(rows)]:
        return wrong(f"{what}: those are the positions each row drops (cache_lengths[b] minus its new length), not the "
                     "length it keeps", "return each row's new length: what its cache holds after the cut")
    for moved in rotations(list(range(rows))) if rows > 1 else []:
        if g == [min(c[b], n[moved[b]]) for b in range(rows)] or g == [e[moved[b]] for b in range(rows)]:
            b = next(b for b in range(rows) if g[b] != e[b])
            return wrong(f"{what}: row {b + 1} was cut with row {moved[b] + 1}'s numbers (n_kept[{moved[b]}] = "
                         f"{n[moved[b]]}), not its own (n_kept[{b}] = {n[b]}): the rows are paired out of order",
                         "pair row b's cache length with row b's n_kept: zip(cache_lengths, n_kept), both in the "
                         "rows' order")
    if g == list(n) and any(n[b] > c[b] for b in range(rows)):
        b = next(b for b in range(rows) if n[b] > c[b])
        return wrong(f"{what}: row {b + 1}'s cache holds only {c[b]} positions and you cut it to {g[b]}, past its "
                     "end: a cut can only shorten (BatchKVCache.truncate refuses to lengthen a row). A draft cache is one "
                     "short of n_kept after a round that kept every draft: the draft never fed its last one",
                     ROW_HINT)
    b = next(b for b in range(rows) if g[b] != e[b])
    row = f"row {b + 1} (a cache of {c[b]} positions, n_kept {n[b]})"
    if g[b] > c[b]:
        return wrong(f"{what}: {row} was cut to {g[b]}, past its cache's end: a cut can only shorten (BatchKVCache."
                     "truncate refuses to lengthen a row)", ROW_HINT)
    if g[b] > e[b]:
        if g[b] == n[b] + 1:
            return wrong(f"{what}: {row} keeps {g[b]} positions, one more than n_kept: position {n[b]} is where the "
                         "newest token goes, and what the cache holds there is a rejected draft's keys and values",
                         "the newest token (the oracle's own) is in no cache: the next round feeds it first, so each "
                         "row keeps all its tokens but the newest, n_kept[b]")
        return wrong(f"{what}: {row} keeps {g[b] - e[b]} position(s) past n_kept, {span(e[b], g[b] - 1)}: keys and "
                     "values of drafts the oracle rejected, which the row's next tokens would attend to", ROW_HINT)
    return wrong(f"{what}: {row} was cut {e[b] - g[b]} position(s) too short: {span(g[b], e[b] - 1)} "
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
    from batch import speculative_generate_batch
    from speculative import greedy_generate
    draft, oracle = tiny_pair()
    spies = Spy(draft), Spy(oracle)
    prompts = run_prompts(lengths, seed)
    rows = speculative_generate_batch(*spies, prompts, n_new, n_draft=n_draft)
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
            with replaced(batch, "rollback_rows", cutting_with(f, cuts)):
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
    from kvcache import BatchKVCache

    def cut_rows(cache_lengths, n_kept):
        cache = BatchKVCache(len(cache_lengths))
        cache.lengths = np.array(cache_lengths, dtype=np.int64)
        project_rollback_rows(list(n_kept), cache)
        return cache.n_tokens().tolist()
    return cut_rows


# ---------------------------------------------------------------------------
# Exercise 27: aligning a re-tokenized suffix
# ---------------------------------------------------------------------------

def fresh_bytes(tokens):
    """Each token's bytes as a new object, as tiktoken's decode_single_token_bytes makes them (one-byte tokens are
    CPython's shared objects there, as in a slice of the text: an `is` for `==` holds on them and on nothing longer)."""
    return [bytes(list(t)) for t in tokens]


def pieces(text):
    """text split as a byte-level BPE of real size splits it: words with their leading space, runs of symbols,
    spaces; and every multi-byte character cut in two pieces of bytes, as a draft token can be."""
    import re
    tokens = []
    for word in re.findall(rb" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", text):
        if len(word) > 2 and word[-1] >= 0x80:  # ends in a character of several bytes: split it off, in two
            start = len(word) - 1
            while word[start] & 0xC0 == 0x80:  # back to the character's first byte
                start -= 1
            tokens += [word[:start], word[start:start + 1], word[start + 1:]] if start else [word[:1], word[1:]]
        else:
            tokens.append(word)
    return [t for t in tokens if t]


REAL_TEXT = ("The warnings module’s filter controls whether a warning is ignored, displayed, or turned into an "
             "exception — see the naïve café example below, then run python -W error::DeprecationWarning to treat "
             "every deprecation as an error (the default filter list is printed by warnings.filters).").encode()
REAL = pieces(REAL_TEXT)


def real_cases():
    """Real-size token lists (tens of tokens, of one to ten bytes): everything agreed and the oracle's token after
    it; agreement that ends inside a word token, inside a UTF-8 character (at a draft token's end, and inside one);
    a byte that differs."""
    joined = b"".join(REAL)
    ends = [int(e) for e in np.cumsum([len(t) for t in REAL])]
    dash = joined.index("\u2014".encode())  # the dash's 3 bytes are the drafts b"\xe2" and b"\x80\x94"
    cafe = joined.index("\u00e9".encode()) + 1  # inside the draft b"\xc3\xa9"
    inside = ends[40] + 2                     # inside a word
    assert dash + 1 in ends and all(e not in (dash + 2, cafe, inside) for e in ends)
    differ = bytearray(joined[:ends[50] + 3])
    differ[ends[47] + 1] ^= 0x20              # one letter of a word in the other case
    return [
        ("real-size tokens, everything agreed and the oracle's own token after it", REAL, joined + b" Done"),
        ("real-size tokens, agreement that ends inside a word token", REAL, joined[:inside]),
        ("real-size tokens, agreement that ends inside the 3-byte character \u2014, at a draft token's end", REAL,
         joined[:dash + 1]),
        ("real-size tokens, agreement that ends inside the 3-byte character \u2014 and inside a draft token", REAL,
         joined[:dash + 2]),
        ("real-size tokens, agreement that ends inside \u00e9, a draft token of 2 bytes", REAL, joined[:cafe]),
        ("real-size tokens, the oracle wrote one letter in the other case", REAL, bytes(differ)),
    ]


ALIGN_CASES = [
    ("one-byte drafts, then a word, all agreed, then the oracle's own token", [b"t", b"h", b"e", b" cat"],
     b"the cat sat"),
    ("agreement that ends inside a draft token, more drafts after it", [b"the", b" cat", b"s", b" sat"], b"the ca"),
    ("agreement that ends inside a draft token", [b"the", b" cat"], b"the ca"),
    ("disagreement inside a draft token", [b"the", b" cat"], b"the cow"),
    ("nothing agreed", [b"the", b" cat"], b"a dog"),
    ("everything agreed, nothing past it", [b"the", b" cat"], b"the cat"),
    ("agreement that ends inside a UTF-8 character", [b"caf", b"\xc3\xa9"], b"caf\xc3"),
    ("the character's second byte differs", [b"caf", b"\xc3\xa9", b"s"], b"caf\xc3\xa8s"),
    ("draft tokens that are pieces of a character", [b"\xe2\x80", b"\x94"], b"\xe2\x80\x94"),
    ("the draft drafted nothing (its window was full)", [], b"the"),
    ("the agreed text is shorter than the first draft", [b"the"], b"th"),
    ("a split the draft would not make itself", [b"th", b"e", b" cat"], b"the"),
    ("a later draft that matches the text after a wrong one", [b"a", b"b", b"c"], b"ac"),
    ("a draft whose bytes come later in the text", [b"the", b" cat"], b"the dog cat"),
] + real_cases()

ALIGN_HINT = ("the first n drafts stay while each one's bytes are the text's bytes at its place, all of them "
              "(text[end:end + len(d)] == d); rest is text[end:], the bytes past them")


def show_tokens(tokens):
    """A list of byte strings for a message: the first and last few when it is long."""
    if len(tokens) <= 8:
        return repr(tokens)
    return f"[{', '.join(map(repr, tokens[:3]))}, ... {len(tokens) - 6} more ..., {', '.join(map(repr, tokens[-3:]))}]"


def show_bytes(text, limit=48):
    return repr(text) if len(text) <= limit else f"{text[:limit // 2]!r}...{text[-limit // 2:]!r} ({len(text)} bytes)"


def check_align_suffix(f):
    for what, drafted, text in ALIGN_CASES:
        check_one_alignment(f, what, drafted, text)
    check_align_suffix_in_runs(f)


def expected_alignment(drafted, text):
    n, end = 0, 0
    while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
        end += len(drafted[n])
        n += 1
    return n, text[end:]


def identical_run(drafted, text):
    """What the loop with `is` for `==` gives: CPython shares the objects of one-byte strings only."""
    n, end = 0, 0
    while n < len(drafted) and text[end:end + len(drafted[n])] is drafted[n]:
        end += len(drafted[n])
        n += 1
    return n, text[end:]


def check_one_alignment(f, what, drafted, text):
    call = f"align_suffix({show_tokens(drafted)}, {show_bytes(text)})"
    given = fresh_bytes(drafted)
    n, rest = attempt(call, f, given, text, hints=((UnicodeDecodeError, (
        "the drafts and the text are bytes and can end inside a UTF-8 character: compare and slice bytes, "
        "never decode them to str")),))
    expected = expected_alignment(drafted, text)
    if (n, rest) != expected:
        raise diagnose_alignment(f"{call} ({what}) returned ({n}, {show_bytes(rest)}), expected ({expected[0]}, "
                                 f"{show_bytes(expected[1])})", drafted, text, n, rest, expected)


def short_of_the_end(drafted, text):
    """What the loop that keeps a draft only when it ends before the text's end gives (< for <=)."""
    n, end = 0, 0
    while n < len(drafted) and end + len(drafted[n]) < len(text) and text[end:end + len(drafted[n])] == drafted[n]:
        end += len(drafted[n])
        n += 1
    return n, text[end:]


def by_characters(drafted, text):
    """What the loop whose end moves by each draft's length in characters, not bytes, gives."""
    n, end = 0, 0
    while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
        end += len(drafted[n].decode("utf-8", errors="replace"))
        n += 1
    return n, text[end:]


def every_match(drafted, text):
    """What a loop that steps over a disagreeing draft and goes on matching gives (no stop at the first)."""
    n, end = 0, 0
    for d in drafted:
        if text[end:end + len(d)] == d:
            end += len(d)
            n += 1
    return n, text[end:]


def diagnose_alignment(what, drafted, text, n, rest, expected):
    """The failure for a wrong (n, rest): too many drafts kept, too few, or the right n with the wrong rest."""
    n_e, rest_e = expected
    end = len(text) - len(rest_e)  # the bytes the kept drafts spell
    if n > len(drafted):
        return wrong(f"{what}: there are only {len(drafted)} drafts", "n counts drafts that stay: at most len(drafted)")
    if n > n_e:
        d, tail = drafted[n_e], text[end:]
        there = tail[:len(d)]
        if len(tail) < len(d) and d.startswith(tail):  # the agreed text ends inside draft n_e
            if n > n_e + 1:
                return wrong(f"{what}: you kept {n} drafts, spelling {show_bytes(b''.join(drafted[:n]))}, but the "
                             f"agreed text is shorter: it ends inside draft {n_e} ({d!r}), of which only {tail!r} was "
                             "agreed", "keep a draft only when the text holds all of its bytes: test that the text "
                             "goes on with the draft, not that the drafts go on with the text")
            return wrong(f"{what}: you kept draft {n_e} ({d!r}), but the agreed text ends inside it: only {tail!r} "
                         "of it was agreed", "a draft stays only when all its bytes lie in the agreed text; the "
                         "agreed part of the draft the text ends inside goes into rest, to be encoded again in the "
                         "draft's tokens")
        if (n, rest) == every_match(drafted, text):
            return wrong(f"{what}: draft {n_e} ({d!r}) disagrees with the text there ({there!r}), and you kept "
                         "drafts after it that match further on",
                         "the kept drafts are a run from the first: stop at the first draft that disagrees")
        if d in tail:
            return wrong(f"{what}: draft {n_e} ({d!r}) is in the text, but at byte {text.index(d, end)}, not at "
                         f"byte {end} where it would go (the text has {there!r} there)",
                         "compare the draft with the text at its own place, text[end:end + len(d)] == d, not search "
                         "for it anywhere further on (`in`, find)")
        return wrong(f"{what}: you kept draft {n_e} ({d!r}), where the text has {there!r} (from byte {end})",
                     "compare the bytes themselves, text[end:end + len(d)] == d: a draft whose length fits in the text "
                     "has not agreed yet (counting bytes or tokens is not comparing them)")
    if n < n_e:
        if n == 0 and rest == text:
            return wrong(f"{what}: the draft's list would still spell the text, but the {n_e} draft(s) it agreed on "
                         "are thrown away and encoded again: its cache is cut back before them, so it reads them "
                         "again, and encoded anew they may split otherwise",
                         "keep the longest run of drafts, from the first, whose bytes lie in the text")
        variants = [
            (identical_run(drafted, text), f"that is the run with `is` for `==`: draft {n} ({drafted[n]!r}) equals "
             "the text there, but is another object", "compare bytes with ==: `is` asks whether two objects are one, "
             "and CPython shares the objects of one-byte strings only, so `is` holds on one-byte tokens and fails on "
             "real ones"),
            (short_of_the_end(drafted, text), f"that is the run that keeps a draft only when it ends before the agreed "
             f"text's end: draft {n} ({drafted[n]!r}) ends exactly there, and all its bytes are agreed",
             "a draft stays when it ends at the text's end or before (<=, not <)"),
            (expected_alignment(drafted[:-1], text), "that is the run of every draft but the last: the loop stops one "
             "draft short", "every draft can stay, the last included: the loop runs over all of drafted"),
            (by_characters(drafted, text), "that is the run whose position in the text moves by each draft's length in "
             "characters, not bytes: a character of UTF-8 is 1 to 4 bytes", "count bytes, len(d) of the draft's "
             "bytes, as the text's slices do; never decode them"),
        ]
        matches = [(said, hint) for run, said, hint in variants if run == (n, rest)]
        if matches:
            return wrong(f"{what}: " + "; or ".join(said for said, _ in matches), "; or ".join(h for _, h in matches))
        return wrong(f"{what}: you stopped before draft {n} ({drafted[n]!r}), whose bytes are the text's at byte "
                     f"{len(b''.join(drafted[:n]))}", ALIGN_HINT)
    if rest == text and end > 0:
        return wrong(f"{what}: rest is the whole agreed text, but the {n} kept draft(s) already spell its first {end} "
                     "bytes: the draft would read them twice",
                     "rest starts where the kept drafts end: text[end:], end the bytes they spell")
    if len(rest) < len(rest_e) and (rest_e.endswith(rest) or rest_e.startswith(rest)):
        lost = rest_e[:len(rest_e) - len(rest)] if rest_e.endswith(rest) else rest_e[len(rest):]
        return wrong(f"{what}: rest lost the byte(s) {lost!r}"
                     + (", a piece of a UTF-8 character, which decoding drops (errors='ignore') or replaces"
                        if any(b >= 0x80 for b in lost) else ""),
                     "rest is every byte past the kept drafts, text[end:], whole characters or not: never decode it")
    return wrong(f"{what}: the {n} kept draft(s) spell the text's first {end} bytes, so rest is text[{end}:] = "
                 f"{show_bytes(rest_e)}", "rest starts where the kept drafts end: text[end:]")


# End to end: the function aligns the draft's list in crossvocab_generate, in crossvocab.align_suffix's place, on the
# toy pair of vocabularies; after every round the draft's token list must spell the text.

def crossvocab_prompts(oracle_enc=None):
    """Oracle prompts of several lengths and kinds (tests/test_crossvocab.py runs them too): characters of two and
    three bytes, random tokens (bytes that are no characters), <|endoftext|> first, one byte. oracle_enc: the
    oracle's tokenizer, the toy pair's by default."""
    from crossvocab import encode_bytes
    oracle_enc = crossvocab_pair()[3] if oracle_enc is None else oracle_enc
    rng = np.random.default_rng(3)
    return {
        "characters": encode_bytes(oracle_enc, "café — the naïve cat".encode()),
        "random": rng.integers(0, oracle_enc.n_vocab, 7).tolist(),
        "endoftext": encode_bytes(oracle_enc, b"<|endoftext|>the"),
        "one": [int(rng.integers(0, 256))],
    }


CROSSVOCAB_RUNS = [(name, n_draft) for name in ("characters", "random", "endoftext", "one") for n_draft in (2, 5)]
CROSSVOCAB_NEW = 24


@functools.lru_cache(maxsize=None)
def crossvocab_reference(name, n_draft):
    """(tokens, cost) of crossvocab.py's own run, and greedy decoding's tokens."""
    from crossvocab import crossvocab_generate
    from speculative import greedy_generate
    draft, oracle, draft_enc, oracle_enc = crossvocab_pair()
    ids = crossvocab_prompts()[name]
    spies = Spy(draft), Spy(oracle)
    tokens = list(crossvocab_generate(*spies, draft_enc, oracle_enc, ids, CROSSVOCAB_NEW, n_draft=n_draft))
    return tokens, work(*spies), list(greedy_generate(oracle, ids, CROSSVOCAB_NEW))


def aligning_with(f, calls):
    """A crossvocab.align_suffix that asks f, noting each call's (drafted, text, answer)."""
    def align_suffix(drafted, text):
        call = f"align_suffix({show_tokens(drafted)}, {show_bytes(text)})"
        got = attempt(call, f, list(drafted), text)
        calls.append((list(drafted), text, got))
        return got
    return align_suffix


def check_align_suffix_in_runs(f):
    """Stage two: crossvocab_generate on the toy pair with f aligning the draft's list. The tokens must be the
    oracle's greedy text; after every round the draft's token list must spell the text; and the run must cost what
    crossvocab.py's own run costs."""
    import crossvocab
    from decoding import Stats
    draft, oracle, draft_enc, oracle_enc = crossvocab_pair()
    prompts = crossvocab_prompts()
    for name, n_draft in CROSSVOCAB_RUNS:
        own_tokens, own_cost, greedy = crossvocab_reference(name, n_draft)
        ids = prompts[name]
        setting = (f"crossvocab_generate with your align_suffix in place of its own, on the toy pair of vocabularies, "
                   f"{CROSSVOCAB_NEW} tokens after the prompt {crossvocab.spell(oracle_enc, ids)!r}, n_draft={n_draft}")
        spies, calls, stats = (Spy(draft), Spy(oracle)), [], Stats(trace=[])
        tokens = []
        try:
            with replaced(crossvocab, "align_suffix", aligning_with(f, calls)):
                for token in crossvocab.crossvocab_generate(*spies, draft_enc, oracle_enc, ids, CROSSVOCAB_NEW,
                                                            n_draft=n_draft, stats=stats):
                    tokens.append(int(token))
        except (AssertionError, NotImplementedError):
            raise
        except Exception as e:
            raise wrong(f"{setting}: round {len(stats.trace) + 1} raised {type(e).__name__}: {e}", ALIGN_HINT) from None
        # The draft's token list, rebuilt round by round: the prompt in its tokens, then each round's kept drafts and
        # the re-encoded rest. It must spell the text after every round.
        draft_tokens = crossvocab.encode_bytes(draft_enc, crossvocab.spell(oracle_enc, ids))
        text = list(ids)
        for r, (round_, (drafted, agreed, answer)) in enumerate(zip(stats.trace, calls), 1):
            d = round_.details
            draft_tokens += d.draft_ids[:d.draft_kept] + d.reencoded
            text += round_.new
            spelled, should = crossvocab.spell(draft_enc, draft_tokens), crossvocab.spell(oracle_enc, text)
            if spelled != should:
                at = next((i for i, (x, y) in enumerate(zip(spelled, should)) if x != y),
                          min(len(spelled), len(should)))
                raise wrong(f"{setting}: after round {r} the draft's token list spells {show_bytes(spelled[at - 8:])} "
                            f"from byte {max(at - 8, 0)}, where the text is {show_bytes(should[at - 8:])}: the round's "
                            f"drafts were {show_tokens(drafted)}, the agreed text {agreed!r}, and your align_suffix "
                            f"returned {answer!r}. The draft goes on from a text that is not there.",
                            ALIGN_HINT)
        if tokens != greedy and tokens != own_tokens:  # own differs from greedy only at a float near-tie
            i = next((i for i, (x, y) in enumerate(zip(tokens, greedy)) if x != y), len(tokens))
            raise wrong(f"{setting}: token {i} is {tokens[i] if i < len(tokens) else 'missing'}, but the oracle's "
                        f"greedy decoding gives {greedy[i]}", ALIGN_HINT)
        cost = work(*spies)
        if cost != own_cost:
            first = next(((drafted, agreed, answer) for drafted, agreed, answer in calls
                          if answer != expected_alignment(drafted, agreed)), None)
            where = ("" if first is None else f" The first alignment that differs: drafts {show_tokens(first[0])}, "
                     f"agreed text {first[1]!r}: you returned {first[2]!r}, crossvocab.py keeps "
                     f"{expected_alignment(first[0], first[1])!r}.")
            raise wrong(f"{setting}: the text is right and the draft's list spells it after every round, but the run "
                        f"cost {said(cost)}, where crossvocab.py's own run costs {said(own_cost)}: the draft was "
                        f"given other tokens to read.{where}", ALIGN_HINT)


EXERCISES = (
    Exercise("26", "ex26_cut_rows", "cut_rows", check_cut_rows, reference_cut_rows),
    Exercise("27", "ex27_align_suffix", "align_suffix", check_align_suffix, lambda: project_align_suffix),
)
