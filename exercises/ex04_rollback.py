"""Exercise 4 (core): roll the KV caches back after a round.   EXERCISES.md, exercise 4

After a round, `tokens` holds everything kept so far. A cache may also hold
keys and values of rejected drafts past that point. Every cache must end up
holding the first n_kept = len(tokens) - 1 positions (all but the newest token,
which no model has been fed yet), or fewer if it never saw that many: the draft
model never feeds its own last guess, and the next round catches it up.

Use cache.n_tokens() and cache.truncate(n) (kvcache.py). Careful: a cache
shorter than n_kept must not be "truncated" upwards, and n_kept can be 0.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    None: nothing (the caches are cut in place)
  arguments  n_kept comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries caches that hold exactly n_kept; a cache shorter than n_kept;
             n_kept = 0; no cache at all; a shorter cache, then a longer one
  caches     each holds min(its length, n_kept) positions after the call

Check: pytest exercises/ -k ex04
"""


def rollback(n_kept, *caches):
    raise NotImplementedError("exercise 04: write rollback")
