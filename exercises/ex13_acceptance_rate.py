"""Exercise 13 (core): the acceptance rate alpha.   EXERCISES.md, exercise 13

One step of speculative sampling draws a draft token x ~ p and keeps it when
r < min(1, q(x) / p(x)), with r ~ U[0, 1). Write acceptance_rate(p, q) -> float:
the probability that the step keeps its draft, in closed form (no sampling).
p is the draft's distribution, q the target's: float32 arrays of one length.

Check: pytest exercises/ -k ex13
"""

import numpy as np  # noqa: F401


def acceptance_rate(p, q):
    raise NotImplementedError("exercise 13: write acceptance_rate")
