"""A second student trial's wrong answers to exercises 16-29 that the checkers passed, or failed with a message about
another mistake or none: each now fails with the message written for the rule it breaks (tests/wrong_answers.py).
The answers give hints away: read them after the exercises."""

import functools
import math

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from gpt2 import MASKED  # noqa: E402
from ngram import NGramDrafter  # noqa: E402
from speculative import speculative_generate  # noqa: E402
from stats import Stats  # noqa: E402
from wrong_answers import fails


def reference(number):
    return checks.EXERCISES[number].reference()


# --- exercise 16: prompt lookup --------------------------------------------------------------------------------

def lookup(zero=True, late=0, tail_shift=0, longest_only=False, cut_at_tail=False):
    def answer(tokens, k, max_tail=3):
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            tail = tokens[len(tokens) - n - tail_shift:len(tokens) - tail_shift]
            for s in range(len(tokens) - n - 1, -1 if zero else 0, -1):
                if tokens[s:s + n] == tail:
                    end = min(s + n + late + k, len(tokens) - n if cut_at_tail else len(tokens))
                    return tokens[s + n + late:end]
            if longest_only:
                break
        return []
    return answer


def test_lookup_whose_search_stops_before_start_0():
    fails("16", lookup(zero=False), r"lookup\(\[4, 5, 4\], 2, 5\) returned \[\], expected \[5, 4\]: .*your search never tries "
          "start 0", r"a stop of 0 leaves 0 out")


def test_lookup_one_token_late():
    fails("16", lookup(late=1), r"returned \[2\], expected \[1, 2\]: .*your guesses start one token late", r"tokens\[s \+ n\]")


def test_lookup_of_the_tail_one_token_early():
    fails("16", lookup(tail_shift=1), r"the tail you looked for is tokens\[-n - 1:-1\], not the last n tokens",
          r"tokens\[-n:\]")


def test_lookup_of_the_longest_tail_only():
    fails("16", lookup(longest_only=True), r"lookup\(\[1, 2, 1, 2\], 5\) returned \[\], expected \[1, 2\]: .*only the "
          "longest tail was tried", "the first n that matches wins")


def test_lookup_cut_where_the_tail_begins():
    fails("16", lookup(cut_at_tail=True), r"your guesses stop where the tail begins", r"tokens\[s \+ n:s \+ n \+ k\]")


def test_lookup_by_list_membership():
    def answer(tokens, k, max_tail=3):
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            if tokens[-n:] in tokens[:-n]:  # a list is never an entry of a list of ints
                i = tokens[:-n].index(tokens[-n:])
                return tokens[i + n:i + n + k]
        return []
    fails("16", answer, r"returned \[\], expected \[1, 2\]: .*your lookup found none of them", r"a list is never `in` a "
          "list of ints")


# --- exercise 18: the tree mask ----------------------------------------------------------------------------

def mask(hide=MASKED, see=np.float32(0), consume=False):
    def answer(nodes, new, n_text, n_fed):
        m = np.full((len(new), n_text + n_fed + len(new)), hide, np.float32)
        m[:, :n_text] = see
        rows = []
        while consume and new:
            rows.append(new.pop(0))  # the caller's list, emptied
        for row, i in enumerate(rows if consume else new):
            while i != -1:
                m[row, n_text + i] = see
                i = nodes[i].parent
        return m
    return answer


def test_tree_mask_with_minus_infinity():
    fails("18", mask(hide=np.float32(-np.inf)), r"returned 000\?\?/0000\?/00000, expected 000MM/0000M/00000: .*entry \[0, "
          r"3\] is -inf; use 0 \(visible\) or gpt2.MASKED \(hidden\)", "0 and gpt2.MASKED")


def test_tree_mask_inverted():
    fails("18", mask(hide=np.float32(0), see=MASKED), r"returned MM, expected 00: .*the mask is inverted", "0 where node "
          r"new\[row\] may attend")


def test_tree_mask_that_pops_the_new_nodes():
    fails("18", mask(consume=True), r"tree_mask\(<2 nodes>, new=\[0, 1\], n_text=3, n_fed=0\) changed its argument new: "
          r"\[0, 1\] became \[\]", "tree.py goes on with the nodes it feeds")


# --- exercise 22: acceptance by kind --------------------------------------------------------------------------

