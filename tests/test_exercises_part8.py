"""The checkers of part 8's exercises (28: traversal verification on a toy tree, 29: Sequoia's dynamic program): each
wrong answer below fails with the message written for the rule it breaks (tests/wrong_answers.py). The answers give
hints away: read them after the exercises."""

import math
import random

import numpy as np
import pytest

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from wrong_answers import fails


# --- exercise 28: traversal verification, a learner's walk with one mistake at a time ------------------------

def kept_path(parents, tokens, q, p, rs, mistake=None):
    """The walk as a learner writes it from the text; mistake names the one thing done otherwise."""
    uniforms = list(rs) if mistake != "pops rs" else rs
    order = [] if mistake != "rs by node" else list(rs)

    def draw(x):
        return order[x] if mistake == "rs by node" else uniforms.pop(0)

    def children(x):
        found = [c for c, parent in enumerate(parents) if parent == x]
        if mistake == "numpy indices":
            found = list(np.flatnonzero(np.array(parents, dtype=np.int64) == x))
        return found[::-1] if mistake == "right-most leaf first" else found

    def visit(x, w, target):  # -> (the path below x, last), or None when x's subtree is rejected
        if mistake == "a node before its children" and x != -1 and not draw(x) < w:
            return None
        for c in children(x):
            x_c = tokens[c]
            parent_p = p[c] if mistake == "p after the child" else p[x]
            ratio = parent_p[x_c] / target[x_c] if mistake == "p over q" else target[x_c] / parent_p[x_c]
            w_c = min(1.0, ratio if mistake == "no path weight" else w * ratio)
            kept = visit(c, w_c, q[c] if mistake == "q off by one" else q[c + 1])
            if kept is not None:
                return [c] + kept[0], kept[1]
            if mistake == "in place":
                target *= np.float32(w)
                target -= p[x]
                np.maximum(target, 0, out=target)
                excess = target
            else:
                excess = (target if mistake == "residual without w" else np.float32(w) * target) - p[x]
                excess = excess if mistake == "no max" else np.maximum(excess, 0)
            z = float(excess.sum())
            if mistake == "no max":  # and so no care for Z: the sum of w target - p is w - 1, 0 at the root
                with np.errstate(all="ignore"):
                    w, target = np.float32(z) / np.float32(z + 1.0 - w), excess / np.float32(z)
                continue
            if mistake != "weight kept":
                w = z / (z + 1.0 - w) if z + 1.0 - w > 0 else 1.0
            if z > 0 or mistake == "0 / 0":
                with np.errstate(all="ignore"):
                    target = excess if mistake == "not normalised" else excess / np.float32(z)
        if x == -1 and mistake != "an r for the root":
            return [], (q[0] if mistake == "the bonus always" else target)
        if mistake != "a node before its children" and not draw(x) < w:
            return None
        return [], (q[x + 1] if mistake == "the bonus always" else target)

    path, last = visit(-1, 1.0, q[0])
    if mistake == "leaf first":
        path = path[::-1]
    if mistake == "float64":
        last = last.astype(np.float64)
    if mistake == "the path alone":
        return path
    return path, last


def walk(mistake):
    return lambda *args: kept_path(*args, mistake=mistake)


def test_the_learners_walk_without_mistakes_passes():
    checks.check("28", walk(None))


def test_traversal_top_down():
    from sps import residual

    def answer(parents, tokens, q, p, rs):  # tree-sps's rule: from the root down, one r a child
        uniforms, path, at, target = list(rs), [], -1, q[0]
        while True:
            for c in [c for c, parent in enumerate(parents) if parent == at]:
                if uniforms.pop(0) < min(1.0, target[tokens[c]] / p[at][tokens[c]]):
                    path, at, target = path + [c], c, q[c + 1]
                    break
                target = residual(target, p[at])
            else:
                return path, target
    fails("28", answer, r"raised IndexError: pop from empty list; the walk uses 1 r here, and given more yours "
          r"returns .*: that is the token-level rule's path \(tree-sps's, from the root down\)",
          "starts at the deepest leftmost leaf")


def test_traversal_with_p_over_q():
    fails("28", walk("p over q"), "raised IndexError", "that is the walk with p/q for q/p", "Chen et al.'s letters")


