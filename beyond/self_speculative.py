"""Self-speculative decoding: the oracle's own first layers are its draft.

No second model. The draft is the oracle cut short: its blocks 0..L-1, then
its final layer norm ln_f and its LM head (tied to wte), as in LayerSkip's
early exit (Elhoushi et al. 2024). Draft & Verify (Zhang et al. 2023) skips a
searched set of middle layers instead, and SWIFT (Xia et al. 2024) picks them
on the fly; this module keeps the simplest shape, the first L, and fixes L.
The output is exactly the oracle's greedy output, whatever L: a draft token
is kept only if the full oracle chooses it too. How many are kept depends on
how close layer L's early answer is to the last layer's. LayerSkip trains for
that (layer dropout, an early-exit loss); GPT-2 was not, so a shallow draft
agrees less often than a deep one.

Three things are shared, nothing is copied:
  weights: early_exit_draft gives a GPT2 whose params are the oracle's own
           arrays (the same layer dicts, wte, wpe, ln_f), and upper_layers
           one of the oracle's blocks L..n_layer-1;
  keys and values: layers 0..L-1 of the oracle compute exactly what the
           draft computes on the same tokens, so there is ONE cache for them,
           `shared`; the oracle's own layers L..n_layer-1 keep theirs in `deep`;
  hidden states: the draft already ran every drafted token through layers
           0..L-1, so verification starts from its output after layer L-1
           (LayerSkip's "exit query cache") and runs layers L.. only.

Each round (self_speculative_generate, then the steps it calls, in order):
  1. draft:     pass i runs the newest token through layers 0..L-1 (its
                keys and values into `shared`), and ln_f + LM head on its
                row propose d_(i+1). The k drafts take k + 1 passes: the draft
                never needs d_k's own layers (it proposes nothing after it)
                but the oracle does, for its choice after d_k (the bonus) and
                for the next round's cache, so the last pass runs d_k's layers
                0..L-1 and stops there;
  2. verify:    the oracle's layers L..n_layer-1 over the k + 1 hidden rows of
                step 1 (the prompt too, in round 1), then the LM head: its
                argmax after each prefix, as speculative.verify gives;
  3. accept:    speculative.accept, unchanged;
  4. roll back: both caches to the kept tokens, all but the newest.

What the sharing saves, per round, against speculative_generate with the
same early-exit draft as a separate model (which keeps a second cache and
whose verification runs all n_layer layers over the k + 1 rows): layers
0..L-1 run once per token instead of twice, so L layers of arithmetic over
k rows, and the second copy of the cache of layers 0..L-1. The count of
weight reads stays: the extra one-row pass over d_k's layers 0..L-1 reads
what the full verification would have. Where a pass costs what reading its
weights costs (few rows, large model), the two run about equally fast; where
rows cost arithmetic (a prompt, small models on a CPU), sharing is faster.
`python workbench.py bench layers` (app/layers.py) measures both beside plain greedy.

The passes are the model's own steps (gpt2.GPT2): the draft's hidden_states
and logits, the upper layers' blocks and the oracle's logits: the same
computation forward makes, cut at layer L.
"""

import time
from dataclasses import dataclass

import numpy as np

from gpt2 import GPT2
from decoding import GenerationError, cache_lengths, check_lengths, check_room
from stats import Line, Stats
from kvcache import KVCache
from speculative import accept, rollback


# ---------------------------------------------------------------------------
# The draft: the oracle's first L layers, ln_f and LM head, its own arrays
# ---------------------------------------------------------------------------

def check_layers(oracle, n_layers):
    """The draft must be shorter than the oracle and at least one layer deep: 1 <= L < n_layer."""
    if oracle.n_layer < 2:
        raise GenerationError(f"{oracle.name} has {oracle.n_layer} layer: no shorter draft can be cut from it")
    if not isinstance(n_layers, (int, np.integer)) or not 1 <= n_layers < oracle.n_layer:
        raise GenerationError(f"the draft's layers must be a whole number from 1 to {oracle.n_layer - 1} "
                              f"({oracle.name} has {oracle.n_layer}), got {n_layers!r}")


def layers_of(oracle, layers, name):
    """A gpt2.GPT2 whose blocks are the oracle's blocks `layers` (a slice), the same layer dicts, with the same
    wte, wpe and ln_f: nothing is copied."""
    params = {**oracle.params, "h": oracle.params["h"][layers]}
    config = {"n_layer": len(params["h"]), "n_head": oracle.n_head, "n_embd": oracle.n_embd,
              "n_positions": oracle.n_positions, "vocab_size": oracle.vocab_size,
              "layer_norm_epsilon": float(oracle.eps)}
    return GPT2(params, config, name=name)


def early_exit_draft(oracle, n_layers):
    """The oracle's blocks 0..n_layers-1, then its ln_f and LM head. It runs alone too (draft.forward)."""
    check_layers(oracle, n_layers)
    return layers_of(oracle, slice(0, n_layers), f"{oracle.name} layers 0-{n_layers - 1}")


def upper_layers(oracle, n_layers):
    """The oracle's blocks n_layers..n_layer-1, to run (its .blocks) on hidden states after layer n_layers-1."""
    check_layers(oracle, n_layers)
    return layers_of(oracle, slice(n_layers, None), f"{oracle.name} layers {n_layers}-{oracle.n_layer - 1}")


