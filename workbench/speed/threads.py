"""Who runs the weight products: the BLAS's own threads for one row, this module's threads for several.

One token's products are matrix-vector products: the BLAS shares each one out
over its own threads, which spin between products and start at once. Several
rows (a verification) are many small products (blocked.py): the BLAS runs
single-threaded and each core takes a share of the blocks on threads this
module owns, which sleep on a queue between forwards.

The BLAS's threads go on spinning after their last product, and a spinning
thread takes half a core from a verification that follows. So they share a
token's products only where they can be stopped before a verification
(OpenBLAS's blas_thread_shutdown_, which the OpenBLAS of NumPy 2.2-2.4 exports).
Where they cannot (NumPy 2.5's OpenBLAS 0.3.34 exports no such function; MKL,
Accelerate), this module's threads share every product and the BLAS runs
single-threaded, so none of its threads is ever woken to spin.

A model that streams less than SHARE_MIN_BYTES of weights per token (the
learned demo pair) runs everything in the calling thread, the BLAS
single-threaded: its products are too small for a hand-over between threads
to pay (PERFORMANCE.md, "Small models"); second_core.py hands half of its
wide ones to a process of its own instead. Its forwards leave the BLAS single-threaded
after them: putting the program's setting back would have OpenBLAS start its
threads, only for the next forward to end them again, a thread started and
joined around every forward of a model whose forward takes a millisecond.

threads_for(n_rows) sets the BLAS's threads at run time (threadpoolctl) for
each forward, so the setting holds whatever the program imported first: an
environment variable such as OPENBLAS_NUM_THREADS is read only once, when
NumPy loads.
"""

import contextlib
import ctypes
import functools
import os
import queue
import sys
import threading

import numpy as np

from workbench.speed.cores import CHOSEN

N_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
THREADED_MIN_SIZE = 1 << 20  # weights of fewer elements (4 MB) are multiplied in the calling thread
SHARE_MIN_BYTES = 64 << 20   # a model streaming fewer bytes of weights per token runs on the calling thread only
_blas = None  # threadpoolctl's handle on the BLAS, made on first use
_stop_blas_threads = None  # OpenBLAS's own function that ends its thread pool, found on first use
_blas_shares_rows = False  # True while the BLAS's own threads share out matrix-vector products
_shares = True  # False while a small model's forward runs: no product is handed to other threads
_one_thread = False  # True while this module holds the BLAS at one thread (single_threaded, several rows)
_set_to = "start"  # the thread count the BLAS is at, as use_blas_threads last set it; None: unknown (this module
                   # changed it since); "start": as NumPy's BLAS started, not looked at yet (started_with)
_pool = None  # this module's worker threads, started on first use
_tasks = queue.SimpleQueue()  # (part, share, done) for the workers
_starting = threading.Lock()  # one caller at a time starts workers
_setting = threading.RLock()  # one forward at a time sets the BLAS's threads: the setting is the process's


def blas_shares_rows():
    """True while the products of one row run on the BLAS's own threads (inside threads_for(1), where they can be parked)."""
    return _blas_shares_rows


def threads_for(n_rows, share=True, park=False):
    """The BLAS's threads while products of x with n_rows rows run, the program's own setting after.

    One row: the BLAS shares each matrix-vector product out itself, if its
    threads can be parked (blas_thread_stoppers). Otherwise, and for more rows:
    the BLAS runs single-threaded and blocked.product shares the blocks out on
    this module's threads. share=False (a small model): single_threaded(park).
    Forwards from several threads take turns: the setting belongs to the whole process.
    """
    return _shared_out(n_rows) if share else single_threaded(park)


@contextlib.contextmanager
def single_threaded(park=False):
    """A small model's forward: the BLAS single-threaded, no product handed to this module's threads; and the
    BLAS left single-threaded after (the module's docstring says why). park=True (its products half on the
    second core's helper): idle BLAS threads parked, which would spin on the helper's core; otherwise they
    are left, as a model beside it on the BLAS's threads would pay for their restart."""
    global _blas_shares_rows, _shares, _one_thread, _set_to
    with _setting:
        _set_to = None  # left at one thread after: use_blas_threads asks the BLAS again
        for lib in blas().select(user_api="blas").lib_controllers:
            if lib.get_num_threads() != 1:
                lib.set_num_threads(1)
        if park:
            park_idle_blas_threads()  # threads a big model's single-token products left spinning
        before = (_blas_shares_rows, _shares, _one_thread)
        _blas_shares_rows, _shares, _one_thread = False, False, True
        try:
            yield
        finally:
            _blas_shares_rows, _shares, _one_thread = before


@contextlib.contextmanager
def blas_single_threaded():
    """The BLAS at one thread for what runs inside, and as it was after: nothing to do inside a forward that
    holds it there already (a small model's, a verification's); elsewhere (a product called on its own) it is set."""
    global _one_thread
    if _one_thread:
        yield
        return
    with _setting, blas().limit(limits=1, user_api="blas"):
        _one_thread = True
        try:
            yield
        finally:
            _one_thread = False


@contextlib.contextmanager
def _shared_out(n_rows):
    global _blas_shares_rows, _shares, _one_thread
    with _setting:
        one_row = n_rows == 1 and N_THREADS > 1 and bool(blas_thread_stoppers())
        before = (_blas_shares_rows, _shares, _one_thread)
        with blas().limit(limits=N_THREADS if one_row else 1, user_api="blas"):
            if not one_row:
                park_idle_blas_threads()
            _blas_shares_rows, _shares, _one_thread = one_row, True, not one_row
            try:
                yield
            finally:
                _blas_shares_rows, _shares, _one_thread = before