def test_traversal_without_the_paths_weight():
    fails("28", walk("no path weight"), r"rs=\[0.7, 0.6, 0.2\]\) returned \(\[0, 1\], \[0.1, 0.2, 0.7\]\), expected "
          r"\(\[\], \[0, 0.5, 0.5\]\): a weight that falls to 0 .*; that is the walk whose child weight is "
          r"min\(1, q/p\) alone, not carried down the path\n", r"the parent's weight w times the child's ratio")


def test_traversal_with_q_off_by_one():
    fails("28", walk("q off by one"), r"that is the walk with q\[i\] as the oracle's distribution after node i\n",
          r"a child C's target is q\[C \+ 1\]")


def test_traversal_with_the_residual_without_max():
    fails("28", walk("no max"), r"that is the walk with the residual w target - p, without max\(\., 0\)\n",
          "not negative")


def test_traversal_with_the_residual_not_normalised():
    fails("28", walk("not normalised"), "that is the walk whose residual is not divided by Z\n", "summing to 1")


def test_traversal_with_the_residual_without_the_weight():
    fails("28", walk("residual without w"), r"\(random tree \d+, a vocabulary of \d\) returned .*: that is the walk with "
          r"the residual max\(target - p, 0\), without the weight w\n", r"max\(w target - p\[X\], 0\)")


def test_traversal_keeping_the_parents_weight():
    fails("28", walk("weight kept"), r"returned \(\[0\], \[0.5, 0.25, 0.25\]\), expected \(\[\], \[0, 0.5, 0.5\]\): a "
          "weight that falls to 0 .*; that is the walk that keeps a node's weight after a child's subtree is rejected\n",
          r"Z / \(Z \+ 1 - w\)")


def test_traversal_dividing_by_a_zero_z():
    fails("28", walk("0 / 0"), r"returned \(\[0, 2\], \[0.3, 0.3, 0.4\]\), .*; where Z is 0, the target divided by it "
          r"is 0 / 0, NaN, and min\(1, NaN\) is 1", "the target cannot be divided by Z: it stays")


def test_traversal_with_an_r_for_the_root():
    fails("28", walk("an r for the root"), "raised IndexError: pop from empty list; given more r's it keeps the right "
          "path: it asks for an r the walk does not use", "the root always passes and takes no r")


def test_traversal_testing_a_node_before_its_children():
    fails("28", walk("a node before its children"), "that is the walk that tests a node before its children\n",
          "leaves first: the r's go to the nodes in that order")


def test_traversal_giving_node_i_the_r_rs_i():
    fails("28", walk("rs by node"), r"raised IndexError: list index out of range; .*that is the walk that gives node "
          r"i the r rs\[i\]\n", "the first is the deepest leftmost leaf's")


def test_traversal_from_the_right_most_leaf():
    fails("28", walk("right-most leaf first"), "that is the walk over each node's children last first\n",
          "the deepest LEFTMOST leaf")


def test_traversal_drawing_the_last_token_from_q_always():
    fails("28", walk("the bonus always"), r"rs=\[0.0\]\) returned \(\[\], \[0, 0.5, 0.5\]\), expected \(\[\], "
          r"\[0, 0, 1\]\): r = 0.0 at a token the oracle never emits .*; the last token is drawn from q after the kept "
          "node, but a child of it was rejected\n", "else the residual")


def test_traversal_path_leaf_first():
    fails("28", walk("leaf first"), r"returned \(\[1, 0\], \[0.5, 0.5\]\), expected \(\[0, 1\], \[0.5, 0.5\]\): a line "
          ".*; that is the path leaf first\n", "the path root first")


def test_traversal_with_p_after_the_child():
    fails("28", walk("p after the child"), "raised KeyError: 2", r"a child C of X was drawn from p\[X\]")


def test_traversal_that_pops_rs():
    fails("28", walk("pops rs"), r"changed its argument rs: \[0.99, 0.95, 0.3\] became \[\]", "work on a copy")


def test_traversal_computing_the_residual_in_q():
    fails("28", walk("in place"), "changed its argument q: ", "the round goes on with the oracle's rows")


def test_traversal_with_numpy_node_indices():
    fails("28", walk("numpy indices"), r"whose path is \[np.int64\(1\)\], whose entry 0 is np.int64\(1\), a NumPy "
          "integer", r"int\(\.\.\.\) turns it into Python's int")


