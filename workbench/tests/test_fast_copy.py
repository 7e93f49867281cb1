"""The workbench's fast copy of the weights (workbench/speed/accelerate.py): model.blocked.safetensors, converted
once beside the checkpoint and never trusted more than its source. Loads at once, a load killed at every point of
a conversion, a damaged or stale copy, the temporary files of killed writers, and the platforms without file
locks, change times, madvise or fadvise: every load gives the logits of a copy converted alone."""

import collections
import contextlib
import mmap
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fixtures import ROOT, make_model_dir
from permissions import permissions_binding_root
from test_checkpoint import IDS, fresh_copy, notes, read_raw, temp_files, template, write_raw  # noqa: F401 (template: a fixture)
from weights import checkpoint
from workbench.speed import accelerate
from workbench.speed.accelerate import BLOCKED_FILE, load_fast


@pytest.fixture(scope="module")
def pristine(template, tmp_path_factory):  # noqa: F811
    """The template's logits for IDS, from a copy converted alone."""
    return load_fast(fresh_copy(template, tmp_path_factory.mktemp("pristine"))).forward(IDS)


# ---------------------------------------------------------------------------
# Concurrent first loads, and the converted copy checked against its source
# ---------------------------------------------------------------------------

# Imports the loader once, then forks a child per line written to its stdin: "DIR\tPOINT\tMODE".
# Each child loads DIR and prints its pid and the hash of its logits for IDS. On the way, a
# converting load passes named points (POINTS, in order); at the child's POINT it prints
# "PID at:POINT" and then, by MODE: "kill" waits there to be killed, "hold FIFO" waits until
# the test opens FIFO for writing, "pass" goes on. So the test kills a load exactly where it
# means to, whatever the machine's load: events, never sleeps. One os.write per line: a print
# may be several writes (PYTHONUNBUFFERED), which the other processes' lines could split.
POINTS = ("checked",   # its first look found no sound copy; next: the lock (converting_alone)
          "waiting",   # another load holds the lock: about to wait for it
          "convert",   # holding the lock, the copy checked again and found wanting: converting
          "temp",      # the copy's temporary file made, empty
          "half",      # half of the tensors written to it
          "written",   # all written and flushed, not yet renamed into place
          "renamed",   # renamed into place, not yet recorded (model.blocked.json, weights/derived.py)
          "recorded")  # recorded: the copy is sound
ZYGOTE = r"""
import hashlib, os, signal, sys
from workbench.speed import accelerate
from weights import derived, files
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
stop = {"point": None, "mode": None}

def point(name):
    if name != stop["point"]:
        return
    os.write(1, f"{os.getpid()} at:{name}\n".encode())
    if stop["mode"] == "kill":
        while True:
            signal.pause()
    if stop["mode"].startswith("hold "):
        with open(stop["mode"][5:]) as f:  # blocks until the test opens it for writing
            f.read()

def before(name, f):
    return lambda *a, **k: (point(name), f(*a, **k))[1]

def after(name, f):
    return lambda *a, **k: (f(*a, **k), point(name))[0]

accelerate.converting_alone = before("checked", accelerate.converting_alone)
accelerate.convert = before("convert", accelerate.convert)
derived.bind = after("recorded", derived.bind)
temp_file = files.temp_file
files.temp_file = lambda path, *a: (temp_file(path, *a), point("temp") if path.endswith(accelerate.BLOCKED_FILE) else 0)[0]
layouts, to_memory_layout = [], accelerate.to_memory_layout
accelerate.to_memory_layout = lambda key, t: (layouts.append(key), point("half") if len(layouts) == 8 else 0,
                                              to_memory_layout(key, t))[2]
replace = os.replace
def replacing(src, dst, *a, **k):
    copy = str(dst).endswith(accelerate.BLOCKED_FILE)
    point("written") if copy else 0
    replace(src, dst, *a, **k)
    point("renamed") if copy else 0
os.replace = replacing
class Locks:
    def __getattr__(self, name):
        import fcntl
        return getattr(fcntl, name)
    def flock(self, fd, operation):
        import fcntl
        if not operation & fcntl.LOCK_NB:
            point("waiting")
        fcntl.flock(fd, operation)
accelerate.fcntl = Locks()

for line in sys.stdin:
    model_dir, stop["point"], stop["mode"] = line.rstrip("\n").split("\t")
    pid = os.fork()
    if pid == 0:
        try:
            logits = accelerate.load_fast(model_dir).forward(IDS)
            os.write(1, f"{os.getpid()} {hashlib.sha256(logits.tobytes()).hexdigest()}\n".encode())
        except BaseException as e:
            os.write(1, f"{os.getpid()} failed:{type(e).__name__}\n".encode())
            print(e, file=sys.stderr, flush=True)
        finally:
            os._exit(0)
    os.write(1, f"{pid} started\n".encode())
""".replace("IDS", repr(IDS))


