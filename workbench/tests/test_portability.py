"""Windows and other non-Linux systems: every call that exists only on Linux or POSIX has a
fallback, checked here by removing the call (the checkpoint's madvise/fadvise and the download
locks have theirs in workbench/tests/test_fast_copy.py and tests/test_download.py)."""

import io
import os
import subprocess
import sys
import types

from fixtures import ROOT
from processors import Processor
from workbench import display, session
from workbench.settings import Settings


def test_no_ansi_colours_where_the_console_cannot_show_them(monkeypatch):
    # Windows without virtual-terminal mode: no colour codes, even on a terminal.
    monkeypatch.setattr(display.os, "name", "nt")
    monkeypatch.setitem(sys.modules, "ctypes", types.SimpleNamespace())  # no windll: not a Windows console API
    terminal = io.StringIO()
    terminal.isatty = lambda: True
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert not display.use_color("auto", terminal)
    assert display.use_color("always", terminal)  # asked for explicitly: the user knows their console


def test_the_session_works_without_readline(monkeypatch, tiny_dirs):
    # Windows' Python has no readline: no completion or history, the same session otherwise.
    monkeypatch.setattr(session, "readline", None)
    lines = iter(["/length 3", "the cat", "/quit"])
    out = io.StringIO()
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, Settings(processor=Processor(0.0)), out=out)
    s.loop(read=lambda prompt: next(lines))
    assert "length 3" in out.getvalue() and "speculative: 3 new tokens" in out.getvalue()


def test_thread_count_without_sched_getaffinity():
    # Only Linux has sched_getaffinity; elsewhere the count of CPUs.
    code = "import os; del os.sched_getaffinity; from workbench.speed import threads; print(threads.N_THREADS == (os.cpu_count() or 1))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True", r.stderr


def test_ctrl_c_handling_needs_only_sigint():
    # signal.SIGINT is the one signal Windows shares with POSIX; nothing here uses SIGPIPE, SIGTERM handlers or alarms.
    for name in ("errors.py", "speculative.py", "demo.py", "download_weights.py", "workbench.py", "workbench/program.py",
                 "workbench/session.py", "workbench/cli.py", "workbench/runner.py"):
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            source = f.read()
        assert "SIGPIPE" not in source and "signal.alarm" not in source and "SIGALRM" not in source, name


def test_the_threads_without_register_at_fork():
    # Windows has no fork: the workers need no forgetting there, and products still run on them.
    code = ("import os; del os.register_at_fork; import numpy as np; from workbench.speed import blocked, threads; "
            "threads.N_THREADS = 2; threads.THREADED_MIN_SIZE = 0; "
            "w = np.arange(64 * 40, dtype=np.float32).reshape(64, 40) / 1000; x = np.ones((3, 64), np.float32); "
            "print(np.allclose(blocked.product(x, blocked.to_blocks(w.T))[:, :40], x @ w, rtol=1e-5))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True", r.stderr


def test_bench_without_proc_or_resource(monkeypatch):
    # Windows has neither /proc nor the resource module: the benchmark says what it could not measure.
    import builtins
    from workbench.bench import measure as bench
    from workbench.speed import cores
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setitem(sys.modules, "resource", None)  # `import resource` raises ImportError
    assert bench.peak_rss() is None
    assert bench.peak_rss_text({"peak_rss_bytes": None, "files_bytes": 1}) == "peak RSS not measured on this system"
    snapshot = bench.cpu_snapshot()
    assert snapshot[1] is None and cores.others_cores(snapshot, snapshot) is None
    monkeypatch.delattr(os, "getloadavg")
    assert bench.load_average() == "unknown"
