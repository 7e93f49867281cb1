"""How the machine it runs on should run a model's forwards: measured where it runs, kept beside the model, watched.

Each way the project has of running a forward is timed at the row counts the methods use, the ways
taking turns, and per row count plain NumPy is kept unless another way is faster by more than its own
spread (choose): a way that is faster on one CPU (AVX-512's small-matrix kernels) is slower on another
(AVX2), so the choice is made on the machine that runs it, not where the code was written.

    numpy-1    NumPy's own product, the BLAS on one thread: what never waits on another core
    numpy      NumPy's own product, the BLAS on every core this process may use
    fast       the fast layout (accelerate.py: blocked products for a big model, panels for a small one, and
               a small model's wide products half on a helper process where the second core was asked for)

Row counts: 1 (a token), n_draft + 1 for n_draft up to 16 (a check), and a tree's nodes up to 32.

A plan measured on a quiet machine can collapse when other programs take the cores: the BLAS's threads,
each sharing a core with a busy program, wait on each other (PERFORMANCE.md, "End to end, beside busy
programs"), and a single such forward can cost more than threads save in a whole run. So
the cores are looked at before the BLAS's threads are used (Cores: is another program running now?),
and a forward on more than one thread is watched (Watch): one FALLBACK times what the plan says one
thread takes, while another program runs, sends every model's forwards to numpy-1 for BUSY_SECONDS,
twice that if the cores are still taken then, and so on. A slow forward with nothing else running is
the machine's jitter, or this run's own, and changes nothing.

A plan measured while other programs ran (a student's first run beside a browser) finds one thread best
at most row counts, and would keep one thread on that machine when it is quiet: such a plan says so
(Plan.busy), and is measured again at a later start that finds the machine quiet (measure_again), up
to BUSY_PLAN_TRIES measurings in a row; a machine busy at every one of them is one where it holds.
"""

import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from errors import printable
from kvcache import KVCache
from roofline import forward_run, turns
from weights import derived, files, reading
from workbench.speed import threads
from workbench.speed.cores import STARTED_ON_ONE, cpu_seconds, others_cores, others_running

WAYS = ("numpy-1", "numpy", "fast")
ROWS = (1, 2, 3, 4, 5, 6, 7, 9, 12, 17, 25, 33)  # a token; checks of n_draft + 1 up to 17; trees up to 32 nodes
CONTEXT = 64          # cached tokens the forwards are timed after (the suite's prompts and a few rounds)
BUDGET_SECONDS = 6.0  # about what making a plan may take: the repeats are cut to it, between MIN and MAX_REPEATS
MIN_REPEATS, MAX_REPEATS = 3, 25  # a small model's forwards are cheap: more pairs, and fewer choices made by noise
# The fast layout has a cost a forward's timing does not show: at its first use in a run, its converted copy
# mapped, checked and paged in (the learned oracle's: a tenth of a second or more, ten of its forwards). A
# model whose forwards take under FAST_MIN_SECONDS, or a saving under FAST_MIN_SAVING of a forward, does not
# repay it in a run of a few hundred forwards, fewer of them of the row count it was chosen for.
FAST_MIN_SECONDS = 0.05
FAST_MIN_SAVING = 0.10
DISTURBED = 0.10      # NumPy's forward of a row count this much slower than of more rows: other programs slowed it
OPEN_MEDIAN = 0.95    # a way this much faster in the median, and not in the high quartile of its ratios: undecided
FALLBACK = 1.5        # a forward on several threads this many times one thread's planned time, another program
                      # running: the cores were taken
BUSY_SECONDS = 2.0    # how long the cores count as taken once found so (doubled each time they still are)
BUSY_SECONDS_MAX = 60.0
OTHERS_MIN_CORES = 0.5  # other programs using less than this many cores over LOOK_BACK_SECONDS are not running
LOOK_BACK_SECONDS = 0.2  # at least (/proc/stat counts in hundredths of a second)
READING_SECONDS = 0.25   # how often the CPU's use is read while a run lasts (Cores.free)
BUSY_PLAN_TRIES = 3      # measurings in a row beside other programs after which a plan is kept as it is


