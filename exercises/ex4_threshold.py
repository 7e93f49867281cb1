"""Exercise 4: adapt the drafting threshold.  (EXERCISES.md, exercise 11)

threshold.py drafts while the draft's cumulative probability of its guesses is
at least `threshold`. After each round the threshold adapts:

  - if all drafts were accepted: lower it by `boost` (guess further next time);
  - otherwise: move it halfway toward the cumulative probability at the last
    accepted draft, cumulative[n_accepted - 1] (with nothing accepted, that
    cumulative probability is the empty product, 1.0);
  - keep it within [0.05, 0.95].

cumulative[i] is the draft's probability of drafted[:i + 1]; there are
len(cumulative) drafts, of which n_accepted were accepted. Return a float.

Check: pytest exercises/ -k ex4
"""


def next_threshold(threshold, cumulative, n_accepted, boost):
    raise NotImplementedError("write next_threshold in exercises/ex4_threshold.py")
