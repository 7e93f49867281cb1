"""Exercise 28 (stretch): traversal verification on a toy tree: which path is kept?   (EXERCISES.md to come)

A round drafted nodes 0 .. n-1 (beyond/traversal.py, Weng et al. 2025): node i is token tokens[i] after its
parent parents[i] (-1: the root), the nodes in level order, a node's children in the order they were drawn.
q[0] is the oracle's distribution after the root and q[i + 1] after node i; p[i] is the draft's after node i
(p[-1] after the root), given for every node that has children. rs are the uniforms r ~ U[0, 1) of the walk,
in the order the walk uses them: one per node it tests.

kept_path(parents, tokens, q, p, rs) returns (the indices of the nodes kept, root first; the distribution the
round's last token is drawn from). The walk goes from the leaves to the root: a node's path weight is
w = min(1, w_parent q(x) / p(x)) with q the parent's target; a node is tested, r < w, once its subtree is
done; a child's subtree rejected changes its parent's weight and target (the residual max(w q - p, 0)).
The root always passes and takes no r.

Check: pytest exercises/ -k ex28   (once the lead registers it; until then tests/test_exercises_newest.py)
"""


def kept_path(parents, tokens, q, p, rs):
    raise NotImplementedError("exercise 28: write kept_path")  # TODO
