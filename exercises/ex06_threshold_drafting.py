"""Exercise 6 (core): draft while the draft is confident.   EXERCISES.md, exercise 6

The threshold notes' improvement on a fixed number of drafts: the draft keeps guessing
while the cumulative probability it gives its own guesses,
p(d_1) * p(d_2 | d_1) * ..., is at least `threshold`, and never guesses more
than k tokens. The guess that takes the cumulative probability below the
threshold is still proposed (it has been computed already, and checking it
costs the oracle little); after it, drafting stops.

Write draft_while_confident(draft, tokens, k, threshold) -> the list of
guessed token ids. Each guess is the draft's greedy (argmax) token after
tokens and the earlier guesses. No KV cache is needed:

    logits = draft.forward(tokens + guesses)   # [len(tokens) + len(guesses), vocab_size]
    probs = softmax(logits[-1])                # the draft's next-token distribution

The checker runs threshold.py on tiny models and asks your function for the
drafts of every round: they must be exactly threshold.py's.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a list of Python ints (the guesses)
  arguments  tokens comes back unchanged
  randomness none: the same arguments, the same answer
  passes     one draft forward per guess, and none for a guess it does not
             make
  boundaries threshold 1.0 (with an unsure draft, and with one certain of
             every guess); a cumulative probability exactly equal to the
             threshold; k = 0; threshold 0

Check: pytest exercises/ -k ex06
"""

import numpy as np  # noqa: F401

from gpt2 import softmax  # noqa: F401


def draft_while_confident(draft, tokens, k, threshold):
    raise NotImplementedError("exercise 06: write draft_while_confident")
