"""How `x @ W` is computed: the one place that decides it.

Decoding multiplies a few rows x by big weight matrices W, so its time is the
time to stream W from memory, and checking k draft tokens should cost about
what one token costs. With the checkpoint's own [n_in, n_out] layout it does
not: a general matrix product of a few rows first packs all of W. So every
weight is stored transposed, W.T [n_out, n_in], in blocks of BLOCK rows
(zero-padded), and
  1 row:   one matrix-vector product over W, which streams it, shared out
           by the BLAS's own threads: they spin between products and start
           at once, where this module's threads sleep on a queue and wake late;
  k rows:  small [rows, n_in] @ [n_in, k] products, each as many rows as
           OpenBLAS's small-matrix kernel takes (rows_per_call): it needs no
           packing, so W is read once, and the calls are few. The BLAS runs
           single-threaded, its idle threads stopped (they would spin beside
           ours), and each core takes a share of the blocks, on threads this
           module owns;
  a prompt (GEMM_MIN_ROWS rows or more): one ordinary matrix product per
           share, where the time is arithmetic and BLAS's big kernels are best.
owns_the_threads sets the BLAS's threads at run time for each forward, so
this holds whatever the program imported first. PERFORMANCE.md has the
measurements behind BLOCK, rows_per_call, GEMM_MIN_ROWS and the threads.

gpt2.py never sees any of this: a weight is a `Weight`, and `x @ w` on it
runs `product` below. So the model reads as the math does: `x @ w + b`, and
the LM head `x @ wte.T`.
"""

import contextlib
import ctypes
import functools
import os
import queue
import sys
import threading

import numpy as np
from threadpoolctl import ThreadpoolController

BLOCK = 16
GEMM_MIN_ROWS = 25
THREADED_MIN_SIZE = 1 << 20  # weights of fewer elements (4 MB) are multiplied in the calling thread
N_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
# OpenBLAS multiplies [m, k] @ [k, n] without packing its operands when m * n * k
# is at most SMALL_MNK and m * n at most SMALL_MN (its small-matrix kernel).
SMALL_MNK, SMALL_MN = 1_000_000, 1200
_blas = None  # threadpoolctl's handle on the BLAS, made on first use
_stop_blas_threads = None  # OpenBLAS's own function that ends its thread pool, found on first use
_blas_shares_rows = False  # True while the BLAS's own threads share out matrix-vector products
_pool = None  # this module's worker threads, started on first use
_tasks = queue.SimpleQueue()  # (part, share, done) for the workers
_starting = threading.Lock()  # one caller at a time starts workers
_setting = threading.RLock()  # one forward at a time sets the BLAS's threads: the setting is the process's


def product(x, blocks):  # [n_seq, n_in] @ blocked W.T [n_blocks, BLOCK, n_in] -> [n_seq, n_blocks * BLOCK]
    n_blocks, block, n_in = blocks.shape
    n_seq = x.shape[0]
    assert x.dtype == np.float32, f"x is {x.dtype}: the model computes in float32"
    w_t = blocks.reshape(-1, n_in)  # W.T [n_blocks * BLOCK, n_in]
    if n_seq == 1 and _blas_shares_rows:  # one token: the BLAS's threads share W out
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

    in_shares(part, n_blocks, blocks.size >= THREADED_MIN_SIZE)
    return out.T


def rows_per_call(n_seq, n_in):
    """Rows of W.T per call for n_seq rows of x: the most, a power of two up to 256, that
    keeps a [rows, n_in] @ [n_in, n_seq] product within OpenBLAS's small-matrix kernel."""
    rows = 256
    while rows > 1 and (rows * n_seq > SMALL_MN or rows * n_seq * n_in > SMALL_MNK):
        rows //= 2
    return rows


# ---------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------

def owns_the_threads(forward):
    """forward(self, ids, ...) with the BLAS's threads set for its products (threads_for)."""
    @functools.wraps(forward)
    def wrapper(self, ids, *args, **kwargs):
        with threads_for(np.size(ids)):
            return forward(self, ids, *args, **kwargs)
    return wrapper


