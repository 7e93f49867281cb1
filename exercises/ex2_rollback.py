"""Exercise 2: roll the KV caches back after a round.  (EXERCISES.md, exercise 9)

After a round, `tokens` holds everything kept so far. Each cache may hold keys
and values of rejected drafts past that point. Every cache must end up holding
the first n_kept = len(tokens) - 1 positions (all but the newest token, which no
model has been fed yet), or fewer if it never saw that many: the draft model
never feeds its own last draft, and the next call catches it up.

Use cache.n_tokens() and cache.truncate(n) (kvcache.py). Careful: a cache
shorter than n_kept must not be "truncated" upwards, and n_kept can be 0.

Check: pytest exercises/ -k ex2
"""


def rollback(n_kept, *caches):
    raise NotImplementedError("write rollback in exercises/ex2_rollback.py")
