"""The exercises' checkers, parts 4 and 6: prompt lookup and the tree mask (exercises 16 and 18), and the learned
pair (exercises 22-25): each passes the project's own function and fails plausible wrong answers with a message
naming what went wrong. The checkers' other tests: test_exercises.py. The wrong answers below give hints away: read
them after the exercises.
"""

import numpy as np
import pytest

import checks  # exercises/checks: conftest.py puts exercises/ on the path
from gpt2 import MASKED
from ngram import NGramDrafter
from speculative import speculative_generate
from stats import Stats
from test_exercises import fails

pytestmark = pytest.mark.slow  # as test_exercises.py is (conftest.py's SLOW_FILES)


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
    fails("16", answer, r"returned \[9, 1\], expected \[9, 1, 2\].*one guess short of k = 3", "end of the slice")


def test_lookup_that_finds_the_tail_itself():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n, -1, -1)),
          r"returned \[\], expected \[9, 1, 2\]", "excludes the tail itself")


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
    fails("16", answer, r"lookup\(\[11, 2, 5, 6, 2, 8, 1, 2\], k=2, max_tail=2\) returned \[5, 6\], expected \[8, 1\]: the last "
          r"2 tokens \[1, 2\] occur nowhere earlier as tokens, but their text '1,2' occurs at character 1 of "
          r"'11,2,5,6,2,8,1,2', inside other ids", "not their decimal text")


def test_lookup_as_floats():
    def answer(tokens, k, max_tail=3):
        return np.array(checks.EXERCISES["16"].reference()(tokens, k, max_tail), dtype=float)
    fails("16", answer, r"returned array\(\[9., 1., 2.\]\), whose entry 0 is np.float64\(9.0\), a float; a token id is an int",
          "every entry must be an int")


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
          r"lookup\(\[7, 7, 7, 7\], k=2, max_tail=3\) returned \[7, 7\], expected \[7\]: the last 3 token\(s\) \[7, 7, 7\] "
          r"occur earlier at position\(s\) \[0\]; the one at 0 overlaps the tail itself", "overlapping or not")


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
    fails("18", answer, r"row 5 \(node 5, child of node 2, depth 3\) hides column 4; column 4 is node 0, its ancestor",
          "its ancestors and itself")


def test_tree_mask_without_the_text():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[:, :n_text] = MASKED
        return mask
    fails("18", answer, r"hides column 0; column 0 is text, which every node sees")


def test_tree_mask_without_the_node_itself():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[np.arange(len(new)), n_text + np.asarray(new)] = MASKED
        return mask
    fails("18", answer, r"hides column 4; column 4 is node 0, itself")


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
    fails("18", answer, r"returned float64, expected float32", "the dtype of the array you fill")


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
    fails("18", answer, r"tree_mask\(<6 nodes>, new=\[2, 3, 4\], n_text=4, n_fed=2\): row 0 \(node 2, child of node 0, depth "
          r"2\) hides column 6; column 6 is node 2, itself", r"node i's keys sit in column n_text \+ i")


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
    fails("18", answer, r"new=\[2, 3, 4\], n_text=4, n_fed=2\) returned shape \(3, 7\), expected \(3, 9\)",
          "the n_fed nodes already in the cache")


# --- part 6, on the learned pair: exercises 22-25 -------------------------------------

def acceptance_by_kind(pooled=True, fresh=True, bottom=lambda s: s.drafted, consume=True, use_k=True,
                       use_n_new=True, per_round=False):
    def answer(draft, oracle, prompts, n_new, k):
        counts, rates, stats = {}, {}, Stats()
        for kind, ids in prompts:
            stats = Stats(trace=[]) if fresh else stats
            run = speculative_generate(draft, oracle, ids, n_new if use_n_new else 16, stats=stats,
                                       **({"n_draft": k} if use_k else {}))
            if consume:
                list(run)
            accepted, proposed = counts.get(kind, (0, 0)) if fresh else (0, 0)
            counts[kind] = (accepted + stats.accepted, proposed + bottom(stats))
            rates.setdefault(kind, []).extend([r.accepted / len(r.drafted) for r in stats.trace if r.drafted]
                                              if per_round else [stats.accepted / bottom(stats)])
        if not pooled or per_round:
            return {kind: sum(r) / len(r) for kind, r in rates.items()}
        return {kind: accepted / proposed for kind, (accepted, proposed) in counts.items()}
    return answer


