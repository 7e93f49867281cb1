"""Greedy speculative decoding: a small draft model guesses, a large oracle checks.

    python speculative.py "The meaning of life is"

Plain greedy decoding runs the big model once per token. Here the small draft
model (gpt2) proposes n_draft tokens one at a time, and the big oracle
(gpt2-large) checks all of them in ONE forward pass: on a machine where that
pass costs about as much as a single-token pass, every accepted draft token is
a big-model pass saved. The output is exactly the oracle's own greedy output:
a draft token is kept only if it is what the oracle would have chosen.

Each round (see speculative_generate):
  1. draft:    the draft model proposes n_draft tokens greedily;
  2. verify:   the oracle runs once over them and gives its argmax after each prefix;
  3. accept:   keep the longest prefix of drafts that matches, plus the oracle's
               own next token (a correction, or a bonus if all matched);
  4. roll back: truncate both KV caches to the tokens kept.

This module also holds what threshold.py and sps.py share (Stats, feed,
verify, rollback, the argument checks), and the command-line interface.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from kvcache import KVCache


class GenerationError(ValueError):
    """Arguments that cannot give a valid generation (no room left, vocabularies differ)."""


@dataclass
class Stats:
    """What a generator did, filled in as it runs; the tokens themselves are its output."""
    rounds: int = 0          # oracle passes
    drafted: int = 0         # tokens the draft proposed
    accepted: int = 0        # drafted tokens the oracle kept
    draft_time: float = 0.0  # seconds in the draft model's forward passes
    oracle_time: float = 0.0
    from_draft: list = field(default_factory=list)  # one bool per new token: proposed by the draft?
    trace: list = None       # set to [] to get one record per round (what was drafted, kept, cached)

    @property
    def n_tokens(self):
        return len(self.from_draft)

    @property
    def acceptance_rate(self):
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_round(self):
        return self.n_tokens / self.rounds if self.rounds else 0.0

    def emit(self, new_tokens, n_from_draft):
        """Count one round whose new tokens start with n_from_draft accepted drafts."""
        self.rounds += 1
        self.from_draft += [True] * n_from_draft + [False] * (len(new_tokens) - n_from_draft)


def check_room(ids, n_new, *models):
    """The prompt must be non-empty and prompt + n_new tokens must fit every model's window."""
    window = min(m.n_positions for m in models)
    if len(ids) == 0:
        raise GenerationError("the prompt has no tokens (start from <|endoftext|> for an unconditional sample)")
    if n_new < 0:
        raise GenerationError(f"cannot generate {n_new} tokens")
    if len(ids) + n_new > window:
        raise GenerationError(f"a prompt of {len(ids)} tokens plus {n_new} new tokens does not fit "
                              f"the context window of {window} tokens")


def check_pair(draft, oracle):
    """Draft tokens are checked by id, so both models must use the same vocabulary."""
    if draft.vocab_size != oracle.vocab_size:
        raise GenerationError(f"the draft's vocabulary ({draft.vocab_size} tokens) differs from "
                              f"the oracle's ({oracle.vocab_size}); they must share a tokenizer")


def feed(model, cache, tokens, stats, role):  # -> [n_fed, vocab_size]
    """Run the model on the tokens its cache does not hold yet, timing it for stats.

    Feeding exactly tokens[cache.n_tokens():] is the whole cache discipline: the
    prompt on the first call, then whatever was appended since. It can neither
    skip a token nor feed the cached prefix again.
    """
    start = time.perf_counter()
    logits = model.forward(tokens[cache.n_tokens():], cache)
    elapsed = time.perf_counter() - start
    if role == "draft":
        stats.draft_time += elapsed
    else:
        stats.oracle_time += elapsed
    return logits


def accepted_prefix_length(drafted, oracle_choice):
    """How many drafts, from the first, equal the oracle's choice at their position."""
    n = 0
    while n < len(drafted) and drafted[n] == oracle_choice[n]:
        n += 1
    return n


def verify(oracle, oracle_cache, tokens, drafted, stats):
    """Steps 2 and 3: check the drafts in one oracle pass; return (n accepted, new tokens)."""
    # 2. One pass over [last token, d_1 .. d_k]: row i is the oracle's next-token
    #    logits after d_1 .. d_i, so k drafts give k + 1 choices.
    logits = feed(oracle, oracle_cache, tokens + drafted, stats, "oracle")[-(len(drafted) + 1):]
    oracle_choice = np.argmax(logits, axis=-1)  # [k + 1]
    # 3. Keep the drafts up to the first disagreement, then the oracle's own token:
    #    its correction at the disagreement, or a bonus token if all k matched.
    n = accepted_prefix_length(drafted, oracle_choice)
    new_tokens = drafted[:n] + [int(oracle_choice[n])]
    if stats.trace is not None:
        stats.trace.append({"context": len(tokens), "drafted": list(drafted),
                            "oracle": oracle_choice.tolist(), "accepted": n, "new": new_tokens})
    return n, new_tokens


def rollback(n_kept, *caches):
    """Step 4: forget the keys and values of rejected drafts.

    After a round every cache must hold the first n_kept = len(tokens) - 1
    tokens: all but the newest, which has not been fed yet. A cache can also be
    shorter (the draft never feeds its last draft); feed() catches it up.
    """
    for cache in caches:
        cache.truncate(min(cache.n_tokens(), n_kept))


def greedy_generate(model, ids, n_new, stats=None):
    """Plain greedy decoding with a KV cache: yields n_new token ids, each the argmax."""
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, model)
    tokens, cache = list(ids), KVCache()
    for _ in range(n_new):
        logits = feed(model, cache, tokens, stats, "oracle")[-1]
        tokens.append(int(np.argmax(logits)))
        stats.emit(tokens[-1:], 0)
        yield tokens[-1]


def speculative_generate(draft, oracle, ids, n_new, n_draft=8, stats=None):
    """Greedy speculative decoding: yields exactly greedy_generate(oracle, ids, n_new)'s tokens."""
    stats = Stats() if stats is None else stats
    check_pair(draft, oracle)
    check_room(ids, n_new, draft, oracle)
    if n_draft < 1:
        raise GenerationError(f"n_draft must be at least 1, got {n_draft}")
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        # 1. Draft k tokens greedily with the small model. The oracle adds one
        #    more token, so k stops one short of what is left: no overshoot.
        k = min(n_draft, end - len(tokens) - 1)
        drafted = []
        for _ in range(k):
            logits = feed(draft, draft_cache, tokens + drafted, stats, "draft")[-1]
            drafted.append(int(np.argmax(logits)))
        # 2 and 3. One oracle pass checks them all; keep the agreeing prefix + one.
        n_accepted, new_tokens = verify(oracle, oracle_cache, tokens, drafted, stats)
        tokens += new_tokens
        # 4. Both caches back to the kept tokens.
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.drafted += k
        stats.accepted += n_accepted
        stats.emit(new_tokens, n_accepted)
        if stats.trace is not None:
            stats.trace[-1]["cached"] = {"draft": draft_cache.n_tokens(), "oracle": oracle_cache.n_tokens()}
        yield from new_tokens
