"""Many prompts at once: batched greedy and speculative decoding, and where speculation stops paying.

A server decodes several users' prompts together: one forward pass takes a row per prompt, so
the weights are streamed once for all of them. Speculative decoding in a batch meets two problems
that one prompt never shows.

The batch is ragged. Prompts have different lengths, and after each verification every row keeps
its own number of drafts, so the rows' KV caches hold different numbers of positions. The choices:
  - pad and mask: left-pad the prompts to one length; after a round, pad again so that every row
    ends at the same place. Every forward then carries the padding, and it grows with every round.
  - per-row cache lengths (the choice here): each row of the cache (kvcache.BatchKVCache) has its own
    length; a forward writes row b's new keys at its own position and the mask lets row b see only
    its own positions (gpt2.batch_mask). Cutting rows to different lengths is, as for one prompt,
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
paying; serving engines turn it off under load. `python bench.py batch` measures where
(PERFORMANCE.md, "Many prompts at once").

Each round of speculative_generate_batch, the steps of speculative.py for every row at once, and
the line of this file where each starts (tests/test_batch.py checks them):
  1. draft     (line 87): the draft model proposes k tokens for every row, one batched pass per token;
  2. verify    (line 94): the oracle runs once over every row's [last token, d_1 .. d_k];
  3. accept    (line 97): each row keeps its own agreeing prefix plus the oracle's next token;
  4. roll back (line 103): each row of both caches is cut to that row's kept tokens;
  5. leave     (line 107): rows with all their tokens leave the batch.
"""

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from decoding import GenerationError, Stats, check_lengths, check_pair, check_room, finite, memory_budget, timed_forward
from kvcache import BatchKVCache, KVCache
from processors import as_processor
from speculative import accept
from sps import accept_or_resample, explain_round, sample


@dataclass
class BatchRound:
    """A batch's round for --trace: each row still in the batch, what it drafted and kept."""
    kind: ClassVar[str] = "batch"
    n_draft: int  # the draft length asked for
    k: int        # drafted this round by every row: n_draft, or fewer where a row had fewer tokens left
    rows: list    # per row in the batch: {"row": its number (from 1), "drafted", "kept", "new"[, "sps": sps.SpsDetails]}


def greedy_generate_batch(model, batch_ids, n_new, stats=None):
    """Greedy decoding of every prompt at once, one batched forward per token: a list of n_new new ids per
    prompt, each what speculative.greedy_generate(model, ids, n_new) gives."""
    stats = Stats() if stats is None else stats
    check_batch(batch_ids, n_new, model)
    tokens = [list(ids) for ids in batch_ids]
    cache = prompt_caches(model, batch_ids, stats, "oracle")
    for _ in range(n_new):
        logits = feed_batch(model, cache, tokens, stats, "oracle")[:, -1]  # [n_rows, vocab_size]
        for row, token in zip(tokens, np.argmax(logits, axis=-1)):
            row.append(int(token))
        stats.add_round([row[-1] for row in tokens])
    return [row[len(ids):] for row, ids in zip(tokens, batch_ids)]


def speculative_generate_batch(draft, oracle, batch_ids, n_new, n_draft=4, stats=None):
    """Greedy speculative decoding of every prompt at once: a list of n_new new ids per prompt, each exactly
    what speculative.greedy_generate(oracle, ids, n_new) gives."""
    stats = Stats() if stats is None else stats
    check_batch(batch_ids, n_new, draft, oracle, n_draft=n_draft)
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
        stats.add_round(*round_record(rows, drafted, kept), context_length=None,
                        details=BatchRound(n_draft, k, row_records(live, rows, drafted, kept)))
        # 5. Rows with all their tokens leave the batch.
        live = leave(live, tokens, ends, draft_cache, oracle_cache)
    return [row[len(ids):] for row, ids in zip(tokens, batch_ids)]


def speculative_sample_batch(draft, oracle, batch_ids, n_new, n_draft=4, rng=None, processor=None, stats=None,
                             **flags):
    """Speculative sampling (sps.py, Chen et al. 2023, Algorithm 2) of every prompt at once: a list of n_new
    new ids per prompt, each row distributed exactly as sps.autoregressive_sample(oracle, ids, ...).

    The rows' rounds are independent: k is set before a round's draws, so each row is SpS with a
    draft length that changes from round to round, which keeps its distribution (sps.py's proof
    holds for any k). One processor makes p and q, as in sps.speculative_sample.
    """
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng
    processor = as_processor(processor, **flags)
    check_batch(batch_ids, n_new, draft, oracle, n_draft=n_draft)
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
        stats.add_round(*round_record(rows, drafted, kept), context_length=None,
                        details=BatchRound(n_draft, k, row_records(live, rows, drafted, kept, explained)))
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
    logits = model.forward_batch(ids, cache, [len(row) for row in new], n_logits=n_logits)
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


def round_record(rows, drafted, kept):
    """Stats.add_round's counts for a batch's round, every row's together: (new tokens, drafts, drafts kept,
    rows that ended at a rejected draft)."""
    new = [token for row, n in zip(rows, kept) for token in row[-(n + 1):]]
    return new, [token for d in drafted for token in d], sum(kept), sum(n < len(d) for d, n in zip(drafted, kept))


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

def check_batch(batch_ids, n_new, *models, **draft_lengths):
    """At least one prompt; each fits every model's window with n_new more (decoding.check_room); the models
    share a vocabulary; each draft length is at least 1; and the caches fit in memory."""
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
    budget = memory_budget()
    if need > budget:
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
