"""Why checking k tokens costs about what one costs, and where that stops: a forward pass's roofline.

A forward pass over k new tokens reads every weight of the model once, whatever k is, and multiplies
each weight with k rows: 2 FLOPs per weight and row. On a CPU, reading costs more than multiplying
while k is small, so the pass takes about as long for k tokens as for one. That is the premise of
speculative decoding: the oracle checks k drafts for about the price of one token.

    T(k) >= max(bytes / bandwidth, k * flops / rate)       the roofline of a forward of k tokens
    ridge = (bytes / bandwidth) / (flops / rate)            where the two meet: the k past which checks cost more

bytes: what one forward streams (every weight; wpe has one row read); flops: 2 per weight per row;
bandwidth: bytes per second the machine streams from memory (all its cores); rate: float32 FLOPs per
second of its best matrix product. Up to the ridge the memory bounds the pass, past it the arithmetic.
A CPU with wider vector units (AVX-512 against AVX2) has a higher rate, so its ridge comes later.

Measured here with NumPy alone: the bandwidth by reading a large array on every core, the rate by
NumPy's own product of two 2048 x 2048 matrices, and T(k) by forwards taking turns (turns). A real pass
also pays for the work between its products (layer norms, attention over the cache, Python), which the
roofline leaves out: the measured T(k) sits above it.
"""

import os
import threading
import time

import numpy as np

from kvcache import KVCache

PROBE_BYTES = 1 << 30  # the bandwidth probe's array: large enough to leave every cache of the CPU
PRODUCT_SIZE = 2048    # the product the rate is measured with: n x n times n x n


# ---------------------------------------------------------------------------
# What a model's forward reads and computes
# ---------------------------------------------------------------------------

def weight_bytes(model):
    """Bytes a one-token forward streams: every weight of the model (of wpe, one row)."""
    def total(node):
        if isinstance(node, dict):
            return sum(total(v) for v in node.values())
        if isinstance(node, list):
            return sum(total(v) for v in node)
        return int(np.asarray(node).nbytes)
    p = model.params
    return total(p) - total(p["wpe"]) + total(p["wpe"][:1])


def flops_per_token(model, context=0):
    """FLOPs of one token's forward: 2 per weight of the products (blocks and the LM head), and attention's
    scores and weighted sum over `context` cached positions (4 x n_embd per position and layer)."""
    d, n_layer, vocab = model.n_embd, model.n_layer, model.vocab_size
    weights = n_layer * (3 * d * d + d * d + 8 * d * d) + vocab * d
    return 2 * weights + 4 * n_layer * d * (context + 1)


# ---------------------------------------------------------------------------
# What the machine running this does: its bandwidth and its product rate
# ---------------------------------------------------------------------------

def memory_bandwidth(n_bytes=PROBE_BYTES, repeats=5, n_threads=None):
    """Bytes per second read from memory, the best of `repeats` reads of an array of n_bytes, one thread per
    core (NumPy's reductions release the GIL, so the threads read at once)."""
    if n_threads is None:
        n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    data = np.ones(n_bytes // 4, dtype=np.float32)
    parts = np.array_split(data, n_threads)
    best = float("inf")
    for _ in range(repeats):
        threads = [threading.Thread(target=np.max, args=(part,)) for part in parts]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        best = min(best, time.perf_counter() - start)
    return data.nbytes / best


def product_rate(n=PRODUCT_SIZE, repeats=5):
    """float32 FLOPs per second of NumPy's own product of two n x n matrices (2 n^3 FLOPs), the best of repeats,
    with the BLAS's threads as they are set."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # the BLAS's threads started
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best


def roofline(k, n_bytes, flops, bandwidth, rate):
    """The least a forward of k tokens can take: max(reading the weights, computing k tokens), in seconds."""
    return max(n_bytes / bandwidth, k * flops / rate)


def ridge(n_bytes, flops, bandwidth, rate):
    """The k where computing k tokens takes as long as reading the weights: below it, a check of k tokens costs
    what one costs (on the roofline); above it, each token more costs its arithmetic."""
    return (n_bytes / bandwidth) / (flops / rate)


# ---------------------------------------------------------------------------
# What a forward of k tokens takes here
# ---------------------------------------------------------------------------

def forward_run(model, cache, context, k):
    """A run() of one forward of k new tokens after `context` cached ones (the cache then cut back to them)."""
    ids = np.arange(k) % model.vocab_size

    def run():
        model.forward(ids, cache)  # all k rows of logits: verification needs them all
        cache.truncate(context)    # back to `context` cached tokens: O(1), only the length changes

    return run


def turns(runs, repeats):
    """{name: the seconds of each call of run, in the order they ran} for runs = {name: run}.

    The runs take turns, `repeats` rounds of one call each, rather than all repeats of one run and then the
    next: on a machine shared with other programs, each run then meets the same busy and quiet moments, and
    the i-th calls of two runs, made one right after the other, make a pair whose ratio is fair.
    """
    seconds = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def check_costs(model, ks, context=64, repeats=9):
    """{k: [seconds of each repeat]}: forwards of k tokens after `context` cached ones, the ks taking turns."""
    cache = KVCache()
    model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)
    return turns({k: forward_run(model, cache, context, k) for k in ks}, repeats)


def median(values):
    return sorted(values)[len(values) // 2]