def draft_name(n_layers, n_layer, trained=False):
    """'layers 0-1 of 8 + ln_f + LM head': what the draft is, for the trace."""
    layers = "layer 0" if n_layers == 1 else f"layers 0-{n_layers - 1}"
    return f"{layers} of {n_layer}{' + the trained adapter' if trained else ''} + ln_f + LM head"


# ---------------------------------------------------------------------------
# The decoder
# ---------------------------------------------------------------------------

@dataclass
class LayersDetails(Line):
    """A round's record for --trace and --html: a fixed draft length (stats.Line) and the draft's depth."""
    layers: int = 1   # L, the draft's blocks
    n_layer: int = 2  # the oracle's blocks
    trained: bool = False  # the exit goes through a trained adapter (beyond/early_exit.py)


def self_speculative_generate(oracle, ids, n_new, n_draft=4, n_layers_draft=None, stats=None):
    """Greedy self-speculative decoding: yields exactly greedy_generate(oracle, ids, n_new)'s tokens.

    The draft is the oracle's layers 0..n_layers_draft-1 + ln_f + LM head (default: half its layers);
    n_draft drafts a round. The checks run at the call, before any token.
    """
    n_layers = max(1, oracle.n_layer // 2) if n_layers_draft is None else n_layers_draft
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft)
    if min(ids) < 0 or max(ids) >= oracle.vocab_size:
        raise GenerationError(f"token ids must be in [0, {oracle.vocab_size}), got {min(ids)}..{max(ids)}")
    draft = early_exit_draft(oracle, n_layers)  # checks 1 <= n_layers < n_layer
    return rounds(draft, oracle, list(ids), n_new, n_draft, Stats() if stats is None else stats)


def rounds(draft, oracle, tokens, n_new, n_draft, stats, adapter=None):  # self_speculative_generate's rounds, once checked
    """adapter: None, the untrained exit; or beyond/early_exit.py's, with a cache of its own kept beside `shared`."""
    end, n_layers = len(tokens) + n_new, draft.n_layer
    upper = upper_layers(oracle, n_layers)
    shared = KVCache()  # layers 0..L-1: the draft's cache, and the bottom of the oracle's
    deep = KVCache()    # layers L..n_layer-1: the oracle's alone (its layer 0 is block L)
    exits = [] if adapter is None else [KVCache()]  # the adapter's attention: one position per token, as shared
    while len(tokens) < end:
        # The oracle adds one token after the drafts: k stops one short of what is left.
        k = min(n_draft, end - len(tokens) - 1)
        # 1. k drafts, and every fed token's hidden state after layer L-1.
        drafted, hidden = draft_tokens(draft, shared, tokens, k, stats, adapter, *exits)
        # 2 and 3. The oracle's layers L.. over those rows; keep the agreeing prefix + one.
        n_accepted, new_tokens, oracle_choice = verify_from_layer(oracle, upper, deep, hidden, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        # 4. Both caches hold context + k positions; keep all but the newest token.
        rollback(len(tokens) - 1, shared, deep, *exits)
        trained = adapter is not None
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(shared, deep),
                        details=LayersDetails(n_draft, k, n_layers, oracle.n_layer, trained))
        yield from new_tokens


def draft_tokens(draft, shared, tokens, k, stats, adapter=None, exit_cache=None):
    """Step 1: (k greedy drafts, [n_fed, n_embd] hidden states after layer L-1 of every token fed).

    n_fed = what `shared` lacked (the newest token; round 1: the prompt) + the k drafts.
    With an adapter, every fed row also goes through it (its attention needs every position's keys),
    and the draft reads the adapter's output instead of layer L-1's.
    """
    fresh = tokens[shared.n_tokens():]  # never the cached prefix again, never a gap
    drafted, hidden = [], []
    for i in range(k + 1):
        start = time.perf_counter()
        hidden.append(draft.hidden_states(fresh, shared))  # layers 0..L-1, K/V into shared: [n_fresh, n_embd]
        exit_state = hidden[-1] if adapter is None else adapter.forward(hidden[-1], exit_cache)  # [n_fresh, n_embd]
        if i < k:  # pass k ran d_k's layers for the oracle only: nothing is drafted after d_k
            drafted.append(int(np.argmax(draft.logits(exit_state[-1:]))))  # the early exit: [1, vocab_size]
            fresh = drafted[-1:]
        stats.add_pass("draft", time.perf_counter() - start)
    return drafted, np.concatenate(hidden)  # [n_fed, n_embd]


def verify_from_layer(oracle, upper, deep, hidden, drafted, stats):
    """Steps 2 and 3 from layer L on: (n accepted, new tokens, the oracle's choices).

    hidden [n_fed, n_embd] is after layer L-1 and `shared` already holds these rows' keys and
    values of layers 0..L-1: what the oracle's own pass would compute there, so it is not run again.
    upper holds the oracle's blocks L..; its cache `deep` numbers them from 0.
    """
    start = time.perf_counter()
    x = upper.blocks(hidden, deep)  # [n_fed, n_embd] -> [n_fed, n_embd]
    logits = oracle.logits(x[-(len(drafted) + 1):])  # row i: the choice after d_1..d_i: [k + 1, vocab_size]
    stats.add_pass("oracle", time.perf_counter() - start)
    return accept(drafted, logits)
