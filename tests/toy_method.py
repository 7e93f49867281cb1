"""A toy decoding method for tests/test_registry.py: the draft is the last token, repeated.

It verifies greedily with speculative.py's own steps, so its text is the oracle's greedy text.
"""

from decoding import cache_lengths, check_room
from stats import Stats
from kvcache import KVCache
from speculative import rollback, verify


def echo_generate(oracle, ids, n_new, n_draft=3, stats=None):
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    tokens, end, cache = list(ids), len(ids) + n_new, KVCache()
    while len(tokens) < end:
        drafted = tokens[-1:] * min(n_draft, end - len(tokens) - 1)
        n_accepted, new_tokens, choice = verify(oracle, cache, tokens, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=choice, cached=cache_lengths(None, cache))
        yield from new_tokens
