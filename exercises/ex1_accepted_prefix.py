"""Exercise 1: how many draft tokens does the oracle accept?  (EXERCISES.md, exercise 8)

The oracle has checked k draft tokens in one pass. oracle_choice[i] is its own
greedy token at the position of drafted[i] (oracle_choice has k + 1 entries: the
last is its choice after all k drafts). Return n, the number of drafts, from the
first, that equal the oracle's choice. Stop at the first disagreement.

    accepted_prefix_length([5, 7, 9], [5, 7, 2, 4]) == 2
    accepted_prefix_length([5, 7, 9], [5, 7, 9, 4]) == 3   (all accepted: no IndexError!)
    accepted_prefix_length([], [3]) == 0

Check: pytest exercises/ -k ex1
"""


def accepted_prefix_length(drafted, oracle_choice):
    raise NotImplementedError("write accepted_prefix_length in exercises/ex1_accepted_prefix.py")
