"""Exercise 22 (core): acceptance by kind of text, on the learned pair.   EXERCISES.md, exercise 22

Predict first: on which kind of text (prose, code, a table, a list) does the
small draft guess the oracle best? Then measure it.

acceptance_by_kind(draft, oracle, prompts, n_new, k) runs greedy speculative
decoding (speculative.speculative_generate, with a decoding.Stats) on each
(kind, prompt_ids) of prompts, and returns {kind: acceptance}, where a kind's
acceptance is ALL its accepted drafts over ALL its drafted tokens, pooled over
its prompts (not the mean of each prompt's rate).

Check: pytest exercises/ -k ex22
"""


def acceptance_by_kind(draft, oracle, prompts, n_new, k):
    raise NotImplementedError("exercise 22: write acceptance_by_kind")
