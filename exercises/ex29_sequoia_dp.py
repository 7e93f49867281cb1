"""Exercise 29 (stretch): Sequoia's dynamic program on a toy acceptance vector.   (EXERCISES.md to come)

acceptance[k] is the chance that a node's (k + 1)-th child is the one the oracle keeps, given that the node was
kept (beyond/sequoia.py; Chen et al. 2024). A tree's expected tokens a round is
    F(T) = 1 + Σ_v Π_{u on the path from the root to v} acceptance[rank(u)]
(rank(u): u's place among its siblings, 0 first; a node has at most len(acceptance) children).

best_expected_tokens(acceptance, n_nodes, max_depth) returns the largest F over trees of exactly n_nodes drafted
nodes (the root not counted) and depth at most max_depth (the root's children are at depth 1), or -inf where
no such tree exists. Two programs in one: over the subtree sizes, and over the ranks that share them.

Check: pytest exercises/ -k ex29   (once the lead registers it; until then tests/test_exercises_newest.py)
"""


def best_expected_tokens(acceptance, n_nodes, max_depth):
    raise NotImplementedError("exercise 29: write best_expected_tokens")  # TODO
