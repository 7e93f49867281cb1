"""The checkers of part 4's exercises (16, 18): each wrong answer below fails with the message written for the rule
it breaks (tests/wrong_answers.py). The answers give hints away: read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from gpt2 import MASKED  # noqa: E402
from wrong_answers import fails


# --- exercises 16 and 18: prompt lookup, the tree mask ----------------------------------

def lookup(order, starts):
    def answer(tokens, k, max_tail=3):
        for n in order(min(max_tail, len(tokens) - 1)):
            for s in starts(len(tokens), n):
                if tokens[s:s + n] == tokens[-n:]:
                    return tokens[s + n:s + n + k]
        return []
    return answer


def test_lookup_of_the_earliest_occurrence():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n)), "LATEST", "direction")


def test_lookup_of_the_shortest_tail_first():
    fails("16", lookup(lambda m: range(1, m + 1), lambda length, n: range(length - n - 1, -1, -1)),
          "longest matching tail")


def test_lookup_with_max_tail_written_in():
    def answer(tokens, k, max_tail=3):
        return lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n - 1, -1, -1))(tokens, k)
    fails("16", answer, r"max_tail=1\) returned \[7, 8\], expected \[9, 1\]: that is the answer with max_tail = 3",
          "the argument max_tail")


def test_lookup_one_guess_short():
    def answer(tokens, k, max_tail=3):
        return checks.EXERCISES["16"].reference()(tokens, k, max_tail)[:k - 1]
    fails("16", answer, r"lookup\(\[4, 5, 4\], 2, 5\) returned \[5\], expected \[5, 4\]: max_tail longer than the text; "
          r"the last 1 token\(s\) \[4\] occur earlier at position\(s\) \[0\]; one guess short of k = 2", "end of the slice")


def test_lookup_that_finds_the_tail_itself():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n, -1, -1)),
          r"lookup\(\[1, 2, 1, 2\], 5\) returned \[\], expected \[1, 2\]: a match whose continuation runs into the end of "
          r"the text: .*; the last 2 token\(s\) \[1, 2\] occur earlier at position\(s\) \[0\]", "excludes the tail itself")


def test_lookup_in_the_joined_text():
    def answer(tokens, k, max_tail=3):
        joined = ",".join(map(str, tokens))
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            tail = ",".join(map(str, tokens[-n:]))
            at = joined.rfind(tail, 0, len(joined) - len(tail) - 1)
            if at >= 0:
                start = joined[:at].count(",")  # the token whose text the match begins in
                return tokens[start + n:start + n + k]
        return []
    # its search range also stops short of the overlapping occurrence, a boundary the text names: that comes first
    fails("16", answer, r"lookup\(\[7, 7, 7, 7\], 2\) returned \[7, 7\], expected \[7\]: an earlier occurrence that "
          "overlaps the tail; .* the one at 0 overlaps the tail itself", "overlapping or not")


def test_lookup_as_floats():
    def answer(tokens, k, max_tail=3):
        return np.array(checks.EXERCISES["16"].reference()(tokens, k, max_tail), dtype=float)
    fails("16", answer, r"lookup\(\[1, 2, 3, 9, 1, 2, 3\], 2\) returned \[9, 1\], a NumPy array of float64; the text "
          r"promises a list \(the token ids\)", r"\.tolist\(\)")


def test_lookup_in_bytes():
    def answer(tokens, k, max_tail=3):  # bytes.rfind, fast and exact, for ids that fit in a byte
        text = bytes(tokens)
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            at = text.rfind(text[-n:], 0, len(tokens) - 1)
            if at >= 0:
                return tokens[at + n:at + n + k]
        return []
    fails("16", answer, r"lookup\(\[2393, 50256, 7, 8, 50256, 9, 393, 50256\], k=2, max_tail=2\) raised ValueError: bytes "
          r"must be in range\(0, 256\)")


def test_lookup_of_occurrences_that_end_before_the_tail():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - 2 * n, -1, -1)),
          r"lookup\(\[7, 7, 7, 7\], 2\) returned \[7, 7\], expected \[7\]: an earlier occurrence that overlaps the tail; the "
          r"last 3 token\(s\) \[7, 7, 7\] occur earlier at position\(s\) \[0\]; the one at 0 overlaps the tail itself",
          "overlapping or not")


def test_lookup_with_tails_one_token_short():
    def answer(tokens, k, max_tail=3):  # max_tail read as NGramDrafter's n, whose tails are n - 1 tokens long
        return checks.EXERCISES["16"].reference()(tokens, k, max_tail - 1)
    fails("16", answer, r"returned \[\], expected \[8, 1, 2\]: that is the answer with max_tail = 0|that is the answer "
          r"with max_tail = \d; tails here are at most \d token\(s\) long", "the argument max_tail")


def test_tree_mask_that_is_causal():
    def answer(nodes, new, n_text, n_fed):
        width = n_text + n_fed + len(new)
        rows = n_text + np.asarray(new)[:, None]
        return np.where(np.arange(width)[None, :] <= rows, np.float32(0), MASKED)
    fails("18", answer, r"row \d+ \(node \d+, .*\) sees column \d+; column \d+ is node \d+, not on its path", "cousin")


def test_tree_mask_that_sees_the_parent_only():
    def answer(nodes, new, n_text, n_fed):
        mask = np.full((len(new), n_text + n_fed + len(new)), MASKED, np.float32)
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            mask[row, n_text + i] = 0
            if nodes[i].parent != -1:
                mask[row, n_text + nodes[i].parent] = 0
        return mask
    fails("18", answer, r"tree_mask\(<3 nodes>, new=\[0, 1, 2\], n_text=2, n_fed=0\) returned 000MM/0000M/00M00, expected "
          r"000MM/0000M/00000: a tree that is a line: .*; row 2 \(node 2, child of node 1, depth 3\) hides column 2; "
          r"column 2 is node 0, its ancestor", "its ancestors and itself")


def test_tree_mask_without_the_text():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[:, :n_text] = MASKED
        return mask
    fails("18", answer, r"hides column 0; column 0 is text, which every node sees")


def test_tree_mask_without_the_node_itself():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[np.arange(len(new)), n_text + np.asarray(new, dtype=np.int64)] = MASKED
        return mask
    fails("18", answer, r"tree_mask\(<1 nodes>, new=\[0\], n_text=1, n_fed=0\) returned 0M, expected 00: .*; row 0 \(node 0, "
          r"a child of the root, depth 1\) hides column 1; column 1 is node 0, itself")


def test_tree_mask_in_float64():
    def answer(nodes, new, n_text, n_fed):
        mask = np.zeros((len(new), n_text + n_fed + len(new)))  # float64
        mask[:] = MASKED
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            while i != -1:
                mask[row, n_text + i] = 0
                i = nodes[i].parent
        return mask
    fails("18", answer, r"tree_mask\(<2 nodes>, new=\[0, 1\], n_text=3, n_fed=0\) returned an array of shape \(2, 5\), a "
          r"NumPy array of float64; the text promises float32 \(the mask\)", "np.zeros or np.full without dtype")


def test_tree_mask_by_row_instead_of_node():
    def answer(nodes, new, n_text, n_fed):
        mask = np.full((len(new), n_text + n_fed + len(new)), MASKED, np.float32)
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            mask[row, n_text + row] = 0  # the row's own column, not node i's
            while nodes[i].parent != -1:
                i = nodes[i].parent
                mask[row, n_text + i] = 0
        return mask
    fails("18", answer, r"tree_mask\(<6 nodes>, new=\[5\], n_text=3, n_fed=5\) returned 0000M0MMM, expected 0000M0MM0: the "
          r"last node, every other fed before; row 0 \(node 5, child of node 2, depth 3\) hides column 8; column 8 is "
          r"node 5, itself", r"node i's keys sit in column n_text \+ i")


def test_tree_mask_without_the_nodes_fed_before():
    def answer(nodes, new, n_text, n_fed):
        mask = np.full((len(new), n_text + len(new)), MASKED, np.float32)  # columns for the new nodes only
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            while i != -1:
                if i >= new[0]:
                    mask[row, n_text + i - new[0]] = 0
                i = nodes[i].parent
        return mask
    fails("18", answer, r"tree_mask\(<6 nodes>, new=\[\], n_text=4, n_fed=2\) returned an array of shape \(0, 4\), not of "
          r"shape \(0, 6\), as the text says", "the n_fed nodes already in the cache")




# --- new answers --------------------------------------------------------------------------------------

def test_lookup_as_a_tuple():
    fails("16", lambda tokens, k, max_tail=3: tuple(checks.EXERCISES["16"].reference()(tokens, k, max_tail)),
          r"lookup\(\[1, 2, 3, 9, 1, 2, 3\], 2\) returned \(9, 1\), a tuple, not a list", "list\\(\\.\\.\\.\\) of a tuple")


def test_lookup_that_reverses_the_callers_text():
    def answer(tokens, k, max_tail=3):
        tokens.reverse()  # search from the end by reading the text backwards...
        found = checks.EXERCISES["16"].reference()(tokens[::-1], k, max_tail)
        return found
    fails("16", answer, r"changed its argument tokens: \[1, 2, 3, 9, 1, 2, 3\] became \[3, 2, 1, 9, 3, 2, 1\]",
          "a lookup only reads it")


def test_lookup_that_drops_k_0():
    def answer(tokens, k, max_tail=3):
        found = checks.EXERCISES["16"].reference()(tokens, max(k, 1), max_tail)  # "at least one guess"
        return found
    fails("16", answer, r"lookup\(\[1, 2, 3, 1, 2, 3\], 0\) returned \[1\], expected \[\]: k = 0; more than k = 0 guesses",
          "the cut at k")


def test_tree_mask_as_booleans():
    def answer(nodes, new, n_text, n_fed):
        return checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed) == 0  # True where a node sees
    fails("18", answer, r"tree_mask\(<2 nodes>, new=\[0, 1\], n_text=3, n_fed=0\) returned an array of shape \(2, 5\), a "
          r"NumPy array of bool; the text promises float32 \(the mask\)")


def test_tree_mask_with_minus_infinity():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        return np.where(mask == 0, np.float32(0), np.float32(1))  # 1 for "masked": a flag, not a logit offset
    fails("18", answer, r"tree_mask\(<3 nodes>, new=\[0, 1, 2\], n_text=2, n_fed=0\) returned 000\?\?/0000\?/00000, expected "
          r"000MM/0000M/00000: .*; entry \[0, 3\] is 1.0; use 0 \(visible\) or gpt2.MASKED \(hidden\)",
          "the two values a mask holds")


def test_tree_mask_that_hides_the_nodes_fed_before():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[:, n_text:n_text + n_fed] = MASKED  # "the nodes fed before are another round's"
        return mask
    fails("18", answer, r"tree_mask\(<6 nodes>, new=\[5\], n_text=3, n_fed=5\) returned 000MMMMM0, expected 0000M0MM0: .*; "
          r"row 0 \(node 5, child of node 2, depth 3\) hides column 3; column 3 is node 0, its ancestor")


def test_lookup_of_another_occurrence_than_the_latest():
    def answer(tokens, k, max_tail=3):
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            starts = [s for s in range(len(tokens) - n) if tokens[s:s + n] == tokens[-n:]]
            if starts:  # the middle one: "neither too old nor too recent"
                s = starts[len(starts) // 2]
                return tokens[s + n:s + n + k]
        return []
    fails("16", answer, r"lookup\(\[1, 2, 7, 1, 2, 8, 1, 2, 9, 1, 2\], k=2, max_tail=2\) returned \[8, 1\], expected \[9, 1\]: "
          r"the last 2 token\(s\) \[1, 2\] occur earlier at position\(s\) \[0, 3, 6\]; you took the one at 3, not the "
          "latest, at 6", "the latest")
