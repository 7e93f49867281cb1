"""Exercise 4 (core): roll the KV caches back after a round.   EXERCISES.md, exercise 4

After a round, `tokens` holds everything kept so far. A cache may also hold
keys and values of rejected drafts past that point. Every cache must end up
holding the first n_kept = len(tokens) - 1 positions (all but the newest token,
which no model has been fed yet), or fewer if it never saw that many: the draft
model never feeds its own last guess, and the next round catches it up.

Use cache.n_tokens() and cache.truncate(n) (kvcache.py). Careful: a cache
shorter than n_kept must not be "truncated" upwards, and n_kept can be 0.

Check: pytest exercises/ -k ex04
"""


def rollback(n_kept, *caches):
    raise NotImplementedError("exercise 04: write rollback")
