"""Drafts without a draft model: guess from the text itself (NASD and prompt lookup).

Text repeats itself: names, code identifiers, quoted passages, lists. An n-gram
drafter costs microseconds instead of a model pass. NGramDrafter proposes from:
  - prompt lookup (not in the project documentation; prompt_lookup=False turns it off): what
    followed the latest earlier occurrence of the last n - 1 tokens (then fewer), the most
    recent evidence (transformers' PromptLookupCandidateGenerator takes the first, left to right);
  - an n-gram table, NASD of the project documentation (docs/sources.md), "n-gram assisted speculative
    decoding" (romsto/Speculative-Decoding, ngram_assisted/): for a context of
    the last tokens, the token that most often came next (the first seen on a tie),
    chained to make up to n_draft (the project documentation's gamma) drafts.
Prompt lookup (after Hugging Face's prompt lookup decoding) is tried first, then the table.

The project documentation's options, and what they are here:
  n-gram storage "basic"      storage="basic": contexts of n - 1 tokens, backing off to
                              fewer, down to 1 (the project documentation's back-off stops at 2)
  n-gram storage "onelevel"   storage="onelevel": contexts of exactly n - 1 tokens
  /set_ngramstorage <kind> n  NGramDrafter(n=n, storage=kind)
  top-k filler (filler_top_k) top_k_filler=k: at each position the oracle verified, its k
                              most likely tokens are counted after that context too, so the
                              table learns what the oracle thinks likely, not only what it
                              chose; the chosen token is among them and so weighs more. 1: off.
  /reset_in_between           reset_in_between: each generation starts from an empty table
                              (True), or the table keeps what earlier generations taught it
                              (False; pass the same drafter to each call)

Two ways to use it, both greedy and exact (the output is greedy_generate's):
  ngram_generate:  n-gram drafts, checked by the oracle;
  staged_generate: n-gram -> draft model -> oracle. The draft model's k tokens
                   are themselves produced by speculative decoding, with the
                   n-gram drafter as *its* draft ("a draft for the draft"):
                   they are exactly the draft model's greedy tokens, made in
                   fewer draft passes.
"""

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from decoding import GenerationError, cache_lengths, check_args, check_lengths, check_room, feed
from stats import Stats
from kvcache import KVCache
from speculative import accept, rollback, verify

STORAGES = ("basic", "onelevel")


@dataclass
class NgramDetails:
    """A round's record for --trace and --html: where the drafts came from (NGramDrafter.source)."""
    source: dict  # {"from": "prompt lookup", "length", "at"}, {"from": "n-gram table", "contexts"} or {"from": None}
    n_draft: int = None  # the most drafts asked for
    k: int = None        # the most this round: n_draft, or fewer where fewer tokens were left to make


@dataclass
class StagedDetails:
    """A round's record for --trace and --html: which stage made each draft."""
    stages: list  # stages[i]: "n-gram" (an n-gram guess the draft model kept) or "draft" (the draft model's own)
    n_draft: int = None  # the draft length asked for
    k: int = None        # drafted this round: n_draft, or fewer where fewer tokens were left to make