def by_kind(run=lambda d, o, ids, n_new, n_draft, stats: speculative_generate(d, o, ids, n_new, n_draft=n_draft, stats=stats),
            rate=lambda accepted, drafted, rounds: accepted / drafted, read_fresh=False):
    def answer(draft, oracle, prompts, n_new, n_draft):
        counts = {}
        for kind, ids in prompts:
            stats = Stats()
            list(run(draft, oracle, ids, n_new, n_draft, stats))
            stats = Stats() if read_fresh else stats
            a, d, r = counts.get(kind, (0, 0, 0))
            counts[kind] = (a + stats.accepted, d + stats.drafted, r + stats.rounds)
        return {kind: rate(*c) for kind, c in counts.items()}
    return answer


def test_acceptance_by_kind_with_n_new_and_n_draft_swapped():
    fails("22", by_kind(run=lambda d, o, ids, n_new, n_draft, stats: speculative_generate(d, o, ids, n_draft,
                                                                                         n_draft=n_new, stats=stats)),
          r"raised ZeroDivisionError: division by zero; the oracle ran, but the draft never did", "in each other's places")


def test_acceptance_by_kind_as_the_rejected_share():
    fails("22", by_kind(rate=lambda a, d, r: 1 - a / d), "that is the share of its drafts REJECTED", "the drafts the oracle "
          "kept over the drafts proposed")


def test_acceptance_by_kind_read_from_a_new_stats():
    fails("22", by_kind(read_fresh=True), "raised ZeroDivisionError: division by zero; the models ran and drafted, but the "
          "Stats you divided by counted nothing", "a Stats made afresh counts nothing")


def test_acceptance_by_kind_with_the_models_swapped():
    fails("22", by_kind(run=lambda d, o, ids, n_new, n_draft, stats: speculative_generate(o, d, ids, n_new, n_draft=n_draft,
                                                                                         stats=stats)),
          "that is its acceptance with the draft and the oracle in each other's places", "the small model drafts")


def test_acceptance_by_kind_with_the_prompt_counted_in_n_new():
    fails("22", by_kind(run=lambda d, o, ids, n_new, n_draft, stats: speculative_generate(
        d, o, ids, n_new + len(ids), n_draft=n_draft, stats=stats)), r"that is its acceptance with n_new \+ len\(prompt\) "
          "new tokens a prompt", "n_new counts the new tokens alone")


def test_acceptance_by_kind_with_the_stats_passed_as_n_draft():
    fails("22", by_kind(run=lambda d, o, ids, n_new, n_draft, stats: speculative_generate(d, o, ids, n_new, stats)),
          "raised TypeError", "pass n_draft and stats by name")


def test_acceptance_by_kind_per_round():
    fails("22", by_kind(rate=lambda a, d, r: a / r), r"that is the drafts kept per round, accepted / rounds",
          r"stats.accepted / stats.drafted")


def test_acceptance_by_kind_rounded():
    fails("22", by_kind(rate=lambda a, d, r: round(a / d, 3)), "that is each acceptance rounded to 3 decimals",
          "rounding is for printing")


# --- exercise 23: the best draft length -----------------------------------------------------------------------

def best_length(score, choose=max, first=1, returns=lambda n: n):
    def answer(alpha, c, T):
        scores = {n: score(alpha, c, T, n) for n in range(first, max(T))}
        return returns(choose(scores, key=lambda n: (scores[n], -n) if choose is max else (scores[n], n)))
    return answer


def tokens(alpha, n):
    return n + 1 if alpha == 1 else (1 - alpha ** (n + 1)) / (1 - alpha)


def speedup(alpha, c, T, n):
    return tokens(alpha, n) / (n * c + T[n + 1] / T[1])


def test_best_draft_length_by_tokens_alone():
    fails("23", best_length(lambda a, c, T, n: tokens(a, n)), "that is the n_draft with the most tokens per round, whatever "
          "the round costs", "OVER the round's cost")


def test_best_draft_length_of_the_lowest_speedup():
    fails("23", best_length(speedup, choose=min), "that is the n_draft with the LOWEST predicted speedup", "the largest score")


def test_best_draft_length_with_alpha_nudged_below_1():
    fails("23", best_length(lambda a, c, T, n: speedup(min(a, 0.999999), c, T, n)), r"best_draft_length\(1.0, 0.0, \{1: "
          r"1.0, 2: 1.0, 3: 1.4999999\}\) returned 1, expected 2: .*that is the best n_draft for an alpha a hair below 1",
          "alpha = 1 needs its own case")