def test_traversal_in_float64():
    fails("28", walk("float64"), r"whose last is \[0.6, 0.4\], a NumPy array of float64; the text promises float32",
          "another dtype")


def test_traversal_returning_the_path_alone():
    fails("28", walk("the path alone"), r"returned \[1\], a list; the text promises a tuple \(path, last\)",
          "return path, last")


def walk_with(test=lambda r, w: r < w, weight=lambda w, ratio: min(1.0, w * ratio), retarget=True, root=()):
    """A second learner's walk from the text, with the node's test, the child's weight, the target's update after a
    rejection and the path's start as given."""
    def answer(parents, tokens, q, p, rs):
        uniforms = iter(rs)

        def visit(x, w, target):
            for c in [c for c, parent in enumerate(parents) if parent == x]:
                kept = visit(c, weight(w, target[tokens[c]] / p[x][tokens[c]]), q[c + 1])
                if kept is not None:
                    return [c] + kept[0], kept[1]
                excess = np.maximum(np.float32(w) * target - p[x], 0)
                z = float(excess.sum())
                w = z / (z + 1.0 - w) if z + 1.0 - w > 0 else 1.0
                if z > 0 and retarget:
                    target = excess / np.float32(z)
            if x == -1:
                return list(root), target
            return ([], target) if test(next(uniforms), w) else None
        return visit(-1, 1.0, q[0])
    return answer


def test_the_learners_other_walk_without_mistakes_passes():
    checks.check("28", walk_with())


def test_traversal_keeping_a_node_at_r_equal_to_its_weight():
    fails("28", walk_with(test=lambda r, w: r <= w), r"rs=\[0.0\]\) returned \(\[0\], \[0.2, 0.2, 0.6\]\), expected "
          r"\(\[\], \[0, 0, 1\]\): r = 0.0 at a token .*; that is the walk with r <= w for r < w\n", "the test is strict")


def test_traversal_with_weights_of_np_minimum():
    fails("28", walk_with(weight=lambda w, ratio: np.minimum(1.0, w * ratio)), r"rs=\[0.9999999999999999\]\) returned "
          r"\(\[\], .*\), expected \(\[0\], .*\): one node of weight 1 .*; that is the walk that compares r with w in "
          "float32", r"NumPy compares a Python float with an np.float32 .* in float32, where r = 1 - 2\^-53 is 1.0")


def test_traversal_keeping_a_nodes_target_after_a_rejection():
    fails("28", walk_with(retarget=False), "that is the walk that keeps a node's target after a child's subtree is "
          "rejected", r"the residual max\(w target - p\[X\], 0\) / Z, for its next children and for the last token")


def test_traversal_with_the_root_in_the_path():
    fails("28", walk_with(root=[-1]), r"kept_path\(\[\], \[\], q=\[\[0.2, 0.5, 0.3\]\], p=\{\}, rs=\[\]\) returned "
          r"\(\[-1\], \[0.2, 0.5, 0.3\]\), expected \(\[\], \[0.2, 0.5, 0.3\]\): a tree of the root alone: no node to "
          "test, no r\n", "with no node the path is empty")


def test_traversal_with_rs_of_its_own():
    def answer(parents, tokens, q, p, rs):  # "rs are uniforms: draw them"
        return kept_path(parents, tokens, q, p, [random.random() for _ in range(len(parents))])
    fails("28", answer, r"called twice with the same arguments, kept_path\(.*\) returned .*, then .*: nothing in "
          "exercise 28's text is random", r"Python's random module .* draws differently each call; every r comes from "
          "rs, in the walk's order")


def test_the_untouched_files_are_not_solved_yet():
    from ex28_traversal_toy import kept_path
    from ex29_sequoia_dp import best_expected_tokens as best
    for number, stub, module in (("28", kept_path, "ex28_traversal_toy"), ("29", best, "ex29_sequoia_dp")):
        with pytest.raises(checks.NotSolved) as failure:
            checks.check(number, stub)
        assert str(failure.value) == (f"exercise {number} is not solved yet: see EXERCISES.md, then edit "
                                      f"exercises/{module}.py")


def test_the_references_pass():
    for number in ("28", "29"):
        checks.check(number, checks.EXERCISES[number].reference())


# --- exercise 29: Sequoia's dynamic program, a learner's program with one mistake at a time ------------------