class NGramDrafter:
    """Prompt lookup and an n-gram table (the project documentation's "n-gram storage"), learnt from the accepted text.

    n: the n-gram order, a context of n - 1 tokens and the token after it. storage,
    top_k_filler, reset_in_between, prompt_lookup: see the module docstring.
    """

    def __init__(self, n=4, storage="basic", top_k_filler=1, reset_in_between=True, prompt_lookup=True):
        if not (isinstance(n, Integral) and n >= 2):
            raise GenerationError(f"the n-gram order n must be a whole number >= 2 (a context of n - 1 tokens), got {n!r}")
        if storage not in STORAGES:
            raise GenerationError(f"unknown n-gram storage {storage!r}; the storages are: {', '.join(STORAGES)}")
        if not (isinstance(top_k_filler, Integral) and top_k_filler >= 1):
            raise GenerationError(f"top_k_filler must be a whole number >= 1, got {top_k_filler!r}")
        self.n, self.storage, self.top_k_filler = n, storage, top_k_filler
        self.reset_in_between, self.prompt_lookup = reset_in_between, prompt_lookup
        # the context lengths the table keeps, longest first
        self.context_lengths = range(n - 1, 0, -1) if storage == "basic" else [n - 1]
        self.table = defaultdict(Counter)  # (t_1 .. t_m) -> Counter of the tokens that followed
        self.n_seen = 0                    # tokens of this generation already counted into the table
        self.source = {"from": None}       # where the last proposal came from (the trace says it)

    def start(self, ids):
        """A new generation from the prompt ids: forget the table if reset_in_between, then learn the prompt."""
        if self.reset_in_between:
            self.table.clear()
        self.n_seen = 0
        self.update(ids)

    def update(self, tokens):
        """Count every token not counted yet after each of its contexts: the accepted text."""
        for end in range(max(self.n_seen, 1), len(tokens)):
            self.count(tokens[max(end - self.n + 1, 0):end], [tokens[end]])
        self.n_seen = len(tokens)

    def fill(self, tokens, start, oracle_top):
        """The top-k filler: oracle_top[i] are the oracle's most likely tokens after tokens[:start + i]."""
        if self.top_k_filler > 1:  # with k = 1 the one token is the oracle's choice, already counted as text
            for i, candidates in enumerate(oracle_top):
                end = start + i
                self.count(tokens[max(end - self.n + 1, 0):end], candidates)

    def count(self, context, followers):
        """One more sighting of each follower after the context, at every context length the storage keeps."""
        for m in self.context_lengths:
            if m <= len(context):
                counts = self.table[tuple(context[-m:])]
                for token in followers:
                    counts[token] += 1

    def lookup(self, tokens, k):
        """Prompt lookup: what followed the latest earlier occurrence of the last n - 1 tokens (then fewer)."""
        for m in range(min(self.n - 1, len(tokens) - 1), 0, -1):
            tail = tokens[-m:]
            for start in range(len(tokens) - m - 1, -1, -1):  # latest first, not the tail itself
                if tokens[start:start + m] == tail:
                    self.source = {"from": "prompt lookup", "length": m, "at": start}  # for the trace
                    return tokens[start + m:start + m + k]
        return []

    def from_table(self, tokens, k):
        """Chain the table's most frequent continuation, longest known context first."""
        proposal, context, used = [], list(tokens), []
        while len(proposal) < k:
            token, m, count = self.next_token(context)
            if token is None:  # an unknown context: stop drafting (the project documentation's project can draft a random token)
                break
            proposal.append(token)
            context.append(token)
            used.append((m, count))
        if proposal:
            self.source = {"from": "n-gram table", "contexts": used}  # each token's context length and count
        return proposal

    def next_token(self, context):
        """(the most frequent follower of the longest known context, that context's length, its count), or (None, 0, 0)."""
        for m in self.context_lengths:
            counts = self.table.get(tuple(context[-m:])) if m <= len(context) else None
            if counts:
                token, count = counts.most_common(1)[0]
                return token, m, count
        return None, 0, 0

    def propose(self, tokens, k):
        """Up to k guesses for what follows tokens (possibly none); self.source says where they came from."""
        self.source = {"from": None}
        if k <= 0:
            return []
        found = self.lookup(tokens, k) if self.prompt_lookup else []
        return found or self.from_table(tokens, k)


def verify_with_top_k(oracle, oracle_cache, tokens, drafted, stats, top_k):
    """speculative.verify, also returning the oracle's top_k most likely tokens at each
    position it verified (after each accepted draft prefix, k + 1 at most): what the
    top-k filler counts. -> (n accepted, new tokens, the oracle's choices, top tokens)"""
    logits = feed(oracle, oracle_cache, tokens + drafted, stats, "oracle", n_logits=len(drafted) + 1)
    n, new_tokens, oracle_choice = accept(drafted, logits)
    return n, new_tokens, oracle_choice, top_tokens(logits[:n + 1], top_k)