class Loaders:
    """Processes loading model directories at once, each stopped, held or killed at a named point (ZYGOTE)."""

    def __init__(self, log_path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        # pid -> its lines in order: "started" (from the parent, which may come after the child's
        # first lines), "at:POINT", then the hash of its logits
        self.answers = collections.defaultdict(list)
        self.pending = b""

    def start(self, model_dir, point="", mode="pass"):  # -> the pid of a new process loading model_dir
        self.proc.stdin.write(f"{model_dir}\t{point}\t{mode}\n")
        self.proc.stdin.flush()
        while True:
            pid, answer = self.read()
            if answer == "started":
                return pid

    def final(self, pid):  # -> its last line once it has finished (a hash, or failed:...), else None
        done = [a for a in self.answers[pid] if a != "started" and not a.startswith("at:")]
        return done[0] if done else None

    def reaches(self, pid, point):
        """Wait until the process is at the point (True) or has finished without passing it (False)."""
        while f"at:{point}" not in self.answers[pid] and self.final(pid) is None:
            self.read()
        return f"at:{point}" in self.answers[pid]

    def result(self, pid):  # -> the hash the process printed
        while self.final(pid) is None:
            self.read()
        return self.final(pid)

    def read(self, timeout=120):  # -> (pid, answer) of the next line, recorded in self.answers
        # The pipe's bytes are read as they come, not through a buffered file
        # whose second line select() would not see.
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready = select.select([self.proc.stdout], [], [], max(deadline - time.monotonic(), 0))[0]
            chunk = os.read(self.proc.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                with open(self.log.name) as f:
                    pytest.fail(f"the loaders gave no answer:\n{f.read()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        assert len(line.split()) == 2, line
        pid, answer = line.decode().split()
        self.answers[int(pid)].append(answer)
        return int(pid), answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.log.close()


# Each round: (where the victim is killed, where the first survivor is held until then, or None)
KILLS = [(point, None) for point in POINTS if point != "waiting"] + [("waiting", "half")]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the loaders are forked (POSIX)")
def test_concurrent_first_loads_with_one_killed_never_leave_a_bad_converted_copy(tmp_path, capfd):
    # The fault: every writer used model.blocked.safetensors.tmp; a second writer's
    # open("wb") truncated the first one's file, which was then renamed into place
    # with a valid stamp, and a kill left it half zeros, trusted by every later run.
    # Here three processes load one fresh checkpoint at once and one of them is
    # killed at each point of a conversion in turn (POINTS), the others converting
    # before it, waiting for its lock or coming after: every survivor and every later
    # load must give the logits of a copy converted alone, without a note (a later
    # load removes nothing and rebuilds nothing), and the only temporary files left
    # are the killed writer's.
    model = make_model_dir(tmp_path / "model", seed=4, n_layer=2, tokenizer=False)
    expected = load_fast(fresh_copy(model, tmp_path / "alone")).forward(IDS)
    loaders = Loaders(tmp_path / "loaders.log")
    try:
        expected_hash = loaders.result(loaders.start(fresh_copy(model, tmp_path / "alone too")))
        for round_, (kill_at, hold_at) in enumerate(KILLS):
            model_dir = fresh_copy(model, tmp_path / f"round{round_}")
            held, fifo = None, str(tmp_path / f"go{round_}")
            if hold_at:  # a survivor first, converting, held at hold_at while the victim waits for its lock
                os.mkfifo(fifo)
                held = loaders.start(model_dir, hold_at, f"hold {fifo}")
                assert loaders.reaches(held, hold_at), round_
            victim = loaders.start(model_dir, kill_at, "kill")
            assert loaders.reaches(victim, kill_at), (round_, kill_at, loaders.answers[victim])
            waiting = None if held else loaders.start(model_dir, "waiting", "pass")  # blocked on the victim's lock, if it holds it
            if waiting:
                loaders.reaches(waiting, "waiting")  # or finished: the victim's copy was already recorded
            os.kill(victim, signal.SIGKILL)
            if held:
                with open(fifo, "w"):  # the survivor goes on
                    pass
            late = loaders.start(model_dir)  # and one after the kill
            for pid in (held or waiting, late):
                assert loaders.result(pid) == expected_hash, f"round {round_}: a concurrent load gave other logits"
            notes(capfd)
            np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), expected,
                                          err_msg=f"round {round_}: a later load gave other logits")
            assert notes(capfd) == [], f"round {round_} (killed at {kill_at}): a later load removed or rebuilt"
            leftovers = [f for f in temp_files(model_dir) if not f.startswith(f".speculative-gpt2-{victim}-")]
            assert leftovers == [], (round_, kill_at, leftovers)
    finally:
        loaders.close()


@pytest.mark.parametrize("damage", ["zero-filled", "half-written", "truncated", "other weights", "another source"])
def test_a_converted_copy_that_does_not_match_its_source_is_rebuilt(tmp_path, template, pristine, capfd, damage):
    model_dir = fresh_copy(template, tmp_path / "m")
    load_fast(model_dir)
    path = os.path.join(model_dir, BLOCKED_FILE)
    header, data = read_raw(path)
    if damage == "zero-filled":
        write_raw(path, header, bytes(len(data)))
    elif damage == "half-written":
        write_raw(path, header, data[:len(data) // 2] + bytes(len(data) - len(data) // 2))
    elif damage == "truncated":
        write_raw(path, header, data[:len(data) // 2])
    elif damage == "other weights":  # another model's conversion, stamped as this one's
        other = make_model_dir(tmp_path / "other", seed=9, n_layer=2, tokenizer=False)
        load_fast(other)
        other_header, other_data = read_raw(os.path.join(other, BLOCKED_FILE))
        write_raw(path, {**other_header, "__metadata__": header["__metadata__"]}, other_data)
    else:  # the checkpoint was replaced since
        write_raw(path, {**header, "__metadata__": {"source": "1:2:block16"}}, data)
    notes(capfd)
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    lines = notes(capfd)
    assert len(lines) == 1 and lines[0].startswith(f"note: {path}") and lines[0].endswith("; rebuilding it"), lines
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    assert notes(capfd) == []  # rebuilt once, trusted since


def test_a_sound_converted_copy_is_used_as_it_is(tmp_path, template, capfd):
    model_dir = fresh_copy(template, tmp_path / "m")
    load_fast(model_dir)
    before = os.stat(os.path.join(model_dir, BLOCKED_FILE))
    notes(capfd)
    load_fast(model_dir)
    after = os.stat(os.path.join(model_dir, BLOCKED_FILE))
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert notes(capfd) == []


def dead_pid():
    """The process id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def temp_name(pid, random="0123456789abcdef"):
    return f".speculative-gpt2-{pid}-{random}.tmp"


LOOKALIKES = ["notes.4000000-0badf00d.tmp", "x.99999999999999999999-00000000.tmp", ".writing-4000000-photos",
              temp_name(99999999999), temp_name(9999999999), temp_name(0), temp_name(4000000, "0badf00d"), temp_name("12x"),
              ".speculative-gpt2-4000000-0123456789abcdef.tmp.bak", "model.blocked.safetensors.4000000-0badf00d.tmp"]


def test_temporary_files_of_killed_writers_are_removed_by_a_writer_only_and_said(tmp_path, template, capfd):
    # Only this program's own temporary names (files.TEMP: its prefix, a process id in range, 64
    # random bits), only a killed process's, and only by a run that writes in that directory: a
    # load that finds a sound copy removes nothing; one that converts removes what killed ones left.
    model_dir = fresh_copy(template, tmp_path / "m")
    load_fast(model_dir)  # converted: from now on the loads only read
    dead, alive = (os.path.join(model_dir, temp_name(pid)) for pid in (dead_pid(), os.getppid()))
    for name in (dead, alive, *(os.path.join(model_dir, n) for n in LOOKALIKES)):
        if name.endswith("photos"):
            os.mkdir(name)
            name = os.path.join(name, "a.jpg")
        with open(name, "wb") as f:
            f.write(b"half a file, or the user's own")
    before = sorted(os.listdir(model_dir))
    notes(capfd)
    load_fast(model_dir)
    assert sorted(os.listdir(model_dir)) == before and notes(capfd) == []  # a load that only reads
    os.remove(os.path.join(model_dir, BLOCKED_FILE))
    load_fast(model_dir)  # converts: writes in the directory
    assert not os.path.exists(dead)  # a killed writer's
    assert os.path.exists(alive)  # a live process's: perhaps writing it now
    assert all(os.path.exists(os.path.join(model_dir, n)) for n in LOOKALIKES)  # not ours
    said = notes(capfd)
    assert len(said) == 1 and said[0].startswith(f"note: removed {dead}, left by a run that was stopped"), said


def test_without_file_locks_loads_convert_side_by_side(tmp_path, template, pristine, capfd, monkeypatch):
    monkeypatch.setattr(accelerate, "fcntl", None)  # no flock: each load converts for itself, whole files of its own
    model_dir = fresh_copy(template, tmp_path / "m")
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    assert notes(capfd) == [] and os.path.exists(os.path.join(model_dir, accelerate.RECORD_FILE))


def test_where_files_have_no_change_time_the_conversion_is_made_in_memory(tmp_path, template, pristine, capfd,
                                                                         monkeypatch):
    monkeypatch.setattr(accelerate, "CHANGE_TIME", False)  # Windows: st_ctime is the creation time
    model_dir = fresh_copy(template, tmp_path / "m")
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    assert sorted(os.listdir(model_dir)) == ["config.json", "model.safetensors"] and notes(capfd) == []


def test_replacing_a_mapped_file_refused_windows_falls_back_to_memory(tmp_path, template, pristine, capfd, monkeypatch):
    # Windows refuses to replace a file another process has mapped.
    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", src, None, dst)

    model_dir = fresh_copy(template, tmp_path / "m")
    monkeypatch.setattr(checkpoint.os, "replace", refuse)
    notes(capfd)
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    lines = notes(capfd)
    assert len(lines) == 1 and "cannot write" in lines[0] and "converting in memory instead" in lines[0], lines
    assert temp_files(model_dir) == [] and not os.path.exists(os.path.join(model_dir, BLOCKED_FILE))


# ---------------------------------------------------------------------------
# A directory the copy cannot be written in
# ---------------------------------------------------------------------------

def test_a_converted_file_that_is_a_directory_gives_a_note_and_success(tmp_path, template, pristine, capfd):
    model_dir = fresh_copy(template, tmp_path)
    os.mkdir(os.path.join(model_dir, BLOCKED_FILE))
    notes(capfd)
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    lines = notes(capfd)
    assert len(lines) == 1 and lines[0].startswith(f"note: {os.path.join(model_dir, BLOCKED_FILE)} is a directory, "
                                                   "not a file this program wrote"), lines
    assert temp_files(model_dir) == [] and os.path.isdir(os.path.join(model_dir, BLOCKED_FILE))


@pytest.mark.parametrize("how", ["chmod", "simulated"])
def test_a_read_only_model_directory_converts_in_memory_with_one_note(tmp_path, template, pristine, capfd, monkeypatch, how):
    model_dir = fresh_copy(template, tmp_path / "m")
    binding = contextlib.nullcontext(True)
    if how == "chmod":
        if os.name != "posix":
            pytest.skip("POSIX permission bits")
        os.chmod(model_dir, 0o555)
        binding = permissions_binding_root()
    else:
        def refuse(path, mode="wb"):
            raise PermissionError(13, "Permission denied", path)
        monkeypatch.setattr(checkpoint.files, "temp_file", refuse)
    notes(capfd)
    try:
        with binding as bound:
            if not bound:
                pytest.skip("root writes into read-only directories, and cannot set that aside here")
            model = load_fast(model_dir)
    finally:
        os.chmod(model_dir, 0o755)
    np.testing.assert_array_equal(model.forward(IDS), pristine)
    lines = notes(capfd)
    assert len(lines) == 1 and "cannot write" in lines[0] and lines[0].endswith("converting in memory instead"), lines
    assert not os.path.exists(os.path.join(model_dir, BLOCKED_FILE))


# ---------------------------------------------------------------------------
# The Linux-only calls are optional
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("advice", ["MADV_HUGEPAGE", "MADV_RANDOM"])
def test_without_an_madvise_advice_loading_works_and_gives_the_same_logits(tmp_path, template, pristine, monkeypatch, advice):
    model_dir = fresh_copy(template, tmp_path)
    monkeypatch.delattr(mmap, advice, raising=False)  # Windows has neither, macOS no MADV_HUGEPAGE
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)  # converted
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)  # checked and mapped


def test_without_posix_fadvise_loading_works_and_gives_the_same_logits(tmp_path, template, pristine, monkeypatch):
    model_dir = fresh_copy(template, tmp_path)
    monkeypatch.delattr(os, "posix_fadvise", raising=False)  # Windows and macOS have none
    np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="needs posix_fadvise")
def test_after_a_conversion_the_checkpoint_pages_are_let_go_once(tmp_path, template, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: calls.append(advice))
    model_dir = fresh_copy(template, tmp_path)
    load_fast(model_dir)
    load_fast(model_dir)  # no conversion: nothing to let go
    assert calls == [os.POSIX_FADV_DONTNEED]