def best_expected_tokens(acceptance, n_nodes, max_depth, mistake=None):
    """The program as a learner writes it from the text; mistake names the one thing done otherwise."""
    a = acceptance if mistake in ("sorts in place", "pads in place") else list(acceptance)
    if mistake == "sorts in place":
        a.sort(reverse=True)
    if mistake == "pads in place":  # a rank past the last, never kept: "so that a[i] never runs out"
        a.append(0.0)
    if mistake == "sorted":
        a = sorted(a, reverse=True)
    if mistake == "every child as the first":
        a = [a[0]] * len(a)
    if mistake == "a chain":
        a = a[:1]
    n = n_nodes if mistake == "the root counted" else n_nodes + 1
    depth = {"a level too deep": max_depth + 1, "a level short": max_depth - 1, "a star": 1}.get(mistake, max_depth)

    def best(n, d):  # a tree of n nodes, the root included, depth <= d
        if n == 1:
            return 1 if mistake == "ints" else 1.0
        if d == 0 and mistake != "no depth":
            return -math.inf
        return 1.0 + share(0, n - 1, d - 1)

    def share(i, m, d):  # m nodes among the subtrees of ranks i, i + 1, ...
        if m == 0:
            return 0.0
        if i == len(a) and mistake != "no last rank":
            return -math.inf
        values = [a[i] * best(s, d) + share(i + 1, m - s, d) for s in range(1, m + 1)]
        if mistake == "skips ranks":
            values.append(share(i + 1, m, d))
        return float(np.max(values)) if mistake == "np.max" else max(values)

    if mistake == "at most":
        return max(best(k, depth) for k in range(1, n + 1))
    value = best(n, depth)
    if mistake == "without the root's 1":
        return value - 1
    if mistake == "0 for no tree" and value == -math.inf:
        return 0.0
    if mistake == "None for no tree" and value == -math.inf:
        return None
    return np.float64(value) if mistake == "numpy float" else value


def program(mistake):
    return lambda *args: best_expected_tokens(*args, mistake=mistake)


def test_the_learners_program_without_mistakes_passes():
    checks.check("29", program(None))


def test_sequoia_counting_the_root():
    fails("29", program("the root counted"), r"best_expected_tokens\(\[0.6, 0.2, 0.1\], n_nodes=0, max_depth=3\) raised "
          "ValueError: max\\(\\) arg is an empty sequence", r"best\(n_nodes \+ 1, max_depth\) = best\(1, \.\.\.\) = 1.0")


def test_sequoia_without_the_roots_one():
    fails("29", program("without the root's 1"), r"n_nodes=0, max_depth=3\) returned 0.0, expected 1.0: no drafted node "
          r".*; that is F without the root's 1\n", "the oracle's own token")


def test_sequoia_a_level_too_deep():
    fails("29", program("a level too deep"), r"n_nodes=2, max_depth=1\) returned 1.96, expected 1.8: max_depth = 1: .*; "
          r"that is the best tree of depth max_depth \+ 1\n", "the root's children are at depth 1")


def test_sequoia_a_level_short():
    fails("29", program("a level short"), r"n_nodes=2, max_depth=1\) returned -inf, expected 1.8: .*; that is the best "
          r"tree of depth max_depth - 1\n", "the root's children are at depth 1")


def test_sequoia_without_the_depth():
    fails("29", program("no depth"), r"returned 1.96, expected 1.8: .*; that is the best tree of any depth: max_depth "
          r"left out\n", r"best\(n, 0\) is -inf")


def test_sequoia_greedy():
    def answer(acceptance, n_nodes, max_depth):  # a node at a time, each where it adds most: right for falling rates
        total, nodes = 1.0, [{"f": 1.0, "depth": 0, "children": 0}]
        for _ in range(n_nodes):
            open_places = [(node["f"] * acceptance[node["children"]], node) for node in nodes
                           if node["depth"] < max_depth and node["children"] < len(acceptance)]
            if not open_places:
                return -math.inf
            f, parent = max(open_places, key=lambda place: place[0])
            parent["children"] += 1
            nodes.append({"f": f, "depth": parent["depth"] + 1, "children": 0})
            total += f
        return total
    fails("29", answer, r"best_expected_tokens\(\[0.1, 0.9, 0.5\], n_nodes=4, max_depth=2\) returned 2.59, expected 2.9: "
          "that is the tree grown greedily", "a node worth little can open the way for one worth much")


