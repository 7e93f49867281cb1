"""Many prompts at once: batched greedy and speculative decoding, and where speculation stops paying.

A server decodes several users' prompts together: one forward pass takes a row per prompt, so
the weights are streamed once for all of them. Speculative decoding in a batch meets two problems
that one prompt never shows.

The batch is ragged. Prompts have different lengths, and after each verification every row keeps
its own number of drafts, so the rows' KV caches hold different numbers of positions. The choices:
  - pad and mask: left-pad the prompts to one length; after a round, pad again so that every row
    ends at the same place. Every forward then carries the padding, and it grows with every round.
  - per-row cache lengths (the choice here): each row of the cache (BatchKVCache, below) has its own
    length; a forward writes row b's new keys at its own position and the mask lets row b see only
    its own positions (batch_mask). Cutting rows to different lengths is, as for one prompt,
    only a shorter length. A forward of rows whose new tokens differ in number pads them on the
    right to the longest (feed_batch): a token or two, not the history. The prompts themselves,
    whose lengths differ most, run one by one and their caches are stacked (prompt_caches).
  - the same k for every row (the choice here), or each row its own: one k keeps the verification
    one pass of k + 1 tokens per row. k stops one short of what the row with the fewest tokens left
    can take, so no row overshoots.
  - rows that finish early: they leave the batch (BatchKVCache.select), so the others' passes stop
    carrying them.

And a batch already fills the products with rows. The premise of speculation, that checking k
tokens costs about what one costs, holds while a product's rows are few: T(k + 1) of B rows is
B * (k + 1) rows. As B grows the check's cost grows towards k + 1 times a step, and speculation stops
paying; serving engines turn it off under load. `python workbench.py bench batch` measures where
(PERFORMANCE.md, "Many prompts at once").

Each round of speculative_generate_batch is the steps of speculative.py for every row at once, each
step's comment in the code numbered as here (tests/test_batch.py checks them, in order):
  1. draft:     the draft model proposes k tokens for every row, one batched pass per token;
  2. verify:    the oracle runs once over every row's [last token, d_1 .. d_k];
  3. accept:    each row keeps its own agreeing prefix plus the oracle's next token;
  4. roll back: each row of both caches is cut to that row's kept tokens;
  5. leave:     rows with all their tokens leave the batch.
"""

import time
from dataclasses import dataclass

import numpy as np

from decoding import GenerationError, check_lengths, check_pair, check_room, finite, timed_forward
from gpt2 import MASKED, attention, layer_norm, linear, mlp
from kvcache import KVCache
from stats import Stats
from processors import as_processor
from speculative import accept
from sps import accept_or_resample, explain_round, sample


@dataclass
class BatchRound:
    """A batch's round for --trace: each row still in the batch, what it drafted and kept."""
    n_draft: int  # the draft length asked for
    k: int        # drafted this round by every row: n_draft, or fewer where a row had fewer tokens left
    rows: list    # per row in the batch: {"row": its number (from 1), "drafted", "kept", "new"[, "sps": sps.SpsDetails]}


def greedy_generate_batch(model, batch_ids, n_new, stats=None, budget=None):
    """Greedy decoding of every prompt at once, one batched forward per token: a list of n_new new ids per
    prompt, each what speculative.greedy_generate(model, ids, n_new) gives."""
    stats = Stats() if stats is None else stats
    check_batch(batch_ids, n_new, model, budget=budget)
    if n_new == 0:  # nothing to make: no prompt is run
        return [[] for _ in batch_ids]
    tokens = [list(ids) for ids in batch_ids]
    cache = prompt_caches(model, batch_ids, stats, "oracle")
    for _ in range(n_new):
        logits = feed_batch(model, cache, tokens, stats, "oracle")[:, -1]  # [n_rows, vocab_size]
        for row, token in zip(tokens, np.argmax(logits, axis=-1)):
            row.append(int(token))
        stats.add_tokens([row[-1] for row in tokens])
    return [row[len(ids):] for row, ids in zip(tokens, batch_ids)]