def test_acceptance_by_kind_averaged_over_prompts():
    fails("22", acceptance_by_kind(pooled=False), "that is the mean of its prompts' rates", "pool the kind's counts")


def test_acceptance_by_kind_averaged_over_rounds():
    fails("22", acceptance_by_kind(per_round=True), r"that is the mean of its \d+ rounds' rates",
          "pool the counts of all its rounds")


def test_acceptance_by_kind_with_one_stats_for_every_prompt():
    fails("22", acceptance_by_kind(fresh=False), r"the acceptance of the first \d+ prompts together", "a fresh")


def test_acceptance_by_kind_over_the_tokens_produced():
    fails("22", acceptance_by_kind(bottom=lambda s: len(s.from_draft)), "new tokens that were drafts",
          r"stats\.drafted")


def test_acceptance_by_kind_that_ignores_k():
    # speculative_generate's default draft length is the checker's first k: only another k shows the mistake
    fails("22", acceptance_by_kind(use_k=False), r"n_new=12, k=3\).*drafts per round, speculative_generate's "
          r"default, not k = 3", "n_draft=k")


def test_acceptance_by_kind_that_ignores_n_new():
    fails("22", acceptance_by_kind(use_n_new=False), r"n_new=12, k=3\)", "the checker varies them")


def test_acceptance_by_kind_that_never_runs_the_generator():
    fails("22", acceptance_by_kind(consume=False), "raised ZeroDivisionError", "generator")


def test_acceptance_by_kind_as_counts():
    def answer(draft, oracle, prompts, n_new, k):
        counts = {}
        for kind, ids in prompts:
            stats = Stats()
            list(speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=stats))
            accepted, drafted = counts.get(kind, (0, 0))
            counts[kind] = (accepted + stats.accepted, drafted + stats.drafted)
        return counts  # the counts, never divided
    fails("22", answer, r"\['\w+'\] returned \(\d+, \d+\), not a number", "what the function returns")


def test_acceptance_by_kind_as_leviathans_alpha():
    fails("22", acceptance_by_kind(bottom=lambda s: s.accepted + s.rejections),
          r"accepted / \(accepted \+ rejections\), Leviathan et al.'s alpha", r"stats\.drafted")


def test_acceptance_by_kind_as_a_percentage():
    def answer(draft, oracle, prompts, n_new, k):
        return {kind: 100 * rate for kind, rate in acceptance_by_kind()(draft, oracle, prompts, n_new, k).items()}
    fails("22", answer, r"you gave \d+.\d{4}, expected 0.\d{4}: .* that is a percentage", "a fraction of 1")


def tokens_per_round(alpha, n_draft):
    return n_draft + 1 if alpha == 1 else (1 - alpha ** (n_draft + 1)) / (1 - alpha)


def best_draft_length(per_round=tokens_per_round, check=lambda T, n_draft: T[n_draft + 1] / T[1], last=lambda T: max(T) - 1,
                      largest_on_tie=False, draft_passes=lambda n_draft: n_draft, returns=lambda n_draft, score: n_draft):
    def answer(alpha, c, T):
        best, best_score = None, -1.0
        for n_draft in range(1, last(T) + 1):
            score = per_round(alpha, n_draft) / (draft_passes(n_draft) * c + check(T, n_draft))
            if score > best_score or (largest_on_tie and score == best_score):
                best, best_score = n_draft, score
        return returns(best, best_score)
    return answer


def test_best_draft_length_with_free_checking():
    fails("23", best_draft_length(check=lambda T, n_draft: 1.0), "best n_draft if checking were free", r"T\[n_draft \+ 1\] / T\[1\]")


def test_best_draft_length_that_divides_by_zero_at_alpha_1():
    fails("23", best_draft_length(per_round=lambda alpha, n_draft: (1 - alpha ** (n_draft + 1)) / (1 - alpha)),
          r"alpha=1, .* raised ZeroDivisionError", r"n_draft \+ 1 tokens")


def test_best_draft_length_checking_k_tokens():
    fails("23", best_draft_length(check=lambda T, n_draft: T[n_draft] / T[1]), r"costed at T\[n_draft\]", r"reads n_draft \+ 1 tokens")


def test_best_draft_length_past_the_curve():
    fails("23", best_draft_length(last=max), "raised KeyError", r"n_draft runs from 1 to max\(T\) - 1")


