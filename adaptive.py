"""Adaptive draft length: draft more when the draft is doing well, less when not.

Two rules, both around the greedy verification of speculative.py (so the
output is exactly greedy_generate's):

  "entropy" (in the spirit of AdaEDL, arXiv 2410.18351): within a round, stop
      drafting as soon as the draft's next-token entropy exceeds entropy_bound:
      an unsure draft is likely wrong, and every later guess depends on it.
      Across rounds, gamma (the most drafts per round) follows an exponential
      moving average of the accepted count: gamma = round(average) + 1.
  "heuristic" (Hugging Face's assisted generation): gamma + 2 after a round
      in which every draft was accepted, gamma - 1 otherwise.
Both keep gamma within [gamma_min, gamma_max].
"""

import numpy as np

from gpt2 import softmax
from kvcache import KVCache
from decoding import GenerationError, Stats, cache_lengths, check_args, feed
from speculative import rollback, verify

RULES = ("entropy", "heuristic")


def entropy(probs):  # [V] -> nats
    return float(-np.sum(probs * np.log(np.maximum(probs, np.float32(1e-30)))))


def adaptive_generate(draft, oracle, ids, n_new, rule="entropy", gamma=4, gamma_min=1, gamma_max=16,
                      entropy_bound=2.0, ema=0.7, stats=None):
    """Greedy speculative decoding with an adaptive draft length; yields n_new token ids."""
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, gamma_min=gamma_min)
    if rule not in RULES:
        raise GenerationError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if not 1 <= gamma_min <= gamma <= gamma_max:
        raise GenerationError(f"need 1 <= gamma_min <= gamma <= gamma_max, got {gamma_min}, {gamma}, {gamma_max}")
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    average_accepted = float(gamma - 1)
    while len(tokens) < end:
        # 1. Draft up to gamma tokens; with the entropy rule, stop after an unsure one.
        k_max = min(gamma, end - len(tokens) - 1)
        drafted, entropies = [], []
        while len(drafted) < k_max:
            probs = softmax(feed(draft, draft_cache, tokens + drafted, stats, "draft")[-1])
            drafted.append(int(np.argmax(probs)))
            entropies.append(entropy(probs))
            if rule == "entropy" and entropies[-1] > entropy_bound:
                break
        # 2-4. As in speculative_generate.
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        # 5. The next round's gamma.
        details = {"gamma": gamma, "rule": rule, "k_max": k_max, "entropies": entropies, "entropy_bound": entropy_bound,
                   "average_before": average_accepted, "ema": ema, "bounds": (gamma_min, gamma_max)}
        if drafted:
            if rule == "heuristic":
                gamma = gamma + 2 if n_accepted == len(drafted) else gamma - 1
            else:
                average_accepted = ema * average_accepted + (1 - ema) * n_accepted
                gamma = round(average_accepted) + 1
            gamma = min(max(gamma, gamma_min), gamma_max)
        stats.add_round(new_tokens, drafted, n_accepted, context=context, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache),
                        details={**details, "average_after": average_accepted, "next_gamma": gamma})
        yield from new_tokens
