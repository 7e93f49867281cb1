"""Lookahead decoding: the oracle guesses n-grams by Jacobi iteration and checks them, in the same pass.

No draft model, and no earlier text to copy from (Fu, Bailis, Stoica, Zhang,
"Break the Sequential Dependency of LLM Inference Using Lookahead Decoding",
ICML 2024, arXiv 2402.02057; reference code hao-ai-lab/LookaheadDecoding).
Jacobi decoding guesses all the next tokens at once and lets the model
improve every guess in parallel; a guess that settles is right. Plain Jacobi
rarely settles, but its trajectory is full of good n-grams. Lookahead keeps
the last N - 1 Jacobi iterations (the window), cuts n-grams out of them (the
pool), and verifies the pool's n-grams that start with the text's last token,
all in ONE forward pass of the oracle, with an attention mask that gives each
row exactly the text it would have alone.

The paper's letters, and what they are here (the registry's --n-draft sets N):
  W  window size: guesses per level, the Jacobi positions looked ahead
  N  n-gram size: a candidate is the text's last token + N - 1 guesses, so
     n_draft = N - 1, the most drafts a round can accept; the window keeps
     N - 1 levels (iterations) of guesses
  G  the most candidates verified per round (the pool keeps G per first token)

The window. Level 0 is the oldest iteration. A level's column c is the guess
for the token c positions after the text's last token, shifted by the level:
level l, column c sits at position (n - 1) + c + l, where n - 1 is the last
token's position. Level 0's column 0 IS the text's last token (row 0 of the
pass), so level 0 holds W - 1 guesses and every other level W. The row at
level l, column c sees the text, level 0 up to column c, and column c of
levels 1..l: the text's last token, then one guess at each position
n .. n - 1 + c + l, in order, a line of text as the model expects it. Its argmax is one Jacobi step: the
next guess for position n + c + l. Column c of every level, then that
argmax, is an n-gram: each token followed from the one before it.

One round (lookahead_generate; the paper's algorithm for greedy decoding in
its words on the left, the code's names on the right):

  fit the window within the tokens asked for          fit(window, left)
  candidates = pool[last token], at most G            pool.candidates(tokens[-1], left - 1)
  one pass: [last token] + window + candidates        layout(), branch_mask(), wide_pass()
  lookahead branch: the top level's argmaxes          choice[rows.levels[-1]]
  if the window is full (N - 1 levels):
      for each column c: pool[first] += n-gram c      column_ngrams(), NGramPool.add()
      drop level 0, the others move down one,          advance(window, outputs, N)
      the argmaxes become the top level
  else (warm-up): add the argmaxes as a new level      advance(window, outputs, N)
  verification branch: for each candidate, the        best_candidate()
      longest prefix equal to the oracle's argmax
      after the text and the prefix before it
  accept the best prefix + the oracle's next token    new_tokens
  keep their keys and values, drop the rest           cache.keep(), rollback()

The window moves one position per round, whatever the round accepted (the
reference code's default): its tokens are guesses, whose only use is the
n-grams they make. Warm-up, as in the reference code: the window starts as
level 0 alone, W + N - 3 tokens drawn at random from the prompt, and each
round adds a level and drops every level's first column (the text moved one
token), until N - 1 levels of W guesses remain. Only a full window makes
n-grams, and the pool is read before the pass: the first N - 1 rounds verify
nothing and add one token each.

The pass has at most 1 + (W - 1) + (N - 2) W + G (N - 1) rows. Where a row
costs next to nothing beside the weights' reading (a GPU, a large model) the
window is free; where each row costs arithmetic (NumPy on a CPU) it is not,
and the tokens per pass must pay for it. Not here: the reference code's
option to seed the pool with the prompt's own n-grams, and its lookahead
parallelism over several devices.

Why the output is exactly greedy decoding's. The verification rows of a
candidate see only the text and the candidate's tokens before them, at the
positions a line of text would have: their logits are what greedy decoding
computes after the text followed by that prefix (masked keys weigh exp(-1e10)
= 0; the sums may group differently, so a genuine float near-tie is the only
way to differ, as in tree.py). A candidate's token is kept only if it is the
oracle's argmax after everything kept before it, and the round always ends
with the oracle's own argmax after the last kept token (row 0's if nothing
is kept). The lookahead rows are seen by no verification row, and the pool
only chooses WHICH tokens are checked, never whether one is kept: bad
guesses cost time, never a token. The cache keeps exactly the text's keys
and values, the text's own and the kept candidate rows', all but the newest
token, as after a greedy step.
"""

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

from decoding import GenerationError, cache_lengths, check_room, feed, timed_forward
from stats import Stats
from gpt2 import MASKED
from kvcache import KVCache
from speculative import rollback


