"""Exercise 5 (core): find the KV-cache bug.   EXERCISES.md, exercise 5

Greedy speculative decoding written out in the classic style, every step by
hand. It runs, it is fast, it returns the right number of tokens, and its text
is wrong. See for yourself:

    python exercises/ex05_cache_bug.py

which compares it with plain greedy decoding on tiny random models and prints
where they part. Find the bug (one line is missing), fix it here, and check:

    pytest exercises/ -k ex05

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    yields the new token ids one by one, each a Python int (n_new
             of them)
  arguments  ids comes back unchanged
  randomness none: the same arguments, the same answer
  passes     against speculative.py's own run: the oracle's passes that
             check drafts, and the tokens each model reads a second time
             (the newest token included)
  boundaries a run of one token; a prompt of one token; n_draft = 1; the end
             of the context
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kvcache import KVCache  # noqa: E402


def speculative_generate(draft, oracle, ids, n_new, n_draft=8):
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    if len(tokens) > 1:  # both caches start with the prompt but its last token
        draft.forward(tokens[:-1], draft_cache, n_logits=1)
        oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)
        # 1. Draft: the draft reads the last token, then each of its own guesses.
        drafted, last = [], tokens[-1]
        for _ in range(k):
            last = int(np.argmax(draft.forward([last], draft_cache)[-1]))
            drafted.append(last)
        # 2. Verify: the oracle reads the last token and all k drafts in one pass.
        oracle_choice = np.argmax(oracle.forward([tokens[-1]] + drafted, oracle_cache), axis=-1)
        # 3. Accept the agreeing drafts, then the oracle's own next token.
        n = 0
        while n < k and drafted[n] == oracle_choice[n]:
            n += 1
        new_tokens = drafted[:n] + [int(oracle_choice[n])]
        tokens += new_tokens
        # 4. Roll back: every cache must hold all the tokens but the newest.
        n_kept = len(tokens) - 1
        if draft_cache.n_tokens() < n_kept:  # all k accepted: the draft never read its last guess
            draft.forward(tokens[draft_cache.n_tokens():n_kept], draft_cache, n_logits=1)
        draft_cache.truncate(n_kept)
        yield from new_tokens


if __name__ == "__main__":
    from checks import tiny_pair
    from speculative import greedy_generate

    draft, oracle = tiny_pair()
    ids = [1, 2, 3, 4, 5]
    expected = list(greedy_generate(oracle, ids, 30))
    got = list(speculative_generate(draft, oracle, ids, 30, n_draft=4))
    print("greedy:     ", expected)
    print("speculative:", got)
    first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), None)
    if first is None and len(got) == len(expected):
        print("identical: solved!")
    elif first is None:
        print(f"the first {min(len(got), len(expected))} tokens agree, but greedy gave {len(expected)} and this {len(got)}")
    else:
        print(f"they differ from token {first} on")