def use_blas_threads(n):
    """NumPy's own products on n of the BLAS's threads from now on (a way of the plan, plan.py). Going down to
    one leaves the BLAS's idle threads as they are: a draft on one thread and an oracle on two switch at every
    round, and parking the threads each time (their restart at the next threaded product) cost more than the
    oracle's threads gained; plan.Cores parks them when other programs want the cores. Set where it changes,
    not around every forward: a draft's forward takes a fraction of a millisecond; and not
    asked of the BLAS again while this module has not changed it since (calling into it costs microseconds;
    a threadpoolctl limit set outside this module while a run uses this one would go unseen)."""
    global _set_to
    if _set_to == "start":
        _set_to = started_with()  # the BLAS is asked (threadpoolctl) only where the count must change
    if n == _set_to:
        return
    with _setting:
        for lib in blas_libraries():
            if lib.get_num_threads() != n:
                lib.set_num_threads(n)
        _set_to = n


@functools.lru_cache(maxsize=None)
def blas_libraries():
    """threadpoolctl's controllers of the BLAS libraries NumPy loaded, found once."""
    return tuple(blas().select(user_api="blas").lib_controllers)


def blas():
    """threadpoolctl's handle on the BLAS, made on first use (it inspects every loaded library once, milliseconds:
    a run that never changes the thread count started with does not pay for it, see started_with)."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    return _blas


@functools.lru_cache(maxsize=None)
def numpy_blas():
    """(the BLAS NumPy was built with, its version), as NumPy's build records it, e.g. ('scipy-openblas',
    '0.3.31.188.0'); () where NumPy does not say (show_config's dicts are NumPy's from 1.26 on)."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return (str(blas["name"]), str(blas["version"]))
    except (TypeError, KeyError, AttributeError, ValueError):
        return ()


def started_with(environ=None):
    """The thread count NumPy's OpenBLAS started with, worked out as OpenBLAS does when NumPy loads: the first
    of OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS set to a whole number above 0, else every core
    this process may use, and never more than those cores. None where that cannot be known without asking the
    BLAS (another BLAS; a setting that is not such a number, as OpenBLAS may read it otherwise): asked then.
    workbench/tests/test_plan.py holds it to what the BLAS says."""
    environ = os.environ if environ is None else environ
    if "openblas" not in "".join(numpy_blas()[:1]).lower():
        return None
    for name in CHOSEN:
        value = environ.get(name, "").strip()
        if value:
            if not (value.isascii() and value.isdigit()) or int(value) == 0:
                return None
            return min(int(value), N_THREADS)
    return N_THREADS


def park_idle_blas_threads():
    """End OpenBLAS's thread pool while the BLAS is single-threaded (threads_for).

    After sharing out a product, OpenBLAS's threads spin for a while waiting
    for the next one, and a spinning thread takes half a core from the worker
    beside it: a draft's single-token passes would slow the verification that
    follows them (PERFORMANCE.md has the figures). OpenBLAS starts its threads
    again at its next product that uses them. Where the BLAS has no such
    function (OpenBLAS 0.3.34, macOS's Accelerate, MKL, Windows, OpenBLAS
    without pthreads), threads_for never gives the BLAS more than one thread,
    so none is awake to park (parking() says which). Like the thread setting,
    this assumes no other thread of the program is inside a BLAS call
    meanwhile: forwards take turns.
    """
    for stop in blas_thread_stoppers():
        stop()


def blas_thread_stoppers():
    """OpenBLAS's blas_thread_shutdown_ for each OpenBLAS with pthreads that NumPy loaded (Linux), found once."""
    global _stop_blas_threads
    if _stop_blas_threads is None:
        found = []
        if sys.platform.startswith("linux"):
            controller = blas()
            for lib in controller.select(internal_api="openblas").lib_controllers:
                if getattr(lib, "threading_layer", None) == "pthreads":
                    stop = getattr(ctypes.CDLL(lib.filepath), "blas_thread_shutdown_", None)
                    if stop is not None:
                        found.append(stop)
        _stop_blas_threads = found
    return _stop_blas_threads


def parking():
    """One line for --verbose and the benchmark: which threads share a token's products, and why."""
    if blas_thread_stoppers():
        return ("the BLAS's threads share a token's products and are parked before a verification "
                "(OpenBLAS blas_thread_shutdown_)")
    return ("the BLAS's idle threads could not be parked (no OpenBLAS blas_thread_shutdown_ here): "
            "this program's threads share every product, the BLAS runs single-threaded")


def in_shares(part, n_blocks, threaded):
    """part(slice) over all the blocks: one share per core, the calling thread taking the first.

    The other shares go to this module's worker threads through a queue, and
    their answers (None, or the exception raised) come back through another.
    """
    if not threaded or N_THREADS == 1 or not _shares:  # small: handing it to threads costs more than it saves
        return part(slice(0, n_blocks))
    mine, *others = shares(n_blocks, N_THREADS)
    start_workers(len(others))
    done = queue.SimpleQueue()
    for share in others:
        _tasks.put((part, share, done))
    try:
        part(mine)
    finally:  # every share finished before the product's output is read or the error raised
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
            _pool.append(threading.Thread(target=work, daemon=True, name=f"speed-{len(_pool) + 1}"))
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