def speculative_generate_batch(draft, oracle, batch_ids, n_new, n_draft=4, stats=None, budget=None):
    """Greedy speculative decoding of every prompt at once: a list of n_new new ids per prompt, each exactly
    what speculative.greedy_generate(oracle, ids, n_new) gives."""
    stats = Stats() if stats is None else stats
    check_batch(batch_ids, n_new, draft, oracle, budget=budget, n_draft=n_draft)
    if n_new == 0:  # nothing to make: no prompt is run
        return [[] for _ in batch_ids]
    tokens = [list(ids) for ids in batch_ids]
    ends = [len(ids) + n_new for ids in batch_ids]
    live = list(range(len(tokens)))  # the rows still decoding, in the caches' order
    draft_cache, oracle_cache = (prompt_caches(model, batch_ids, stats, role)
                                 for model, role in ((draft, "draft"), (oracle, "oracle")))
    while live:
        rows = [tokens[b] for b in live]  # each row's list itself: appending to it appends to tokens[b]
        # 1. The same k for every row, one short of what the row with the fewest tokens left can take.
        k = min(n_draft, min(ends[b] - len(tokens[b]) for b in live) - 1)
        drafted = [[] for _ in live]
        for _ in range(k):
            logits = feed_batch(draft, draft_cache, [row + d for row, d in zip(rows, drafted)], stats, "draft")
            for d, token in zip(drafted, np.argmax(logits[:, -1], axis=-1)):
                d.append(int(token))
        # 2. One oracle pass checks every row: row b's logits [k + 1, vocab_size] after each of its prefixes.
        logits = feed_batch(oracle, oracle_cache, [row + d for row, d in zip(rows, drafted)], stats, "oracle",
                            n_logits=k + 1)
        # 3. Each row keeps its own agreeing prefix, then the oracle's own next token.
        kept = []
        for row, d, row_logits in zip(rows, drafted, logits):
            n_accepted, new_tokens, _ = accept(d, row_logits)
            row += new_tokens
            kept.append(n_accepted)
        # 4. Each row of both caches back to its own kept tokens, all but the newest.
        rollback_rows([len(row) - 1 for row in rows], draft_cache, oracle_cache)
        add_batch_round(stats, live, rows, drafted, kept, BatchRound(n_draft, k, row_records(live, rows, drafted, kept)))
        # 5. Rows with all their tokens leave the batch.
        live = leave(live, tokens, ends, draft_cache, oracle_cache)
    return [row[len(ids):] for row, ids in zip(tokens, batch_ids)]


def speculative_sample_batch(draft, oracle, batch_ids, n_new, n_draft=4, rng=None, processor=None, stats=None,
                             budget=None, **flags):
    """Speculative sampling (sps.py, Chen et al. 2023, Algorithm 2) of every prompt at once: a list of n_new
    new ids per prompt, each row distributed exactly as sps.autoregressive_sample(oracle, ids, ...).

    The rows' rounds are independent: k is set before a round's draws, so each row is SpS with a
    draft length that changes from round to round, which keeps its distribution (sps.py's proof
    holds for any k). One processor makes p and q, as in sps.speculative_sample.
    """
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng
    processor = as_processor(processor, **flags)
    check_batch(batch_ids, n_new, draft, oracle, budget=budget, n_draft=n_draft)
    if n_new == 0:  # nothing to make: no prompt is run
        return [[] for _ in batch_ids]
    tokens = [list(ids) for ids in batch_ids]
    ends = [len(ids) + n_new for ids in batch_ids]
    live = list(range(len(tokens)))
    draft_cache, oracle_cache = (prompt_caches(model, batch_ids, stats, role)
                                 for model, role in ((draft, "draft"), (oracle, "oracle")))
    while live:
        rows = [tokens[b] for b in live]
        k = min(n_draft, min(ends[b] - len(tokens[b]) for b in live) - 1)
        # Step 1: k draft tokens x ~ p for every row, keeping each row's p.
        drafted, p = [[] for _ in live], [[] for _ in live]
        for _ in range(k):
            logits = feed_batch(draft, draft_cache, [row + d for row, d in zip(rows, drafted)], stats, "draft")
            for d, row_p, row_logits in zip(drafted, p, logits[:, -1]):
                row_p.append(processor(row_logits))  # [V]
                d.append(sample(row_p[-1], rng))
        # Step 2: q for all k + 1 positions of every row, in one oracle pass.
        q = processor(feed_batch(oracle, oracle_cache, [row + d for row, d in zip(rows, drafted)], stats, "oracle",
                                 n_logits=k + 1))  # [n_rows, k + 1, V]
        # Steps 3 and 4, row by row: keep each draft with probability min(1, q/p), or end at a residual draw.
        kept, explained = [], []
        for row, d, row_p, row_q in zip(rows, drafted, p, q):
            new_tokens, rs = accept_or_resample(row_q, row_p, d, rng)
            row += new_tokens
            kept.append(len(new_tokens) - 1)
            if stats.trace is not None:  # what the row's step 3 saw, for --trace (it draws nothing)
                explained.append(explain_round(row_q, row_p, d, rs, new_tokens, n_draft))
        rollback_rows([len(row) - 1 for row in rows], draft_cache, oracle_cache)
        add_batch_round(stats, live, rows, drafted, kept,
                        BatchRound(n_draft, k, row_records(live, rows, drafted, kept, explained)))
        live = leave(live, tokens, ends, draft_cache, oracle_cache)
    return [row[len(ids):] for row, ids in zip(tokens, batch_ids)]