@dataclass
class Plan:
    """The way chosen for each row count measured, and the figures behind the choice."""
    ways: dict                       # {rows: way}
    seconds: dict                    # {way: {rows: median seconds}}
    ratios: dict = field(default_factory=dict)  # {way: {rows: [median, low quartile, high quartile] of way / numpy-1}}
    key: dict = field(default_factory=dict)     # what the plan was measured for (machine_key)
    busy: int = 0  # how many measurings in a row found other programs using OTHERS_MIN_CORES or more (0: quiet)

    def way(self, n_rows):
        """The way for a forward of n_rows rows: that of the nearest row count measured at or above it (the
        largest above the largest)."""
        measured = sorted(self.ways)
        return self.ways[next((r for r in measured if r >= n_rows), measured[-1])]

    def expected(self, way, n_rows):
        """The plan's seconds for a forward of n_rows by way, from the nearest row count measured (or None)."""
        figures = self.seconds.get(way) or {}
        if not figures:
            return None
        r = min(figures, key=lambda m: (m < n_rows, abs(m - n_rows)))
        return figures[r] * max(1.0, n_rows / r)

    def to_json(self):
        return {"ways": {str(r): w for r, w in self.ways.items()},
                "seconds": {w: {str(r): s for r, s in f.items()} for w, f in self.seconds.items()},
                "ratios": {w: {str(r): q for r, q in f.items()} for w, f in self.ratios.items()}, "key": self.key,
                "busy": self.busy}

    @classmethod
    def from_json(cls, data):
        """The Plan a plan file holds; ValueError (or KeyError, TypeError) unless it is one make_plan could have made:
        a way of WAYS for at least one row count, each a whole number from 1, finite seconds and a busy count from
        0 to BUSY_PLAN_TRIES. A signed plan is only as sound as whoever holds the key (plan.read): a run must not
        end on what its plan says."""
        plan = cls({int(r): w for r, w in data["ways"].items()},
                   {w: {int(r): float(s) for r, s in f.items()} for w, f in data["seconds"].items()},
                   {w: {int(r): [float(x) for x in q] for r, q in f.items()} for w, f in data.get("ratios", {}).items()},
                   dict(data.get("key", {})), data.get("busy", 0))
        if not plan.ways or any(r < 1 or w not in WAYS for r, w in plan.ways.items()) or \
                any(not 0 <= s < float("inf") for f in plan.seconds.values() for s in f.values()) or \
                type(plan.busy) is not int or not 0 <= plan.busy <= BUSY_PLAN_TRIES:
            raise ValueError("not a plan: no row counts, a row count under 1, a way not in WAYS, seconds not finite "
                             "or a busy count out of range")
        return plan


# ---------------------------------------------------------------------------
# Measuring: each way at each row count, taking turns
# ---------------------------------------------------------------------------

def quartiles(values):
    """[median, low quartile, high quartile] (statistics.quantiles' "inclusive" method: NumPy's default)."""
    return [float(q) for q in np.percentile(values, [50, 25, 75])]


def choose(times):
    """The way for one row count, from {way: [seconds of each turn]}: plain NumPy unless another way beats it by more
    than its spread: numpy-1, then numpy on every core if it beats numpy-1 so, then the fast layout if it beats the
    plain way chosen so (beats)."""
    chosen = "numpy-1"
    for way in ("numpy", "fast"):
        if way in times and beats(times, way, chosen):
            chosen = way
    return chosen


def beats(times, way, plain):
    """Whether `way` is faster than the plain way by more than its spread (even the slow quartile of its turns'
    ratios under 1); the fast layout also by FAST_MIN_SAVING of the plain way's time, where that is FAST_MIN_SECONDS
    or more (its start must be repaid)."""
    if ratio_quartiles(times, way, plain)[2] >= 1.0:
        return False
    return way != "fast" or fast_could_pay(times, way, plain)


