"""Exercise 28 (stretch): traversal verification on a toy tree: which path is kept?   EXERCISES.md, exercise 28

A round of tree sampling drafted nodes 0 .. n-1 (beyond/traversal.py, after
Weng et al. 2025): node i is token tokens[i] after its parent parents[i]
(-1: the root, the text's last token), the nodes in level order, each node's
children in the order they were drawn (i.i.d. from the draft's p after their
parent). q is a float32 array [n + 1, V]: q[0] the oracle's distribution after
the root, q[i + 1] after node i. p is a dict: p[i] the draft's float32 [V]
after node i (p[-1] after the root), for the root and every node with
children. rs holds exactly the uniforms r ~ U[0, 1) the walk uses, in the
order it uses them: one per node it tests.

kept_path(parents, tokens, q, p, rs) returns (path, last): path, the indices
of the nodes kept, root first, a list of ints; last, the distribution the
round's last token is drawn from, a float32 array [V]. The walk goes from the
leaves to the root, a node's children in order:
  - the root starts with weight w = 1 and target q[0]; a child C of X gets the
    weight w_C = min(1, w target(C) / p[X](C)), and its subtree is walked with
    target q[C + 1];
  - a node is tested once its children's subtrees are all done (a leaf at
    once): r < w keeps the path to it, and last is its target;
  - a child's subtree rejected changes X: Z = Σ max(w target - p[X], 0),
    w becomes Z / (Z + 1 - w) and the target max(w target - p[X], 0) / Z
    (where Z is 0, w becomes 0 and the target stays: nothing more below X
    is kept);
  - the root always passes and takes no r.
Leave every argument as it came.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a tuple (path, last): the nodes kept, root first, a list of
             Python ints; the last token's distribution, a float32 array [V]
  arguments  parents, tokens, q, p, rs come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries a tree of the root alone; one node of weight 1 at r just below
             1; r = 0.0 where q(x) = 0; a line whose shortfall is made up
             below; a node kept after its child was rejected; a weight that
             falls to 0 (Z = 0); every node rejected
  uniforms   rs holds exactly the r's the walk uses, one per node tested, in
             the walk's order, none for the root: one more asked for is an
             error

Check: pytest exercises/ -k ex28
"""

import numpy as np  # noqa: F401


def kept_path(parents, tokens, q, p, rs):
    raise NotImplementedError("exercise 28: write kept_path")
