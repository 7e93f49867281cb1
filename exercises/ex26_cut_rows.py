"""Exercise 26 (core): cut a ragged batch's caches after a round.   EXERCISES.md, exercise 26

batch.py decodes many prompts at once, and every row of a batch's KV cache
(batch.BatchKVCache) holds its own number of positions. After a round each
row has kept its own number of drafts, so each row is cut to its own length:
n_kept[b] = that row's tokens after the round minus one (all but the newest,
which no model has been fed yet), or fewer if the row's cache holds fewer: the
draft never feeds its last draft, so after a round that kept every draft its
cache is one short.

cut_rows(cache_lengths, n_kept) gets each row's cache length and n_kept, both
lists of ints in the rows' order, and returns each row's new cache length: a
list of ints, one per row. Leave both arguments as they came.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a list of Python ints (the new lengths)
  arguments  cache_lengths, n_kept come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries an empty batch; one row; a cache that holds exactly n_kept; a
             cache one short of n_kept

Check: pytest exercises/ -k ex26
"""


def cut_rows(cache_lengths, n_kept):
    raise NotImplementedError("exercise 26: write cut_rows")