class NGramPool:
    """The n-gram pool: for each first token, at most G continuations of N - 1 tokens, the most recent last.

    The reference code keeps each first token's n-grams in a list capped at G and drops the oldest
    when it is full; an n-gram made again moves to the end (least recently made goes first).
    """

    def __init__(self, G):
        self.G = G
        self.pool = {}  # first token -> OrderedDict of continuations (tuples), oldest first

    def add(self, ngram):
        first, continuation = ngram[0], tuple(ngram[1:])
        kept = self.pool.setdefault(first, OrderedDict())
        kept.pop(continuation, None)  # made again: it moves to the end
        kept[continuation] = None
        if len(kept) > self.G:
            kept.popitem(last=False)

    def candidates(self, first, length):
        """The continuations of `first`, each cut to `length` tokens, without repeats; newest first."""
        out = []
        for continuation in reversed(self.pool.get(first, ())):
            cut = list(continuation[:length])
            if cut and cut not in out:
                out.append(cut)
        return out

    def __len__(self):
        return sum(len(kept) for kept in self.pool.values())


@dataclass
class Rows:
    """Where each guess sits in the wide pass: row 0 is the text's last token."""
    tokens: list = field(default_factory=list)     # row r's token
    positions: list = field(default_factory=list)  # row r's position in the text
    sees: list = field(default_factory=list)       # row r: the rows it attends to, itself included
    levels: list = field(default_factory=list)     # levels[l][c]: the row of level l, column c (levels[0][0] = 0)
    candidates: list = field(default_factory=list)  # candidates[g][m]: the row of candidate g's token m

    def add(self, token, position, sees):
        self.tokens.append(int(token))
        self.positions.append(position)
        self.sees.append(sees + [len(self.tokens) - 1])
        return len(self.tokens) - 1


@dataclass
class LookaheadDetails:
    """A round's record for --trace and --html."""
    window: list      # the levels fed, oldest first (level 0 without the text's last token, its column 0)
    candidates: list  # the pool's n-grams after the text's last token, newest first, cut to the tokens left
    best: int         # the candidate the oracle's choices were compared along (None: there was none)
    ngrams: list      # the n-grams this round put into the pool (a full window's columns)
    rows: int         # rows of the pass: the text's last token, the window, the candidates
    W: int            # the window's width, N the n-gram size (the window keeps N - 1 levels)
    N: int
    pool_size: int    # n-grams in the pool after this round
    left: int         # tokens left to make when the round began


def check_shape(W, N, G):
    """W, N and G are whole numbers, W and G at least 1, N at least 2 (an n-gram of one token guesses nothing)."""
    for name, value, least in (("the window W", W, 1), ("the n-gram size N", N, 2), ("the candidates G", G, 1)):
        if not (isinstance(value, Integral) and value >= least):
            raise GenerationError(f"{name} must be a whole number >= {least}, got {value!r}")


def initial_window(ids, W, N, n_new, rng):
    """Level 0 alone: W + N - 3 tokens drawn from the prompt (the reference code's start); warm-up adds the rest.
    No more than n_new: fit() never feeds a guess past the last token asked for."""
    return [[int(t) for t in rng.choice(ids, size=min(W + N - 3, n_new))]]


def fit(window, left):
    """The window cut so that no guess lies past the last token asked for: `left` tokens remain to be made,
    at offsets 1..left after the text's last token. Level 0's token i is at offset i + 1, level l's at i + l."""
    return [level[:max(0, left - (l if l else 1) + 1)] for l, level in enumerate(window)]


def layout(last, n, window, candidates):
    """The rows of one pass: the text's last token (at position n - 1), the window, the candidates."""
    rows = Rows()
    rows.add(last, n - 1, [])
    # Level 0 is causal along its columns: column c sees columns 0..c.
    rows.levels.append([0])
    for c, token in enumerate(window[0], start=1):
        rows.levels[0].append(rows.add(token, n - 1 + c, list(rows.levels[0])))
    # Level l, column c: level 0 up to column c, column c of levels 1..l-1, itself (positions n - 1 .. n - 1 + c + l).
    for l, level in enumerate(window[1:], start=1):
        rows.levels.append([])
        for c, token in enumerate(level):
            below = [rows.levels[k][c] for k in range(1, l)]
            rows.levels[l].append(rows.add(token, n - 1 + c + l, rows.levels[0][:c + 1] + below))
    # Candidate g's token m: the text's last token and the candidate's tokens before it.
    for candidate in candidates:
        rows.candidates.append([])
        for m, token in enumerate(candidate):
            rows.candidates[-1].append(rows.add(token, n + m, [0] + rows.candidates[-1]))
    return rows


def branch_mask(rows, n_cached):  # -> [n_rows, n_cached + n_rows]
    """Each row sees the cached text and the rows it sees, nothing else."""
    n_rows = len(rows.tokens)
    mask = np.full((n_rows, n_cached + n_rows), MASKED, dtype=np.float32)
    mask[:, :n_cached] = 0
    for r, seen in enumerate(rows.sees):
        mask[r, [n_cached + s for s in seen]] = 0
    return mask


