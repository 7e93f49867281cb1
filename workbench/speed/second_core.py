"""A second core for a small model's verification: a helper process computes half of each panel product.

Checking k tokens multiplies k rows by every weight. For a small model that is compute-bound on
one core (PERFORMANCE.md, "Small models"), and a second core halves it only if handing work over
costs far less than a product. Python threads cannot do that: a sleeping thread is slow to wake,
and two threads take turns at one interpreter lock. So the second core is a process of its own,
spinning on shared memory while there is work:

    this process                                  the helper process
    x -> mailbox, then job += 1 ----------------> sees job change, reads x
    x @ panels[:half]                             x @ its copy of panels[half:] -> mailbox
    waits until done == job <-------------------- done = job
    copies the helper's columns out

A hand-over is a few reads and writes of shared memory (PERFORMANCE.md has what it costs). Each side
multiplies whole panels with panels.product_into, in the calls one core would make, so the output is
the same, bit for bit.

The helper keeps a copy of its half of each weight, sent through the mailbox before that weight's
first product and dropped when the weight is. After IDLE_SECONDS without work it sleeps on a pipe
(this process writes a byte to wake it); it ends with this process, or when this process's end
closes the pipe.

It is off unless asked for (--second-core, the session's /second-core on, or
SPECULATIVE_GPT2_SECOND_CORE=1): both processes spin while a generation runs, so the helper holds a
core for the whole run, and when anything else wants that core (a browser, a second run) the two
take turns with it and a run is slower than on one core (PERFORMANCE.md, "A second core"). On a
quiet machine it makes a small model's checks of many tokens cheaper.

Asked for, it runs only where it is sound and pays: Linux on x86-64 (whose stores are seen by the
other core in the order they were made, so the mailbox needs no lock), two cores or more, and two
rows or more. One row is a matrix-vector product bound by memory, not by arithmetic: T(1) stays as
it was. Nor does a product of under MIN_WORK multiply-adds go (a tiny model's): the hand-over would
cost more. SPECULATIVE_GPT2_ONE_CORE=1 keeps every product on one core even when the helper is asked
for. Both settings are read at every product. If the helper dies, this process computes its half,
says so once on stderr, and goes on with one core.

The same bits: a SplitPanels product of several rows always runs with the BLAS single-threaded
(threads.blas_single_threaded), here and in the helper, on one core or two, inside a forward or not:
a two-threaded BLAS rounds some products differently, so "one core's output" means this.
"""

import atexit
import itertools
import mmap
import os
import platform
import select
import signal
import subprocess
import sys
import threading
import time
import weakref

import numpy as np

if __name__ == "__main__":  # run as the helper process: its imports start at the project's root, not at speed/
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

from errors import UserError, printable, quoted  # noqa: E402
from weights import reading  # noqa: E402
from workbench.speed import panels, threads  # noqa: E402
from workbench.speed.cores import ONE_CORE_SETTING, SECOND_CORE_SETTING  # noqa: E402
ON, OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
MAILBOX_ROWS = 128           # rows per hand-over at most, above panels.rows_per_call: more go in several
MAILBOX_X = 128 * 4096       # floats of x: MAILBOX_ROWS rows of n_in up to 4096
MAILBOX_OUT = 128 * 16384    # floats of the helper's columns: MAILBOX_ROWS rows of up to 16384
MIN_WORK = 1_000_000         # multiply-adds of a product worth sharing (17 rows by 288 x 288 is 1.4 million)
IDLE_SECONDS = 0.05          # the helper spins this long after its last job, then sleeps
WAIT_SECONDS = 10.0          # a helper this late on one job is taken for hung
PARENT_CHECK_SECONDS = 0.5   # a sleeping helper looks this often whether its parent is still there
# The mailbox's header, int64 words. This process writes a job's fields, then JOB; the helper
# writes its answer, then DONE.
JOB, DONE, ASLEEP, READY, FAILED, COMMAND, KEY, ROWS, N_IN, START, STOP, N_PANELS, WIDTH = range(13)
HEADER = 16
MULTIPLY, KEEP, FORGET, QUIT = range(1, 5)  # COMMAND's values

