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


def buffer(n_head, capacity, head_dim, transposed=False):  # -> [n_head, capacity, head_dim]
    """An empty cache buffer, float32; transposed: a view of memory laid out [n_head, head_dim, capacity] (the keys)."""
    if transposed:
        return np.empty((n_head, head_dim, capacity), dtype=np.float32).swapaxes(-1, -2)
    return np.empty((n_head, capacity, head_dim), dtype=np.float32)