def test_best_draft_length_largest_on_a_tie():
    fails("23", best_draft_length(largest_on_tie=True), "the two tie", "smallest n_draft")


def test_best_draft_length_as_a_float():
    def answer(alpha, c, T):
        return float(checks.EXERCISES["23"].reference()(alpha, c, T))
    fails("23", answer, r"returned 2.0, a float; a draft length \(here n_draft = 2\) is an int", "type of what you return")


def test_best_draft_length_with_the_longest_k_at_alpha_1():
    def answer(alpha, c, T):
        if alpha == 1:  # "every draft is kept, so draft as many as the curve allows"
            return max(T) - 1
        return checks.EXERCISES["23"].reference()(alpha, c, T)
    fails("23", answer, r"best_draft_length\(alpha=1, c=0.1, T=\{1: 10, 2: 10, 3: 20, 4: 20\}\) returned 3, expected n_draft = 1 "
          r".*: at alpha = 1 every round yields n_draft \+ 1 tokens, but the longest n_draft is not the best", "score every n_draft")


def test_best_draft_length_with_a_draft_pass_for_the_oracles_token():
    fails("23", best_draft_length(draft_passes=lambda n_draft: n_draft + 1), r"alpha=0.83, c=0.265, .* returned 4, expected n_draft = 2 "
          r".*that is the best n_draft with n_draft \+ 1 draft passes a round", "the oracle's own token needs no draft pass")


def test_best_draft_length_without_the_oracles_token():
    fails("23", best_draft_length(per_round=lambda alpha, n_draft: n_draft if alpha == 1 else (1 - alpha ** n_draft) / (1 - alpha)),
          r"that is the best n_draft with \(1 - alpha\^n_draft\) / \(1 - alpha\) tokens a round, the drafts kept alone",
          "AND the oracle's own token")


def test_best_draft_length_returning_its_score():
    fails("23", best_draft_length(returns=lambda n_draft, score: score), r"returned \d+.\d+, expected n_draft = 2",
          "the draft length n_draft itself, not its score")


def test_best_draft_length_as_an_index():
    def answer(alpha, c, T):  # scores[0] is n_draft = 1
        from speedup import predicted_speedup
        scores = [predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]) for n_draft in range(1, max(T))]
        return int(np.argmax(scores))
    fails("23", answer, r"returned 1, expected n_draft = 2 .*1 is one less than the best n_draft: the index of the best score",
          r"scores\[i\] is n_draft = i \+ 1")


def accepted_path(choice_after=lambda i: i + 1, any_parent=False, one_level=False):
    def answer(parents, tokens, choice):
        path, at = [], -1
        while True:
            want = choice[0] if at == -1 else choice[choice_after(at)]
            child = next((j for j in range(len(parents)) if (any_parent or parents[j] == at) and tokens[j] == want
                          and j not in path), None)
            if child is None or (one_level and path):
                return path
            path.append(child)
            at = child
    return answer


def test_tree_path_with_choice_off_by_one():
    fails("24", accepted_path(choice_after=lambda i: i), r"the oracle chose \d+ \(choice\[\d+\]\)",
          r"after node i is choice\[i \+ 1\]")


def test_tree_path_to_any_node_with_the_token():
    fails("24", accepted_path(any_parent=True), r"node \d+ is not a child of node \d+", "a child of the last node")


def test_tree_path_of_one_level():
    fails("24", accepted_path(one_level=True), "the path goes on", "keep stepping down")


def test_tree_path_as_tokens():
    def answer(parents, tokens, choice):
        return [tokens[i] for i in checks.EXERCISES["24"].reference()(parents, tokens, choice)]
    fails("24", answer, "those are the path tokens", "indices")


def test_tree_path_as_floats():
    def answer(parents, tokens, choice):
        return np.array(checks.EXERCISES["24"].reference()(parents, tokens, choice), dtype=float)
    fails("24", answer, r"returned array\(\[1.\]\), whose entry 0 is np.float64\(1.0\), a float; a node index is an int")


def test_tree_path_as_a_mask_of_the_nodes():
    def answer(parents, tokens, choice):
        kept = [False] * len(parents)  # which nodes the round keeps, instead of their indices
        for i in checks.EXERCISES["24"].reference()(parents, tokens, choice):
            kept[i] = True
        return kept
    fails("24", answer, r"whose entry 0 is False, a bool; a node index is an int")


