"""Whether other programs are running on the machine's cores now: read during a run, and before NumPy loads.

OpenBLAS starts its threads when NumPy is imported, and each spins about a tenth of a second waiting for
work: beside a busy program that tenth comes out of the run's own thread, and a run of a small model
lasts under a second. So workbench.py looks first (start_blas_threads, before anything imports NumPy)
and, where another program is running and nobody chose the BLAS's threads, starts OpenBLAS on one
thread; the plan's watch (plan.py) gives it its threads again once the cores are free. Nothing here
imports NumPy.
"""

import os
import time

STARTED_ON_ONE = "SPECULATIVE_GPT2_BLAS_STARTED_ON_ONE"  # set with OPENBLAS_NUM_THREADS=1 by start_blas_threads
SECOND_CORE_SETTING = "SPECULATIVE_GPT2_SECOND_CORE"  # on: small models' products half on a helper (second_core.py)
ONE_CORE_SETTING = "SPECULATIVE_GPT2_ONE_CORE"        # on: never that helper, whatever else asks
# The user's own choice of the BLAS's threads, left as it is; in the order OpenBLAS reads them (threads.started_with)
CHOSEN = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def others_running(loadavg="/proc/loadavg", tasks="/proc/self/task"):
    """Threads of other programs running or waiting for a core right now, or None where this cannot be read
    (Linux's /proc/loadavg counts every runnable thread on the machine; this process's own are taken off).
    In a container it may count the host's, and on a machine with more cores than this process may use,
    programs on the others: the cores then look taken, and one thread is kept (the safe side)."""
    try:
        with open(loadavg, encoding="ascii") as f:
            running = int(f.read(256).split()[3].split("/")[0])
        names = os.listdir(tasks)
    except (OSError, ValueError, IndexError):
        return None
    mine = 0
    for task in names:
        try:
            mine += stat_fields(os.path.join(tasks, task, "stat"))[0] == "R"
        except (OSError, IndexError):  # a thread that ended meanwhile
            continue
    return max(0, running - mine)


def cpu_seconds(stat="/proc/stat"):
    """(CPU seconds the whole machine has been busy, CPU seconds of this process and its children), or None
    where the machine's cannot be read (not Linux). Busy: user, nice, system, irq and softirq; not the steal of a
    virtual machine (time its host gave other guests: no program here wants it back). A child (the second core's
    helper) is this run's own work, not another program that wants the cores."""
    try:
        with open(stat, encoding="ascii") as f:
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in f.readline(4096).split()[1:8])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK"), own_seconds()


def others_cores(start, end):
    """Cores' worth of CPU other programs used between two readings (wall seconds, cpu_seconds()), or None where
    the machine's use cannot be read (cpu_seconds() None) or no time passed between them."""
    (then, before), (now, after) = start, end
    if before is None or after is None or now <= then:
        return None
    return max(0.0, (after[0] - before[0]) - (after[1] - before[1])) / (now - then)


def own_seconds():
    """CPU seconds of this process's threads and of its children, running or ended."""
    ended = os.times()  # children that ended and were waited for: their CPU is counted there, no longer in /proc
    return time.process_time() + ended.children_user + ended.children_system + children_seconds()


def children_seconds(tasks="/proc/self/task"):
    """CPU seconds of this process's running child processes (Linux lists each thread's children), or 0.0."""
    total = 0.0
    try:
        names = os.listdir(tasks)
    except OSError:
        return 0.0
    for task in names:
        try:
            with open(os.path.join(tasks, task, "children"), encoding="ascii") as f:
                total += sum(process_seconds(pid) for pid in f.read(4096).split())
        except OSError:  # a thread that ended meanwhile, or a kernel that does not list children
            continue
    return total


def process_seconds(pid):
    """The user and system CPU seconds of process pid (Linux's /proc/PID/stat), or 0.0 where it cannot be read."""
    try:
        fields = stat_fields(f"/proc/{pid}/stat")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return 0.0


def stat_fields(path):
    """The fields of a /proc stat file after "pid (name)": state, ppid, ... (a name may hold spaces and ")")."""
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read(4096).rpartition(")")[2].split()


def start_blas_threads(environ=None, others=others_running):
    """Before NumPy is imported: OpenBLAS to start on one thread where another program is running now and no
    thread count was chosen (the environment's CHOSEN); said in STARTED_ON_ONE, so that the plan's key does
    not take it for a user's choice (plan.machine_key)."""
    environ = os.environ if environ is None else environ
    if any(name in environ for name in CHOSEN) or (others() or 0) == 0:
        return
    environ["OPENBLAS_NUM_THREADS"], environ[STARTED_ON_ONE] = "1", "1"