# ---------------------------------------------------------------------------
# The batch's plumbing: feeding ragged rows, cutting them, letting them go
# ---------------------------------------------------------------------------

def prompt_caches(model, batch_ids, stats, role):
    """The batch's cache after its prompts: row b holds prompt b but its last token (what a round feeds first),
    each prompt run alone. Their lengths differ, and a batched pass padded to the longest could cost the
    batch's size times the work of the prompts themselves."""
    caches = [KVCache() for _ in batch_ids]
    for ids, cache in zip(batch_ids, caches):
        if len(ids) > 1:
            timed_forward(model, cache, list(ids[:-1]), stats, role)
    return BatchKVCache.stacked(caches)


def feed_batch(model, cache, rows, stats, role, n_logits=1):  # -> [n_rows, n_logits, vocab_size]
    """decoding.feed for a batch: each row runs on its tokens its row of the cache does not hold yet.

    Rows with fewer new tokens are padded on the right to the longest (the padding's keys land past
    the row's end, where the mask hides them); the logits are those of each row's last n_logits tokens.
    """
    lengths = cache.n_tokens()
    new = [row[length:] for row, length in zip(rows, lengths)]
    ids = np.zeros((len(new), max(map(len, new))), dtype=np.int64)  # token 0 pads: never read
    for b, row in enumerate(new):
        ids[b, :len(row)] = row
    start = time.perf_counter()
    logits = forward_batch(model, ids, cache, [len(row) for row in new], n_logits=n_logits)
    stats.add_pass(role, time.perf_counter() - start)
    return finite(logits, model) if role == "oracle" else logits


def rollback_rows(n_kept, *caches):
    """Step 4 for a batch: row b of each cache keeps at most n_kept[b] positions (speculative.rollback's rule,
    row by row: a cache can be shorter, the draft's never feeds its last draft)."""
    for cache in caches:
        cache.truncate(np.minimum(cache.n_tokens(), n_kept))


def leave(live, tokens, ends, *caches):
    """The rows still decoding; the rows of each cache that have all their tokens are dropped."""
    staying = [i for i, b in enumerate(live) if len(tokens[b]) < ends[b]]
    if len(staying) < len(live):
        for cache in caches:
            cache.select(staying)
    return [live[i] for i in staying]


def add_batch_round(stats, live, rows, drafted, kept, details):
    """One round of every row: Stats.add_round's counts, every row's together (new tokens, drafts, drafts kept,
    rows that ended at a rejected draft), and each row's line of draft positions (Stats.count_positions)."""
    new = [token for row, n in zip(rows, kept) for token in row[-(n + 1):]]
    stats.add_round(new, [token for d in drafted for token in d], sum(kept), sum(n < len(d) for d, n in zip(drafted, kept)),
                    positions=0, context_length=None, details=details)
    for d, n in zip(drafted, kept):
        stats.count_positions(len(d), n)


