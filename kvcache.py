"""A truncatable key/value cache for GPT-2 attention.

Each transformer layer computes a key and a value vector per head for every
token. They never change once the token is in the sequence, so decoding keeps
them instead of recomputing the whole prefix for every new token.

Speculative decoding adds one operation to the usual cache: after the oracle
rejects draft tokens, their keys and values must go. `truncate(n)` keeps the
first n positions, which is all a rejection needs, and costs nothing: the
buffers stay, only the length shrinks, and the next append overwrites them.

Layout: per layer a key and a value buffer [n_head, capacity, head_dim]:
`buffer[:, :n]` is attention's per-head [n_head, n, head_dim] operand, no copy.
The keys' memory is laid out [n_head, head_dim, capacity], so that attention's
K^T is read along rows (faster); capacity doubles, so appends are amortized O(1).
"""

import numpy as np


class KVCache:
    def __init__(self):
        self.keys = []    # one [n_head, capacity, head_dim] float32 buffer per layer
        self.values = []  # same shapes as keys
        self.length = 0   # positions held, the same in every layer

    def n_tokens(self):
        return self.length

    def truncate(self, n):
        """Keep the first n positions (0 <= n <= n_tokens()), drop the rest."""
        if not 0 <= n <= self.length:
            raise ValueError(f"cannot truncate a KV cache of {self.length} positions to {n}")
        self.length = n

    def keep(self, positions):
        """Keep only the given positions, in order (a root path of a draft tree).

        positions: sorted indices < n_tokens(). Those already in place (a prefix
        0, 1, 2, ...) are not moved; the rest are copied down behind them.
        """
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions[-1] >= self.length or np.any(np.diff(positions) <= 0)):
            raise ValueError(f"positions must be increasing and below {self.length}")
        # Increasing positions that start 0, 1, 2, ... are already where they belong.
        in_place = positions == np.arange(positions.size)
        start = positions.size if in_place.all() else int(np.argmin(in_place))
        moving = positions[start:]
        for k, v in zip(self.keys, self.values):
            k[:, start:positions.size] = k[:, moving]
            v[:, start:positions.size] = v[:, moving]
        self.length = positions.size

    def append(self, layer, k, v):
        """Store the new tokens' keys and values of one layer after the cached ones.

        k, v: [n_head, n_new, head_dim]. Returns all of that layer's keys and
        values, cached then new: two [n_head, n_tokens() + n_new, head_dim] views.
        The model calls this once per layer, then `commit(n_new)` once.
        """
        start, n_new = self.length, k.shape[1]
        if layer == len(self.keys):  # first forward through this layer
            self.keys.append(buffer(k.shape[0], 0, k.shape[2], transposed=True))
            self.values.append(buffer(k.shape[0], 0, k.shape[2]))
        if start + n_new > self.keys[layer].shape[1]:
            self._grow(layer, start + n_new)
        self.keys[layer][:, start:start + n_new] = k
        self.values[layer][:, start:start + n_new] = v
        return self.keys[layer][:, :start + n_new], self.values[layer][:, :start + n_new]

    def commit(self, n_new):
        """Count the n_new positions that every layer has just appended."""
        self.length += n_new

    def _grow(self, layer, needed):
        # Doubling keeps the total copying linear in the number of tokens.
        n_head, capacity, head_dim = self.keys[layer].shape
        new_capacity = max(needed, 2 * capacity, 16)
        for buffers, transposed in ((self.keys, True), (self.values, False)):
            grown = buffer(n_head, new_capacity, head_dim, transposed)
            grown[:, :self.length] = buffers[layer][:, :self.length]
            buffers[layer] = grown


def buffer(n_head, capacity, head_dim, transposed=False, n_rows=None):  # -> [(n_rows,) n_head, capacity, head_dim]
    """An empty cache buffer, float32; transposed: a view of memory laid out [..., head_dim, capacity] (the keys).
    n_rows: a batch's buffer, one such buffer per row (BatchKVCache), zeros: attention reads a row's
    positions past its end too (masked), and memory left as it was could hold a NaN, which no mask hides."""
    lead, new = ((), np.empty) if n_rows is None else ((n_rows,), np.zeros)
    if transposed:
        return new((*lead, n_head, head_dim, capacity), dtype=np.float32).swapaxes(-1, -2)
    return new((*lead, n_head, capacity, head_dim), dtype=np.float32)


class BatchKVCache:
    """The cache of a batch of sequences (batch.py): one buffer per layer [n_rows, n_head, capacity, head_dim],
    and a length per row.

    After a speculative round each row keeps its own number of drafts, so the rows hold different
    numbers of positions: row b holds lengths[b]. What lies past a row's length is left over (padding,
    rejected drafts): the mask hides it (gpt2.batch_mask) and the row's next tokens overwrite it, so
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
                buffers.append(buffer(n_head, max(int(batch.lengths.max()), 16), head_dim, transposed, len(caches)))
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
            self.keys.append(buffer(n_head, 0, head_dim, transposed=True, n_rows=n_rows))
            self.values.append(buffer(n_head, 0, head_dim, n_rows=n_rows))
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
            grown = buffer(n_head, new_capacity, head_dim, transposed, n_rows=n_rows)
            grown[:, :, :capacity] = buffers[layer]
            buffers[layer] = grown