def test_sequoia_skipping_ranks():
    fails("29", program("skips ranks"), r"\(\[0.1, 0.5, 0.2\], n_nodes=3, max_depth=2\) returned 1.95, expected 1.8: that "
          "is the best tree whose children take the best ranks, in any order", "none skipped or reordered")


def test_sequoia_with_acceptance_sorted():
    fails("29", program("sorted"), r"returned 1.95, expected 1.8: that is the best tree whose children take the best "
          r"ranks, in any order \(acceptance sorted", r"acceptance\[k\] is its own whatever its value")


def test_sequoia_sorting_acceptance_in_place():
    fails("29", program("sorts in place"), r"changed its argument acceptance: \[0.1, 0.5, 0.2\] became \[0.5, 0.2, 0.1\]",
          "sequoia_shape reads the same measured rates")


def test_sequoia_padding_acceptance_in_place():
    fails("29", program("pads in place"), r"changed its argument acceptance: \[0.6, 0.2, 0.1\] became \[0.6, 0.2, 0.1, "
          r"0.0\]", "work on a copy")


def test_sequoia_every_child_as_the_first():
    fails("29", program("every child as the first"), r"n_nodes=2, max_depth=1\) returned 2.2, expected 1.8: .*; that is "
          r"the best tree with every child weighed by acceptance\[0\]\n", r"weighs its subtree by acceptance\[k\]")


def test_sequoia_a_star():
    fails("29", program("a star"), r"best_expected_tokens\(\[0.8\], n_nodes=3, max_depth=5\) returned -inf, expected "
          r"2.952: a single rank: .*; that is the best star", "itself a best tree of depth d - 1")


def test_sequoia_a_line():
    fails("29", program("a chain"), r"n_nodes=2, max_depth=1\) returned -inf, expected 1.8: .*; that is the best line "
          r"\(one child a node\)\n", "up to len\\(acceptance\\) children")


def test_sequoia_with_no_end_to_the_ranks():
    fails("29", program("no last rank"), r"raised IndexError: list index out of range", "past the last no subtree can "
          "take a node")


def test_sequoia_zero_where_no_tree_fits():
    fails("29", program("0 for no tree"), r"\(\[0.6, 0.2\], n_nodes=3, max_depth=1\) returned 0.0, expected -inf: .*; no "
          r"tree of 3 drafted nodes has depth at most 1 with at most 2 children a node \(such trees hold at most 2\)",
          r"return -inf \(float\('-inf'\)\) where no tree fits")


def test_sequoia_none_where_no_tree_fits():
    fails("29", program("None for no tree"), r"n_nodes=4, max_depth=1\) returned None: nothing; the best F is a float",
          "return a value on every path")


def test_sequoia_of_at_most_n_nodes():
    fails("29", program("at most"), r"returned 1.8, expected -inf: .*; that is the best tree of at most n_nodes drafted "
          r"nodes\n", "exactly n_nodes drafted nodes")


def test_sequoia_nan_from_a_rank_of_acceptance_0():
    fails("29", program("np.max"), r"\(\[0.7, 0.0\], n_nodes=4, max_depth=2\) returned nan, expected 2.19: a rank of "
          r"acceptance 0: .*; NaN is 0 \* -inf", "leave out the sizes no subtree can take")


def test_sequoia_an_int_for_the_root_alone():
    fails("29", program("ints"), r"n_nodes=0, max_depth=3\) returned 1, an int; the best F is a float",
          "0.0 and 1.0, not 0 and 1")


def test_sequoia_a_numpy_float():
    fails("29", program("numpy float"), r"returned np.float64\(1.6\), a NumPy float \(np.float64\); the "
          "best F is a Python float", r"float\(\.\.\.\) turns it into Python's float")


def test_sequoia_with_a_draw_of_its_own():
    def answer(acceptance, n_nodes, max_depth):  # "checked by sampling": the noise of a Monte Carlo estimate
        return best_expected_tokens(acceptance, n_nodes, max_depth) + 1e-3 * float(np.random.standard_normal())
    fails("29", answer, r"called twice with the same arguments, best_expected_tokens\(.*\) returned .*: nothing in "
          "exercise 29's text is random", "np.random's global generator")