@contextlib.contextmanager
def threads_for(n_rows):
    """The BLAS's threads while products of x with n_rows rows run, the program's own setting after.

    One row: the BLAS shares each matrix-vector product out itself (product).
    More: the BLAS runs single-threaded and product shares the blocks out on
    this module's threads. Set at run time (threadpoolctl), so it holds
    whatever the program imported first. Forwards from several threads take
    turns: the setting belongs to the whole process.
    """
    global _blas, _blas_shares_rows
    with _setting:
        if _blas is None:
            _blas = ThreadpoolController()
        one_row, before = n_rows == 1 and N_THREADS > 1, _blas_shares_rows
        with _blas.limit(limits=N_THREADS if one_row else 1, user_api="blas"):
            if not one_row:
                stop_idle_blas_threads()
            _blas_shares_rows = one_row
            try:
                yield
            finally:
                _blas_shares_rows = before


def stop_idle_blas_threads():
    """End OpenBLAS's thread pool while the BLAS is single-threaded (threads_for).

    After sharing out a product, OpenBLAS's threads spin for about 0.1 s
    waiting for the next one, and a spinning thread takes half a core from
    the worker beside it: a draft's single-token passes would slow the
    verification that follows them (PERFORMANCE.md has the figures).
    OpenBLAS starts its threads again at its next product that uses them.
    Linux only: there its pool restarts by itself (as it does after a fork).
    Like the thread setting, this assumes no other thread of the program is
    inside a BLAS call meanwhile: this module's forwards take turns.
    """
    global _stop_blas_threads
    if _stop_blas_threads is None:
        _stop_blas_threads = []
        if sys.platform.startswith("linux"):
            for lib in _blas.select(internal_api="openblas").lib_controllers:
                if getattr(lib, "threading_layer", None) == "pthreads":
                    stop = getattr(ctypes.CDLL(lib.filepath), "blas_thread_shutdown_", None)
                    if stop is not None:
                        _stop_blas_threads.append(stop)
    for stop in _stop_blas_threads:
        stop()


def in_shares(part, n_blocks, threaded):
    """part(slice) over all the blocks: one share per core, the calling thread taking the first.

    The other shares go to this module's worker threads through a queue, and
    their answers (None, or the exception raised) come back through another.
    """
    if not threaded or N_THREADS == 1:  # a small weight: handing it to threads costs more than it saves
        return part(slice(0, n_blocks))
    mine, *others = shares(n_blocks, N_THREADS)
    start_workers(len(others))
    done = queue.SimpleQueue()
    for share in others:
        _tasks.put((part, share, done))
    try:
        part(mine)
    finally:  # every share finished before `out` is read or the error raised
        errors = answers(done, len(others))
    for error in errors:
        if error is not None:
            raise error


def answers(done, n):
    """The n answers of the other shares. A Ctrl-C meanwhile is raised once all are in:
    no worker may still be writing into the product's output when the caller moves on."""
    got, interrupted = [], None
    while len(got) < n:
        try:
            got.append(done.get())
        except KeyboardInterrupt as e:
            interrupted = e
    if interrupted is not None:
        raise interrupted
    return got


@functools.lru_cache(maxsize=None)
def shares(n_blocks, n_threads):  # -> up to n_threads slices of about n_blocks / n_threads blocks
    bounds = np.linspace(0, n_blocks, n_threads + 1).astype(int)
    return tuple(slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a)


def start_workers(n):
    global _pool
    with _starting:
        _pool = _pool or []
        while len(_pool) < n:
            _pool.append(threading.Thread(target=work, daemon=True, name=f"matmul-{len(_pool) + 1}"))
            _pool[-1].start()


def work():  # a worker thread: run shares until the program ends
    while True:
        part, share, done = _tasks.get()
        try:
            part(share)
        except BaseException as error:  # handed to the caller, which raises it
            done.put(error)
        else:
            done.put(None)


def forget_workers():  # in a forked child: the parent's threads, and the locks they held, do not exist there
    global _pool, _tasks, _starting, _setting
    _pool, _tasks = None, queue.SimpleQueue()
    _starting, _setting = threading.Lock(), threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=forget_workers)


# ---------------------------------------------------------------------------
# The layout
# ---------------------------------------------------------------------------

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
