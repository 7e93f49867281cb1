"""Greedy speculative decoding: a small draft model guesses, a large oracle checks.

    python speculative.py "The meaning of life is"

Plain greedy decoding runs the big model once per token. Here the small draft
model (gpt2) proposes n_draft tokens one at a time, and the big oracle
(gpt2-large) checks all of them in ONE forward pass: on a machine where that
pass costs about as much as a single-token pass, every accepted draft token is
a big-model pass saved. The output is exactly the oracle's own greedy output:
a draft token is kept only if it is what the oracle would have chosen.

Each round (speculative_generate, then the steps it calls, in order):
  1. draft:     the draft model proposes k tokens greedily;
  2. verify:    the oracle runs once over them and gives its argmax after each prefix;
  3. accept:    keep the longest prefix of drafts that matches, plus the oracle's
                own next token (a correction, or a bonus if all matched);
  4. roll back: truncate both KV caches to the tokens kept.

greedy_generate, at the end, is the baseline: the oracle alone, one pass per token.
The command line is app/cli.py; running this file starts it.
"""

if __name__ == "__main__":  # python speculative.py: hand over to the command line, app/cli.py
    from app.interrupt import interrupt_quietly
    interrupt_quietly()  # first, before NumPy loads: Ctrl-C meanwhile is one line, not a traceback
    from app.cli import main_entry  # it imports this file as the module `speculative`: its code runs once, there
    raise SystemExit(main_entry())

import numpy as np

from decoding import cache_lengths, check_args, check_room, feed
from stats import Line, Stats
from kvcache import KVCache


def speculative_generate(draft, oracle, ids, n_new, n_draft=4, stats=None):
    """Greedy speculative decoding: yields exactly greedy_generate(oracle, ids, n_new)'s tokens."""
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, n_draft=n_draft)
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
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        # 4. Both caches back to the kept tokens.
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache), details=Line(n_draft, k))
        yield from new_tokens


def verify(oracle, oracle_cache, tokens, drafted, stats, role="oracle"):
    """Steps 2 and 3: check the drafts in one pass; (n accepted, new tokens, the oracle's choices).

    role is "draft" when the draft model checks guesses of its own drafter
    (staged decoding, ngram.py): its time then counts as drafting.
    """
    # 2. One pass over [last token, d_1 .. d_k]: row i is the oracle's next-token
    #    logits after d_1 .. d_i, so k drafts give k + 1 choices.
    logits = feed(oracle, oracle_cache, tokens + drafted, stats, role, n_logits=len(drafted) + 1)
    return accept(drafted, logits)


def accept(drafted, logits):  # drafted: k ids, logits [k + 1, vocab_size]
    """Step 3: keep the drafts up to the first disagreement, then the oracle's own token: its
    correction at the disagreement, or a bonus token if all k matched."""
    oracle_choice = np.argmax(logits, axis=-1).tolist()  # [k + 1]
    n = accepted_prefix_length(drafted, oracle_choice)
    return n, drafted[:n] + [oracle_choice[n]], oracle_choice


def accepted_prefix_length(drafted, oracle_choice):
    """How many drafts, from the first, equal the oracle's choice at their position."""
    n = 0
    while n < len(drafted) and drafted[n] == oracle_choice[n]:
        n += 1
    return n


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
        stats.add_tokens(tokens[-1:])
        yield tokens[-1]
