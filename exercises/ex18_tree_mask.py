"""Exercise 18 (stretch): the tree attention mask.   EXERCISES.md, exercise 18

A draft tree: nodes[i] = Node(token, parent, depth), where parent is the index
of the parent node, or -1 for a child of the root (the root is the last token
of the text). Nodes are listed level by level, so a parent comes before its
children. The model reads the text and the nodes in one pass, with node i's
keys and values in column n_text + i.

Write tree_mask(nodes, new, n_text, n_fed) -> float32 [len(new), n_text + n_fed + len(new)]:
the attention mask for feeding the nodes whose indices are in `new` (they are
n_fed, n_fed + 1, ...) after the n_text tokens of the text and the n_fed nodes
fed before. Entry [row, col] is 0 where node new[row] may attend and
gpt2.MASKED where it may not. A node sees the text, its ancestors and itself:
never a sibling, a cousin or a descendant.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a float32 array [len(new), n_text + n_fed + len(new)]
  arguments  nodes, new come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries no node to feed (new = []); one node after a one-token text; a
             line; the last node alone

Check: pytest exercises/ -k ex18
"""

import numpy as np  # noqa: F401

from gpt2 import MASKED  # noqa: F401
from tree import Node  # noqa: F401  (Node(token, parent, depth), as the checker builds them)


def tree_mask(nodes, new, n_text, n_fed):
    raise NotImplementedError("exercise 18: write tree_mask")
