"""The checkers of part 6's exercises (22-25, on the learned pair): each wrong answer below fails with the message
written for the rule it breaks (tests/wrong_answers.py). The answers give hints away: read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from stats import Stats  # noqa: E402
from ngram import NGramDrafter  # noqa: E402
from speculative import speculative_generate  # noqa: E402
from wrong_answers import fails


# --- part 6, on the learned pair: exercises 22-25 -------------------------------------

def acceptance_by_kind(pooled=True, fresh=True, bottom=lambda s: s.drafted, consume=True, use_n_draft=True,
                       use_n_new=True, per_round=False):
    def answer(draft, oracle, prompts, n_new, n_draft):
        counts, rates, stats = {}, {}, Stats()
        for kind, ids in prompts:
            stats = Stats(trace=[]) if fresh else stats
            run = speculative_generate(draft, oracle, ids, n_new if use_n_new else 16, stats=stats,
                                       **({"n_draft": n_draft} if use_n_draft else {}))
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
    # speculative_generate's default draft length is the checker's first n_draft: only another one shows the mistake
    fails("22", acceptance_by_kind(use_n_draft=False), r"n_new=6, n_draft=1\) returned .*: one draft a round; 'prose' is "
          "0.3750, not 0.6667; that is its acceptance with 4 drafts per round, speculative_generate's default, not "
          "n_draft = 1", "n_draft=n_draft")


def test_acceptance_by_kind_that_ignores_n_new():
    fails("22", acceptance_by_kind(use_n_new=False), r"n_new=6, n_draft=1\) returned .*: one draft a round; 'prose' is "
          "0.7778, not 0.6667", "each decoded with n_new tokens and n_draft=n_draft")


def test_acceptance_by_kind_that_never_runs_the_generator():
    fails("22", acceptance_by_kind(consume=False), r"n_new=4, n_draft=2\) raised ZeroDivisionError", "a generator: it "
          "decodes, and fills its Stats, only as you iterate over it")


def test_acceptance_by_kind_as_counts():
    def answer(draft, oracle, prompts, n_new, n_draft):
        counts = {}
        for kind, ids in prompts:
            stats = Stats()
            list(speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft, stats=stats))
            accepted, drafted = counts.get(kind, (0, 0))
            counts[kind] = (accepted + stats.accepted, drafted + stats.drafted)
        return counts  # the counts, never divided
    fails("22", answer, r"returned \{'prose': \(2, 4\), .*\}, whose entry \['prose'\] is \(2, 4\), not a number; a kind's "
          "acceptance is a float", "what the function returns")


def test_acceptance_by_kind_as_leviathans_alpha():
    fails("22", acceptance_by_kind(bottom=lambda s: s.accepted + s.rejections),
          r"accepted / \(accepted \+ rejections\), Leviathan et al.'s alpha", r"stats\.drafted")


def test_acceptance_by_kind_as_a_percentage():
    def answer(draft, oracle, prompts, n_new, n_draft):
        return {kind: 100 * rate for kind, rate in acceptance_by_kind()(draft, oracle, prompts, n_new, n_draft).items()}
    fails("22", answer, r"one draft a round; 'prose' is 66.6667, not 0.6667; that is a percentage", "a fraction of 1")


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
    fails("23", best_draft_length(check=lambda T, n_draft: 1.0), r"best_draft_length\(1.0, 0.1, \{1: 10.0, 2: 10.0, 3: 20.0, "
          r"4: 20.0\}\) returned 3, expected 1: alpha = 1: .*; or that is the best n_draft if checking were free",
          r"T\[n_draft \+ 1\] / T\[1\], grows with n_draft")


def test_best_draft_length_that_divides_by_zero_at_alpha_1():
    fails("23", best_draft_length(per_round=lambda alpha, n_draft: (1 - alpha ** (n_draft + 1)) / (1 - alpha)),
          r"best_draft_length\(1.0, 0.1, .*\) raised ZeroDivisionError", r"n_draft \+ 1 tokens")


def test_best_draft_length_checking_k_tokens():
    fails("23", best_draft_length(check=lambda T, n_draft: T[n_draft] / T[1]), r"costed at T\[n_draft\]", r"reads n_draft \+ 1 tokens")


def test_best_draft_length_past_the_curve():
    fails("23", best_draft_length(last=max), "raised KeyError", r"n_draft runs from 1 to max\(T\) - 1")


def test_best_draft_length_largest_on_a_tie():
    fails("23", best_draft_length(largest_on_tie=True), "the two tie", "smallest n_draft")


def test_best_draft_length_as_a_float():
    def answer(alpha, c, T):
        return float(checks.EXERCISES["23"].reference()(alpha, c, T))
    fails("23", answer, r"best_draft_length\(0.8, 0.1, \{1: 10.0, 2: 12.0, 3: 13.0\}\) returned 2.0, a float; a draft "
          "length is an int", "type of what you return")


def test_best_draft_length_with_the_longest_k_at_alpha_1():
    def answer(alpha, c, T):
        if alpha == 1:  # "every draft is kept, so draft as many as the curve allows"
            return max(T) - 1
        return checks.EXERCISES["23"].reference()(alpha, c, T)
    fails("23", answer, r"best_draft_length\(1.0, 0.1, \{1: 10.0, 2: 10.0, 3: 20.0, 4: 20.0\}\) returned 3, expected 1: .*; "
          r"at alpha = 1 every round yields n_draft \+ 1 tokens, but the longest n_draft is not the best",
          "score every n_draft")


def test_best_draft_length_with_a_draft_pass_for_the_oracles_token():
    fails("23", best_draft_length(draft_passes=lambda n_draft: n_draft + 1), r"alpha=0.83, c=0.265, .* returned 4, expected n_draft = 2 "
          r".*that is the best n_draft with n_draft \+ 1 draft passes a round", "the oracle's own token needs no draft pass")


def test_best_draft_length_without_the_oracles_token():
    fails("23", best_draft_length(per_round=lambda alpha, n_draft: n_draft if alpha == 1 else (1 - alpha ** n_draft) / (1 - alpha)),
          r"returned 3, expected 1: .*; or that is the best n_draft with \(1 - alpha\^n_draft\) / \(1 - alpha\) tokens "
          "a round, the drafts kept alone", "AND the oracle's own token")


def test_best_draft_length_returning_its_score():
    fails("23", best_draft_length(returns=lambda n_draft, score: score), r"best_draft_length\(0.8, 0.1, \{1: 10.0, 2: 12.0, "
          r"3: 13.0\}\) returned 1.62667, a float; a draft length is an int", "type of what you return")


def test_best_draft_length_as_an_index():
    def answer(alpha, c, T):  # scores[0] is n_draft = 1
        from speedup import predicted_speedup
        scores = [predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]) for n_draft in range(1, max(T))]
        return int(np.argmax(scores))
    fails("23", answer, r"best_draft_length\(0.8, 0.1, \{1: 10.0, 2: 12.0\}\) returned 0, expected 1: a curve of two "
          "points: .*; 0 is outside 1..1, one less than the best n_draft: the index of the best score",
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
    fails("24", accepted_path(any_parent=True), r"accepted_path\(\[-1, 0\], \[5, 6\], \[6, 0, 0\]\) returned \[1\], "
          r"expected \[\]: the oracle's choice after the root is a grandchild's token; node 1 is not a child of the root",
          "a child of the last node")


def test_tree_path_of_one_level():
    fails("24", accepted_path(one_level=True), "the path goes on", "keep stepping down")


def test_tree_path_as_tokens():
    def answer(parents, tokens, choice):
        return [tokens[i] for i in checks.EXERCISES["24"].reference()(parents, tokens, choice)]
    fails("24", answer, "those are the path tokens", "indices")


def test_tree_path_as_floats():
    def answer(parents, tokens, choice):
        return np.array(checks.EXERCISES["24"].reference()(parents, tokens, choice), dtype=float)
    fails("24", answer, r"accepted_path\(\[-1, -1, 0\], \[11, 12, 13\], \[12, 0, 0, 0\]\) returned \[1\], a NumPy array "
          r"of float64; the text promises a list \(the node indices\)", r"\.tolist\(\)")


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
    fails("24", answer, r"returned \[2, 1, 0\], expected \[0, 1, 2\]: a line kept to its leaf; that is the path leaf "
          "first", "root first")


def replay_lookup(step=1, reserve=1, sees=0, prefix=True, fixed_n_draft=None, fixed_max_tail=None, empty_rounds=True,
                  start=None):
    def answer(tokens, n_prompt, n_draft, max_tail=3):
        n_draft, max_tail = fixed_n_draft or n_draft, fixed_max_tail or max_tail
        drafter, drafted, accepted, rounds, i = NGramDrafter(n=max_tail + 1), 0, 0, 0, n_prompt if start is None else start
        while i < len(tokens):
            guesses = drafter.lookup(tokens[:i + sees],
                                     n_draft if reserve is None else min(n_draft, len(tokens) - i - reserve))
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
    fails("25", replay_lookup(reserve=None), "always asks for n_draft drafts", r"min\(n_draft, len\(tokens\) - i - 1\)")


def test_lookup_replay_counting_every_match():
    fails("25", replay_lookup(prefix=False), "counts every draft matching", "first one that differs")


def test_lookup_replay_with_n_draft_written_in():
    fails("25", replay_lookup(fixed_n_draft=4), r"replay_lookup\(\[1, 2, 3, .*\], 8, 1\) returned \(8, 2, 6\), expected "
          r"\(2, 2, 6\): n_draft = 1; that is the replay with n_draft = 4, not 1", "the argument n_draft")


def test_lookup_replay_with_the_drafters_default_tail():
    fails("25", replay_lookup(fixed_max_tail=3), r"n_draft=3, max_tail=1\) returned .* with max_tail = 3, the default",
          r"NGramDrafter\(n=max_tail \+ 1\)")



def test_lookup_replay_as_floats():
    def answer(tokens, n_prompt, n_draft, max_tail=3):
        drafted, accepted, rounds = replay_lookup()(tokens, n_prompt, n_draft, max_tail)
        return drafted, accepted / 1, rounds  # "/ 1" to be safe: a float
    fails("25", answer, r"returned \(\d+, \d+.0, \d+\), whose accepted is \d+.0, a float; a count is an int")


def test_lookup_replay_without_the_empty_rounds():
    fails("25", replay_lookup(empty_rounds=False), "does not count the rounds whose lookup found nothing",
          "a round without drafts is still an oracle pass")


def test_lookup_replay_to_the_end_of_the_text():
    fails("25", replay_lookup(reserve=0), "whose last round may draft up to the end of the text",
          r"the oracle's own token must still fit")


def test_lookup_replay_from_the_start_of_the_prompt():
    fails("25", replay_lookup(start=0), "a replay from the start of the prompt", "i = n_prompt")




# --- new answers --------------------------------------------------------------------------------------

def test_acceptance_by_kind_in_numpy_floats():
    def answer(draft, oracle, prompts, n_new, n_draft):
        return {kind: np.float64(rate) for kind, rate in acceptance_by_kind()(draft, oracle, prompts, n_new,
                                                                               n_draft).items()}
    fails("22", answer, r"n_new=4, n_draft=2\) returned .*, whose entry \['prose'\] is np.float64\(.*\), a NumPy float "
          r"\(np.float64\); a kind's acceptance is a Python float", r"float\(\.\.\.\)")


def test_acceptance_by_kind_as_pairs():
    def answer(draft, oracle, prompts, n_new, n_draft):
        return list(acceptance_by_kind()(draft, oracle, prompts, n_new, n_draft).items())
    fails("22", answer, r"returned \[\('prose', .*\)\], a list, not a dict; the text promises a dict \{kind: acceptance\}",
          "return a dict, one entry per kind")


def test_acceptance_by_kind_with_its_kinds_renamed():
    def answer(draft, oracle, prompts, n_new, n_draft):
        return {kind.title(): rate for kind, rate in acceptance_by_kind()(draft, oracle, prompts, n_new,
                                                                          n_draft).items()}
    fails("22", answer, r"n_new=6, n_draft=1\) returned \{'Prose': .*: one draft a round; the kinds are \['code', 'lists', "
          r"'prose', 'repeat'\]", "the kinds are the keys")


def test_best_draft_length_that_pads_the_callers_curve():
    def answer(alpha, c, T):
        T[max(T) + 1] = 2 * T[max(T)]  # "one more point, so that n_draft = max(T) - 1 has its T[n_draft + 1]"
        return best_draft_length(last=lambda T: max(T) - 2)(alpha, c, T)
    fails("23", answer, r"best_draft_length\(0.8, 0.1, \{1: 10.0, 2: 12.0, 3: 13.0\}\) changed its argument T: "
          r"\{1: 10.0, 2: 12.0, 3: 13.0\} became \{1: 10.0, 2: 12.0, 3: 13.0, 4: 26.0\}", "the caller goes on with its measured curve")


def test_best_draft_length_by_numpy_argmax():
    def answer(alpha, c, T):
        from speedup import predicted_speedup
        return np.argmax([predicted_speedup(alpha, n, c, T[n + 1] / T[1]) for n in range(1, max(T))]) + 1
    fails("23", answer, r"best_draft_length\(0.8, 0.1, \{1: 10.0, 2: 12.0, 3: 13.0\}\) returned np.int64\(2\), a NumPy "
          r"integer \(np.int64\); a draft length is a Python int", r"int\(\.\.\.\)")


def test_best_draft_length_one_short_of_the_curve():
    fails("23", best_draft_length(last=lambda T: max(T) - 2), r"best_draft_length\(0.8, 0.1, \{1: 10.0, 2: 12.0\}\) "
          "returned None: nothing; a draft length is an int", "return a value on every path")


def test_tree_path_as_a_tuple():
    def answer(parents, tokens, choice):
        return tuple(checks.EXERCISES["24"].reference()(parents, tokens, choice))
    fails("24", answer, r"accepted_path\(\[-1, -1, 0\], \[11, 12, 13\], \[12, 0, 0, 0\]\) returned \(1,\), a tuple, not a "
          r"list; the text promises a list \(the node indices\)", r"list\(\.\.\.\)")


def test_tree_path_in_numpy_ints():
    def answer(parents, tokens, choice):
        return [np.int64(i) for i in checks.EXERCISES["24"].reference()(parents, tokens, choice)]
    fails("24", answer, r"returned \[np.int64\(1\)\], whose entry 0 is np.int64\(1\), a NumPy integer \(np.int64\); a node "
          "index is a Python int", r"int\(\.\.\.\)")


def test_tree_path_from_the_root_itself():
    def answer(parents, tokens, choice):
        return [-1] + checks.EXERCISES["24"].reference()(parents, tokens, choice)  # the root as node -1
    fails("24", answer, r"accepted_path\(\[\], \[\], \[3\]\) returned \[-1\], expected \[\]: an empty tree; not node "
          "indices", r"return the nodes' indices \(0 to -1\)")


def test_lookup_replay_as_a_list():
    fails("25", lambda tokens, n_prompt, n_draft, max_tail=3: list(replay_lookup()(tokens, n_prompt, n_draft, max_tail)),
          r"replay_lookup\(\[1, 2, 3, .*\], 8, 4\) returned \[\d+, \d+, \d+\], a list; the text promises a tuple "
          r"\(drafted, accepted, rounds\)", "a tuple, as the text says")


def test_lookup_replay_with_a_sentinel_appended_to_the_text():
    def answer(tokens, n_prompt, n_draft, max_tail=3):
        tokens.append(-1)  # "a sentinel: the last round always sees a miss"
        drafted, accepted, rounds = replay_lookup()(tokens[:-1], n_prompt, n_draft, max_tail)
        return drafted, accepted, rounds
    fails("25", answer, r"changed its argument tokens: \[1, 2, 3, .*, 2, 3\] became \[1, 2, 3, .*, 2, 3, -1\]",
          "the caller replays other settings on the same text")


def test_lookup_replay_in_numpy_counts():
    def answer(tokens, n_prompt, n_draft, max_tail=3):
        return tuple(np.int64(x) for x in replay_lookup()(tokens, n_prompt, n_draft, max_tail))
    fails("25", answer, r"returned \(np.int64\(\d+\), .*\), whose drafted is np.int64\(\d+\), a NumPy integer "
          r"\(np.int64\); a count is a Python int", r"int\(\.\.\.\)")