_helper = None           # the running Helper, started on first use
_broken = False          # True once a helper failed: one core from then on, said once
_asked = None            # use() from a flag or the session: True or False; None: the environment says
_dropped = []            # weakrefs of weights dropped since the last job: the helper drops their copies too
_key_of = {}             # each live weight's weakref -> its key, the helper's name for its copy
_keys = itertools.count(1)
_starting = threading.Lock()


def supported():
    """Whether the helper can run here: Linux on x86-64, with two cores or more."""
    return (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")
            and hasattr(os, "memfd_create") and len(os.sched_getaffinity(0)) > 1 and bool(sys.executable))


class SettingError(UserError):
    """A value of SPECULATIVE_GPT2_SECOND_CORE or SPECULATIVE_GPT2_ONE_CORE that is neither on nor off."""


def use(on):
    """Ask for the helper (True), or not (False), whatever the environment says: --second-core, /second-core."""
    global _asked
    _asked = bool(on)


def setting(name):
    """An on/off setting of the environment: 1/true/yes/on is True; 0/false/no/off or empty or unset is False."""
    value = os.environ.get(name, "")
    if value.strip().lower() in ON:
        return True
    if value.strip().lower() in OFF:
        return False
    raise SettingError(f"{name}={quoted(value)}: use 1, true, yes or on to turn it on; 0, false, no, off or empty "
                       "to turn it off")


def asked():
    """Whether products of several rows should go to the helper: asked for, and not kept on one core."""
    wanted = _asked if _asked is not None else setting(SECOND_CORE_SETTING)
    return wanted and not setting(ONE_CORE_SETTING)


def helper_for(n_rows, weights):
    """The helper if a product of n_rows rows by `weights` (a SplitPanels) should be shared with it, else None.

    The first call starts it; until it is ready, products run on one core instead of waiting.
    """
    global _helper
    if _broken or not asked() or not worth_sharing(n_rows, weights):
        return None
    if _helper is None:
        with _starting:
            if _helper is None and not _broken and supported():
                _helper = Helper.start()
    helper = _helper
    if helper is None or not helper.ready():
        if helper is not None and helper.process.poll() is not None:  # it ended before it was ready
            helper.fail("the second core's helper process did not start")
        return None
    return helper


