"""Exercise 29 (stretch): Sequoia's dynamic program on a toy acceptance vector.   EXERCISES.md, exercise 29

acceptance[k] is the chance that a node's (k + 1)-th child is the one the
oracle keeps, given that the node was kept (beyond/sequoia.py, after Chen et
al. 2024). A node has at most len(acceptance) children, and a (k + 1)-th
child only beside the first k (rank(u): u's place among its siblings, 0
first). A tree T makes, in expectation, F(T) tokens a round:
    F(T) = 1 + Σ_v Π_{u on the path from the root to v} acceptance[rank(u)]

best_expected_tokens(acceptance, n_nodes, max_depth) returns the largest F
over the trees of exactly n_nodes drafted nodes (the root not counted) and
depth at most max_depth >= 1 (the root's children are at depth 1), a float,
or -inf where no such tree exists. Two programs in one: over the subtree
sizes, and over the ranks that share them. Leave acceptance as it came.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a Python float (the best F)
  arguments  acceptance comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries no drafted node (n_nodes = 0); max_depth = 1; more nodes than
             max_depth = 1 holds (-inf); a single rank, a line that fits and
             one longer than max_depth (-inf); a rank of acceptance 0

Check: pytest exercises/ -k ex29
"""


def best_expected_tokens(acceptance, n_nodes, max_depth):
    raise NotImplementedError("exercise 29: write best_expected_tokens")