def row_records(live, rows, drafted, kept, explained=None):
    """BatchRound.rows: per row still in the batch, its number, its drafts, how many it kept, its new tokens (and,
    explained given, what each row's step 3 saw: sps.SpsDetails)."""
    records = [{"row": b + 1, "drafted": d, "kept": n, "new": row[-(n + 1):]}
               for b, row, d, n in zip(live, rows, drafted, kept)]
    for record, details in zip(records, explained or []):
        record["sps"] = details
    return records


# ---------------------------------------------------------------------------
# Checks, made before any work
# ---------------------------------------------------------------------------

def check_batch(batch_ids, n_new, *models, budget=None, **draft_lengths):
    """At least one prompt; each fits every model's window with n_new more (decoding.check_room); the models
    share a vocabulary; each draft length is at least 1; and the caches fit in `budget` bytes (None: unchecked;
    the programs give half of what this process may take)."""
    if len(batch_ids) == 0:
        raise GenerationError("the batch has no prompts")
    for number, ids in enumerate(batch_ids, 1):
        try:
            check_room(ids, n_new, *models)
        except GenerationError as e:
            raise GenerationError(f"prompt {number}: {e}") from None
    if len(models) == 2:
        check_pair(*models)
    check_lengths(**draft_lengths)
    need = sum(memory_needed(model, len(batch_ids), max(map(len, batch_ids)) + n_new, **draft_lengths)
               for model in models)
    if budget is not None and need > budget:
        raise GenerationError(f"a batch of {len(batch_ids)} prompts needs about {need / 1e9:.1f} GB, more than the "
                              f"{budget / 1e9:.1f} GB this process may give it: use fewer prompts at once")


def memory_needed(model, n_rows, n_tokens, n_draft=0):
    """An upper bound on the bytes a batch allocates at once in one model: its cache (a float32 key and value
    per row, layer and position, the capacity up to twice what it holds) and a verification's logits,
    attention scores and MLP activations for n_draft + 1 rows of each (a prompt's pass: n_tokens rows)."""
    cache = 2 * model.n_layer * model.n_embd * 4 * n_rows * 2 * max(n_tokens, 16)
    rows = n_rows * max(n_tokens, n_draft + 1)
    activations = 4 * rows * (model.vocab_size + model.n_head * n_tokens + 8 * model.n_embd)
    return cache + activations


# ---------------------------------------------------------------------------
# The batch's model: one forward over ragged rows, and their cache
# ---------------------------------------------------------------------------
# gpt2.py runs one sequence; here every shape has [n_rows] in front. The layers are gpt2.py's own
# (layer_norm, linear, attention, mlp); only the attention's heads and mask know about rows.

def forward_batch(model, ids, kvcache, n_new, n_logits=1):
    """gpt2.GPT2.forward for a batch: logits [n_rows, n_logits, vocab_size] after the last n_logits new tokens
    of each row.

    ids [n_rows, n_seq]: row b's next n_new[b] tokens, then padding (any token) up to n_seq, after the
    kvcache.lengths[b] positions its row of kvcache (a BatchKVCache) holds. Every row runs through the same
    products; the mask keeps each row to its own positions.
    """
    ids, n_new = np.asarray(ids, dtype=np.int64), np.asarray(n_new, dtype=np.int64)
    n_rows, n_seq = ids.shape
    if n_new.min() < n_logits or n_new.max() > n_seq:
        raise ValueError(f"each row needs {n_logits} to {n_seq} new tokens, got {n_new.tolist()}")
    lengths = kvcache.n_tokens()
    # Each row's positions continue its own; padding repeats its row's first new position (its
    # output is never read) so that no padding can pass the window.
    positions = lengths[:, None] + np.minimum(np.arange(n_seq), n_new[:, None] - 1)  # [n_rows, n_seq]
    if positions.max() >= model.n_positions:
        raise ValueError(f"position {positions.max()} is past {model.name}'s context window of {model.n_positions}")
    if ids.min() < 0 or ids.max() >= model.vocab_size:
        raise ValueError(f"token ids must be in [0, {model.vocab_size}), got {ids.min()}..{ids.max()}")
    p = model.params
    x = p["wte"][ids.reshape(-1)].reshape(n_rows, n_seq, -1) + p["wpe"][positions]  # [n_rows, n_seq, n_embd]
    mask = batch_mask(lengths, n_seq)
    for layer, params in enumerate(p["h"]):
        x = batch_block(x, params, model.n_head, model.eps, kvcache, layer, mask)
    kvcache.commit(n_seq)
    kvcache.truncate(lengths + n_new)  # the padding's keys went in too: each row counts its own tokens
    last = n_new[:, None] - n_logits + np.arange(n_logits)  # [n_rows, n_logits]: each row's last new tokens
    x = x[np.arange(n_rows)[:, None], last]  # [n_rows, n_logits, n_embd]
    return model.logits(x.reshape(n_rows * n_logits, -1)).reshape(n_rows, n_logits, -1)