def fast_could_pay(times, way, plain):  # its median saving enough to repay its start (FAST_MIN_SAVING, ..._SECONDS)
    plain_seconds = float(np.median(times[plain]))
    return plain_seconds >= FAST_MIN_SECONDS and float(np.median(times[way])) <= (1 - FAST_MIN_SAVING) * plain_seconds


def ratio_quartiles(times, way, base):  # [median, low, high quartile] of the turns' ratios way / base
    return quartiles([a / b for a, b in zip(times[way], times[base])])


def undecided(times):
    """Whether a measuring left one of choose's comparisons open: a way clearly faster than the plain way it is
    compared with in the median of its turns' ratios (OPEN_MEDIAN) but not in the high quartile, where it could
    be chosen. A spread that wide is a stretch of turns the neighbours slowed: a learned draft's plan once kept
    numpy-1 so at one row count, where the row counts beside it were clearly faster on both cores, and its
    forwards of that size ran slower for good (PERFORMANCE.md, "What checking k tokens costs here"). Two ways
    whose ratios only scatter about 1 are a tie, not an open choice. times: {way: [seconds]}."""
    chosen = "numpy-1"
    for way in ("numpy", "fast"):
        if way not in times:
            continue
        median, _, high = ratio_quartiles(times, way, chosen)
        if median < OPEN_MEDIAN and high >= 1.0 and (way != "fast" or fast_could_pay(times, way, chosen)):
            return True
        if beats(times, way, chosen):
            chosen = way
    return False


def make_plan(runners, rows=ROWS, context=CONTEXT, progress=True, name="the model", busy_before=0):
    """A Plan from runners = {way: (model, prepare)}: each way's forwards of each row count after `context`
    cached tokens, the ways taking turns (roofline.turns), repeats cut to about BUDGET_SECONDS in all; then each
    row count whose measuring other programs slowed (disturbed), or left its choice open (undecided), measured once
    more for each, beyond the budget.
    prepare() sets what the way's forwards run with (the BLAS's threads); it is timed with them, as in a run,
    where a draft's forwards and the oracle's may each change the setting. busy_before: the busy count of the
    plan this one replaces (Plan.busy: one more where other programs ran through this measuring too)."""
    started = time.monotonic(), cpu_seconds()
    caches = {}
    for way, (model, prepare) in runners.items():
        caches[way] = KVCache()
        prepare()
        model.forward(np.arange(context) % model.vocab_size, caches[way], n_logits=1)
    one = time_one(runners, caches, context)
    repeats = int(min(MAX_REPEATS, max(MIN_REPEATS, BUDGET_SECONDS / max(one * len(runners) * sum(rows) / 4, 1e-9))))

    def measure(r):  # {way: [seconds of each turn]} for forwards of r rows
        runs = {way: prepared(forward_run(model, caches[way], context, r), prepare)
                for way, (model, prepare) in runners.items()}
        return turns(runs, repeats)

    with tqdm(total=len(rows), desc=f"measuring how to run {name} here (once)", disable=not progress,
              file=sys.stderr, leave=False) as bar:
        times = {}
        for r in rows:
            times[r] = measure(r)
            bar.update()
        slowed = disturbed(times)
        bar.total += len(slowed)
        for r in slowed:  # once more; the measuring whose NumPy forwards were less slowed is kept, all its ways
            again = measure(r)  # (the choice compares the ways' turns pair by pair)
            bar.update()
            if sum(numpy_medians(again).values()) < sum(numpy_medians(times[r]).values()):
                times[r] = again
        left_open = [r for r in rows if undecided(times[r])]
        bar.total += len(left_open)
        for r in left_open:  # once more, the turns of both measurings taken together: a slowed stretch weighs half
            again = measure(r)
            bar.update()
            times[r] = {way: times[r][way] + again[way] for way in times[r]}
    seconds = {way: {r: float(np.median(times[r][way])) for r in rows} for way in runners}
    ratios = {way: {r: ratio_quartiles(times[r], way, "numpy-1") for r in rows} for way in runners}
    # the machine's use unknown (not Linux): never called busy
    busy = busy_before + 1 if (others_cores(started, (time.monotonic(), cpu_seconds())) or 0.0) >= OTHERS_MIN_CORES \
        else 0
    return Plan({r: choose(times[r]) for r in rows}, seconds, ratios, busy=min(busy, BUSY_PLAN_TRIES))


