"""Exercise 25 (stretch): predict prompt lookup's acceptance from the text alone.   EXERCISES.md, exercise 25

Greedy verification keeps exactly the oracle's greedy text, so how many of
prompt lookup's drafts a run accepts depends on that text only. Given the text
(tokens: the prompt's n_prompt tokens, then the oracle's greedy continuation),
replay the run without any model: from i = n_prompt, while i < len(tokens):
  draft up to min(k, len(tokens) - i - 1) tokens with lookup(tokens[:i], ...)
  (exercise 16's lookup; your own or ngram.NGramDrafter's), count how many of
  them match tokens[i:] from the start, and move i past them and the oracle's
  own token.
replay_lookup(tokens, n_prompt, k, max_tail=3) returns (drafted, accepted, rounds);
the checker calls it with other values of k and max_tail too.

Check: pytest exercises/ -k ex25
"""


def replay_lookup(tokens, n_prompt, k, max_tail=3):
    raise NotImplementedError("exercise 25: write replay_lookup")
