"""Exercise 15 (stretch): one round of speculative sampling, from the pseudocode.   EXERCISES.md, exercise 15

The SpS notes' class asked: "can you just implement it?" Write one round of Chen
et al.'s Algorithm 2 (the pseudocode is in EXERCISES.md, exercise 15):

    sps_round(draft, oracle, tokens, n_draft, rng) -> the new token ids, 1 to n_draft + 1 of them

The draft model gives p, the oracle (the target) gives q: Chen et al.'s letters.
Sample at temperature 1, with no top-k. What you may use:

    model.forward(ids)      # logits [len(ids), V]; row i is for the token after ids[:i + 1] (no KV cache needed)
    softmax(logits)         # probabilities, along the last axis
    sample(probs, rng)      # one token id drawn from probs (float32; it need not sum to 1 exactly)
    rng.random()            # r ~ U[0, 1)
    residual(q, p)          # (q - p)+ renormalised: exercise 11

A round is ONE pass of the oracle over the text and all n_draft drafts, and
one pass of the draft per draft; the rng is its only randomness. The checker
first runs rounds whose every draw is the same (r = 0.0, or r just below 1) on
models of exact zero and one probabilities, step by step. Then, on two tiny
models over a vocabulary of 6 tokens, it runs your round 300 times
(n_draft = 2) and compares how often drafts are kept with alpha, and how often
all n_draft are kept (also with n_draft = 1 and 3) with its exact probability;
it checks the bonus tokens of 2,000 rounds (n_draft = 1, then n_draft = 2 with
a draft close to the target) against q after their drafts; it compares the
outputs of 3,000 rounds over a vocabulary of 3 with Algorithm 2's, enumerated
exactly; last, it runs your rounds 500 times until 3 tokens are out, and
compares those with the target's exact distribution (chi-square tests).

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a list of Python ints (the token ids)
  arguments  tokens comes back unchanged
  randomness only the rng given: the same seed, the same answer
  passes     ONE oracle (target) pass a round, and one draft pass per draft:
             n_draft
  boundaries rounds with generators whose every draw is the same, on models
             with exact zero and one probabilities: both drafts kept (r just
             below 1), a first draft the target never emits (r = 0.0), a
             draft model equal to the target (p = q)

Check: pytest exercises/ -k ex15
"""

import numpy as np  # noqa: F401

from gpt2 import softmax  # noqa: F401
from sps import residual, sample  # noqa: F401


def sps_round(draft, oracle, tokens, n_draft, rng):
    raise NotImplementedError("exercise 15: write sps_round")
