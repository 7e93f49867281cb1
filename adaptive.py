"""Adaptive draft length: draft more when the draft is doing well, less when not.

Two rules, both around the greedy verification of speculative.py (so the
output is exactly greedy_generate's). Each has one name here, in the trace
and in app/methods.py:

  "egag" (EGAG, entropy-adaptive gamma, of the project documentation docs/sources.md quotes; in the spirit of
      AdaEDL, arXiv 2410.18351; method `adaptive`, the session's /egag):
      within a round, stop drafting as soon as the draft's next-token entropy
      exceeds entropy_bound: an unsure draft is likely wrong, and every later
      guess depends on it. Across rounds, n_draft (the most drafts per round;
      the project documentation's gamma) follows an exponential moving average of the
      accepted count: n_draft = round(average) + 1.
  "heuristic" (Hugging Face's num_assistant_tokens_schedule="heuristic";
      method `adaptive-hf`): n_draft + 2 after a round in which every draft
      was accepted, n_draft - 1 otherwise.
Both keep n_draft within [n_draft_min, n_draft_max].
"""

from dataclasses import dataclass

import numpy as np

from gpt2 import softmax
from kvcache import KVCache
from decoding import GenerationError, cache_lengths, check_args, feed
from stats import Stats
from speculative import rollback, verify

RULES = ("egag", "heuristic")


@dataclass
class AdaptiveDetails:
    """A round's record for --trace and --html: what stopped the drafts and how the next n_draft was set."""
    rule: str              # "egag" or "heuristic"
    n_draft: int           # the most drafts this round was allowed
    k: int                 # the most drafts this round: n_draft, or the tokens left if fewer
    entropies: list        # the draft's entropy (nats) before each draft
    entropy_bound: float
    average_before: float  # egag: the moving average of the accepted count, before this round
    average_after: float   # ... and after it
    ema: float
    bounds: tuple          # (n_draft_min, n_draft_max)
    next_n_draft: int      # the next round's n_draft


def entropy(probs):  # [V] -> nats
    return float(-np.sum(probs * np.log(np.maximum(probs, np.float32(1e-30)))))


def adaptive_generate(draft, oracle, ids, n_new, rule="egag", n_draft=4, n_draft_min=1, n_draft_max=16,
                      entropy_bound=2.0, ema=0.7, stats=None):
    """Greedy speculative decoding with an adaptive draft length, starting at n_draft; yields n_new token ids."""
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, n_draft_min=n_draft_min)
    if rule not in RULES:
        raise GenerationError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if not 1 <= n_draft_min <= n_draft <= n_draft_max:
        raise GenerationError(f"need 1 <= n_draft_min <= n_draft <= n_draft_max, "
                              f"got {n_draft_min}, {n_draft}, {n_draft_max}")
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    average_accepted = float(n_draft - 1)
    while len(tokens) < end:
        # 1. Draft up to n_draft tokens; with the egag rule, stop after an unsure one.
        k = min(n_draft, end - len(tokens) - 1)
        drafted, entropies = [], []
        while len(drafted) < k:
            probs = softmax(feed(draft, draft_cache, tokens + drafted, stats, "draft")[-1])
            drafted.append(int(np.argmax(probs)))
            entropies.append(entropy(probs))
            if rule == "egag" and entropies[-1] > entropy_bound:
                break
        # 2-4. As in speculative_generate.
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        # 5. The next round's n_draft.
        used, average_before = n_draft, average_accepted
        if drafted:
            if rule == "heuristic":
                n_draft = n_draft + 2 if n_accepted == len(drafted) else n_draft - 1
            else:
                average_accepted = ema * average_accepted + (1 - ema) * n_accepted
                n_draft = round(average_accepted) + 1
            n_draft = min(max(n_draft, n_draft_min), n_draft_max)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache),
                        details=AdaptiveDetails(rule, used, k, entropies, entropy_bound, average_before,
                                                average_accepted, ema, (n_draft_min, n_draft_max), n_draft))
        yield from new_tokens
