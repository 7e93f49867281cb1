"""Exercise 22 (core): acceptance by kind of text, on the learned pair.   EXERCISES.md, exercise 22

Predict first: on which kind of text does the small draft guess the oracle
best? The held-out prompts (assets/learned-pair/prompts.json) are of the
benchmark's four kinds (workbench/bench/suite.py): prose (continue a paragraph), code
(continue an example), lists (more items of a list or rows of a table) and
repeat (text that repeats its prompt). Then measure it.

acceptance_by_kind(draft, oracle, prompts, n_new, n_draft) runs greedy
speculative decoding (speculative.speculative_generate, with a decoding.Stats)
on each (kind, prompt_ids) of prompts, n_new new tokens each and n_draft
drafts a round (speculative_generate's n_draft), and returns
{kind: acceptance}, where a kind's acceptance is ALL its accepted drafts over
ALL its drafted tokens, pooled over its prompts (not the mean of each prompt's
rate, nor of each round's).

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a dict {kind: acceptance}, one entry per kind, each a Python
             float (a kind's acceptance)
  arguments  prompts comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries one draft a round; 2 new tokens

Check: pytest exercises/ -k ex22
"""


def acceptance_by_kind(draft, oracle, prompts, n_new, n_draft):
    raise NotImplementedError("exercise 22: write acceptance_by_kind")