def batch_block(x, params, n_head, eps, kvcache, layer, mask):  # [n_rows, n_seq, n_embd] -> the same
    """gpt2.block, every row at once."""
    ln_1, ln_2 = params["ln_1"], params["ln_2"]
    x = x + batch_mha(layer_norm(x, ln_1["weight"], ln_1["bias"], eps), params["attn"], n_head, kvcache, layer, mask)
    return x + mlp(layer_norm(x, ln_2["weight"], ln_2["bias"], eps), params["mlp"])


def batch_mha(x, attn, n_head, kvcache, layer, mask):  # [n_rows, n_seq, n_embd] -> [n_rows, n_seq, n_embd]
    """gpt2.mha, every row at once: its heads [n_rows, n_head, n_seq, head_dim], its mask batch_mask's."""
    n_rows, n_seq, n_embd = x.shape
    qkv = linear(x, attn["c_attn"]["weight"], attn["c_attn"]["bias"])  # [n_rows, n_seq, 3 * n_embd]
    q, k, v = qkv.reshape(n_rows, n_seq, 3, n_head, -1).transpose(2, 0, 3, 1, 4)  # 3 x [n_rows, n_head, n_seq, head_dim]
    k, v = kvcache.append(layer, k, v)  # now [n_rows, n_head, max(lengths) + n_seq, head_dim]
    out = attention(q, k, v, mask)  # [n_rows, n_head, n_seq, head_dim]
    out = out.transpose(0, 2, 1, 3).reshape(n_rows, n_seq, n_embd)  # merge the heads
    return linear(out, attn["c_proj"]["weight"], attn["c_proj"]["bias"])


def batch_mask(lengths, n_q):  # [n_rows] -> [n_rows, 1, n_q, max(lengths) + n_q]
    # A batch (batch.py): row b holds lengths[b] cached positions and its n_q new tokens follow
    # them, so new token t of row b sits at lengths[b] + t and may see every key up to there.
    # That hides the row's future and whatever lies past its own end (a longer row's positions).
    seen = lengths[:, None, None] + np.arange(n_q)[:, None]  # [n_rows, n_q, 1]: the last key each query sees
    future = np.arange(lengths.max() + n_q) > seen  # [n_rows, n_q, n_kv]
    return np.where(future, MASKED, np.float32(0))[:, None]  # the same for every head


def batch_buffer(n_rows, n_head, capacity, head_dim, transposed=False):  # -> [n_rows, n_head, capacity, head_dim]
    """kvcache.buffer for a batch, one per row, zeros: attention reads a row's positions past its end too
    (masked), and memory left as it was could hold a NaN, which no mask hides."""
    if transposed:
        return np.zeros((n_rows, n_head, head_dim, capacity), dtype=np.float32).swapaxes(-1, -2)
    return np.zeros((n_rows, n_head, capacity, head_dim), dtype=np.float32)


