"""How every decoder here calls its models: the checks before any work, and feeding a model through its cache.

Nothing in this file is an algorithm. The decoders (speculative.py, threshold.py, sps.py, tree.py, ngram.py,
adaptive.py, beam.py, batch.py, crossvocab.py and beyond/) import it; it imports none of them. What they
record is stats.py's; what a round should gain, speedup.py's.

The code's names, and the papers' letters for them (only this table uses the letters):

| the code | what it is | Chen et al. 2023 (SpS) | Leviathan et al. 2023 | Hugging Face transformers |
|---|---|---|---|---|
| n_draft | the setting: the most tokens a round drafts | K | gamma | num_assistant_tokens |
| k | what this round drafts: n_draft, or fewer where the tokens left cut it short (a tree: its depth) | | | |
| q | the target's (the oracle's) distribution | q | p | p |
| p | the draft's distribution | p | q | q |
| alpha(q, p) | sum_x min(p(x), q(x)): the chance a draft x ~ p is kept (sps.alpha) | | alpha (beta per token) | |
| Stats.kept_fraction | a run's drafts kept over drafts made | | | |
| Stats.alpha_estimate | a run's estimate of alpha: kept / (kept + rejections) | | | |
| c | T_draft(1) / T_oracle(1) | c | c | |

Medusa, Lookahead and most later papers write k for n_draft (and Lookahead's n-gram size is
N = n_draft + 1). The signatures take the target first: (q, p), as sps.py's functions do.
"""

import time

import numpy as np

from errors import UserError


class GenerationError(UserError):
    """Arguments that cannot give a valid generation (no room left, vocabularies differ)."""


def feed(model, cache, tokens, stats, role, n_logits=1):  # -> [n_logits, vocab_size]
    """Run the model on the tokens its cache does not hold yet; logits of the last n_logits.

    Feeding exactly tokens[cache.n_tokens():] is the whole cache discipline: the
    prompt on the first call, then whatever was appended since. It can neither
    skip a token nor feed the cached prefix again. The time goes into stats.
    """
    return timed_forward(model, cache, tokens[cache.n_tokens():], stats, role, n_logits=n_logits)


def timed_forward(model, cache, ids, stats, role, n_logits=1, **tree):  # -> [n_logits, vocab_size]
    """One forward pass of the model over ids after what its cache holds, counted and timed in stats.

    The one place a decoder's forward is timed: feed() for a line of tokens, and
    directly for a draft tree's nodes (tree.py), whose tree gives the forward
    its positions= and mask=.
    """
    start = time.perf_counter()
    logits = model.forward(ids, cache, n_logits=n_logits, **tree)
    stats.add_pass(role, time.perf_counter() - start)
    return finite(logits, model) if role == "oracle" else logits


def timed_states(model, cache, ids, stats, role, n_logits=None, **tree):  # -> ([n, n_embd], [n_logits, vocab_size])
    """timed_forward for a drafter that reads the model's last hidden states too (beyond/eagle.py's features,
    beyond/medusa.py's heads): the states of every row of ids, and the logits of the last n_logits (default all)."""
    start = time.perf_counter()
    states = model.hidden_states(ids, cache, **tree)
    logits = model.logits(states[-(n_logits or len(states)):])
    stats.add_pass(role, time.perf_counter() - start)
    return states, finite(logits, model) if role == "oracle" else logits


def finite(logits, model):
    """The oracle's logits, when every one is a finite number; else GenerationError. Finite weights (every loader
    checks them) can still overflow float32 in their products, and the oracle's argmax or draw from NaN would be a
    wrong token. A draft's may be anything: its drafts are checked (and sps.acceptance_probability keeps none then)."""
    if not np.isfinite(logits).all():
        raise GenerationError(f"{model.name}'s logits are not finite numbers: its weights overflow float32 on this text")
    return logits


def cache_lengths(draft_cache, oracle_cache):
    """For a Round: how many positions each cache holds (the draft's is None without a draft model)."""
    return {"draft": None if draft_cache is None else draft_cache.n_tokens(), "oracle": oracle_cache.n_tokens()}



# ---------------------------------------------------------------------------
# Argument checks, made before any work
# ---------------------------------------------------------------------------

def check_room(ids, n_new, *models):
    """The prompt must be non-empty and prompt + n_new tokens must fit every model's window."""
    window = min(m.n_positions for m in models)
    if len(ids) == 0:
        raise GenerationError("the prompt has no tokens (start from <|endoftext|> for an unconditional sample)")
    if n_new < 0:
        raise GenerationError(f"cannot generate {n_new} tokens")
    if len(ids) + n_new > window:
        prompt, new = (f"{n} token" + ("s" if n != 1 else "") for n in (len(ids), n_new))
        raise GenerationError(f"a prompt of {prompt} plus {new} new does not fit "
                              f"the context window of {window} tokens")


def check_pair(draft, oracle):
    """Draft tokens are checked by id, so both models must use the same vocabulary."""
    if draft.vocab_size != oracle.vocab_size:
        raise GenerationError(f"the draft's vocabulary ({draft.vocab_size} tokens) differs from "
                              f"the oracle's ({oracle.vocab_size}); they must share a tokenizer")


def check_lengths(**draft_lengths):
    """Each named draft length must be at least 1."""
    for name, value in draft_lengths.items():
        if value < 1:
            raise GenerationError(f"{name} must be at least 1, got {value}")


def check_args(ids, n_new, draft, oracle, **draft_lengths):
    """The checks every draft-and-verify generator makes before any work: a shared
    vocabulary, room in the window, and each named draft length at least 1."""
    check_pair(draft, oracle)
    check_room(ids, n_new, draft, oracle)
    check_lengths(**draft_lengths)
