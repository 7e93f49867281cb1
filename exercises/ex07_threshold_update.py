"""Exercise 7 (core): adapt the drafting threshold.   EXERCISES.md, exercise 7

Threshold drafting (exercise 6) guesses while the draft's cumulative
probability of its guesses is at least `threshold`. After each round the
threshold adapts to how the oracle judged the guesses:

  - if all drafts were accepted: lower it by `boost` (guess further next time);
  - otherwise: move it halfway toward the cumulative probability of the last
    accepted draft, cumulative[n_accepted - 1] (with nothing accepted, the
    accepted prefix is empty and its probability is 1.0);
  - keep it within [0.05, 0.95].

cumulative[i] is the draft's probability of drafted[:i + 1]; there are
len(cumulative) drafts, of which the first n_accepted were accepted. Return a float.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a Python float (the threshold)
  arguments  cumulative comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries nothing accepted; every draft accepted; no drafts at all; the
             clamps 0.05 and 0.95

Check: pytest exercises/ -k ex07
"""


def next_threshold(threshold, cumulative, n_accepted, boost):
    raise NotImplementedError("exercise 07: write next_threshold")
