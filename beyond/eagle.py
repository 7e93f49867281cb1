"""EAGLE: a one-layer head drafts from the oracle's own hidden state (Li, Wei, Zhang, Zhang, ICML 2024,
arXiv 2401.15077).

No second model. The oracle's last block already holds, at position t, a state f_t (before its final
layer norm; the paper's "feature") from which its LM head reads the next token. EAGLE trains a small
head to guess the next feature from this one and the token that followed:

    f^_(t+1) = block(fc([e(x_(t+1)), f_t]))       e: the oracle's token embedding wte; fc: 2d -> d
    draft x_(t+2) = argmax of logits(f^_(t+1))    logits: the oracle's own ln_f and LM head

and then reads its own guess for the token after: f^_(t+2) from (f^_(t+1), x_(t+2)), and so on. Drafting
in feature space works better than in token space: the feature is what the LM head reads, and the
head is told which token was drawn, so it need not guess it. workbench/tools/train_heads.py trains the head on
the oracle's features (smooth L1 on the feature, plus 0.1 times the draft's cross-entropy against
the oracle's distribution) and docs/LEARNED_PAIR.md gives its figures.

Each round (eagle_generate, in order):
  1. draft:     the head catches up on the pairs (f_t, x_(t+1)) whose true features came from the
                oracle's last verification (its own cache holds the older ones), then runs on its
                own guesses: k drafts in k passes of one layer;
  2. verify:    one oracle pass over [newest token, d_1 .. d_k] gives its argmax after each prefix
                (speculative.accept keeps the agreeing prefix plus one) AND the true features of
                those rows, which the next round's head reads instead of its guesses;
  3. roll back: the oracle's cache to the kept tokens; the head's cache to the pairs whose
                features were true (its guesses are gone, the true ones come next round).
The output is exactly the oracle's greedy output: a draft is kept only if the oracle chooses it.
eagle_sample verifies by speculative sampling instead (sps.py's rule with the head's
distribution as the draft's p), so its output has the oracle's distribution. Both run the same rounds
(eagle_rounds); only the choice of a draft and the verification differ.
EAGLE-2's dynamic tree (arXiv 2406.16858) drafts from the same head: beyond/eagle2.py.
"""

import time

import numpy as np

from decoding import GenerationError, check_lengths, check_room, timed_states
from stats import Line, Stats
from gpt2 import block, causal_mask
from kvcache import KVCache
from processors import as_processor
from speculative import accept, rollback
from sps import sample, token_verification


class EagleHead:
    """fc and one GPT-2 block, the weights workbench/tools/train_heads.py exports ("fc.*", "h.0.*");
    weights/heads.py reads them (params: gpt2.nest of its tensors)."""

    def __init__(self, params, config, oracle):
        if config.get("head") != "eagle" or config.get("n_embd") != oracle.n_embd:
            raise GenerationError(f"this head is not an EAGLE head for a model of width {oracle.n_embd}")
        self.params, self.oracle = params, oracle
        self.n_head, self.eps = config["n_head"], np.float32(config["layer_norm_epsilon"])

    def forward(self, tokens, features, cache, mask=None):  # tokens [n], features [n, n_embd] -> guesses [n, n_embd]
        """The next feature after each (feature f_t, token x_(t+1)) pair, after the pairs in cache; mask: the pairs'
        attention mask (default causal; beyond/eagle2.py gives a tree's)."""
        fc = self.params["fc"]
        x = np.concatenate([self.oracle.params["wte"][np.asarray(tokens)], features], axis=1) @ fc["weight"] + fc["bias"]
        n = len(tokens)
        if mask is None and n > 1:
            mask = causal_mask(n, cache.n_tokens() + n)
        x = block(x, self.params["h"][0], self.n_head, self.eps, cache, 0, mask)
        cache.commit(n)
        return x


def draft_chain(head, head_cache, tokens, features, k, stats, dist, choose):
    """Step 1: k tokens, each chosen by choose(dist(logits)) from the head's guess of the next feature.

    features[t] is the oracle's true f_t for every token it has been fed (all but the newest);
    the head's pair t is (f_t, tokens[t + 1]). Returns the drafts and the dist each was chosen from."""
    start = time.perf_counter()
    first = head_cache.n_tokens()  # pairs 0..first-1 are in the head's cache already
    guess = head.forward(tokens[first + 1:], features[first:], head_cache)[-1:]  # [1, n_embd]
    drafted, dists = [], []
    for i in range(k):
        dists.append(dist(head.oracle.logits(guess)[0]))  # the oracle's own ln_f and LM head: [vocab_size]
        drafted.append(choose(dists[-1]))
        if i + 1 < k:
            guess = head.forward([drafted[-1]], guess, head_cache)
    stats.add_pass("draft", time.perf_counter() - start)
    return drafted, dists


