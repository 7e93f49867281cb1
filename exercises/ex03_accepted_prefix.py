"""Exercise 3 (warm-up): how many drafts does the oracle accept?   EXERCISES.md, exercise 3

The oracle has checked k draft tokens in one pass. oracle_choice[i] is its own
greedy token at the position of drafted[i]; it has k + 1 entries, the last one
being its choice after all k drafts. Return n, the number of drafts, from the
first, that equal the oracle's choice at their position: stop at the first
disagreement.

    accepted_prefix_length([5, 7, 9], [5, 7, 2, 4]) == 2
    accepted_prefix_length([5, 7, 9], [5, 7, 9, 4]) == 3   (all accepted: no IndexError!)
    accepted_prefix_length([], [3]) == 0

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a Python int (n, the number of drafts accepted)
  arguments  drafted, oracle_choice come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries an empty drafted; every draft accepted; token id 0

Check: pytest exercises/ -k ex03
"""


def accepted_prefix_length(drafted, oracle_choice):
    raise NotImplementedError("exercise 03: write accepted_prefix_length")
