"""Threshold drafting: let the draft's own confidence decide how far to guess.

A fixed n_draft wastes draft passes when the draft is unsure (its later guesses
are likely rejected) and stops too early when it is sure. Here the draft keeps
proposing while the cumulative probability it gives its own guesses,
p(d_1) * p(d_2 | d_1) * ..., stays at or above a threshold, up to n_draft
(the most drafts a round may make).

The threshold adapts to how the oracle judged the last round:
  - some drafts rejected: move the threshold halfway toward the cumulative
    probability at the last accepted draft token (stop sooner next time);
  - all accepted: lower it by threshold_all_correct_boost (guess further);
and it stays within [0.05, 0.95].

Verification is exactly that of speculative.py (greedy: the output equals the
oracle's greedy output); only step 1, the drafting, and step 5 differ.

Source: the `speculative_threshold` sketch this file was written from
(docs/sources.md, the threshold notes). See next_threshold for the one place where this
file follows that sketch's comment rather than its code.
"""

from dataclasses import dataclass

import numpy as np

from decoding import cache_lengths, check_args, feed
from stats import Stats
from gpt2 import softmax
from kvcache import KVCache
from speculative import rollback, verify

THRESHOLD_MIN, THRESHOLD_MAX = 0.05, 0.95


@dataclass
class ThresholdDetails:
    """A round's record for --trace and --html: the numbers that decided its drafts and the next threshold."""
    threshold: float       # the threshold this round drafted under
    cumulative: list       # cumulative[i]: the draft's probability of drafted[:i + 1]
    k: int                 # the most drafts this round: n_draft, or the tokens left
    next_threshold: float  # step 5's result
    boost: float           # threshold_all_correct_boost
    n_draft: int = None    # the most drafts asked for (k is fewer where fewer tokens were left to make)


def next_threshold(threshold, cumulative, n_accepted, boost):
    """Step 5: the threshold for the next round.

    cumulative[i] is the draft's probability of drafted[:i + 1]; n_accepted of
    the len(cumulative) drafts were kept.
    """
    if n_accepted == len(cumulative):
        threshold -= boost
    else:
        # Toward the last ACCEPTED draft, as the source's comment says. Its code,
        # `drafted_probs[n_accepted - 1]`, counts the oracle's own token in
        # n_accepted, so it reads the first REJECTED draft's probability instead
        # (EXERCISES.md asks which is right). Nothing accepted: the empty prefix, 1.
        p_last_accepted = cumulative[n_accepted - 1] if n_accepted > 0 else 1.0
        threshold = (threshold + p_last_accepted) / 2
    return min(max(float(threshold), THRESHOLD_MIN), THRESHOLD_MAX)


def threshold_generate(draft, oracle, ids, n_new, n_draft=16, threshold=0.4,
                       threshold_all_correct_boost=0.1, stats=None):
    """Greedy speculative decoding with threshold-bounded drafts; yields n_new token ids."""
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, n_draft=n_draft)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        # 1. Draft greedily while the draft's confidence in the whole guess holds.
        k = min(n_draft, end - len(tokens) - 1)
        drafted, cumulative = draft_while_confident(draft, draft_cache, tokens, k, threshold, stats)
        # 2, 3 and 4, as in speculative_generate.
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        # 5. Adapt the threshold to this round's outcome.
        used = threshold
        if drafted:
            threshold = next_threshold(threshold, cumulative, n_accepted, threshold_all_correct_boost)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache),
                        details=ThresholdDetails(used, [float(c) for c in cumulative], k, threshold,
                                                 threshold_all_correct_boost, n_draft))
        yield from new_tokens


def draft_while_confident(draft, draft_cache, tokens, k, threshold, stats):
    """Step 1: the draft's greedy tokens while their cumulative probability stays >= threshold,
    k of them at most; (drafted, cumulative), cumulative[i] the probability of drafted[:i + 1].

    The token that takes it below the threshold is still proposed: it was
    computed already, and checking it costs the oracle little.
    """
    drafted, cumulative, p = [], [], 1.0
    while len(drafted) < k and p >= threshold:
        probs = softmax(feed(draft, draft_cache, tokens + drafted, stats, "draft")[-1])
        drafted.append(int(np.argmax(probs)))
        p *= probs[drafted[-1]]
        cumulative.append(p)
    return drafted, cumulative
