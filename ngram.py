"""Drafts without a draft model: guess from the text itself.

Text repeats itself: names, code identifiers, quoted passages, lists. An n-gram
drafter costs microseconds instead of a model pass:
  - prompt lookup: find the latest earlier occurrence of the last n tokens
    (n = max_ngram down to 1) and propose what followed it;
  - an n-gram table updated with every accepted token (the NASD idea): for each
    context of up to max_ngram tokens, the token that most often came next.
Prompt lookup is tried first (the most recent evidence), then the table.

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

from kvcache import KVCache
from decoding import Stats, cache_lengths, check_args, check_lengths, check_room
from speculative import rollback, verify


class NGramDrafter:
    def __init__(self, max_ngram=3):
        self.max_ngram = max_ngram
        self.table = defaultdict(Counter)  # (t_1 .. t_n) -> Counter of the tokens that followed
        self.n_seen = 0                    # tokens already counted into the table

    def update(self, tokens):
        """Count every n-gram that ends in a token not seen before."""
        for end in range(max(self.n_seen, 1), len(tokens)):
            for n in range(1, self.max_ngram + 1):
                if end - n >= 0:
                    self.table[tuple(tokens[end - n:end])][tokens[end]] += 1
        self.n_seen = len(tokens)

    def lookup(self, tokens, k):
        """Prompt lookup: what followed the latest earlier occurrence of the last n tokens."""
        for n in range(min(self.max_ngram, len(tokens) - 1), 0, -1):
            tail = tokens[-n:]
            for start in range(len(tokens) - n - 1, -1, -1):  # latest first, not the tail itself
                if tokens[start:start + n] == tail:
                    return tokens[start + n:start + n + k]
        return []

    def from_table(self, tokens, k):
        """Chain the table's most frequent continuation, longest known context first."""
        proposal, context = [], list(tokens)
        while len(proposal) < k:
            for n in range(min(self.max_ngram, len(context)), 0, -1):
                counts = self.table.get(tuple(context[-n:]))
                if counts:
                    token = counts.most_common(1)[0][0]
                    break
            else:
                break
            proposal.append(token)
            context.append(token)
        return proposal

    def propose(self, tokens, k):
        """Up to k guesses for what follows tokens (possibly none)."""
        if k <= 0:
            return []
        return self.lookup(tokens, k) or self.from_table(tokens, k)


def ngram_generate(oracle, ids, n_new, n_draft=8, max_ngram=3, stats=None):
    """Greedy speculative decoding with n-gram drafts; yields exactly greedy_generate's tokens."""
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft)
    drafter, tokens, end, oracle_cache = NGramDrafter(max_ngram), list(ids), len(ids) + n_new, KVCache()
    while len(tokens) < end:
        # 1. Draft from the text so far: no model pass at all.
        start = time.perf_counter()
        drafter.update(tokens)
        drafted = drafter.propose(tokens, min(n_draft, end - len(tokens) - 1))
        stats.add_time("draft", time.perf_counter() - start)
        # 2-4. Verify, accept, roll back, as in speculative_generate.
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context=context, oracle=oracle_choice,
                        cached=cache_lengths(None, oracle_cache))
        yield from new_tokens


def staged_generate(draft, oracle, ids, n_new, n_draft=8, max_ngram=3, stats=None):
    """n-gram -> draft -> oracle; yields exactly greedy_generate(oracle, ...)'s tokens."""
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, n_draft=n_draft)
    drafter, tokens, end = NGramDrafter(max_ngram), list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        # 1. The draft model's k greedy tokens, by speculative decoding one level
        #    down: the n-gram drafter guesses, the draft model checks in one pass.
        k = min(n_draft, end - len(tokens) - 1)
        drafter.update(tokens)  # the table learns accepted text only, never drafts
        drafted = []
        while len(drafted) < k:
            context = tokens + drafted
            guesses = drafter.propose(context, k - len(drafted) - 1)  # the check adds one token
            # role "draft": its time counts as draft time, and it is not an oracle round
            _, new_drafts, _ = verify(draft, draft_cache, context, guesses, stats, role="draft")
            drafted += new_drafts
            rollback(len(tokens) + len(drafted) - 1, draft_cache)
        # 2-4. The oracle checks the k drafts as in speculative_generate.
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context=context, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache))
        yield from new_tokens
