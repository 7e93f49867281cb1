"""Exercise 25 (stretch): predict prompt lookup's acceptance from the text alone.   EXERCISES.md, exercise 25

Greedy verification keeps exactly the oracle's greedy text, so how many of
prompt lookup's drafts a run accepts depends on that text only. Given the text
(tokens: the prompt's n_prompt tokens, then the oracle's greedy continuation),
replay the run without any model: from i = n_prompt, while i < len(tokens):
  draft k = min(n_draft, len(tokens) - i - 1) tokens at most with lookup(tokens[:i], k, ...)
  (exercise 16's lookup; your own or ngram.NGramDrafter's), count how many of
  them match tokens[i:] from the start, and move i past them and the oracle's
  own token.
replay_lookup(tokens, n_prompt, n_draft, max_tail=3) returns (drafted, accepted,
rounds); the checker calls it with other values of n_draft and max_tail too.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a tuple (drafted, accepted, rounds): three counts
  arguments  tokens comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries nothing to replay; one token left; n_draft = 1; max_tail = 1; a
             text that never repeats itself

Check: pytest exercises/ -k ex25
"""


def replay_lookup(tokens, n_prompt, n_draft, max_tail=3):
    raise NotImplementedError("exercise 25: write replay_lookup")