class BatchKVCache:
    """The cache of a batch of sequences (batch.py): one buffer per layer [n_rows, n_head, capacity, head_dim],
    and a length per row.

    After a speculative round each row keeps its own number of drafts, so the rows hold different
    numbers of positions: row b holds lengths[b]. What lies past a row's length is left over (padding,
    rejected drafts): the mask hides it (batch_mask) and the row's next tokens overwrite it, so
    cutting rows to different lengths costs no more than KVCache.truncate.
    """

    def __init__(self, n_rows):
        self.keys = []    # one [n_rows, n_head, capacity, head_dim] buffer per layer
        self.values = []  # same shapes as keys
        self.lengths = np.zeros(n_rows, dtype=np.int64)  # positions each row holds

    @classmethod
    def stacked(cls, caches):
        """The batch cache whose row b holds what caches[b], a KVCache, holds (batch.py's prompts, run one by one)."""
        batch = cls(len(caches))
        batch.lengths = np.array([cache.n_tokens() for cache in caches], dtype=np.int64)
        filled = [cache for cache in caches if cache.keys]
        for layer in range(len(filled[0].keys) if filled else 0):
            n_head, _, head_dim = filled[0].keys[layer].shape
            for buffers, transposed in ((batch.keys, True), (batch.values, False)):
                buffers.append(batch_buffer(len(caches), n_head, max(int(batch.lengths.max()), 16), head_dim, transposed))
            for row, cache in enumerate(caches):
                n = cache.n_tokens()
                if n:
                    batch.keys[layer][row, :, :n] = cache.keys[layer][:, :n]
                    batch.values[layer][row, :, :n] = cache.values[layer][:, :n]
        return batch

    def n_tokens(self):  # -> [n_rows]
        return self.lengths.copy()

    def truncate(self, n):
        """Keep the first n[b] positions of row b (an int: the same for every row), drop the rest."""
        n = np.broadcast_to(np.asarray(n, dtype=np.int64), self.lengths.shape)
        if np.any(n < 0) or np.any(n > self.lengths):
            raise ValueError(f"cannot truncate rows of {self.lengths.tolist()} positions to {n.tolist()}")
        self.lengths = n.copy()

    def select(self, rows):
        """Keep only the given rows, in that order (the others have finished)."""
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]
        self.lengths = self.lengths[rows]

    def append(self, layer, k, v):
        """Store each row's n_new new keys and values of one layer after that row's own cached ones.

        k, v: [n_rows, n_head, n_new, head_dim]; row b's go to positions lengths[b] ... lengths[b] + n_new - 1.
        Returns all of that layer's keys and values up to the longest row's end: two
        [n_rows, n_head, max(lengths) + n_new, head_dim] views, each row's tail past its own end left over.
        The model calls this once per layer, then commit(n_new) once.
        """
        n_rows, n_head, n_new, head_dim = k.shape
        end = int(self.lengths.max()) + n_new
        if layer == len(self.keys):  # first forward through this layer
            self.keys.append(batch_buffer(n_rows, n_head, 0, head_dim, transposed=True))
            self.values.append(batch_buffer(n_rows, n_head, 0, head_dim))
        if end > self.keys[layer].shape[2]:
            self._grow(layer, end)
        # Row b's new positions; indexing [row, :, position] puts the two index arrays' axes first,
        # so the new keys go in as [n_rows, n_new, n_head, head_dim].
        rows, positions = np.arange(n_rows)[:, None], self.lengths[:, None] + np.arange(n_new)  # [n_rows, n_new]
        self.keys[layer][rows, :, positions] = k.transpose(0, 2, 1, 3)
        self.values[layer][rows, :, positions] = v.transpose(0, 2, 1, 3)
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def commit(self, n_new):
        """Count the n_new positions (an int, or one per row) every layer has just appended."""
        self.lengths = self.lengths + n_new

    def _grow(self, layer, needed):
        # Doubling keeps the total copying linear in the number of tokens.
        n_rows, n_head, capacity, head_dim = self.keys[layer].shape
        new_capacity = max(needed, 2 * capacity, 16)
        for buffers, transposed in ((self.keys, True), (self.values, False)):
            grown = batch_buffer(n_rows, n_head, new_capacity, head_dim, transposed)
            grown[:, :, :capacity] = buffers[layer]
            buffers[layer] = grown