def test_tree_path_with_is_for_equals():
    def answer(parents, tokens, choice):
        path, at = [], -1
        while (child := next((j for j, p in enumerate(parents) if p == at and tokens[j] is choice[at + 1]),
                             None)) is not None:
            path.append(child)
            at = child
        return path
    fails("24", answer, r"tokens=\[464, 11361, 50256, 3290, 257, 13\], .* returned \[\], expected \[1, 4\]: that is the path "
          "with `is` for `==`", "CPython shares the objects of -5..256 only")


def test_tree_path_through_first_children_only():
    def answer(parents, tokens, choice):
        path, at = [], -1
        while (child := next((j for j, p in enumerate(parents) if p == at), None)) is not None \
                and tokens[child] == choice[at + 1]:  # the first child, and only it
            path.append(child)
            at = child
        return path
    fails("24", answer, r"returned \[\], expected \[1\]: after the root the oracle chose 12 \(choice\[0\]\), and node 1, a "
          "child of the root, has that token", r"every child of the last node kept, not its first only \(node 0\)")


def test_tree_path_leaf_first():
    def answer(parents, tokens, choice):
        return checks.EXERCISES["24"].reference()(parents, tokens, choice)[::-1]
    fails("24", answer, r"returned \[4, 1\], expected \[1, 4\]: that is the path leaf first", "root first")


def replay_lookup(step=1, held_back=1, sees=0, prefix=True, fixed_k=None, fixed_max_tail=None, empty_rounds=True,
                  start=None):
    def answer(tokens, n_prompt, k, max_tail=3):
        k, max_tail = fixed_k or k, fixed_max_tail or max_tail
        drafter, drafted, accepted, rounds, i = NGramDrafter(n=max_tail + 1), 0, 0, 0, n_prompt if start is None else start
        while i < len(tokens):
            guesses = drafter.lookup(tokens[:i + sees], k if held_back is None else min(k, len(tokens) - i - held_back))
            matches = [g == t for g, t in zip(guesses, tokens[i:])]
            n = (matches + [False]).index(False) if prefix else sum(matches)
            drafted, accepted, i = drafted + len(guesses), accepted + n, i + n + step
            rounds += 1 if guesses or empty_rounds else 0
        return drafted, accepted, rounds
    return answer


def test_lookup_replay_without_the_oracles_token():
    fails("25", replay_lookup(step=0), "did not finish", "AND the oracle's own token")


def test_lookup_replay_that_reads_ahead():
    fails("25", replay_lookup(sees=1), r"also sees tokens\[i\]", r"lookup\(tokens\[:i\], \.\.\.\)")


def test_lookup_replay_without_the_cut():
    fails("25", replay_lookup(held_back=None), "always asks for k drafts", r"min\(k, len\(tokens\) - i - 1\)")


def test_lookup_replay_counting_every_match():
    fails("25", replay_lookup(prefix=False), "counts every draft matching", "first one that differs")


def test_lookup_replay_with_k_written_in():
    fails("25", replay_lookup(fixed_k=4), r"k=2, max_tail=3\) returned .* that is the replay with k = 4, not 2",
          "the argument k")


def test_lookup_replay_with_the_drafters_default_tail():
    fails("25", replay_lookup(fixed_max_tail=3), r"k=3, max_tail=1\) returned .* with max_tail = 3, the default",
          r"NGramDrafter\(n=max_tail \+ 1\)")


def test_lookup_replay_as_floats():
    def answer(tokens, n_prompt, k, max_tail=3):
        drafted, accepted, rounds = replay_lookup()(tokens, n_prompt, k, max_tail)
        return drafted, accepted / 1, rounds  # "/ 1" to be safe: a float
    fails("25", answer, r"returned \(\d+, \d+.0, \d+\), whose accepted is \d+.0, a float; a count is an int")


def test_lookup_replay_without_the_empty_rounds():
    fails("25", replay_lookup(empty_rounds=False), "does not count the rounds whose lookup found nothing",
          "a round without drafts is still an oracle pass")


def test_lookup_replay_to_the_end_of_the_text():
    fails("25", replay_lookup(held_back=0), "whose last round may draft up to the end of the text",
          r"the oracle's own token must still fit")


def test_lookup_replay_from_the_start_of_the_prompt():
    fails("25", replay_lookup(start=0), "a replay from the start of the prompt", "i = n_prompt")
