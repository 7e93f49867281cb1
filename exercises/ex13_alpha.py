"""Exercise 13 (core): the acceptance rate alpha.   EXERCISES.md, exercise 13

One step of speculative sampling draws a draft token x ~ p and keeps it when
r < min(1, q(x) / p(x)), with r ~ U[0, 1). Write alpha(q, p) -> float: the
probability that the step keeps its draft, in closed form (no sampling).
q is the target's distribution, p the draft's (the project's order, as in
sps.py): float32 arrays of one length. After top-k, most tokens have
p(x) = q(x) = 0: alpha must be a number there too.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a Python float (alpha)
  arguments  q, p come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries p = q; disjoint p and q; p(x) = q(x) = 0 after top-k; exact
             ones

Check: pytest exercises/ -k ex13
"""

import numpy as np  # noqa: F401


def alpha(q, p):
    raise NotImplementedError("exercise 13: write alpha")
