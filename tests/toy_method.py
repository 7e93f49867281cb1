"""A toy decoding method, the algorithm of workbench/tests/test_registry.py's toy family: the draft is the text's last
`span` tokens, repeated.

It verifies greedily with speculative.py's own steps, so its text is the oracle's greedy text.
"""

from decoding import cache_lengths, check_room
from kvcache import KVCache
from speculative import rollback, verify
from stats import Line, Stats


def echo_generate(oracle, ids, n_new, n_draft=3, span=1, stats=None):
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    tokens, end, cache = list(ids), len(ids) + n_new, KVCache()
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)
        drafted = (tokens[-span:] * k)[:k]
        n_accepted, new_tokens, choice = verify(oracle, cache, tokens, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=choice,
                        cached=cache_lengths(None, cache), details=Line(n_draft, k))
        yield from new_tokens
