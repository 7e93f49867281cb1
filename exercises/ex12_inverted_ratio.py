"""Exercise 12 (core): spot the bug in a learner's acceptance test.   EXERCISES.md, exercise 12

A learner's notes on how to reject (quoted in docs/sources.md) call
the draft's probability p and the target's q, as Chen et al. do, and reasons:

    we could define accept rate = p / q, which means if p is higher for the
    output token, and q is lower for the output token, then we think the
    token is more likely to be accept!  ...  rand(0, 1) > p / q  (reject)

keep_draft below is that test, as written. q and p are the target's and the
draft's distributions (float32 arrays; the project's functions take the target
first), x the draft token (drawn from p, so p[x] > 0), and r a uniform draw in
[0, 1), which can be exactly 0.0. It returns True to keep x.
Fix it, so that one SpS step emits exactly the target's distribution q.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    True or False (a bool; NumPy's np.bool_, which comparing
             float32 numbers gives, is one too)
  arguments  q, p come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries r = 0.0 with q(x) = 0; r just below 1; exact zero and one
             probabilities

Check: pytest exercises/ -k ex12
"""


def keep_draft(q, p, x, r):
    accept_rate = p[x] / q[x]
    return not r > accept_rate