def top_tokens(logits, k):  # [n, V] -> n lists of k token ids, most likely first, tied ones by id
    k = min(k, logits.shape[-1])
    if k == 1:  # the filler is off: the argmax alone, without the partition's cost
        return np.argmax(logits, axis=-1)[:, None].tolist()
    top = np.sort(np.argpartition(-logits, k - 1, axis=-1)[:, :k], axis=-1)  # the k largest by id: O(V), no full sort
    order = np.argsort(-np.take_along_axis(logits, top, axis=-1), axis=-1, kind="stable")
    return np.take_along_axis(top, order, axis=-1).tolist()


def learn(drafter, tokens, context_length, oracle_top, stats):
    """Step 5: the drafter learns the accepted text and, with the filler, the oracle's top-k (draft time)."""
    start = time.perf_counter()
    drafter.update(tokens)
    drafter.fill(tokens, context_length, oracle_top)
    stats.add_time("draft", time.perf_counter() - start)


def ngram_generate(oracle, ids, n_new, n_draft=8, drafter=None, stats=None):
    """Greedy speculative decoding with n-gram drafts; yields exactly greedy_generate's tokens.

    n_draft is the project documentation's gamma. drafter: an NGramDrafter (default: NGramDrafter());
    pass the same one to several calls to keep its table (reset_in_between=False).
    """
    stats = Stats() if stats is None else stats
    drafter = NGramDrafter() if drafter is None else drafter
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft)
    tokens, end, oracle_cache = list(ids), len(ids) + n_new, KVCache()
    drafter.start(tokens)
    while len(tokens) < end:
        # 1. Draft from the text so far: no model pass at all.
        start = time.perf_counter()
        k = min(n_draft, end - len(tokens) - 1)
        drafted = drafter.propose(tokens, k)
        stats.add_time("draft", time.perf_counter() - start)
        # 2-4. Verify, accept, roll back, as in speculative_generate.
        n_accepted, new_tokens, oracle_choice, top = verify_with_top_k(oracle, oracle_cache, tokens, drafted, stats,
                                                                      drafter.top_k_filler)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(None, oracle_cache), details=NgramDetails(drafter.source, n_draft, k))
        # 5. Learn from the round.
        learn(drafter, tokens, context_length, top, stats)
        yield from new_tokens


def staged_generate(draft, oracle, ids, n_new, n_draft=8, drafter=None, stats=None):
    """n-gram -> draft -> oracle; yields exactly greedy_generate(oracle, ...)'s tokens.

    The drafter (as in ngram_generate) learns the oracle's accepted text and top-k, and guesses
    for the draft model, which checks its guesses; the oracle sees only the draft model's tokens.
    """
    stats = Stats() if stats is None else stats
    drafter = NGramDrafter() if drafter is None else drafter
    check_args(ids, n_new, draft, oracle, n_draft=n_draft)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    drafter.start(tokens)
    while len(tokens) < end:
        # 1. The draft model's k greedy tokens, by speculative decoding one level
        #    down: the n-gram drafter guesses, the draft model checks in one pass.
        k = min(n_draft, end - len(tokens) - 1)
        drafted, stages = [], []  # stages[i]: "n-gram" when drafted[i] was an n-gram guess the draft model kept
        while len(drafted) < k:
            context = tokens + drafted
            guesses = drafter.propose(context, k - len(drafted) - 1)  # the check adds one token
            # role "draft": its time counts as draft time, and it is not an oracle round
            n_kept, new_drafts, _ = verify(draft, draft_cache, context, guesses, stats, role="draft")
            drafted += new_drafts
            stages += ["n-gram"] * n_kept + ["draft"]
            rollback(len(tokens) + len(drafted) - 1, draft_cache)
        # 2-4. The oracle checks the k drafts as in speculative_generate.
        n_accepted, new_tokens, oracle_choice, top = verify_with_top_k(oracle, oracle_cache, tokens, drafted, stats,
                                                                      drafter.top_k_filler)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache), details=StagedDetails(stages, n_draft, k))
        # 5. Learn from the round.
        learn(drafter, tokens, context_length, top, stats)
        yield from new_tokens
