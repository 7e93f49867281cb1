"""Beam search: the baseline that keeps the n_beams most likely continuations, not just one.

Greedy decoding keeps the single most likely next token at every step. Beam
search keeps the n_beams best partial continuations ("beams"), each scored by
the sum of its tokens' log-probabilities, and extends all of them by every
possible token at each step. With n_beams = 1 it is greedy decoding (but at a
float32 near-tie: two logits a hair apart can give equal float32 scores, and
then the lower token id wins where argmax picks the larger logit). The project
the project documentation documents (docs/sources.md; romsto/Speculative-Decoding, sampling/base_decoding.py)
has it as a baseline beside autoregressive decoding.

    beams = [the prompt, with score 0]
    repeat n_new times:
        for each beam: log q(x | prompt, beam) for every token x      (one forward on the beam's KV cache)
        candidates = every (beam, x), scored score(beam) + log q(x | prompt, beam)
        beams = the n_beams best candidates
    return the best beam's tokens, by  score / n_new ** length_penalty

The final score is Hugging Face's: the sum of the log-probabilities divided by
the length to the power length_penalty, the length being the generated tokens
only (transformers since late 2023; before, the prompt counted too). Here every
beam has exactly n_new tokens (nothing stops a beam early, there is no
end-of-text rule), so the penalty divides every score by the same number: it
cannot change which beam wins, only the score's value.

Each beam has its own KV cache. A beam extended by two tokens gets a copy of
its parent's cache for the second child; a beam that is dropped takes its
cache with it. Beam search is exact, the most likely continuation of all, only
when no candidate is ever dropped: n_beams >= V ** (n_new - 1).
"""

import copy
from dataclasses import dataclass

import numpy as np

from decoding import GenerationError, check_lengths, check_room, feed
from stats import Stats
from kvcache import KVCache


@dataclass
class Beam:
    tokens: list     # the generated tokens so far (the prompt is not repeated here)
    score: float     # float32 sum of their log-probabilities
    cache: KVCache   # holds the prompt and every token but the newest


def beam_search(model, ids, n_new, n_beams=4, length_penalty=1.0, stats=None, budget=None):
    """Yields the n_new tokens of the best beam, once the search is over.

    Its checks run at the call, not at the first token: a caller that prints
    the prompt before the tokens hears of a search that cannot run first.
    budget: the bytes the beams' caches may take (None: unchecked; the programs
    give half of what this process may take).
    """
    check_room(ids, n_new, model)
    check_lengths(n_beams=n_beams)
    if budget is not None:
        check_memory(model, n_beams, len(ids), n_new, budget)
    return search(model, ids, n_new, n_beams, length_penalty, Stats() if stats is None else stats)


def search(model, ids, n_new, n_beams, length_penalty, stats):  # beam_search's search, once checked
    if n_new == 0:
        return
    beams = [Beam([], np.float32(0), KVCache())]
    for _ in range(n_new):
        # Every beam's score plus the log-probability of each next token: [n_beams, V].
        scores = np.stack([beam.score + log_softmax(feed(model, beam.cache, ids + beam.tokens, stats, "oracle")[-1])
                           for beam in beams])
        best = best_pairs(scores, n_beams)
        beams = extend(beams, *np.unravel_index(best, scores.shape), scores)
        stats.add_tokens(beams[0].tokens[-1:])  # one step: len(beams) one-token forwards
    best = max(beams, key=lambda beam: beam_score(beam.score, n_new, length_penalty))
    yield from best.tokens


def best_pairs(scores, n):  # [n_beams, V] -> the flat indices of the n best (beam, token) pairs, best first
    """On a tie the earlier beam, then the lower token id: a stable sort of all scores, cut to n.
    Only the candidates as good as the n-th best are sorted, not all n_beams * V of them."""
    flat = -scores.ravel()
    n = min(n, flat.size)
    nth = np.partition(flat, n - 1)[n - 1]
    candidates = np.flatnonzero(flat <= nth)  # the n best and all tied with the n-th, in index order
    return candidates[np.argsort(flat[candidates], kind="stable")][:n]


def check_memory(model, n_beams, n_prompt, n_new, budget):
    """Every beam keeps a KV cache of its own: refuse, before any work, a search that would not fit in budget bytes."""
    need = memory_needed(model, n_beams, n_prompt, n_new)
    if need > budget:
        raise GenerationError(f"{n_beams} beams of {n_prompt + n_new} tokens need about {need / 1e9:.1f} GB, "
                              f"more than the {budget / 1e9:.1f} GB this process may give them: use fewer beams")


def memory_needed(model, n_beams, n_prompt, n_new):
    """An upper bound on the bytes a search allocates at once (tests/test_beam.py holds it to the peak it measures):
    - the caches: during a step the old beams' and the new ones' (2 * n_beams), each a float32 key and value
      per layer and position, its capacity up to twice what it holds (a cache grows by doubling, from 16);
    - the scores: a row of V per beam, stacked, negated and partitioned by best_pairs, and a few more
      rows while one beam's log-probabilities are made;
    - the prompt's forward: its attention scores and MLP activations."""
    n_tokens = n_prompt + n_new
    one_cache = 2 * model.n_layer * model.n_embd * 4 * 2 * max(n_tokens, 16)
    scores = (5 * n_beams + 8) * model.vocab_size * 4
    prompt = 2 * 4 * (model.n_head * n_prompt * n_prompt + 8 * n_prompt * model.n_embd)
    return 2 * n_beams * one_cache + scores + prompt


def extend(beams, parents, tokens, scores):
    """The new beams: parent + token for each chosen pair. The first child of a
    parent takes over the parent's cache; any further child gets a copy."""
    taken, children = set(), []
    for parent, token in zip(parents.tolist(), tokens.tolist()):
        cache = beams[parent].cache
        if parent in taken:
            cache = copy.deepcopy(cache)
        taken.add(parent)
        children.append(Beam(beams[parent].tokens + [token], scores[parent, token], cache))
    return children


def log_softmax(logits):  # [V] -> [V]
    shifted = logits - logits.max()  # minus the max: no overflow in exp
    return shifted - np.log(np.exp(shifted).sum())


def beam_score(sum_log_probs, length, length_penalty):
    """Hugging Face's score of a finished beam: sum of log-probabilities / length ** length_penalty."""
    return sum_log_probs / length ** length_penalty