def measure_again(plan, model_dir):
    """Whether a plan read from beside its model should be measured anew now: it was measured while other programs
    ran (busy), fewer than BUSY_PLAN_TRIES times in a row, none is running now, and the new one can be kept (else
    every quiet start would measure again, and the count of tries never grow)."""
    return 0 < plan.busy < BUSY_PLAN_TRIES and others_running() == 0 and why_not_kept(model_dir) is None


def disturbed(times):
    """The row counts whose NumPy forwards were measured slower than those of more rows, by more than DISTURBED:
    NumPy's product of more rows does not cost less, so a neighbour's program (or a virtual machine's) slowed
    that measuring. A big model gets MIN_REPEATS a row count, and one slowed minute chose the fast layout where
    NumPy was faster. times: {rows: {way: [seconds]}}."""
    medians = {r: numpy_medians(t) for r, t in times.items()}
    rows = sorted(times)
    return [r for i, r in enumerate(rows)
            if any(medians[r][way] > (1 + DISTURBED) * medians[more][way] for more in rows[i + 1:] for way in medians[r])]


def numpy_medians(times):
    """{way: median seconds} of NumPy's ways (numpy-1, numpy) among times = {way: [seconds]}."""
    return {way: float(np.median(t)) for way, t in times.items() if way in ("numpy-1", "numpy")}


def time_one(runners, caches, context):
    """Seconds of one forward of one row, by the slowest way: what the repeats are budgeted by."""
    slowest = 0.0
    for way, (model, prepare) in runners.items():
        run = prepared(forward_run(model, caches[way], context, 1), prepare)
        run()
        start = time.perf_counter()
        run()
        slowest = max(slowest, time.perf_counter() - start)
    return slowest


def prepared(run, prepare):
    def timed():
        prepare()
        run()
    return timed


# ---------------------------------------------------------------------------
# Running: the plan's way for each forward, watched where it uses more than one thread
# ---------------------------------------------------------------------------

