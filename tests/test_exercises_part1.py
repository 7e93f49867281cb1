"""The checkers of part 1's exercises (3, 4, 5): each wrong answer below fails with the message written for the
rule it breaks (tests/wrong_answers.py). The answers give hints away: read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from kvcache import KVCache  # noqa: E402
from wrong_answers import fails


# --- exercise 3: the accepted prefix --------------------------------------------

def test_accepted_prefix_without_a_default_for_all_accepted():
    fails("03", lambda d, o: next(i for i in range(len(d)) if d[i] != o[i]),
          r"\[5, 7, 9\], \[5, 7, 9, 4\]\) raised StopIteration", "all len\\(drafted\\) of them are accepted")


def test_accepted_prefix_that_skips_token_0():
    def answer(drafted, oracle_choice):
        n = 0
        while n < len(drafted) and drafted[n] and drafted[n] == oracle_choice[n]:
            n += 1
        return n
    fails("03", answer, r"\(\[0, 0\], \[0, 1, 2\]\) returned 0, expected 1", "token id 0")


def test_accepted_prefix_that_counts_every_match():
    fails("03", lambda d, o: sum(a == b for a, b in zip(d, o)), r"\[1, 7, 9, 4\]\) returned 2, expected 0", "first disagreement")


def test_accepted_prefix_with_a_sentinel_appended_to_the_callers_list():
    def answer(drafted, oracle_choice):
        drafted.append(None)  # the threshold notes' None, appended to the caller's list instead of a copy
        n = 0
        while drafted[n] == oracle_choice[n]:
            n += 1
        return n
    fails("03", answer, r"changed its argument drafted: \[5, 7, 9\] became \[5, 7, 9, None\]", "work on a copy")


def test_accepted_prefix_as_a_float():
    def answer(drafted, oracle_choice):
        n = 0.0
        while n < len(drafted) and drafted[int(n)] == oracle_choice[int(n)]:
            n += 1
        return n
    fails("03", answer, r"returned 2.0, a float; n, the number of drafts accepted, is an int", "type of what you return")


def test_accepted_prefix_as_seed_000_counts_it():
    def answer(drafted, oracle_choice):  # the threshold notes' n_accepted: the index of the first mismatch, plus one
        return next(i + 1 for i, (c, d) in enumerate(zip(oracle_choice, drafted + [None])) if c != d)
    fails("03", answer, r"\[5, 7, 9\], \[5, 7, 9, 4\]\) returned 4, expected 3: every draft accepted: the count runs to the "
          "end of drafted; that counts the oracle's own token too", "the oracle's own token comes after them", "exercise 8")


def test_accepted_prefix_with_is_for_equals():
    def answer(drafted, oracle_choice):
        n = 0
        while n < len(drafted) and drafted[n] is oracle_choice[n]:  # holds for ids up to 256 only
            n += 1
        return n
    fails("03", answer, r"\(\[2393, 50256, 257\], \[2393, 50256, 300, 11\]\) returned 0, expected 2", "==, not `is`",
          r"-5\.\.256")


def test_accepted_prefix_by_argmin_of_the_matches():
    # np.argmin of [True, True, True] is 0 (the round where every draft matches), but first: a NumPy integer
    fails("03", lambda d, o: np.argmin(np.array(d) == np.array(o[:len(d)])),
          r"\[5, 7, 9\], \[5, 7, 2, 4\]\) returned np.int64\(2\), a NumPy integer \(np.int64\); n, the number of drafts "
          "accepted, is a Python int", r"int\(\.\.\.\) turns it into Python's int")


def test_accepted_prefix_with_ids_in_int16():
    def answer(drafted, oracle_choice):  # "ids are small": real ones are not (50256 > 32767)
        d, o = np.array(drafted, np.int16), np.array(oracle_choice, np.int16)
        n = 0
        while n < len(d) and d[n] == o[n]:
            n += 1
        return n
    fails("03", answer, r"accepted_prefix_length\(\[2393, 50256, 257\], .* raised OverflowError: Python integer 50256 "
                        "out of bounds for int16")


def test_accepted_prefix_as_a_numpy_float():
    fails("03", lambda d, o: np.cumprod(np.array(d) == np.array(o[:len(d)]), dtype=float).sum(),
          r"returned np.float64\(2.0\), a float; n, the number of drafts accepted, is an int", "type of what you return")


# --- exercise 4: rollback -----------------------------------------------------------

def test_rollback_one_too_short():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept - 1))
    fails("04", answer, r"rollback\(12, <cache of 12>, <cache of 12>\) left its caches at \[11, 11\], expected \[12, 12\]: "
          "caches that hold exactly n_kept positions: nothing to cut; cache 1 was cut too short",
          "how many positions truncate")


def test_rollback_without_min():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(n_kept)
    fails("04", answer, r"rollback\(9, <cache of 8>\) raised ValueError", "shorter than n_kept must be left as it is")


def test_rollback_of_the_first_cache_only():
    def answer(n_kept, *caches):
        caches[0].truncate(min(caches[0].n_tokens(), n_kept))
    fails("04", answer, r"rollback\(5\) raised IndexError", "cuts every cache passed, and there may be none")


def test_rollback_that_keeps_the_newest_token_too():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept + 1))
    fails("04", answer, r"rollback\(0, <cache of 5>\) left its caches at \[1\], expected \[0\]: n_kept = 0: the cache keeps "
          r"nothing; cache 1 still holds 1 position\(s\) past the first 0", "at most n_kept positions")


def test_rollback_that_empties_a_long_cache():
    def answer(n_kept, *caches):
        for cache in caches:
            if cache.n_tokens() > n_kept:
                cache.truncate(0)
    fails("04", answer, r"left its caches at \[8, 0\], expected \[8, 9\]: .*; cache 2 was cut too short. It had 10 "
          "positions and must keep 9")


def test_rollback_of_a_list_of_caches():
    def answer(n_kept, caches):  # the signature misread: the caches come one by one, *caches
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept))
    fails("04", answer, r"rollback\(7, <cache of 10>, <cache of 9>\) raised TypeError: .*takes 2 positional arguments but 3")


# --- exercise 5: the KV-cache bug -------------------------------------------------

def keep_all_but_the_newest(tokens):
    return len(tokens) - 1


def classic_generate(oracle_keep, reserve=1, draft_keep=keep_all_but_the_newest, catch_up=True,
                     accepted=lambda d, c: checks.EXERCISES["03"].reference()(d, c), new_oracle_cache=False,
                     new_draft_cache=False):
    """ex05's generator as shipped, with its step 4 for each cache (None: no truncate), its step 1's reserve, its
    catch-up of the draft, its count of accepted drafts, and a new cache each round (fed the text again) as given."""
    def generate(draft, oracle, ids, n_new, n_draft):
        tokens, end = list(ids), len(ids) + n_new
        draft_cache, oracle_cache = KVCache(), KVCache()
        if len(tokens) > 1:  # both caches start with the prompt but its last token
            draft.forward(tokens[:-1], draft_cache, n_logits=1)
            oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
        while len(tokens) < end:
            k = min(n_draft, end - len(tokens) - reserve)
            if new_draft_cache:
                draft_cache = KVCache()
            drafted = []
            for _ in range(k):
                read = (drafted or tokens)[-1:] if draft_cache.n_tokens() else tokens + drafted
                drafted.append(int(np.argmax(draft.forward(read, draft_cache)[-1])))
            if new_oracle_cache:
                oracle_cache = KVCache()
                choice = np.argmax(oracle.forward(tokens + drafted, oracle_cache)[len(tokens) - 1:], axis=-1)
            else:
                choice = np.argmax(oracle.forward([tokens[-1]] + drafted, oracle_cache), axis=-1)
            n = accepted(drafted, choice)
            tokens += drafted[:n] + [int(choice[n])]
            n_kept = len(tokens) - 1
            if catch_up and draft_cache.n_tokens() < n_kept:
                draft.forward(tokens[draft_cache.n_tokens():n_kept], draft_cache, n_logits=1)
            if draft_keep is not None:
                draft_cache.truncate(min(draft_cache.n_tokens(), draft_keep(tokens)))
            if oracle_keep is not None:
                oracle_cache.truncate(min(oracle_cache.n_tokens(), oracle_keep(tokens)))
            yield from drafted[:n] + [int(choice[n])]
    return generate


def test_the_cache_bug_as_shipped_is_not_solved_yet():
    fails("05", classic_generate(None), r"token \d+ is \d+, but greedy decoding gives \d+", "python exercises/ex05",
          unsolved=True)


def test_the_cache_bug_fixed_one_position_too_short():
    fails("05", classic_generate(lambda tokens: len(tokens) - 2), "held \\d+ positions; it should hold",
          "never reads token", "cut 1 position\\(s\\) too short")


def test_the_cache_bug_fixed_one_position_too_long():
    fails("05", classic_generate(lambda tokens: len(tokens)), "1 extra position\\(s\\) hold keys and values of drafts",
          "step 4")


def test_a_round_that_overshoots():
    fails("05", classic_generate(lambda tokens: len(tokens) - 1, reserve=0), r"n_new=12, n_draft=3\) returned \[[\d, ]+\], "
          r"expected \[[\d, ]+\]: a prompt of one token: .*; the last round began with 11 of 12 tokens made, so it could "
          r"add 1; it drafted 1, and a round adds up to n_draft \+ 1 tokens", "step 1: how many tokens a round may draft")


def test_the_fixed_generator_passes():
    checks.check("05", classic_generate(keep_all_but_the_newest))


def test_a_fix_that_drops_the_drafts_catch_up():
    # The text stays right (the oracle's cache is right), and the draft guesses from a text with a hole in it:
    # only the oracle's pass count shows what it costs.
    fails("05", classic_generate(keep_all_but_the_newest, catch_up=False), "your tokens are right, but the draft's "
          r"cache is wrong: .* it fed token \d+ at position \d+, where the text has \d+: token\(s\) \[\d+\] at position "
          r"\d+ were never read", r"The oracle checked drafts in \d+ passes and kept \d+ of your \d+; with a right draft "
          r"cache it needs \d+ passes", "never changes the text, only the speed", "the draft never read its own last guess")


def test_a_fix_that_never_cuts_the_drafts_cache():
    # the draft's cache grows past the model's context window: the end of the context stops it
    fails("05", classic_generate(keep_all_but_the_newest, draft_keep=None), r"n_new=16, n_draft=4\) raised ValueError: "
          "position 24 is past short-draft's context window of 24", "a cache never cut")


def test_a_fix_that_compares_with_is():
    # drafted[n] is an int, oracle_choice[n] a NumPy int: `is` never holds, every draft is rejected
    fails("05", classic_generate(keep_all_but_the_newest, accepted=lambda d, c: next(
        (i for i in range(len(d)) if d[i] is not c[i]), len(d))), r"the oracle kept 0 of your \d+ drafts, where a right "
          r"round keeps \d+ of the same draft's \d+: it checked drafts in \d+ passes where \d+ suffice", "compare ids with ==")


def test_a_fix_with_a_new_oracle_cache_every_round():
    fails("05", classic_generate(None, new_oracle_cache=True), r"the oracle read \d+ tokens of the text again, though it "
          "had read them before", "truncate")


def test_a_fix_with_a_new_draft_cache_every_round():
    fails("05", classic_generate(keep_all_but_the_newest, new_draft_cache=True), r"the draft read \d+ tokens of the text again",
          "cut the draft's cache back")




def test_a_fix_that_ignores_n_draft():
    def generate(draft, oracle, ids, n_new, n_draft):
        return classic_generate(keep_all_but_the_newest)(draft, oracle, ids, n_new, 4)  # "4 drafts are plenty"
    fails("05", generate, r"with n_draft=2, 30 new tokens .*your tokens are right, but your rounds drafted up to 4 tokens "
          "each; with n_draft = 2 a round drafts up to 2", r"k = min\(n_draft, tokens left - 1\) tokens, n_draft the argument")


def test_a_generator_of_numpy_ints():
    def generate(draft, oracle, ids, n_new, n_draft):
        for token in classic_generate(keep_all_but_the_newest)(draft, oracle, ids, n_new, n_draft):
            yield np.int64(token)  # the oracle's choice as np.argmax gives it
    fails("05", generate, r"speculative_generate\(draft, oracle, \[3, 1, 4, 1, 5\], n_new=12, n_draft=3\): the token it "
          r"yielded 0 is np.int64\(\d+\), a NumPy integer \(np.int64\); a token id is a Python int", r"int\(\.\.\.\)")


def test_a_generator_that_extends_the_callers_prompt():
    def generate(draft, oracle, ids, n_new, n_draft):
        shipped = classic_generate(keep_all_but_the_newest)
        for token in shipped(draft, oracle, list(ids), n_new, n_draft):
            ids.append(token)  # "tokens = ids" in the shipped file's first line, without its list(...)
            yield token
    fails("05", generate, r"changed its argument ids: \[3, 1, 4, 1, 5\] became \[3, 1, 4, 1, 5, \d+\]",
          "the caller goes on with its prompt")


# --- new answers for exercises 3 and 4 ----------------------------------------------------

def test_accepted_prefix_that_pops_the_callers_drafts():
    def answer(drafted, oracle_choice):
        n = 0
        while drafted and drafted[0] == oracle_choice[n]:
            drafted.pop(0)  # "consume" the accepted drafts
            n += 1
        return n
    fails("03", answer, r"changed its argument drafted: \[5, 7, 9\] became \[9\]",
          r"speculative.py goes on with drafted\[:n\]")


def test_accepted_prefix_as_the_accepted_drafts():
    def answer(drafted, oracle_choice):
        return [d for d, o in zip(drafted, oracle_choice)][:checks.EXERCISES["03"].reference()(drafted, oracle_choice)]
    fails("03", answer, r"returned \[5, 7\], a list; n, the number of drafts accepted, is an int")


def test_accepted_prefix_against_the_oracles_next_choice():
    def answer(drafted, oracle_choice):  # oracle_choice[i + 1] read as the choice at draft i
        n = 0
        while n < len(drafted) and drafted[n] == oracle_choice[n + 1]:
            n += 1
        return n
    fails("03", answer, r"\(\[5, 7, 9\], \[5, 7, 9, 4\]\) returned 0, expected 3: every draft accepted",
          r"count up to len\(drafted\)")


def test_rollback_that_returns_the_caches():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept))
        return caches
    fails("04", answer, r"rollback\(7, <cache of 10>, <cache of 9>\) returned \(.*\), a tuple; the function returns "
          r"nothing \(None\)", "cut the caches in place")


def test_rollback_that_sets_the_length():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.length = n_kept  # truncate's own field, set directly: it lengthens a short cache too
    fails("04", answer, r"rollback\(9, <cache of 8>\) left its caches at \[9\], expected \[8\]: a cache shorter than "
          r"n_kept .*; cache 1 had 8 positions and was lengthened to 9", "a cut only shortens")


def test_rollback_that_skips_n_kept_0():
    def answer(n_kept, *caches):
        if n_kept:  # "nothing to keep, nothing to do"
            for cache in caches:
                cache.truncate(min(cache.n_tokens(), n_kept))
    fails("04", answer, r"rollback\(0, <cache of 5>\) left its caches at \[5\], expected \[0\]: n_kept = 0: the cache "
          "keeps nothing; cache 1 still holds 5 position", "at most n_kept positions")


def test_rollback_of_the_others_to_the_first_caches_length():
    def answer(n_kept, *caches):
        if caches:
            caches[0].truncate(min(caches[0].n_tokens(), n_kept))
            for cache in caches[1:]:  # "the caches must agree": every other cut to the first's length
                cache.truncate(min(cache.n_tokens(), caches[0].n_tokens()))
    fails("04", answer, r"rollback\(9, <cache of 8>, <cache of 10>\) left its caches at \[8, 8\], expected \[8, 9\]: .*; "
          "cache 2 was cut too short", "how many positions truncate")


def test_rollback_of_the_longest_cache_only():
    def answer(n_kept, *caches):
        if caches:  # "only the oracle's cache runs ahead": the longest one alone is cut
            longest = max(caches, key=lambda cache: cache.n_tokens())
            longest.truncate(min(longest.n_tokens(), n_kept))
    fails("04", answer, r"rollback\(8, caches of 10, 12 positions\) left 10, 8; expected 8, 8: cache 1 still holds 2 "
          r"position\(s\) past the first 8", "every cache passed in must end up holding at most n_kept positions")
