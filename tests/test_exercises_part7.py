"""The checkers of part 7's exercises (26, 27): each wrong answer below fails with the message written for the rule it
breaks (tests/wrong_answers.py). The answers give hints away: read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from wrong_answers import fails, fails_in_runs


# --- part 7: exercises 26 (a batch's caches) and 27 (another vocabulary's draft) ----------------------

def cut_each_row(rule):
    return lambda cache_lengths, n_kept: [rule(c, n) for c, n in zip(cache_lengths, n_kept)]


def test_cut_rows_to_the_shortest_row():
    def answer(cache_lengths, n_kept):  # one length for the batch, as pad-and-mask would keep
        return [min(min(c, n) for c, n in zip(cache_lengths, n_kept))] * len(cache_lengths)
    fails("26", answer, r"cut_rows\(\[\], \[\]\) raised ValueError: min\(\) arg is an empty sequence", "a batch can have no "
          r"rows, and min\(\) or max\(\) over them all has nothing to take")


def test_cut_rows_to_the_longest_row():
    def answer(cache_lengths, n_kept):
        return [max(min(c, n) for c, n in zip(cache_lengths, n_kept))] * len(cache_lengths)
    fails("26", answer, r"cut_rows\(\[\], \[\]\) raised ValueError: max\(\) arg is an empty sequence", "a batch can have no "
          "rows")


def test_cut_rows_without_the_min():
    fails("26", lambda cache_lengths, n_kept: list(n_kept),
          r"cut_rows\(\[415, 304\], \[416, 301\]\) returned \[416, 301\], expected \[415, 301\]: a draft's cache one short "
          "of its n_kept .*; row 1's cache holds only 415 positions and you cut it to 416, past its end",
          "the draft never fed its last one",
          r"min\(cache_lengths\[b\], n_kept\[b\]\)")


def test_cut_rows_that_keep_the_newest_token():
    fails("26", cut_each_row(lambda c, n: min(c, n + 1)), r"cut_rows\(\[37\], \[35\]\) returned \[36\], expected \[35\]: "
          r"one row; row 1 \(a cache of 37 positions, n_kept 35\) keeps 36 positions, one more than n_kept: position "
          "35 is where the newest token goes", "in no cache")


def test_cut_rows_one_position_too_short():
    fails("26", cut_each_row(lambda c, n: min(c, n) - 1), r"cut_rows\(\[37\], \[35\]\) returned \[34\], expected \[35\]: "
          r"one row; row 1 \(a cache of 37 positions, n_kept 35\) was cut 1 position\(s\) too short: position 34 belongs "
          "to tokens that stay", "feed them again")


def test_cut_rows_by_dropping_from_the_end():
    def answer(cache_lengths, n_kept):  # length - rejected, written as a slice that drops the rejected
        return [len(range(c)[:-(c - min(c, n))]) for c, n in zip(cache_lengths, n_kept)]
    fails("26", answer, r"cut_rows\(\[120, 345\], \[120, 340\]\) returned \[0, 340\], expected \[120, 340\]: a row whose "
          r"cache holds exactly n_kept: .*; row 1 had nothing to drop .* and was emptied", r"`x\[:-0\]` is `x\[:0\]`",
          "not by a count from the end")


def test_cut_rows_as_floats():
    fails("26", cut_each_row(lambda c, n: (c + n - abs(c - n)) / 2),  # min(c, n) by arithmetic: `/` makes floats
          r"cut_rows\(\[416, 305, 292\], \[416, 301, 290\]\) returned \[416.0, 301.0, 290.0\], whose entry 0 is 416.0, a "
          "float; a row's new length is an int")


def test_cut_rows_as_a_numpy_array():
    fails("26", lambda cache_lengths, n_kept: np.minimum(cache_lengths, n_kept),
          r"cut_rows\(\[416, 305, 292\], \[416, 301, 290\]\) returned \[416, 301, 290\], a NumPy array of int64; the text "
          r"promises a list \(the new lengths\)", r"\.tolist\(\)")


def test_cut_rows_paired_out_of_order():
    def answer(cache_lengths, n_kept):
        return [min(cache_lengths[b], n_kept[b - 1]) for b in range(len(n_kept))]
    fails("26", answer, r"cut_rows\(\[120, 345\], \[120, 340\]\) returned \[120, 120\], .*; or row 2 was cut with row 1's "
          r"numbers \(n_kept\[0\] = 120\), not its own \(n_kept\[1\] = 340\)", r"zip\(cache_lengths, n_kept\)")


def test_cut_rows_written_into_n_kept():
    def answer(cache_lengths, n_kept):
        for b, c in enumerate(cache_lengths):
            n_kept[b] = min(c, n_kept[b])
        return n_kept
    fails("26", answer, r"cut_rows\(\[415, 304\], \[416, 301\]\) changed its argument n_kept: \[416, 301\] became "
          r"\[415, 301\]", "would cut the oracle's cache to the draft's lengths")


def test_cut_rows_as_the_positions_dropped():
    fails("26", cut_each_row(lambda c, n: c - min(c, n)), r"cut_rows\(\[37\], \[35\]\) returned \[2\], expected \[35\]: "
          "one row; those are the positions each row drops", "each row's new length")


def test_cut_rows_of_the_rows_that_shrink_only():
    def answer(cache_lengths, n_kept):
        return [min(c, n) for c, n in zip(cache_lengths, n_kept) if c > n]
    fails("26", answer, r"cut_rows\(\[120, 345\], \[120, 340\]\) returned \[340\], expected \[120, 340\]: .*; 1 length for a "
          "batch of 2 rows", "every row's")


def test_cut_rows_squeezed_to_a_number_for_one_row():
    fails("26", lambda cache_lengths, n_kept: np.minimum(cache_lengths, n_kept).squeeze().tolist(),
          r"cut_rows\(\[37\], \[35\]\) returned 35, an int, not a list", "np.squeeze")


def test_a_cut_too_short_in_a_run_costs_work_not_tokens():
    fails_in_runs(checks.part7_batch.check_cut_rows_in_runs, cut_each_row(lambda c, n: min(c, n) - 1),
                  r"every row's tokens are right, but the run cost the draft \d+ passes feeding (\d+) tokens, the oracle "
                  r"\d+ passes feeding \d+, where batch.py's own run costs", "the next forward feeds them again",
                  r"round 1, the draft's cache, rows of \[6, 44, 233\] positions, n_kept \[3, 42, 230\]: you cut to "
                  r"\[2, 41, 229\]")


def test_a_cut_past_a_rows_end_in_a_run():
    fails_in_runs(checks.part7_batch.check_cut_rows_in_runs, lambda cache_lengths, n_kept: list(n_kept),
                  r"in round \d+, cut_rows\(.*\) \(the draft's cache\) returned .*: row \d+ holds (\d+) positions, and a "
                  "cut to \\d+ is past its end")


def test_a_cut_that_keeps_the_newest_token_in_a_run():
    fails_in_runs(checks.part7_batch.check_cut_rows_in_runs, cut_each_row(lambda c, n: min(c, n + 1)),
                  r"the run raised ValueError: .*round 1, the draft's cache, .* you cut to \[4, 43, 231\], where "
                  r"min\(\.\.\.\) keeps \[3, 42, 230\]", "no new token to feed")


def align(keep=lambda d, text, end: text[end:end + len(d)] == d, rest=lambda text, end: text[end:], stop=True):
    """An align_suffix that keeps a draft when keep(...) holds, from the first, stopping at the first that does not."""
    def answer(drafted, text):
        n, end = 0, 0
        for d in drafted:
            if not keep(d, text, end):
                if stop:
                    break
                continue
            n, end = n + 1, end + len(d)
        return n, rest(text, end)
    return answer


def test_align_suffix_by_lengths_instead_of_bytes():
    fails("27", align(keep=lambda d, text, end: end + len(d) <= len(text)),  # counts bytes, never compares them
          r"\(\[b'the', b' cat'\], b'the cow'\) .*returned \(2, b''\), expected \(1, b' cow'\): you kept draft 1 "
          r"\(b' cat'\), where the text has b' cow'", "counting bytes or tokens is not comparing them")


def test_align_suffix_that_keeps_the_draft_the_text_ends_inside():
    def answer(drafted, text):
        n, end = 0, 0
        while n < len(drafted) and end < len(text) and drafted[n].startswith(text[end:end + len(drafted[n])]):
            n, end = n + 1, end + len(drafted[n])
        return n, text[end:]
    fails("27", answer, r"align_suffix\(\[b'caf', b'\\xc3\\xa9'\], b'caf\\xc3'\) returned \(2, b''\), expected "
          r"\(1, b'\\xc3'\): a text that ends inside a UTF-8 character; you kept draft 1 \(b'\\xc3\\xa9'\), but the "
          "agreed text ends inside it", "goes into rest")


def test_align_suffix_through_str():
    def answer(drafted, text):
        text, drafted = text.decode("utf-8"), [d.decode("utf-8") for d in drafted]
        n, end = 0, 0
        while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
            n, end = n + 1, end + len(drafted[n])
        return n, text[end:].encode("utf-8")
    fails("27", answer, r"align_suffix\(\[b'caf', b'\\xc3\\xa9'\], b'caf\\xc3'\) raised UnicodeDecodeError",
          "never decode them to str")


def test_align_suffix_that_keeps_everything_when_the_text_is_shorter():
    def answer(drafted, text):
        if b"".join(drafted).startswith(text):  # "the text agrees with the drafts": every draft stays
            return len(drafted), b""
        return checks.part7_vocab.project_align_suffix(drafted, text)
    fails("27", answer, r"align_suffix\(\[b'the', b' cat'\], b''\) returned \(2, b''\), expected \(0, b''\): an empty "
          "agreed text; you kept 2 drafts, spelling b'the cat', but the agreed text is shorter: it ends inside draft 0",
          "not that the drafts go on with the text")


def test_align_suffix_with_the_rest_from_the_start_of_the_text():
    fails("27", align(rest=lambda text, end: text), r"align_suffix\(\[b'the', b' cat'\], b'the cat'\) returned \(2, "
          r"b'the cat'\), expected \(2, b''\): .*; rest is the whole agreed text, but the 2 kept draft\(s\) already spell "
          "its first 7 bytes", r"text\[end:\]")


def test_align_suffix_with_is_for_equals():
    fails("27", align(keep=lambda d, text, end: text[end:end + len(d)] is d),
          r"align_suffix\(\[b'the', b' cat'\], b'the cat'\) returned \(0, b'the cat'\), expected \(2, b''\): .*; or that is "
          "the run with `is` for `==`", "one-byte strings only")


def test_align_suffix_with_the_rest_as_a_list_of_ints():
    def answer(drafted, text):
        n, rest = checks.part7_vocab.project_align_suffix(drafted, text)
        return n, [byte for byte in rest]
    fails("27", answer, r"align_suffix\(\[b'the', b' cat', b's'\], b'the ca'\) returned \(1, \[32, 99, 97\]\), whose rest "
          r"is \[32, 99, 97\], a list of ints; rest is bytes", r"list\(b'ab'\) is \[97, 98\]")


def test_align_suffix_that_searches_the_text():
    fails("27", align(keep=lambda d, text, end: d in text[end:]), r"b'the dog cat'\) .*returned \(2, b' cat'\), "
          r"expected \(1, b' dog cat'\): draft 1 \(b' cat'\) is in the text, but at byte 7, not at byte 3",
          "not search for it")


def test_align_suffix_that_steps_over_a_wrong_draft():
    fails("27", align(stop=False), r"\(\[b'a', b'b', b'c'\], b'ac'\) .*returned \(2, b''\), expected \(1, b'c'\): draft 1 "
          r"\(b'b'\) disagrees", "stop at the first draft that disagrees")


def test_align_suffix_that_drops_the_draft_ending_at_the_texts_end():
    fails("27", align(keep=lambda d, text, end: end + len(d) < len(text) and text[end:end + len(d)] == d),
          r"align_suffix\(\[b'the', b' cat'\], b'the cat'\) returned \(1, b' cat'\), expected \(2, b''\): .*; that is the "
          r"run that keeps a draft only when it ends before the agreed text's end: draft 1 \(b' cat'\) ends exactly there",
          "<=, not <")


def test_align_suffix_that_keeps_no_draft():
    fails("27", lambda drafted, text: (0, text), r"align_suffix\(\[b'the', b' cat'\], b'the cat'\) returned \(0, b'the "
          r"cat'\), expected \(2, b''\): .*; the draft's list would still spell the text, but the 2 draft\(s\) it agreed "
          "on are thrown away", "the longest run")


def test_align_suffix_through_str_without_errors():
    def answer(drafted, text):
        text, drafted = text.decode("utf-8", errors="ignore"), [d.decode("utf-8", errors="ignore") for d in drafted]
        n, end = 0, 0
        while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
            n, end = n + 1, end + len(drafted[n])
        return n, text[end:].encode("utf-8")
    fails("27", answer, r"align_suffix\(\[b'caf', b'\\xc3\\xa9'\], b'caf\\xc3'\) returned \(1, b''\), expected "
          r"\(1, b'\\xc3'\): .*; rest lost the byte\(s\) b'\\xc3', a piece of a UTF-8 character", "never decode it")


def test_an_alignment_that_keeps_no_draft_in_a_run_costs_the_drafts_reading():
    fails_in_runs(checks.part7_vocab.check_align_suffix_in_runs, lambda drafted, text: (0, text),
                  "the text is right and the draft's list spells it after every round, but the run cost the draft "
                  r"\d+ passes feeding \d+ tokens", r"The first alignment that differs: .* you returned \(0, ")


def test_an_alignment_that_keeps_every_draft_in_a_run_misspells_the_text():
    fails_in_runs(checks.part7_vocab.check_align_suffix_in_runs, lambda drafted, text: (len(drafted), b""),
                  r"after round 1 the draft's token list spells .*, where the text is .*: the round's drafts were .*"
                  "The draft goes on from a text that is not there")




# --- new answers --------------------------------------------------------------------------------------

def test_cut_rows_written_into_the_cache_lengths():
    def answer(cache_lengths, n_kept):
        for b, n in enumerate(n_kept):
            cache_lengths[b] = min(cache_lengths[b], n)
        return cache_lengths
    fails("26", answer, r"cut_rows\(\[416, 305, 292\], \[416, 301, 290\]\) changed its argument cache_lengths: "
          r"\[416, 305, 292\] became \[416, 301, 290\]", "the caches still hold them")


def test_cut_rows_as_a_tuple():
    fails("26", lambda cache_lengths, n_kept: tuple(min(c, n) for c, n in zip(cache_lengths, n_kept)),
          r"returned \(416, 301, 290\), a tuple, not a list; the text promises a list \(the new lengths\)",
          "even for a batch of one row")


def test_cut_rows_as_a_generator():
    fails("26", lambda cache_lengths, n_kept: (min(c, n) for c, n in zip(cache_lengths, n_kept)),
          r"returned <generator object .*>, a generator, not a list", "even for a batch of one row")


def test_align_suffix_as_a_list():
    fails("27", lambda drafted, text: list(checks.part7_vocab.project_align_suffix(drafted, text)),
          r"align_suffix\(\[b'the', b' cat', b's'\], b'the ca'\) returned \[1, b' ca'\], a list; the text promises a "
          r"tuple \(n, rest\)", "return n, rest: a tuple")


def test_align_suffix_that_pops_the_kept_drafts():
    def answer(drafted, text):
        n, end = 0, 0
        while drafted and text[end:end + len(drafted[0])] == drafted[0]:
            end += len(drafted.pop(0))  # the kept drafts leave the list
            n += 1
        return n, text[end:]
    fails("27", answer, r"align_suffix\(\[b'the', b' cat', b's'\], b'the ca'\) changed its argument drafted: "
          r"\[b'the', b' cat', b's'\] became \[b' cat', b's'\]", "crossvocab.py goes on with the drafts it keeps")


def test_align_suffix_with_the_rest_decoded():
    def answer(drafted, text):
        n, rest = checks.part7_vocab.project_align_suffix(drafted, text)
        return n, rest.decode("utf-8", errors="replace")
    fails("27", answer, r"returned \(1, ' ca'\), whose rest is ' ca', a str; rest is bytes", "which no str can hold")
