"""Exercises 28 and 29's checks (exercises/checks/part8_newest.py), before they join the shared contract: the
references pass, the untouched stubs are "not solved", and plausible wrong answers fail with a message that says
what went wrong (the negative controls). The wrong answers below give the answers away: read them after."""

import math

import numpy as np
import pytest

from checks import part8_newest as part8

import ex28_traversal_toy
import ex29_sequoia_dp


def test_the_references_pass():
    part8.check_traversal_toy(part8.reference_traversal_toy())
    part8.check_sequoia_dp(part8.reference_sequoia_dp())


def test_the_untouched_stubs_are_not_solved():
    with pytest.raises(NotImplementedError):
        part8.check_traversal_toy(ex28_traversal_toy.kept_path)
    with pytest.raises(NotImplementedError):
        part8.check_sequoia_dp(ex29_sequoia_dp.best_expected_tokens)


def fails(check, answer, *patterns):
    with pytest.raises(AssertionError) as failure:
        check(answer)
    message = str(failure.value)
    assert "where to look:" in message
    for pattern in patterns:
        assert pattern in message, message


# ---------------------------------------------------------------------------
# Exercise 28: a learner's traversal, with one mistake at a time
# ---------------------------------------------------------------------------

def learner_kept_path(parents, tokens, q, p, rs, mistake=None):
    q = [np.asarray(row, np.float64) for row in q]
    uniforms = iter(rs)
    children = {i: [c for c, parent in enumerate(parents) if parent == i] for i in range(-1, len(parents))}
    if mistake == "right-most leaf first":
        children = {i: c[::-1] for i, c in children.items()}

    def visit(x, w, target):
        for c in children[x]:
            ratio = target[tokens[c]] / p[x][tokens[c]]
            w_c = min(1.0, ratio if mistake == "no path weight" else w * ratio)
            kept = visit(c, w_c, q[c + 1])
            if kept is not None:
                return [c] + kept[0], kept[1]
            excess = np.maximum((1.0 if mistake == "residual without w" else w) * target - p[x], 0)
            mass = excess.sum()
            if mistake != "weight kept":
                w = mass / (mass + 1 - w) if mass + 1 - w > 0 else 1.0
            target = excess / mass if mass > 0 else target
        if x == -1:
            return [], (q[0] if mistake == "the bonus always" else target)
        r = next(uniforms)
        if r < w:
            return [], (q[x + 1] if mistake == "the bonus always" else target)
        return None
    path, last = visit(-1, 1.0, q[0])
    return (path[::-1] if mistake == "leaf first" else path), last


def learner(mistake):
    return lambda *args: learner_kept_path(*args, mistake=mistake)


def test_the_learners_traversal_without_mistakes_passes():
    part8.check_traversal_toy(learner(None))


def test_traversal_top_down():
    def top_down(parents, tokens, q, p, rs):
        path = part8.top_down(parents, tokens, q, p, rs)
        return path, np.asarray(q[(path[-1] if path else -1) + 1])
    fails(part8.check_traversal_toy, top_down, "the token-level (top-down) rule's", "deepest leftmost leaf")


def test_traversal_without_the_paths_weight():
    fails(part8.check_traversal_toy, learner("no path weight"), "expected", "w = min(1, w_parent q(x) / p(x))")


def test_traversal_with_the_residual_without_the_weight():
    fails(part8.check_traversal_toy, learner("residual without w"), "expected")


def test_traversal_keeping_the_parents_weight():
    fails(part8.check_traversal_toy, learner("weight kept"), "expected", "Z / (Z + 1 - w)")


def test_traversal_path_leaf_first():
    fails(part8.check_traversal_toy, learner("leaf first"), "the path reads root first")


def test_traversal_from_the_right_most_leaf():
    fails(part8.check_traversal_toy, learner("right-most leaf first"), "expected")


def test_traversal_drawing_the_last_token_from_q_always():
    fails(part8.check_traversal_toy, learner("the bonus always"), "last token's distribution", "residual")


def test_traversal_returning_the_path_alone():
    fails(part8.check_traversal_toy, lambda *args: learner_kept_path(*args)[0], "return a pair")


# ---------------------------------------------------------------------------
# Exercise 29: a learner's program, with one mistake at a time
# ---------------------------------------------------------------------------

def learner_best(acceptance, n_nodes, max_depth, mistake=None):
    a = [acceptance[0]] * len(acceptance) if mistake == "every child as the first" else list(acceptance)
    if mistake == "the root counted":
        n_nodes -= 1
    if mistake == "a level too deep":
        max_depth += 1
    if n_nodes < 0:
        return -math.inf

    def best(n, d):  # n nodes with the root, depth <= d
        if n == 1:
            return 1.0
        if d == 0:
            return -math.inf
        return 1.0 + share(0, n - 1, d)

    def share(i, m, d):
        if m == 0:
            return 0.0
        if i == len(a):
            return -math.inf
        if mistake == "a star":
            return a[i] + share(i + 1, m - 1, d) if d >= 1 else -math.inf
        if mistake == "a chain":
            return a[0] * best(m, d - 1) if i == 0 else -math.inf
        return max(a[i] * best(s, d - 1) + share(i + 1, m - s, d) for s in range(1, m + 1))

    value = best(n_nodes + 1, max_depth)
    if mistake == "without the root's 1":
        return value - 1
    if mistake == "no -inf":
        return 0.0 if value == -math.inf else value
    return value


def greedy_best(acceptance, n_nodes, max_depth):
    """Grow the tree a node at a time where it adds most: right when the acceptance falls with the rank."""
    total, frontier = 1.0, [(acceptance[0], 1, 0, 1.0)]  # (value, depth, rank, the parent's value)
    for _ in range(n_nodes):
        frontier = [c for c in frontier if c[1] <= max_depth and c[2] < len(acceptance)]
        if not frontier:
            return -math.inf
        value, depth, rank, above = max(frontier)
        frontier.remove((value, depth, rank, above))
        total += value
        if rank + 1 < len(acceptance):
            frontier.append((above * acceptance[rank + 1], depth, rank + 1, above))
        frontier.append((value * acceptance[0], depth + 1, 0, value))
    return total


def program(mistake):
    return lambda *args: learner_best(*args, mistake=mistake)


def test_the_learners_program_without_mistakes_passes():
    part8.check_sequoia_dp(program(None))


def test_sequoia_without_the_roots_one():
    fails(part8.check_sequoia_dp, program("without the root's 1"), "F counts the root's 1")


def test_sequoia_greedy():
    fails(part8.check_sequoia_dp, greedy_best, "[0.1, 0.9, 0.5]", "ranks come in order")


def test_sequoia_a_level_too_deep():
    fails(part8.check_sequoia_dp, program("a level too deep"), "expected")


def test_sequoia_counting_the_root():
    fails(part8.check_sequoia_dp, program("the root counted"), "expected")


def test_sequoia_every_child_as_the_first():
    fails(part8.check_sequoia_dp, program("every child as the first"), "expected")


def test_sequoia_a_star():
    fails(part8.check_sequoia_dp, program("a star"), "expected")


def test_sequoia_a_chain():
    fails(part8.check_sequoia_dp, program("a chain"), "-inf")


def test_sequoia_no_minus_infinity():
    fails(part8.check_sequoia_dp, program("no -inf"), "return -inf where no tree fits")


def test_sequoia_returning_the_tree():
    fails(part8.check_sequoia_dp, lambda a, n, d: [-1] * n, "return a number")
