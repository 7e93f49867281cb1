"""Exercise 23 (core): the draft length that is fastest on your machine.   EXERCISES.md, exercise 23

alpha: Leviathan et al.'s acceptance rate, the chance that a draft is kept once the
       drafts before it were (`python workbench.py bench suite` measures it on the learned pair);
c: the draft's cost per token over the oracle's, T_draft(1) / T_oracle(1);
T: {k: milliseconds of one oracle forward over k new tokens}, measured, k = 1 .. the largest n_draft + 1.

A round of n_draft drafts keeps, on average, (1 - alpha^(n_draft+1)) / (1 - alpha) tokens
(n_draft + 1 when alpha is 1) and costs n_draft * c + T[n_draft + 1] / T[1] oracle single-token
passes. best_draft_length(alpha, c, T) returns the n_draft in 1 .. max(T) - 1 with
the most tokens per unit of cost (the smallest such n_draft on a tie).

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a Python int (a draft length)
  arguments  T comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries a curve of two points; a tie; c = 0 with a flat curve; alpha =
             0 and 1

Check: pytest exercises/ -k ex23
"""


def best_draft_length(alpha, c, T):
    raise NotImplementedError("exercise 23: write best_draft_length")
