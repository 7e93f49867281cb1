"""Exercise 9 (warm-up): temperature and top-k.   EXERCISES.md, exercise 9

A sampler seldom draws from softmax(logits) as it is. Write
probabilities(logits, temperature=1.0, top_k=None) -> float32 probabilities [V]:

  - temperature T: softmax(logits / T). T < 1 sharpens the distribution,
    T > 1 flattens it. T = 0 means greedy: all the mass on the argmax (the
    first one on a tie). A tiny T, even 1e-50 (below the smallest float32), must not give NaN.
  - top_k k: only the k largest logits keep any probability, renormalised;
    k >= V keeps everything. Temperature first, then top-k.

logits is a float32 array [V]; keep everything float32.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a float32 array [V]: one probability per token
  arguments  logits comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries temperature 0 on a tie; temperatures down to the smallest
             float32 (1.4e-45) and below it (1e-50); top_k = 1, = V and > V

Check: pytest exercises/ -k ex09
"""

import numpy as np  # noqa: F401

from gpt2 import softmax  # noqa: F401  (softmax(x) = exp(x - max) / sum, along the last axis)


def probabilities(logits, temperature=1.0, top_k=None):
    raise NotImplementedError("exercise 09: write probabilities")
