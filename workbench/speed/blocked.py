"""The blocked layout of a weight, and its product: how `x @ W` is made fast for a few rows.

Decoding multiplies a few rows x by big weight matrices W, so its time is the
time to stream W from memory, and checking k draft tokens should cost about
what one token costs. With the checkpoint's own [n_in, n_out] layout it does
not: a general matrix product of a few rows first packs all of W. So a weight
is stored transposed, W.T [n_out, n_in], in blocks of BLOCK rows (zero-padded),
and product() multiplies
  1 row:   one matrix-vector product over W, which streams it, shared out
           by the BLAS's own threads (threads.py);
  k rows:  small [rows, n_in] @ [n_in, k] products, each as many rows as
           OpenBLAS's small-matrix kernel takes (rows_per_call): it needs no
           packing, so W is read once, and the calls are few; each core takes
           a share of the blocks, on threads of threads.py;
  a prompt (GEMM_MIN_ROWS rows or more): one ordinary matrix product per
           share, where the time is arithmetic and BLAS's big kernels are best.
PERFORMANCE.md has the measurements behind BLOCK, rows_per_call and GEMM_MIN_ROWS.

A weight in this layout is a Weight, and `x @ w` on it runs product(): so
gpt2.py, given Weights instead of arrays (accelerate.py), computes the same
`x @ w + b` and the LM head `x @ wte.T` this way without a line of it changing.
"""

import numpy as np

from workbench.speed import threads

BLOCK = 16
GEMM_MIN_ROWS = 25
# OpenBLAS multiplies [m, k] @ [k, n] without packing its operands when m * n * k
# is at most SMALL_MNK and m * n at most SMALL_MN (its small-matrix kernel).
SMALL_MNK, SMALL_MN = 1_000_000, 1200


def product(x, blocks):  # [n_seq, n_in] @ blocked W.T [n_blocks, BLOCK, n_in] -> [n_seq, n_blocks * BLOCK]
    n_blocks, block, n_in = blocks.shape
    n_seq = x.shape[0]
    if x.dtype != np.float32:
        raise TypeError(f"x is {x.dtype}: the model computes in float32")
    w_t = blocks.reshape(-1, n_in)  # W.T [n_blocks * BLOCK, n_in]
    if n_seq == 1 and threads.blas_shares_rows():  # one token: the BLAS's threads share W out
        return np.matmul(w_t, x[0])[None, :]
    out = np.empty((n_blocks * block, n_seq), dtype=np.float32)  # W.T @ x.T
    per_call = rows_per_call(n_seq, n_in)

    def part(share):  # the rows of W.T in the blocks of `share`
        start, stop = share.start * block, share.stop * block
        if n_seq == 1:  # matrix-vector: streams W
            np.matmul(w_t[start:stop], x[0], out=out[start:stop, 0])
        elif n_seq < GEMM_MIN_ROWS:  # small products, per_call rows each, in one NumPy call
            n_calls, rest = divmod(stop - start, per_call)
            end = start + n_calls * per_call
            np.matmul(w_t[start:end].reshape(n_calls, per_call, n_in), x.T,
                      out=out[start:end].reshape(n_calls, per_call, n_seq))
            if rest:
                np.matmul(w_t[end:stop], x.T, out=out[end:stop])
        else:  # a prompt: one big product, arithmetic-bound
            np.matmul(w_t[start:stop], x.T, out=out[start:stop])

    threads.in_shares(part, n_blocks, blocks.size >= threads.THREADED_MIN_SIZE)
    return out.T


def rows_per_call(n_seq, n_in):
    """Rows of W.T per call for n_seq rows of x: the most, a power of two up to 256, that
    keeps a [rows, n_in] @ [n_in, n_seq] product within OpenBLAS's small-matrix kernel."""
    rows = 256
    while rows > 1 and (rows * n_seq > SMALL_MN or rows * n_seq * n_in > SMALL_MNK):
        rows //= 2
    return rows


def to_blocks(rows):  # [n_rows, n_cols] -> [ceil(n_rows / BLOCK), BLOCK, n_cols], zero rows appended
    n_rows, n_cols = rows.shape
    blocks = np.zeros((-(-n_rows // BLOCK), BLOCK, n_cols), dtype=np.float32)
    for i, start in enumerate(range(0, n_rows, BLOCK)):
        # One block at a time: when `rows` is a transposed view this strided
        # copy stays in cache, much faster than transposing it all at once.
        blocks[i, :min(BLOCK, n_rows - start)] = rows[start:start + BLOCK]
    return blocks


def blocked_shape(n_rows, n_cols):
    return (-(-n_rows // BLOCK), BLOCK, n_cols)


class Rows:
    """A matrix M [n_rows, n_cols] kept as blocks of its rows, so that `x @ M.T` is `product`.

    GPT-2's token embedding is one: wte[ids] looks rows up, and the LM head
    is x @ wte.T. A linear layer's weight W [n_in, n_out] is the transpose of
    one: Rows(W.T).T, so that x @ W is the same fast product.
    """

    def __init__(self, blocks, n_rows):
        self.blocks = blocks  # [n_blocks, BLOCK, n_cols]; rows past n_rows are zero padding
        self.shape = (n_rows, blocks.shape[2])

    def __getitem__(self, index):  # M[ids] -> the rows, [len(ids), n_cols]
        return self.blocks.reshape(-1, self.shape[1])[:self.shape[0]][index]

    @property
    def T(self):
        return Weight(self)

    @property
    def nbytes(self):  # what streaming it costs, padding included
        return self.blocks.nbytes

    def __array__(self, dtype=None, copy=None):  # np.asarray(M): the plain matrix
        return np.asarray(self[:], dtype=dtype)


class Transposed:
    """M.T for a matrix M kept in a layout of its own (`of`): .T gives M back, and its size and
    np.asarray read through it. A weight W is one (W.T is kept); so is the token embedding (speed/panels.py)."""

    def __init__(self, of):
        self.of = of
        self.shape = of.shape[::-1]

    @property
    def T(self):
        return self.of

    @property
    def nbytes(self):  # what streaming it costs, padding included
        return self.of.nbytes

    def __array__(self, dtype=None, copy=None):  # np.asarray(M.T): the plain matrix
        return np.asarray(self.of, dtype=dtype).T


class Weight(Transposed):
    """W [n_in, n_out] for `x @ W`: the transpose of a Rows (W.T kept in blocks of rows)."""

    __array_ufunc__ = None  # NumPy then leaves `ndarray @ Weight` to __rmatmul__ below

    def __rmatmul__(self, x):  # x [n_seq, n_in] @ W -> [n_seq, n_out]; a batch's [n_rows, n_seq, n_in] as its rows
        out = product(x.reshape(-1, x.shape[-1]), self.T.blocks)[:, :self.shape[1]]  # self.T: the Rows of W.T
        return out.reshape(*x.shape[:-1], self.shape[1])
