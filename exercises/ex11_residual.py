"""Exercise 11 (core): the residual distribution of speculative sampling.   EXERCISES.md, exercise 11

When SpS rejects a draft token, it samples the replacement from
(q - p)+ = max(q - p, 0), renormalised to sum to 1. q is the target's
distribution, p the draft's (Chen et al.'s letters), both float32 arrays of
the same length.

In exact arithmetic a rejection means q != p, so the residual has mass. In
float32 it can still be all zeros (q <= p everywhere after rounding). Never
return NaN: return q itself in that case (why q? see EXERCISES.md).

Check: pytest exercises/ -k ex11
"""

import numpy as np  # noqa: F401  (you will need it)


def residual(q, p):
    raise NotImplementedError("exercise 11: write residual")