def test_best_draft_length_with_its_powers_misplaced():
    # (1 - alpha ** n_draft + 1): no usual mistake gives it, and the message says the scores, not another mistake
    message = fails("23", best_length(lambda a, c, T, n: (n + 1 if a == 1 else (1 - a ** n + 1) / (1 - a)) /
                                      (n * c + T[n + 1] / T[1])),
                    r"returned 1, expected n_draft = 2 .*: the predicted speedups for n_draft = 1..2 are \[1.385, 1.627\]",
                    r"score each n_draft by tokens per round")
    assert "stopped one short" not in message and "index" not in message


def test_best_draft_length_as_the_tokens_checked():
    fails("23", best_length(speedup, returns=lambda n: n + 1), r"returned 2, expected 1: .*2 is one more than the best "
          r"n_draft: n_draft \+ 1 is what the check reads", "return the n_draft of the best score")


def test_best_draft_length_of_rounded_scores():
    fails("23", best_length(lambda a, c, T, n: round(speedup(a, c, T, n), 2)), "that compares the scores rounded to 2 "
          "decimals", "compare the scores as computed")


def test_best_draft_length_from_no_drafts():
    fails("23", best_length(lambda a, c, T, n: speedup(a, c, T, n) if n else 1.0, first=0), r"returned 0, expected 1: .*"
          "n_draft = 0 is no speculation at all", "a round drafts at least one token")


# --- exercise 24: which path a tree round keeps ------------------------------------------------------------

def path(at=-1, step=lambda tokens, child: child, one_based=False, lazy=True):
    def answer(parents, tokens, choice):
        kept, here = [], at
        while True:
            want = None if lazy else choice[here + 1]  # read before the search: an IndexError past choice's end
            child = next((j for j, p in enumerate(parents)
                          if p == here and tokens[j] == (choice[here + 1] if lazy else want)), None)
            if child is None:
                return [i + 1 for i in kept] if one_based else kept
            kept.append(child)
            here = step(tokens, child)
    return answer


def test_tree_path_that_steps_to_a_token():
    fails("24", path(step=lambda tokens, child: tokens[child], lazy=False), "raised IndexError", r"i a node's index \(0 to "
          r"n - 1\), never its token")


def test_tree_path_that_looks_under_a_token():
    fails("24", path(step=lambda tokens, child: tokens[child]), r"returned \[0\], expected \[0, 1, 2\]: .*that is the path "
          "whose walk goes on under the kept node's TOKEN, not its index", r"choice\[j \+ 1\]: j the node's index")


def test_tree_path_from_node_0():
    fails("24", path(at=0, lazy=False), r"accepted_path\(\[\], \[\], \[3\]\) raised IndexError", r"the walk starts at the "
          "root, -1")


def test_tree_path_that_looks_under_node_0_first():
    fails("24", path(at=0), r"returned \[1, 2\], expected \[0, 1, 2\]: .*node 1 is not a child of the root", r"the first "
          r"to a child of the root \(parents\[j\] == -1\)")


def test_tree_path_counted_from_1():
    fails("24", path(one_based=True), r"returned \[1, 2, 3\], expected \[0, 1, 2\]: .*those are the kept nodes' indices "
          "plus one, counted from 1", "node indices count from 0")


# --- exercise 25: prompt lookup, replayed ----------------------------------------------------------------

def replayed(n=lambda max_tail: max_tail + 1, past_all=False, asked=False, end=0, order=lambda d, a, r: (d, a, r),
             start=lambda n_prompt: n_prompt, prompt_only=False, late=0):
    def answer(tokens, n_prompt, n_draft, max_tail=3):
        drafter, drafted, accepted, rounds = NGramDrafter(n=n(max_tail)), 0, 0, 0
        i = start(n_prompt)
        while i < len(tokens) - end:
            k = min(n_draft, len(tokens) - i - 1)
            guesses = drafter.lookup(tokens[:n_prompt] if prompt_only else tokens[:i], k)
            kept = 0
            while (kept < len(guesses) and i + kept + late < len(tokens)
                   and guesses[kept] == tokens[i + kept + late]):
                kept += 1
            drafted, accepted, rounds = drafted + (k if asked else len(guesses)), accepted + kept, rounds + 1
            i += (len(guesses) if past_all else kept) + 1
        return order(drafted, accepted, rounds)
    return answer


def test_lookup_replay_with_tails_one_short():
    fails("25", replayed(n=lambda max_tail: max(max_tail, 2)), r"that is the replay with tails of at most 2 token\(s\), one "
          "short of max_tail = 3", r"NGramDrafter\(n=max_tail \+ 1\)")