class Cores:
    """Whether this process's forwards may use more than one core now: a fact about the machine, so one for
    the process, shared by every model's Watch. The cores are taken when another program is running as
    they are looked at (first use, and each time a while taken ends), or when a forward on several threads
    took FALLBACK times what the plan says one thread takes while one is (Watch.took); then they are not looked
    at again for BUSY_SECONDS,
    doubled each time they are found taken again (up to BUSY_SECONDS_MAX), so that a busy machine costs
    at most a few slow forwards however long the run.

    Another program is running when one is seen running now and, where the CPU's use can be read, other
    programs used OTHERS_MIN_CORES or more over the last tenths of a second: a thread woken for a moment (the
    kernel's, a terminal's) is not a program that wants the cores, and on a virtual machine whose neighbours
    slow every forward, such a moment beside a slow forward sent a quiet run to one thread for a minute."""

    def __init__(self, others=others_running, used=None):
        self.others = others   # () -> other programs' running threads, or None (unknown: watched only)
        self.used = used       # () -> cores.cpu_seconds(), or None (unknown): None here, others() alone decides
        self.readings = [(time.monotonic(), used() if used else None)]  # the last two, READING_SECONDS apart
        self.until = None      # monotonic time before which they count as taken; None: not looked at yet
        self.wait = BUSY_SECONDS
        self.fallbacks = 0     # how many times they were found taken

    def free(self):
        now = time.monotonic()
        if self.used and now - self.readings[-1][0] >= READING_SECONDS:  # a reading to look back at
            self.readings = [self.readings[-1], (now, self.used())]
        if self.until is not None and now < self.until:
            return False
        if self.until is None or self.until > 0:  # first use, or a while taken just ended: look now
            if (self.running() or 0) > 0:
                self.taken()
                return False
            self.until = 0.0
        return True

    def running(self):
        """Other programs' threads running now (others()), 0 where they used under OTHERS_MIN_CORES since a reading
        LOOK_BACK_SECONDS or more old; None where none can be seen."""
        n = self.others()
        if n and self.used:
            now, reading = time.monotonic(), self.used()
            then, before = next(((t, r) for t, r in reversed(self.readings) if now - t >= LOOK_BACK_SECONDS), (0, None))
            used = others_cores((then, before), (now, reading))
            if used is not None and used < OTHERS_MIN_CORES:
                return 0
        return n

    def taken(self):  # the BLAS's idle threads parked: spinning, they would take a core other programs want
        threads.park_idle_blas_threads()
        self.until = time.monotonic() + self.wait
        self.wait = min(2 * self.wait, BUSY_SECONDS_MAX)
        self.fallbacks += 1

    def held(self):  # a forward on several threads kept its time: the next while taken starts short again
        self.wait = BUSY_SECONDS


CORES = Cores(used=cpu_seconds)


class Watch:
    """A plan's ways during a run: where the cores are taken (Cores), a way on more than one thread gives
    its forwards to numpy-1. A forward on more than one thread that takes FALLBACK times the plan's
    one-thread figure for its rows finds them taken if another program is running (where other programs
    cannot be seen, others() None: not Linux, whatever the cause). A model's first forward on threads is
    not judged: it is the one that first wakes the BLAS's threads."""

    def __init__(self, plan, uses_threads, cores=None):
        self.plan = plan
        self.threaded = {way: uses_threads(way) for way in WAYS}  # uses_threads(way): more than one thread
        self.cores = cores or CORES
        self.first = True
        self.looked_up = {}  # rows -> (the plan's way, FALLBACK times numpy-1's planned seconds or None): looked
                             # up once, as every call here is paid by every forward (a draft's: a fraction of a ms)

    def planned(self, n_rows):
        if n_rows not in self.looked_up:
            one_thread = self.plan.expected("numpy-1", n_rows)
            self.looked_up[n_rows] = (self.plan.way(n_rows), None if one_thread is None else FALLBACK * one_thread)
        return self.looked_up[n_rows]

    def start(self, n_rows):
        """(the way for a forward of n_rows rows now, the seconds past which it is slow or None: not watched). One
        call a forward, a dictionary's look-up where nothing changes: a draft's forward takes a fraction of a ms."""
        way, slow = self.planned(n_rows)
        if not self.threaded[way]:
            return way, None
        if not self.cores.free():
            return "numpy-1", None
        return way, slow

    def way(self, n_rows):  # way and judge: start and took one at a time, as the tests ask them
        return self.start(n_rows)[0]

    def judge(self, way, n_rows, seconds):
        """Take note of a forward of n_rows rows that took `seconds` by `way`."""
        if self.threaded[way]:
            self.took(seconds, self.planned(n_rows)[1])

    def took(self, seconds, slow):
        """A forward on more than one thread took `seconds`; slow: FALLBACK times one thread's planned figure."""
        if slow is None or self.first:
            self.first = False
            return
        if seconds <= slow:
            self.cores.held()
        elif self.cores.running() != 0:
            self.cores.taken()


# ---------------------------------------------------------------------------
# Kept beside the model, for the machine that measured it
# ---------------------------------------------------------------------------