def wide_pass(oracle, cache, tokens, rows, stats):  # -> [n_rows, vocab_size]
    """The oracle's logits for every row, in one pass (the prompt's other tokens first, in the first round)."""
    if cache.n_tokens() < len(tokens) - 1:
        feed(oracle, cache, tokens[:-1], stats, "oracle")
    return timed_forward(oracle, cache, rows.tokens, stats, "oracle", n_logits=len(rows.tokens),
                         positions=rows.positions, mask=branch_mask(rows, cache.n_tokens()))


def best_candidate(candidates, rows, choice):
    """(index of the candidate with the longest prefix of the oracle's choices, that length); the first on a tie.
    choice[r] is the oracle's argmax after row r: candidate g's token m is right if it equals the choice after
    the row before it (row 0 for m = 0)."""
    best, best_n = None, -1
    for g, candidate in enumerate(candidates):
        before = [0] + rows.candidates[g]
        n = 0
        while n < len(candidate) and candidate[n] == choice[before[n]]:
            n += 1
        if n > best_n:
            best, best_n = g, n
    return best, max(best_n, 0)


def column_ngrams(rows, outputs):
    """The n-grams of a full window: column c of every level, then the top level's argmax at column c."""
    return [[rows.tokens[level[c]] for level in rows.levels] + [outputs[c]] for c in range(len(outputs))]


def advance(window, outputs, N):
    """The next round's window, one position on. The top level's argmaxes, column by column, are the next level
    (the argmax at column c guesses the position one past it). Full: level 0 goes and the others move down one
    (each level sits one position past the one below, so that IS the move); the new level 0 loses its column 0,
    which stood where the text's new last token is. Warm-up: every level moves one column left."""
    levels = window + [outputs]
    if len(window) == N - 1:
        return [levels[1][1:]] + levels[2:]
    return [level[1:] for level in levels]


def lookahead_generate(oracle, ids, n_new, W=3, N=4, G=3, rng=None, stats=None):
    """Greedy lookahead decoding; yields exactly greedy_generate(oracle, ids, n_new)'s tokens.

    W, N, G: the paper's window size, n-gram size and candidates per round (the module docstring). The
    reference code suggests W = 7, N = 5, G = 7 for a 7B model on a GPU; the defaults here are a smaller
    pass, as each row costs arithmetic on a CPU.
    rng: draws the first window from the prompt (default: numpy's generator seeded 0, so a run repeats).
    """
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    check_shape(W, N, G)
    rng = np.random.default_rng(0) if rng is None else rng
    tokens, end, cache = list(ids), len(ids) + n_new, KVCache()
    window, pool = initial_window(tokens, W, N, n_new, rng), NGramPool(G)
    while len(tokens) < end:
        # 1. The window within the tokens asked for, and the pool's n-grams after the last token; no model pass.
        start = time.perf_counter()
        n, left = len(tokens), end - len(tokens)
        window = fit(window, left)
        candidates = pool.candidates(tokens[-1], left - 1)  # the round adds one token of the oracle's: no overshoot
        rows = layout(tokens[-1], n, window, candidates)
        stats.add_time("draft", time.perf_counter() - start)
        # 2. One oracle pass over the last token, the window and the candidates.
        choice = np.argmax(wide_pass(oracle, cache, tokens, rows, stats), axis=-1).tolist()
        # 3. Verification: the longest candidate prefix the oracle agrees with, then the oracle's own token.
        g, n_accepted = best_candidate(candidates, rows, choice)
        drafted = candidates[g] if candidates else []
        along = [choice[r] for r in [0] + (rows.candidates[g] if candidates else [])]  # the oracle after each prefix
        new_tokens = drafted[:n_accepted] + [along[n_accepted]]
        # 4. Keep the text's keys and values and the kept candidate's; the new last token is not fed yet.
        cache.keep(list(range(n)) + [n - 1 + r for r in (rows.candidates[g][:n_accepted] if candidates else [])])
        tokens += new_tokens
        rollback(len(tokens) - 1, cache)
        # 5. Lookahead: a full window's columns go into the pool, and the window moves on.
        start = time.perf_counter()
        outputs = [choice[r] for r in rows.levels[-1]]
        full = len(window) == N - 1
        ngrams = column_ngrams(rows, outputs) if full else []
        for ngram in ngrams:
            pool.add(ngram)
        fed = [list(level) for level in window]
        window = advance(window, outputs, N)
        stats.add_time("draft", time.perf_counter() - start)
        # drafted: the best candidate, the line the oracle's choices are compared along; the others are in details
        stats.add_round(new_tokens, drafted, n_accepted, context_length=n, oracle=along,
                        cached=cache_lengths(None, cache),
                        details=LookaheadDetails(fed, candidates, g, ngrams, len(rows.tokens), W, N, len(pool), left))
        yield from new_tokens