def test_lookup_replay_past_every_draft():
    fails("25", replayed(past_all=True), "that is a replay that moves i past every draft of the round, kept or not",
          "the KEPT drafts")


def test_lookup_replay_that_counts_the_drafts_asked_for():
    fails("25", replayed(asked=True), "that is a replay that counts the drafts asked for, k, as drafted", r"len\(guesses\)")


def test_lookup_replay_that_stops_a_token_early():
    fails("25", replayed(end=1), "that is a replay that stops one token before the end of the text",
          r"while i < len\(tokens\)")


def test_lookup_replay_in_another_order():
    fails("25", replayed(order=lambda d, a, r: (a, d, r)), "those are the three counts in another order",
          r"return \(drafted, accepted, rounds\)")


def test_lookup_replay_from_the_prompts_last_token():
    fails("25", replayed(start=lambda n_prompt: n_prompt - 1), r"that is a replay from the prompt's last token, i = "
          "n_prompt - 1", "i = n_prompt")


def test_lookup_replay_in_the_prompt_alone():
    message = fails("25", replayed(prompt_only=True), "that is a replay whose lookup reads the prompt alone",
                    r"lookup\(tokens\[:i\], \.\.\.\)")
    assert "the future included" not in message


def test_lookup_replay_that_compares_one_position_late():
    message = fails("25", replayed(late=1), r"that is a replay that compares the drafts with tokens\[i \+ 1:\]",
                    r"compare them with tokens\[i:\]")
    assert r"also sees tokens[i]" not in message


# --- exercises 26 and 27: a batch's caches, another vocabulary -----------------------------------------------

def test_cut_rows_that_never_empties_a_row():
    fails("26", lambda cache_lengths, n_kept: [max(1, min(c, n)) for c, n in zip(cache_lengths, n_kept)],
          r"cut_rows\(\[3, 40\], \[0, 38\]\) \(a row whose n_kept is 0, .*\) returned \[1, 38\], expected \[0, 38\]",
          r"n_kept\[b\]")


def test_align_suffix_with_the_rest_after_every_draft():
    def answer(drafted, text):
        n, _ = reference("27")(drafted, text)
        return n, text[len(b"".join(drafted)):]  # past all the drafts, kept or not
    message = fails("27", answer, r"rest starts after ALL the drafts' bytes, at byte 5, kept or not; the 1 kept draft\(s\) "
                    "end at byte 3", r"text\[end:\]")
    assert "decod" not in message


# --- exercise 28: traversal verification ------------------------------------------------------------------

def walk(cap=True, w_first=False, fixed_target=False, own_q=False, z_float32=False):
    def answer(parents, tokens, q, p, rs):
        uniforms = iter(rs)

        def visit(x, w, target):
            first = target
            for c in [c for c, parent in enumerate(parents) if parent == x]:
                toward = q[c + 1] if own_q else first if fixed_target else target
                weight = w * float(toward[tokens[c]]) / float(p[x][tokens[c]])
                kept = visit(c, min(1.0, weight) if cap else weight, q[c + 1])
                if kept is not None:
                    return [c] + kept[0], kept[1]
                if w_first:
                    z = float(np.maximum(np.float32(w) * target - p[x], 0).sum())
                    w = z / (z + 1.0 - w) if z + 1.0 - w > 0 else 1.0
                excess = np.maximum(np.float32(w) * target - p[x], 0)
                z = excess.sum() if z_float32 else float(excess.sum())  # np.float32: w becomes one too
                if not w_first:
                    w = z / (z + 1.0 - w) if z + 1.0 - w > 0 else 1.0
                if z > 0:
                    target = excess / np.float32(z)
            if x == -1:
                return [], target
            return ([], target) if next(uniforms) < w else None
        return visit(-1, 1.0, q[0])
    return answer


def test_traversal_without_the_cap_on_a_weight():
    fails("28", walk(cap=False), "that is the walk whose child weight is w target\\(C\\) / p\\[X\\]\\(C\\) without min\\(1, "
          "\\.\\)", "a weight is a probability, at most 1")


def test_traversal_that_updates_the_weight_before_the_excess():
    message = fails("28", walk(w_first=True), "that is the walk that updates a node's weight before it takes the excess",
                    "with the weight w it had")
    assert "last first" not in message


def test_traversal_that_weighs_every_child_against_q():
    message = fails("28", walk(fixed_target=True), "that is the walk whose children are all weighed against q after their "
                    "parent, never the residual left by their rejected siblings", "as it is when C's turn comes")
    assert "last first" not in message