def check(head, oracle, ids, n_new, n_draft):
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft)
    if head.oracle is not oracle:
        raise GenerationError("the EAGLE head was loaded for another oracle")


def eagle_generate(head, oracle, ids, n_new, n_draft=4, stats=None):
    """Greedy decoding with EAGLE's drafts: yields exactly greedy_generate(oracle, ids, n_new)'s tokens.
    The checks run at the call, before any token."""
    check(head, oracle, ids, n_new, n_draft)

    def rule(drafted, dists, logits):  # speculative.py's step 3: the agreeing prefix + one
        n_accepted, new_tokens, oracle_choice = accept(drafted, logits)
        return new_tokens, oracle_choice, Line(n_draft, len(drafted))

    return eagle_rounds(head, oracle, list(ids), n_new, n_draft, Stats() if stats is None else stats,
                        dist=lambda logits: logits, choose=lambda logits: int(np.argmax(logits)), rule=rule)


def eagle_sample(head, oracle, ids, n_new, n_draft=4, rng=None, processor=None, stats=None, **flags):
    """Speculative sampling with EAGLE's drafts: yields n_new ids distributed exactly as
    sps.autoregressive_sample(oracle, ...)'s. The letters are Chen et al.'s (sps.py): q the oracle's
    distribution, p the drafter's, here the head's (Leviathan et al. swap them)."""
    check(head, oracle, ids, n_new, n_draft)
    rng = np.random.default_rng() if rng is None else rng
    processor = as_processor(processor, **flags)

    stats = Stats() if stats is None else stats

    def rule(drafted, p, logits):  # sps.py's steps 3 and 4, the head's p (each draft's) beside the oracle's q
        new_tokens, _, details = token_verification(processor(logits), p, drafted, rng, n_draft,
                                                    explain=stats.trace is not None)
        return new_tokens, None, details

    return eagle_rounds(head, oracle, list(ids), n_new, n_draft, stats,
                        dist=processor, choose=lambda p: sample(p, rng), rule=rule)


def eagle_rounds(head, oracle, tokens, n_new, n_draft, stats, dist, choose, rule):
    """The rounds of both decoders, once checked: choose(dist(logits)) picks a token (dist: the logits
    themselves, or sampling's p), rule(drafted, the drafts' dists, the oracle's logits) -> (new tokens,
    the oracle's greedy choices or None, details). The prompt's pass is a round of its own, with no drafts
    and no details: the head has no features to read before it."""
    end = len(tokens) + n_new
    if n_new == 0:
        return
    oracle_cache, head_cache = KVCache(), KVCache()
    # The prompt: the oracle's features for it, and its first token (no draft: nothing to read yet).
    features, logits = timed_states(oracle, oracle_cache, tokens, stats, "oracle", n_logits=1)
    tokens.append(choose(dist(logits[-1])))
    stats.add_round(tokens[-1:], context_length=end - n_new, cached={"draft": 0, "oracle": oracle_cache.n_tokens()})
    yield tokens[-1]
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)  # the oracle adds one more: no overshoot
        drafted, dists = draft_chain(head, head_cache, tokens, features, k, stats, dist, choose) if k else ([], [])
        # 2. One oracle pass over [newest token, d_1 .. d_k]: its logits after each, and their true features.
        fresh, logits = timed_states(oracle, oracle_cache, (tokens + drafted)[oracle_cache.n_tokens():], stats, "oracle")
        new_tokens, oracle_choice, details = rule(drafted, dists, logits)
        n_accepted = len(new_tokens) - 1
        features = np.concatenate([features, fresh[:n_accepted + 1]])  # true features of the kept rows
        context_length = len(tokens)
        tokens += new_tokens
        # 3. The oracle's cache to the kept tokens; the head's to the pairs whose features were true.
        rollback(len(tokens) - 1, oracle_cache)
        head_cache.truncate(min(head_cache.n_tokens(), context_length - 1))
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached={"draft": head_cache.n_tokens(), "oracle": oracle_cache.n_tokens()}, details=details)
        yield from new_tokens
