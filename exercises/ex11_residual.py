"""Exercise 11 (core): the residual distribution of speculative sampling.   EXERCISES.md, exercise 11

When SpS rejects a draft token, it samples the replacement from
(q - p)+ = max(q - p, 0), renormalised to sum to 1. q is the target's
distribution, p the draft's (Chen et al.'s letters), both float32 arrays of
the same length.

In exact arithmetic a rejection means q != p, so the residual has mass. In
float32 it can still be all zeros (q <= p everywhere after rounding). Never
return NaN: return q itself in that case (why q? see EXERCISES.md).

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a float32 array as long as q
  arguments  q, p come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries q = p; q and p certain of different tokens; zero probabilities

Check: pytest exercises/ -k ex11
"""

import numpy as np  # noqa: F401  (you will need it)


def residual(q, p):
    raise NotImplementedError("exercise 11: write residual")