def test_traversal_that_weighs_a_child_by_its_own_q():
    message = fails("28", walk(own_q=True), r"that is the walk that weighs a child C with q\[C \+ 1\]", "the oracle's "
                    "distribution after X")
    assert "p/q for q/p" not in message


def test_traversal_with_z_in_float32():
    fails("28", walk(z_float32=True), r"rs=\[0.9999999999999999, 0.9999999999999999\]\) \(a node of weight 1 whose child is "
          r"rejected: .*\) returned \(\[\], .*\), expected \(\[0\], .*\): that is the walk that compares r with w in float32",
          "compare r with w as Python floats")


# --- exercise 29: Sequoia's dynamic program ----------------------------------------------------------------

def program(whole=True, additive=False, past_the_ranks=-math.inf, memo_without_depth=False):
    def answer(acceptance, n_nodes, max_depth):
        a, memo = list(acceptance), {}

        def best(n, d):
            if n == 1:
                return 1.0
            if d == 0:
                return -math.inf
            key = n if memo_without_depth else (n, d)
            if key not in memo:
                memo[key] = 1.0 + share(0, n - 1, d - 1)
            return memo[key]

        def share(i, m, d):
            if m == 0:
                return 0.0
            if i == len(a):
                return past_the_ranks
            options = [(a[i] + best(s, d) - 1 if additive else a[i] * best(s, d)) + share(i + 1, m - s, d)
                       for s in range(1, m + 1 if whole else m) if best(s, d) > -math.inf]
            return max(options, default=-math.inf)
        return best(n_nodes + 1, max_depth)
    return answer


def test_sequoia_whose_subtrees_never_take_every_node_left():
    message = fails("29", program(whole=False), "that is the program in which a subtree never takes all the nodes left to "
                    r"share \(sizes s = 1 .. m - 1\)", r"range\(1, m \+ 1\)")
    assert "max_depth - 1" not in message


def test_sequoia_that_adds_each_nodes_acceptance():
    fails("29", program(additive=True), r"returned 3.4, expected 2.952: .*that is F with each node adding its own "
          r"acceptance\[rank\], not the product down its path", "TIMES its own F")


def test_sequoia_with_a_cache_keyed_on_the_list():
    def answer(acceptance, n_nodes, max_depth):
        @functools.lru_cache(maxsize=None)
        def best(a, n, d):
            if n == 1:
                return 1.0
            return -math.inf if d == 0 else 1.0 + max([a[0] * best(a, n - 1, d - 1)], default=-math.inf)
        return best(acceptance, n_nodes + 1, max_depth)  # a list: unhashable
    fails("29", answer, r"raised TypeError: unhashable type: 'list'", r"needs tuple\(acceptance\)")


GLOBAL_BEST = {}


def test_sequoia_with_a_cache_kept_between_calls():
    def answer(acceptance, n_nodes, max_depth):
        def best(n, d):
            if n == 1:
                return 1.0
            if d == 0:
                return -math.inf
            if (n, d) not in GLOBAL_BEST:  # kept from call to call, and acceptance is not in its key
                GLOBAL_BEST[n, d] = 1.0 + share(0, n - 1, d - 1)
            return GLOBAL_BEST[n, d]

        def share(i, m, d):
            if m == 0:
                return 0.0
            if i == len(acceptance):
                return -math.inf
            return max([acceptance[i] * best(s, d) + share(i + 1, m - s, d) for s in range(1, m + 1)
                        if best(s, d) > -math.inf], default=-math.inf)
        return best(n_nodes + 1, max_depth)
    GLOBAL_BEST.clear()
    fails("29", answer, r"returned 1.9, expected -inf: ", "your module's GLOBAL_BEST grew from call to call", "key the "
          "cache on all of them")
    GLOBAL_BEST.clear()


def test_sequoia_whose_memo_leaves_out_the_depth():
    # a memo keyed on n alone answers one depth with another's value: named by what it returns, -inf where none fits
    fails("29", program(memo_without_depth=True), r"returned 3.3616, expected -inf: .*no tree of 4 drafted nodes has depth "
          r"at most 3", r"return -inf \(float\('-inf'\)\) where no tree fits")


def test_sequoia_with_two_mistakes_in_its_sharing():
    fails("29", program(whole=False, past_the_ranks=0.0), r"returned -inf, expected 1.8: .*a tree of 2 drafted nodes and "
          r"depth at most 1 exists \(up to 3 fit\)", "-inf only where nothing fits")