def worth_sharing(n_rows, weights):
    """Two rows or more, two panels or more, MIN_WORK multiply-adds or more, and room in the mailbox."""
    n_panels, n_in, width = weights.panels.shape
    return (n_rows >= 2 and n_panels >= 2 and n_rows * n_in * n_panels * width >= MIN_WORK
            and n_in * MAILBOX_ROWS <= MAILBOX_X and n_panels // 2 * width * MAILBOX_ROWS <= MAILBOX_OUT)


def status():
    """One line for --verbose and the benchmark: who multiplies a verification's rows."""
    if setting(ONE_CORE_SETTING):
        return f"one core: {ONE_CORE_SETTING} is on"
    if not asked():
        return f"one core (a second core is off unless asked for: --second-core or {SECOND_CORE_SETTING}=1)"
    if _broken:
        return "one core: the second core's helper process failed"
    if not supported():
        return "one core: the helper process needs Linux on x86-64 and two cores"
    return "two cores for products of two rows or more: a helper process takes half the panels (speed/second_core.py)"


def helper_pid():
    """The running helper's process id, or None (the benchmark counts its CPU time as the run's own)."""
    helper = _helper
    return helper.process.pid if helper is not None else None


class SplitPanels(panels.Panels):
    """panels.Panels whose products of two rows or more are shared with the helper process where there is one."""

    def __init__(self, layout, n_out):
        super().__init__(layout, n_out)
        self.key = next(_keys)  # the helper's name for its copy of panels[half:]
        # Told when it is dropped by list.append, which is C: no Python code runs as a model is freed, so a
        # Ctrl-C then (a run's last moment) is raised where the program runs, never lost inside a finalizer.
        _key_of[weakref.ref(self, _dropped.append)] = self.key

    def __rmatmul__(self, x):  # x [n_seq, n_in] @ W -> [n_seq, n_out]; a batch's [n_rows, n_seq, n_in] as its rows
        if x.ndim > 2:
            return (x.reshape(-1, x.shape[-1]) @ self).reshape(*x.shape[:-1], self.shape[1])
        if len(x) == 1:  # one row: straight to panels, nothing asked
            return super().__rmatmul__(x)
        with threads.blas_single_threaded():  # the helper's BLAS is: the same calls, the same bits
            helper = helper_for(len(x), self)
            out = super().__rmatmul__(x) if helper is None else helper.product(x, self)
        return out if out.shape[1] == self.shape[1] else out[:, :self.shape[1]]


class Helper:
    """The helper process and its mailbox, seen from this process."""

    @classmethod
    def start(cls):
        """The helper, starting (ready() says when it can take work); None, with a note, if it cannot start."""
        try:
            with reading.interrupts_held():  # each descriptor below closed here or kept, never lost to a Ctrl-C
                fd = os.memfd_create("speculative-gpt2 mailbox")
                try:
                    os.ftruncate(fd, mailbox_bytes())
                    box = mmap.mmap(fd, mailbox_bytes())
                    wake_r, wake_w = os.pipe()
                    try:
                        process = subprocess.Popen(
                            [sys.executable, os.path.abspath(__file__), str(fd), str(wake_r), str(os.getpid())],
                            pass_fds=(fd, wake_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **{name: "1" for name in BLAS_THREADS}})
                    except BaseException:
                        os.close(wake_w)
                        raise
                    finally:
                        os.close(wake_r)
                finally:
                    os.close(fd)
        except OSError as e:
            give_up(f"cannot start the second core's helper process ({e.strerror or e})")
            return None
        os.set_blocking(wake_w, False)  # a full pipe already holds a wake-up: never wait on it
        helper = cls(process, box, wake_w)
        atexit.register(helper.stop)
        return helper

    def __init__(self, process, box, wake_w):
        self.process, self.wake_w = process, wake_w
        self.header, self.x, self.out = mailbox_views(box)
        self.job = 0
        self.failed = False
        self.kept = set()  # keys of the weights whose half the helper holds
        self.lock = threading.Lock()  # one product at a time in the mailbox

    def ready(self):
        return self.header[READY] == 1

    def product(self, x, weights):
        """x @ weights (a SplitPanels): [n_seq, n_in] -> [n_seq, n_panels * width], half of the panels
        multiplied here and half by the helper, some MAILBOX_ROWS rows at a time: whole calls of
        panels.product_into, so that every row is in the same call, with the same neighbours, as on one core."""
        if x.dtype != np.float32:
            raise TypeError(f"x is {x.dtype}: the model computes in float32")
        n_panels, n_in, width = weights.panels.shape
        mine = (n_panels + 1) // 2  # this process multiplies panels[:mine], the helper panels[mine:]
        per_call = panels.rows_per_call(width, n_in)
        step = MAILBOX_ROWS // per_call * per_call  # whole calls of product_into per hand-over
        out = np.empty((len(x), n_panels * width), dtype=np.float32)
        by_panel = out.reshape(len(x), n_panels, width).transpose(1, 0, 2)  # [n_panels, n_seq, width], a view of out
        with self.lock:
            self.forget_dropped()
            if weights.key not in self.kept:
                self.keep(weights.key, weights.panels[mine:])
            for start in range(0, len(x), step):
                rows = slice(start, start + step)
                n = len(x[rows])
                theirs = by_panel[mine:, rows]  # [n_panels - mine, n, width]
                if not self.failed:
                    self.x[:n * n_in].reshape(n, n_in)[...] = x[rows]
                    posted = self.post(MULTIPLY, key=weights.key, rows=n, n_in=n_in)
                panels.product_into(x[rows], weights.panels[:mine], by_panel[:mine, rows])
                if not self.failed and self.wait(posted):
                    theirs[...] = self.out[:theirs.size].reshape(n, len(theirs), width).transpose(1, 0, 2)
                else:  # the helper has failed: its half here, and one core from now on
                    panels.product_into(x[rows], weights.panels[mine:], theirs)
        return out

    def keep(self, key, half):
        """Send the helper its copy of a weight's half [n_panels - mine, n_in, width], through the mailbox."""
        flat = half.reshape(-1)
        for start in range(0, flat.size, MAILBOX_OUT):
            stop = min(start + MAILBOX_OUT, flat.size)
            self.out[:stop - start] = flat[start:stop]
            if not self.wait(self.post(KEEP, key=key, start=start, stop=stop, n_panels=half.shape[0],
                                       n_in=half.shape[1], width=half.shape[2])):
                return
        self.kept.add(key)

    def forget_dropped(self):
        """The helper drops its copies of the weights this process has dropped since the last product."""
        while _dropped:
            key = _key_of.pop(_dropped.pop())
            if key in self.kept:
                self.kept.discard(key)
                self.wait(self.post(FORGET, key=key))

    def post(self, command, **fields):
        """Write a job's fields (header words by name: key=..., rows=...), then its number: the helper reads
        the fields once it sees the number."""
        h = self.header
        h[COMMAND] = command
        for name, value in fields.items():
            h[FIELDS[name]] = int(value)
        fence()  # every field, and x, in the mailbox before the number that says they are there
        self.job += 1
        h[JOB] = self.job
        # JOB stored, then ASLEEP loaded; the helper stores ASLEEP, then loads JOB (sleep_until_woken).
        # x86 may let a load pass an earlier store, and then each side would miss the other's: a full
        # fence on each side, between its store and its load, makes at least one see the other's.
        fence()
        self.wake_if_asleep()
        return self.job

    def wait(self, job):
        """Spin until the helper has done `job`: True, or False (with a note, once) if it has failed."""
        h, spins, since = self.header, 0, None
        while h[DONE] != job:
            spins += 1
            if spins % 4096 == 0:  # about a millisecond: is it alive, on time? (Waking it again is only a
                self.wake_if_asleep()  # backstop: post()'s fences already see that it is woken.)
                since = since or time.monotonic()
                ended = self.process.poll() is not None
                if ended or time.monotonic() - since > WAIT_SECONDS:
                    self.fail(f"the second core's helper process {'ended' if ended else 'stopped answering'}")
                    return False
        if h[FAILED]:
            self.fail("the second core's helper process failed")
            return False
        return True

    def wake_if_asleep(self):
        if self.header[ASLEEP] and self.wake_w is not None:
            try:
                os.write(self.wake_w, b"w")
            except (BlockingIOError, BrokenPipeError):  # a wake-up is waiting already, or the helper has gone
                pass

    def fail(self, why):
        self.failed = True
        give_up(f"{why}; products run on one core from here on")
        self.stop()

    def stop(self):
        """End the helper: a QUIT job if it is spinning, the pipe closed if it sleeps."""
        global _helper
        if _helper is self:
            _helper = None
        if self.process.poll() is None:
            self.header[COMMAND] = QUIT
            fence()
            self.header[JOB] = self.job + 1
        wake_w, self.wake_w = self.wake_w, None  # forgotten before it is closed: never closed twice
        if wake_w is not None:
            os.close(wake_w)
        try:
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


FIELDS = {"key": KEY, "rows": ROWS, "n_in": N_IN, "start": START, "stop": STOP, "n_panels": N_PANELS, "width": WIDTH}
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")  # the helper's BLAS: one thread
_fence_lock = threading.Lock()


def fence():
    """Stores before it are seen by the other process before stores after it, even the non-temporal
    ones a large copy may use: taking and giving back a lock is a locked instruction, which orders them."""
    with _fence_lock:
        pass


def give_up(why):
    global _broken
    if not _broken:
        _broken = True
        print(printable(f"note: {why}"), file=sys.stderr)


def mailbox_bytes():
    return 8 * HEADER + 4 * (MAILBOX_X + MAILBOX_OUT)


def mailbox_views(box):
    """Views of the shared memory: the header [HEADER] of int64 words, x [MAILBOX_X] and out [MAILBOX_OUT] float32."""
    header = memoryview(box).cast("q")[:HEADER]  # its items are Python ints: quicker to read in a spin than NumPy's
    x = np.frombuffer(box, dtype=np.float32, count=MAILBOX_X, offset=8 * HEADER)
    out = np.frombuffer(box, dtype=np.float32, count=MAILBOX_OUT, offset=8 * HEADER + 4 * MAILBOX_X)
    return header, x, out


def forget_helper():
    """In a forked child: the parent's helper answers the parent only. The child closes its copy of the
    wake pipe's end, or a sleeping helper would wait for a byte from it after the parent has gone."""
    global _helper, _starting
    if _helper is not None and _helper.wake_w is not None:
        wake_w, _helper.wake_w = _helper.wake_w, None
        os.close(wake_w)
    _helper, _starting = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=forget_helper)


