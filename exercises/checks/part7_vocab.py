"""Part 7, continued: exercise 27 (aligning a re-tokenized suffix), alone on hand-made cases, then inside
crossvocab.crossvocab_generate in place of its own align_suffix, against crossvocab.py's own run. The reference is
crossvocab.align_suffix: read it after the exercise."""

import functools

import numpy as np

from crossvocab import align_suffix as project_align_suffix

from .models import crossvocab_pair
from .part7_batch import Spy, replaced, said, work
from .running import Exercise, attempt, confirmed, wrong


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

ALIGNMENTS = [([b"the", b" cat", b"s"], b"the cow"), ([b"a", b"b"], b"a"), ([b"the", b" cat"], b"the cat sat")]
# (cases on which a diagnosis must hold too)

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
        said, hint = explain_alignment((drafted, text), (n, rest), expected, f)
        raise wrong(f"{call} ({what}) returned ({n}, {show_bytes(rest)}), expected ({expected[0]}, "
                    f"{show_bytes(expected[1])}): {said}", hint)


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


def explain_alignment(args, got, expected, f=None):
    """(what went wrong, where to look) for align_suffix(*args) = got, a wrong (n, rest): too many drafts kept, too
    few, or the right n with the wrong rest."""
    drafted, text = args
    n, rest = got
    n_e, rest_e = expected
    end = len(text) - len(rest_e)  # the bytes the kept drafts spell
    if n > len(drafted):
        return (f"there are only {len(drafted)} drafts", "n counts drafts that stay: at most len(drafted)")
    if n > n_e:
        d, tail = drafted[n_e], text[end:]
        there = tail[:len(d)]
        if len(tail) < len(d) and d.startswith(tail):  # the agreed text ends inside draft n_e
            if n > n_e + 1:
                return (f"you kept {n} drafts, spelling {show_bytes(b''.join(drafted[:n]))}, but the "
                        f"agreed text is shorter: it ends inside draft {n_e} ({d!r}), of which only {tail!r} was "
                        "agreed", "keep a draft only when the text holds all of its bytes: test that the text "
                        "goes on with the draft, not that the drafts go on with the text")
            return (f"you kept draft {n_e} ({d!r}), but the agreed text ends inside it: only {tail!r} "
                    "of it was agreed", "a draft stays only when all its bytes lie in the agreed text; the "
                    "agreed part of the draft the text ends inside goes into rest, to be encoded again in the "
                    "draft's tokens")
        if (n, rest) == every_match(drafted, text):
            return (f"draft {n_e} ({d!r}) disagrees with the text there ({there!r}), and you kept "
                    "drafts after it that match further on",
                    "the kept drafts are a run from the first: stop at the first draft that disagrees")
        if d in tail:
            return (f"draft {n_e} ({d!r}) is in the text, but at byte {text.index(d, end)}, not at "
                    f"byte {end} where it would go (the text has {there!r} there)",
                    "compare the draft with the text at its own place, text[end:end + len(d)] == d, not search "
                    "for it anywhere further on (`in`, find)")
        return (f"you kept draft {n_e} ({d!r}), where the text has {there!r} (from byte {end})",
                "compare the bytes themselves, text[end:end + len(d)] == d: a draft whose length fits in the text "
                "has not agreed yet (counting bytes or tokens is not comparing them)")
    if n < n_e:
        variants = [
            ((0, text), f"the draft's list would still spell the text, but the {n_e} draft(s) it agreed on are thrown "
             "away and encoded again: its cache is cut back before them, so it reads them again, and encoded anew they "
             "may split otherwise", "keep the longest run of drafts, from the first, whose bytes lie in the text"),
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
            return (f"" + "; or ".join(said for said, _ in matches), "; or ".join(h for _, h in matches))
        return (f"you stopped before draft {n} ({drafted[n]!r}), whose bytes are the text's at byte "
                f"{len(b''.join(drafted[:n]))}", ALIGN_HINT)
    if rest == text and end > 0:
        return (f"rest is the whole agreed text, but the {n} kept draft(s) already spell its first {end} "
                "bytes: the draft would read them twice",
                "rest starts where the kept drafts end: text[end:], end the bytes they spell")
    every = len(b"".join(drafted))
    if rest == text[every:] != rest_e and (every < len(text) if f is None else confirmed(
            f, lambda d, t: (expected_alignment(d, t)[0], t[len(b"".join(d)):]), ALIGNMENTS)):
        return (f"rest starts after ALL the drafts' bytes, at byte {every}, kept or not; the {n} kept draft(s) end at "
                f"byte {end}", "rest starts where the KEPT drafts end: text[end:], end the bytes they spell")
    if len(rest) < len(rest_e) and (rest_e.endswith(rest) or rest_e.startswith(rest)):
        lost = rest_e[:len(rest_e) - len(rest)] if rest_e.endswith(rest) else rest_e[len(rest):]
        piece = any(b >= 0x80 for b in lost)
        return (f"rest lost the byte(s) {lost!r}"
                + (", a piece of a UTF-8 character, which decoding drops (errors='ignore') or replaces" if piece else ""),
                "rest is every byte past the kept drafts, text[end:], whole characters or not"
                + (": never decode it" if piece else " (a slice, not a strip or a split, which drop or find bytes by "
                   "their value)"))
    return (f"the {n} kept draft(s) spell the text's first {end} bytes, so rest is text[{end}:] = "
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
    from stats import Stats
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
    Exercise("27", "ex27_align_suffix", "align_suffix", check_align_suffix, lambda: project_align_suffix),
)