PLAN_FILE = "model.plan.json"
PLAN_RECORD = "model.plan.record.json"  # its binding to the checkpoint and the machine, signed (weights/derived.py)
PLAN_VERSION = 10  # the ways and their measuring: a plan of another version is made again


def machine_key():
    """What decides a plan: the CPU (its model and its vector extensions), the cores this process may use, the
    NumPy and BLAS that run the products (and any forced kernel or thread count), and the plan's own version."""
    cpu, vector, blas = hardware()
    return {"version": PLAN_VERSION, "cpu": cpu, "vector": list(vector), "cores": threads.N_THREADS,
            "numpy": np.__version__, "blas": list(blas),
            "forced": {k: os.environ[k] for k in forced_settings() if k in os.environ}}


@functools.lru_cache(maxsize=None)
def hardware():
    """(the CPU's name, its vector extensions, the BLAS NumPy was built with): looked up once a process, as they
    cannot change while it runs. The BLAS as NumPy's build records it (threads.numpy_blas), not as the BLAS is
    asked: asking it inspects every loaded library, milliseconds at every start; the kernel it picks follows
    from the CPU and OPENBLAS_CORETYPE, both in the key."""
    cpu, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f.read(1 << 20).splitlines():
                name, _, value = line.partition(":")
                if name.strip() == "model name" and not cpu:
                    cpu = value.strip()
                elif name.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    vector = sorted(f for f in flags if f.startswith(("avx", "fma", "amx")))
    return cpu or sys.platform, tuple(vector), threads.numpy_blas()


def forced_settings():
    """The settings a user may force that decide a plan: the kernel, and the thread count unless it was
    workbench.py's own start on one thread beside a busy program (cores.start_blas_threads)."""
    return ("OPENBLAS_CORETYPE",) if os.environ.get(STARTED_ON_ONE) else ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")


def plan_paths(model_dir):
    """(the plan, its signed record, the checkpoint it is bound to) of a model directory."""
    return (os.path.join(model_dir, PLAN_FILE), os.path.join(model_dir, PLAN_RECORD),
            os.path.join(model_dir, "model.safetensors"))


def recipe():
    """What a plan is made from besides its model: the machine, as machine_key says it (the record's recipe)."""
    return "plan " + json.dumps(machine_key(), sort_keys=True)


def read(model_dir):
    """The plan beside a model, if it is bound, under the directory's key, to this model's checkpoint and to this
    machine (weights/derived.py: trusted no more than the converted copy), else None: a plan edited, planted,
    made elsewhere or for another checkpoint is made again."""
    path, record, source = plan_paths(model_dir)
    if not os.path.isfile(path) or derived.bound(record, path, source, recipe()) is not None:
        return None
    try:
        return Plan.from_json(json.loads(reading.read_text(path, "plan")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, reading.ReadError):
        return None


def why_not_kept(model_dir):
    """Why a plan could not be kept beside the model (a read-only directory, a link or a read-only file in its
    place, a key not this user's alone), or None."""
    return files.why_not_writable_in(os.fspath(model_dir), (PLAN_FILE, PLAN_RECORD)) or derived.why_no_key(model_dir)


def write(model_dir, plan):
    """Keep the plan beside the model and bind it (one write path, weights/files.py; derived.bind). Where it cannot
    be kept (a read-only directory), one note line: the plan serves this run, and is made again next time."""
    path, record, source = plan_paths(model_dir)
    plan.key = machine_key()
    try:
        problem = why_not_kept(model_dir)
        if problem:
            raise files.WriteError(problem)
        files.write_text(path, json.dumps(plan.to_json(), indent=1))
        derived.bind(record, path, source, recipe())
    except (OSError, files.WriteError, reading.ReadError) as e:
        print(printable(f"note: the plan of how to run {os.path.basename(os.path.normpath(model_dir))} here is not "
                        f"kept ({files.words_of(e) if isinstance(e, OSError) else e}): it is measured again next run",
                        newlines=False), file=sys.stderr)