# ---------------------------------------------------------------------------
# The helper process's side
# ---------------------------------------------------------------------------

def serve(mailbox_fd, wake_fd, parent):
    """The helper: do each job posted in the mailbox until told to QUIT, or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which ends this
    box = mmap.mmap(mailbox_fd, mailbox_bytes())
    os.close(mailbox_fd)
    header, x, out = mailbox_views(box)
    halves = {}  # key -> this process's copy of a weight's panels[half:]
    done, last_work, spins = int(header[JOB]), time.monotonic(), 0
    header[READY] = 1
    while True:
        job = int(header[JOB])
        if job == done:
            spins += 1
            if spins % 16384 == 0:  # a few milliseconds of spinning: still wanted?
                if os.getppid() != parent:
                    return
                if time.monotonic() - last_work > IDLE_SECONDS and not sleep_until_woken(header, wake_fd, done, parent):
                    return
            continue
        command = header[COMMAND]
        if command == QUIT:
            return
        try:
            do(command, header, x, out, halves)
        except Exception:  # said to the parent, which computes this half itself and ends this process
            header[FAILED] = 1
        fence()  # the answer in the mailbox before DONE says it is there
        header[DONE] = done = job
        last_work = time.monotonic()


def do(command, header, x, out, halves):
    key = int(header[KEY])
    if command == MULTIPLY:
        half = halves[key]  # [n_mine, n_in, width]
        n, n_in = int(header[ROWS]), int(header[N_IN])
        by_panel = out[:n * half.shape[0] * half.shape[2]].reshape(n, half.shape[0], half.shape[2]).transpose(1, 0, 2)
        panels.product_into(x[:n * n_in].reshape(n, n_in), half, by_panel)
    elif command == KEEP:
        start, stop = int(header[START]), int(header[STOP])
        if start == 0:
            halves[key] = np.empty((int(header[N_PANELS]), int(header[N_IN]), int(header[WIDTH])), dtype=np.float32)
        halves[key].reshape(-1)[start:stop] = out[:stop - start]
    elif command == FORGET:
        halves.pop(key, None)


def sleep_until_woken(header, wake_fd, done, parent):
    """Sleep until a byte comes down the pipe: True, or False when the pipe closes or the parent has gone
    (a killed parent's pipe can stay open in a process it forked, so the parent is looked for too)."""
    header[ASLEEP] = 1
    fence()  # ASLEEP stored before JOB is loaded: the other half of post()'s fence
    try:
        while int(header[JOB]) == done:  # a job posted before ASLEEP was seen is seen here; one after, woken
            if not select.select([wake_fd], [], [], PARENT_CHECK_SECONDS)[0]:
                if os.getppid() != parent:
                    return False
                continue
            if not os.read(wake_fd, 4096):
                return False
    finally:
        header[ASLEEP] = 0
    return True


if __name__ == "__main__":  # the helper process: speed/second_core.py MAILBOX_FD WAKE_FD PARENT_PID
    serve(*(int(arg) for arg in sys.argv[1:4]))
