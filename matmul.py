"""How `x @ W` is computed: the one place that decides it.

Decoding multiplies a few rows x by big weight matrices W, so its time is the
time to stream W from memory, and checking k draft tokens should cost about
what one token costs. With the checkpoint's own [n_in, n_out] layout it does
not: a general matrix product of a few rows first packs all of W. So every
weight is stored transposed, [n_out, n_in], and cut into blocks of BLOCK
output rows, [n_out / BLOCK, BLOCK, n_in], zero-padded:
  1 row:   one matrix-vector product over all of W, which streams it;
  k rows:  each block is a small [BLOCK, n_in] @ [n_in, k] product whose
           operands stay in cache, shared out over the cores;
  a prompt (GEMM_MIN_ROWS rows or more): one ordinary matrix product, where
           the time is arithmetic and BLAS's big kernels are best.
PERFORMANCE.md has the measurements behind BLOCK and GEMM_MIN_ROWS.

gpt2.py never sees any of this: a weight is a `Weight`, and `x @ w` on it
runs `product` below. So the model reads as the math does: `x @ w + b`, and
the LM head `x @ wte.T`.
"""

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

BLOCK = 16
GEMM_MIN_ROWS = 25
THREADED_MIN_SIZE = 1 << 20  # weights of fewer elements (4 MB) are multiplied in the calling thread
N_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_pool = None
_blas = None


def product(x, blocks):  # [n_seq, n_in] @ blocked W.T [n_blocks, BLOCK, n_in] -> [n_seq, n_blocks * BLOCK]
    n_blocks, block, n_in = blocks.shape
    n_seq = x.shape[0]
    out = np.empty((n_blocks, block, n_seq), dtype=np.float32)  # W.T @ x.T, in blocks
    if n_seq == 1:  # matrix-vector: streams W
        def part(s):
            np.matmul(blocks[s].reshape(-1, n_in), x[0], out=out[s].reshape(-1))
    elif n_seq < GEMM_MIN_ROWS:  # one small product per block, its operands in cache
        def part(s):
            np.matmul(blocks[s], x.T, out=out[s])
    else:  # a prompt: one big product, arithmetic-bound
        def part(s):
            np.matmul(blocks[s].reshape(-1, n_in), x.T, out=out[s].reshape(-1, n_seq))
    in_shares(part, n_blocks, blocks.size >= THREADED_MIN_SIZE)
    return out.reshape(n_blocks * block, n_seq).T


def in_shares(part, n_blocks, threaded):
    """part(slice) over all the blocks: one share per core, the calling thread taking the first."""
    global _pool
    if not threaded or N_THREADS == 1:  # a small weight: handing it to threads costs more than it saves
        return part(slice(0, n_blocks))
    bounds = np.linspace(0, n_blocks, N_THREADS + 1).astype(int)
    mine, *others = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    if others and _pool is None:
        _pool = ThreadPoolExecutor(N_THREADS - 1)
    jobs = [_pool.submit(part, share) for share in others]
    part(mine)
    for job in jobs:
        job.result()


def owns_the_threads(f):
    """Run f with the BLAS library single-threaded: every product shares out its work
    itself (in_shares), on threads this module owns.

    Why: a threaded BLAS's own threads busy-wait after each product, and in
    speculative decoding they would spin beside our threads right when
    verification follows drafting. Set at run time (threadpoolctl), so it holds
    whatever the program imported first, and only inside f.
    """
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        global _blas
        if _blas is None:
            _blas = ThreadpoolController()
        with _blas.limit(limits=1, user_api="blas"):
            return f(*args, **kwargs)
    return wrapper


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


class Weight:
    """W [n_in, n_out] for `x @ W`: the transpose of a Rows (W.T kept in blocks of rows)."""

    __array_ufunc__ = None  # NumPy then leaves `ndarray @ Weight` to __rmatmul__ below

    def __init__(self, rows):
        self.rows = rows
        self.shape = rows.shape[::-1]

    def __rmatmul__(self, x):  # x [n_seq, n_in] @ W -> [n_seq, n_out]
        return product(x, self.rows.blocks)[:, :self.shape[1]]

    @property
    def T(self):
        return self.rows

    @property
    def nbytes(self):
        return self.rows.nbytes

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.rows, dtype=dtype).T
