"""checkpoint.py: every file checked before it is trusted, atomic writes beside other
writers, and a converted copy that is never trusted more than its source."""

import collections
import contextlib
import json
import mmap
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

from fixtures import ROOT, make_model_dir, save_tensors
from permissions import permissions_binding_root
from workbench.speed import accelerate
from workbench.speed.accelerate import BLOCKED_FILE, load_fast
from weights import checkpoint, reading
from weights.checkpoint import CheckpointError

IDS = [5, 0, 17, 200, 3, 99, 41, 7]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A small checkpoint (config.json + model.safetensors) that tests copy, never convert in place."""
    return make_model_dir(tmp_path_factory.mktemp("template"), seed=3, n_layer=2, tokenizer=False)


@pytest.fixture(scope="module")
def pristine(template, tmp_path_factory):
    """The template's logits for IDS, from a copy converted alone."""
    return load_fast(fresh_copy(template, tmp_path_factory.mktemp("pristine"))).forward(IDS)


def fresh_copy(src, dest):
    """A copy of src's config.json and model.safetensors in dest, not converted yet."""
    os.makedirs(dest, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(src, name), dest)
    return str(dest)


def read_raw(path):
    """(parsed header, data bytes) of a .safetensors file, unchecked."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), f.read()


def write_raw(path, header, data):
    """A .safetensors file from a header (any JSON value, or bytes) and data bytes, unchecked."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def edit_config(model_dir, **changes):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(changes)
    with open(path, "w") as f:
        json.dump(config, f)


def notes(capfd):
    """The lines the loads since the last call wrote on stderr."""
    return capfd.readouterr().err.strip().splitlines()


def temp_files(model_dir):
    return sorted(f for f in os.listdir(model_dir) if f.endswith(".tmp"))  # files.TEMP's, and any other


# ---------------------------------------------------------------------------
# Fault 1: concurrent first loads, and the converted copy checked against its source
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


def test_two_writers_of_one_file_never_share_a_temporary_file(tmp_path):
    # The same fault, deterministically: a second writer runs to completion while
    # the first is half-way through its own write of the same path.
    path = str(tmp_path / "x.safetensors")
    first = {f"t{i}": np.full((64, 64), i + 1, np.float32) for i in range(6)}
    second = {k: -t for k, t in first.items()}

    def first_tensor(name):
        if name == "t3":
            save_tensors(path, second)
        return first[name]

    checkpoint.save_safetensors(path, {k: t.shape for k, t in first.items()}, first_tensor)
    got = checkpoint.load_safetensors(path)
    assert all(np.array_equal(got[k], first[k]) for k in first)  # the last rename wins, whole
    assert temp_files(tmp_path) == []


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


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = str(tmp_path / "x.safetensors")
    save_tensors(path, {"a": np.ones(4, np.float32)})

    def tensor(name):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_safetensors(path, {"a": (4,)}, tensor)
    assert temp_files(tmp_path) == []
    assert np.array_equal(checkpoint.load_safetensors(path)["a"], np.ones(4, np.float32))


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
# Fault 2: one validation pass per file type
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def raw_checkpoint(template):
    return read_raw(os.path.join(template, "model.safetensors"))


def broken_header(header, change):
    """A copy of a checkpoint header with `change` applied to it (a function of the copy, or a new header)."""
    header = json.loads(json.dumps(header))
    return change(header) if callable(change) else change


def set_field(name, field, value):
    def change(header):
        header[name][field] = value
        return header
    return change


FIRST, SECOND, LAST = "wte.weight", "wpe.weight", "h.1.mlp.c_proj.bias"
BAD_HEADERS = {
    "a list": ([], "a list, not an object"),
    "null": (None, "null, not an object"),
    "a string": ("F32", "a string, not an object"),
    "entry a list": (lambda h: {**h, FIRST: [1, 2]}, "entry is a list"),
    "entry null": (lambda h: {**h, FIRST: None}, "entry is null"),
    "offsets strings": (set_field(FIRST, "data_offsets", ["0", "100"]), "data_offsets must be two integers"),
    "offsets floats": (set_field(FIRST, "data_offsets", [0.0, 69632.0]), "data_offsets must be two integers"),
    "offsets booleans": (set_field(FIRST, "data_offsets", [False, True]), "data_offsets must be two integers"),
    "offsets three": (set_field(FIRST, "data_offsets", [0, 4, 8]), "data_offsets must be two integers"),
    "offsets negative": (set_field(FIRST, "data_offsets", [-4, 69628]), "negative or reversed"),
    "offsets reversed": (lambda h: set_field(FIRST, "data_offsets", h[FIRST]["data_offsets"][::-1])(h), "negative or reversed"),
    "offsets misaligned": (lambda h: set_field(SECOND, "data_offsets", [o + 2 for o in h[SECOND]["data_offsets"]])(h),
                           "not a multiple of F32's 4 bytes"),
    "offsets overlapping": (lambda h: set_field(SECOND, "data_offsets", [o - 4 for o in h[SECOND]["data_offsets"]])(h),
                            "overlap or leave a gap"),
    "aliasing another tensor": (lambda h: set_field(LAST, "data_offsets", h["h.1.ln_2.bias"]["data_offsets"])(h),
                                "overlap or leave a gap"),
    "leaving the tail unused": (lambda h: set_field(LAST, "data_offsets", h["h.1.ln_2.bias"]["data_offsets"])(
                                    {k: v for k, v in h.items() if k != "h.1.ln_2.bias"}), "after the last tensor"),
    "beyond the file": (lambda h: set_field(LAST, "data_offsets", [o + 256 for o in h[LAST]["data_offsets"]])(h), "truncated"),
    "shape negative": (set_field(FIRST, "shape", [-272, -64]), "shape must be a list of non-negative integers"),
    "shape float": (set_field(FIRST, "shape", [272.0, 64]), "shape must be a list of non-negative integers"),
    "shape string": (set_field(FIRST, "shape", "272x64"), "shape must be a list of non-negative integers"),
    "shape overflowing int64": (set_field(FIRST, "shape", [2 ** 40, 2 ** 40, 0]), "too big for any array"),
    "shape wrong size": (set_field(FIRST, "shape", [64, 64]), "has 69632 bytes, not the 16384"),
    "dtype unknown": (set_field(FIRST, "dtype", "F33"), 'unknown dtype "F33"'),
    "dtype a number": (set_field(FIRST, "dtype", 32), "unknown dtype 32"),
    "dtype missing": (lambda h: {**h, FIRST: {k: v for k, v in h[FIRST].items() if k != "dtype"}}, "unknown dtype null"),
    "dtype not a float": (set_field(FIRST, "dtype", "I32"), "has dtype I32; supported: F32, F16, BF16"),
    "metadata a list": (lambda h: {**h, "__metadata__": ["source"]}, "__metadata__ must map names to strings"),
}


@pytest.mark.parametrize("case", BAD_HEADERS)
def test_a_bad_safetensors_header_is_a_checkpoint_error_naming_file_field_and_problem(tmp_path, template, raw_checkpoint, case):
    change, message = BAD_HEADERS[case]
    header, data = raw_checkpoint
    assert header[FIRST]["data_offsets"] == [0, 69632] and header[FIRST]["shape"] == [272, 64]  # what the cases assume
    model_dir = fresh_copy(template, tmp_path)
    path = os.path.join(model_dir, "model.safetensors")
    write_raw(path, broken_header(header, change), data)
    with pytest.raises(CheckpointError) as e:
        load_fast(model_dir)
    assert str(e.value).startswith(path) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("prefix", [b"", b"\x08\x00", (2 ** 64 - 1).to_bytes(8, "little"), (10 ** 6).to_bytes(8, "little")])
def test_a_bad_header_length_is_a_checkpoint_error(tmp_path, prefix):
    path = str(tmp_path / "x.safetensors")
    with open(path, "wb") as f:
        f.write(prefix)
    with pytest.raises(CheckpointError, match="not a safetensors file|truncated"):
        checkpoint.load_safetensors(path)


@pytest.mark.parametrize("text", [b"{", b'{"a": ' * 100_000, b"\xff\xfe{}", b"\x80{}"],
                         ids=["unclosed", "nested 100000 deep", "utf-16", "not utf-8"])
def test_a_header_that_is_not_json_is_a_checkpoint_error(tmp_path, text):
    path = str(tmp_path / "x.safetensors")
    write_raw(path, text, b"")
    with pytest.raises(CheckpointError, match="corrupt safetensors header"):
        checkpoint.load_safetensors(path)


def test_a_deeply_nested_header_is_a_checkpoint_error(tmp_path):
    path = str(tmp_path / "x.safetensors")
    write_raw(path, b"[" * 200_000 + b"]" * 200_000, b"")
    with pytest.raises(CheckpointError, match="corrupt safetensors header"):
        checkpoint.load_safetensors(path)


BAD_CONFIGS = {
    "a list": ([], "a list, not an object of settings"),
    "null": (None, "null, not an object of settings"),
    "n_head 0": ({"n_head": 0}, "n_head must be a positive integer, not 0"),
    "n_head negative": ({"n_head": -4}, "n_head must be a positive integer, not -4"),
    "n_layer 0": ({"n_layer": 0}, "n_layer must be a positive integer, not 0"),
    "n_layer negative": ({"n_layer": -2}, "n_layer must be a positive integer, not -2"),
    "n_layer fractional": ({"n_layer": 2.5}, "n_layer must be a positive integer, not 2.5"),
    "n_layer a float": ({"n_layer": 2.0}, "n_layer must be a positive integer, not 2.0"),
    "n_layer a string": ({"n_layer": "2"}, 'n_layer must be a positive integer, not "2"'),
    "n_layer a boolean": ({"n_layer": True}, "n_layer must be a positive integer, not true"),
    "n_embd 0": ({"n_embd": 0}, "n_embd must be a positive integer, not 0"),
    "n_embd fractional": ({"n_embd": 64.5}, "n_embd must be a positive integer"),
    "vocab_size negative": ({"vocab_size": -1}, "vocab_size must be a positive integer"),
    "vocab_size fractional": ({"vocab_size": 271.5}, "vocab_size must be a positive integer"),
    "n_positions 0": ({"n_positions": 0}, "n_positions must be a positive integer"),
    "n_positions missing": ({"n_positions": None}, "n_positions is missing"),
    "layer_norm_epsilon NaN": ({"layer_norm_epsilon": float("nan")}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon infinite": ({"layer_norm_epsilon": float("inf")}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon negative": ({"layer_norm_epsilon": -1e-5}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon zero": ({"layer_norm_epsilon": 0}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon 0 in float32": ({"layer_norm_epsilon": 1e-50}, "within float32's range"),
    "layer_norm_epsilon a string": ({"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon must be a positive number"),
    "n_embd not a multiple of n_head": ({"n_head": 5}, "n_embd 64 is not a multiple of n_head 5"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_a_bad_config_is_a_checkpoint_error_naming_file_field_and_problem(tmp_path, template, case):
    changes, message = BAD_CONFIGS[case]
    model_dir = fresh_copy(template, tmp_path)
    path = os.path.join(model_dir, "config.json")
    if isinstance(changes, dict):
        edit_config(model_dir, **changes)
    else:
        with open(path, "w") as f:
            json.dump(changes, f)
    with pytest.raises(CheckpointError) as e:
        load_fast(model_dir)
    assert str(e.value).startswith(path) and message in str(e.value), str(e.value)


def test_a_config_of_a_billion_layers_fails_at_once_without_memory(tmp_path, template):
    # It used to build the expected shapes of 10**9 layers, growing until the OOM killer came.
    model_dir = fresh_copy(template, tmp_path)
    edit_config(model_dir, n_layer=10 ** 9)
    config = checkpoint.load_config(model_dir)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=r"tensor h\.2\.ln_1\.weight is missing \(config.json says n_layer=1000000000\)"):
            accelerate.converted_weights(model_dir, config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_a_config_with_fewer_layers_than_the_checkpoint_is_refused_naming_the_extra_tensors(tmp_path, template):
    model_dir = fresh_copy(template, tmp_path)
    edit_config(model_dir, n_layer=1)
    with pytest.raises(CheckpointError, match=r"config.json \(n_layer=1\) leaves unused: h\.1\.ln_1\.weight, h\.1\.ln_1\.bias, "
                                              r"h\.1\.attn\.c_attn\.weight, h\.1\.attn\.c_attn\.bias and 8 more"):
        load_fast(model_dir)


def test_an_unknown_extra_tensor_is_refused(tmp_path, template):
    tensors = {k: np.array(v) for k, v in checkpoint.load_safetensors(os.path.join(template, "model.safetensors")).items()}
    tensors["h.0.mlp.gate.weight"] = np.ones((4, 4), np.float32)
    model_dir = fresh_copy(template, tmp_path)
    save_tensors(os.path.join(model_dir, "model.safetensors"), tensors)
    with pytest.raises(CheckpointError, match=r"leaves unused: h\.0\.mlp\.gate\.weight$"):
        load_fast(model_dir)


@pytest.mark.parametrize("lm_head", ["tied", "untied", "another shape"])
def test_known_harmless_extras_load_identically_and_an_untied_lm_head_is_refused(tmp_path, template, pristine, lm_head):
    tensors = checkpoint.load_safetensors(os.path.join(template, "model.safetensors"))
    extended = {"transformer." + k: np.array(v) for k, v in tensors.items()}
    extended["transformer.h.0.attn.bias"] = np.ones((1, 1, 4, 4), np.float32)  # old checkpoints carry the mask...
    extended["transformer.h.1.attn.masked_bias"] = np.full((), -1e4, np.float32)  # ...and its fill value
    extended["lm_head.weight"] = {"tied": np.array(tensors["wte.weight"]), "untied": np.array(tensors["wte.weight"]) * 2,
                                  "another shape": np.ones((4, 64), np.float32)}[lm_head]
    model_dir = fresh_copy(template, tmp_path)
    save_tensors(os.path.join(model_dir, "model.safetensors"), extended)
    if lm_head == "tied":
        np.testing.assert_array_equal(load_fast(model_dir).forward(IDS), pristine)
    else:
        with pytest.raises(CheckpointError, match="lm_head.weight is not wte.weight"):
            load_fast(model_dir)


def test_transformer_prefix_and_extra_buffers_load_identically(tmp_path, tiny_dirs, oracle):
    tensors = checkpoint.load_safetensors(os.path.join(tiny_dirs["oracle"], "model.safetensors"))
    prefixed = {"transformer." + k: np.array(v) for k, v in tensors.items()}
    prefixed["transformer.h.0.attn.bias"] = np.ones((1, 1, 4, 4), np.float32)  # old checkpoints carry the mask
    os.makedirs(tmp_path / "m")
    shutil.copy(os.path.join(tiny_dirs["oracle"], "config.json"), tmp_path / "m")
    save_tensors(str(tmp_path / "m" / "model.safetensors"), prefixed)
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    np.testing.assert_array_equal(load_fast(str(tmp_path / "m")).forward(ids), oracle.forward(ids))


def test_half_precision_checkpoints_load_as_float32(tmp_path, template):
    tensors = checkpoint.load_safetensors(os.path.join(template, "model.safetensors"))
    header, _ = read_raw(os.path.join(template, "model.safetensors"))
    for dtype, as_bits in (("F16", lambda t: t.astype(np.float16).view(np.uint16)),
                           ("BF16", lambda t: (t.view(np.uint32) >> 16).astype(np.uint16))):
        half, data, offset = {}, b"", 0
        for name in header:
            if name != "__metadata__":
                bits = as_bits(np.array(tensors[name]))
                half[name] = {"dtype": dtype, "shape": list(bits.shape), "data_offsets": [offset, offset + bits.nbytes]}
                data, offset = data + bits.tobytes(), offset + bits.nbytes
        model_dir = fresh_copy(template, tmp_path / dtype)
        write_raw(os.path.join(model_dir, "model.safetensors"), half, data)
        loaded = checkpoint.load_safetensors(os.path.join(model_dir, "model.safetensors"))
        assert all(t.dtype == np.float32 for t in loaded.values())
        np.testing.assert_allclose(loaded["wte.weight"], tensors["wte.weight"], rtol=1e-2)
        assert np.isfinite(load_fast(model_dir).forward(IDS)).all()
        # A load that checks the converted copy widens only the values it samples, not the whole file.
        config = checkpoint.load_config(model_dir)
        sampled = checkpoint.checkpoint_tensors(os.path.join(model_dir, "model.safetensors"), config, sampled=True)
        full = checkpoint.checkpoint_tensors(os.path.join(model_dir, "model.safetensors"), config)
        for key, t in sampled.items():
            assert isinstance(t, checkpoint.Widened) and t.shape == full[key].shape
            np.testing.assert_array_equal(checkpoint.sampled_values(t), checkpoint.sampled_values(full[key]))
            np.testing.assert_array_equal(checkpoint.sampled_values(t.T), checkpoint.sampled_values(full[key].T))


def test_truncated_checkpoint_names_the_file(tmp_path):
    d = make_model_dir(tmp_path, tokenizer=False)
    path = os.path.join(d, "model.safetensors")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CheckpointError, match="model.safetensors: truncated"):
        load_fast(d)


def test_garbage_checkpoint_is_a_clear_error(tmp_path):
    d = make_model_dir(tmp_path, tokenizer=False)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(b"<html>not found</html>")
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load_fast(d)


def test_checkpoint_that_does_not_match_config(tmp_path):
    d = make_model_dir(tmp_path, tokenizer=False)
    edit_config(d, n_embd=128)
    with pytest.raises(CheckpointError, match=r"wte.weight has shape \[\d+, 64\], config.json implies \[\d+, 128\]"):
        load_fast(d)


def test_checkpoint_with_a_missing_layer(tmp_path):
    d = make_model_dir(tmp_path, tokenizer=False)
    edit_config(d, n_layer=5)
    with pytest.raises(CheckpointError, match="h.2.ln_1.weight is missing"):
        load_fast(d)


# ---------------------------------------------------------------------------
# Fault 4: mutated headers and configs, through the loader
# ---------------------------------------------------------------------------

BAD_VALUES = [0, -1, 1, 2.5, 3.0, "7", None, True, [], {}, [1, 2], 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, -(2 ** 63),
              float("nan"), float("inf"), 1e-50, 1e50]


def mutate_header(header, rng):
    """A header with one random mutation (rng: random.Random), as bytes or a JSON value."""
    header = json.loads(json.dumps(header))
    names = [n for n in header if n != "__metadata__"]
    name, field = rng.choice(names), rng.choice(["dtype", "shape", "data_offsets"])
    kind = rng.randrange(9)
    if kind == 0:  # flip bytes in the JSON text
        text = bytearray(json.dumps(header).encode())
        for _ in range(rng.randint(1, 3)):
            text[rng.randrange(len(text))] ^= rng.randrange(1, 256)
        return bytes(text)
    if kind == 1:  # a number becomes something else
        value = header[name][field]
        if isinstance(value, list) and value:
            value[rng.randrange(len(value))] = rng.choice(BAD_VALUES + [-v for v in value] + [v + 4 for v in value])
        else:
            header[name][field] = rng.choice(BAD_VALUES)
    elif kind == 2:  # a field or a tensor dropped
        if rng.random() < 0.5:
            del header[name][field]
        else:
            del header[name]
    elif kind == 3:  # an entry, or the header itself, of another type
        value = rng.choice(BAD_VALUES)
        if rng.random() < 0.2:
            return value
        header[name] = value
    elif kind == 4:
        header[name]["dtype"] = rng.choice(["F16", "BF16", "F64", "I64", "BOOL", "F8_E4M3", "f32", "", "F32 "])
    elif kind == 5:  # two tensors' bytes swapped
        other = rng.choice(names)
        header[name]["data_offsets"], header[other]["data_offsets"] = header[other]["data_offsets"], header[name]["data_offsets"]
    elif kind == 6:  # a tensor's bytes moved
        shift = rng.choice([-8, -4, -2, 2, 4, 8, 1 << 20])
        header[name]["data_offsets"] = [o + shift for o in header[name]["data_offsets"]]
    elif kind == 7:  # a shape reshuffled
        header[name]["shape"] = rng.choice([header[name]["shape"][::-1], header[name]["shape"] + [1],
                                            header[name]["shape"][1:], [0] + header[name]["shape"]])
    else:
        header["__metadata__"] = rng.choice(BAD_VALUES + [{"source": 1}, {"a": "b"}])
    return header


def mutate_config(config, rng):
    """A config with one random mutation, as text."""
    config = dict(config)
    key = rng.choice(["n_layer", "n_head", "n_embd", "vocab_size", "n_positions", "n_ctx", "layer_norm_epsilon"])
    kind = rng.randrange(4)
    if kind == 0:
        text = bytearray(json.dumps(config).encode())
        text[rng.randrange(len(text))] ^= rng.randrange(1, 128)
        return text.decode("utf-8", "replace")
    if kind == 1:
        config[key] = rng.choice(BAD_VALUES)
    elif kind == 2:
        config.pop(key, None)
    else:
        config[key] = rng.choice([2 * config.get(key, 1), config.get(key, 1) + 1, 10 ** 9, 10 ** 18])
    return json.dumps(rng.choice(BAD_VALUES) if rng.random() < 0.05 else config)


def load_measured(model_dir):
    """(outcome, peak bytes allocated): the weights or the CheckpointError of loading model_dir."""
    tracemalloc.start()
    try:
        config = checkpoint.load_config(model_dir)
        return accelerate.converted_weights(model_dir, config), tracemalloc.get_traced_memory()[1]
    except CheckpointError as e:
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_mutated_headers_and_configs_give_a_checkpoint_error_or_load_without_allocating_the_file(tmp_path):
    model_dir = make_model_dir(tmp_path / "fuzz", seed=5, n_layer=2, n_embd=32, n_positions=32, tokenizer=False)
    path, config_path = os.path.join(model_dir, "model.safetensors"), os.path.join(model_dir, "config.json")
    header, data = read_raw(path)
    with open(config_path) as f:
        config = json.load(f)
    file_size = os.path.getsize(path)
    load_measured(model_dir)  # what a first load in a process allocates once (lazy imports, caches) is not the file's doing
    rng = random.Random(1)
    outcomes = {"error": 0, "loaded": 0}
    for case in range(500):
        if case < 300:
            write_raw(path, mutate_header(header, rng), data)
        else:
            write_raw(path, header, data)
            with open(config_path, "w") as f:
                f.write(mutate_config(config, rng))
        if os.path.exists(os.path.join(model_dir, BLOCKED_FILE)):
            os.remove(os.path.join(model_dir, BLOCKED_FILE))
        outcome, peak = load_measured(model_dir)
        assert peak < file_size, f"case {case}: {peak} bytes allocated for a file of {file_size}"
        if isinstance(outcome, CheckpointError):
            assert str(outcome).startswith((path, config_path)), f"case {case}: {outcome}"
            outcomes["error"] += 1
        else:
            shapes = checkpoint.expected_shapes(checkpoint.load_config(model_dir))
            assert {k: np.asarray(w).shape for k, w in outcome.items()} == shapes, f"case {case}"
            outcomes["loaded"] += 1
    with open(config_path, "w") as f:
        json.dump(config, f)
    assert outcomes["error"] > 300 and outcomes["loaded"] > 10, outcomes  # both kinds were exercised


# ---------------------------------------------------------------------------
# Fault 5: other OSErrors
# ---------------------------------------------------------------------------

@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_an_unreadable_checkpoint_is_a_checkpoint_error_with_its_path(tmp_path, template):
    model_dir = fresh_copy(template, tmp_path)
    os.chmod(os.path.join(model_dir, "model.safetensors"), 0)
    with permissions_binding_root() as binding:
        if not binding:
            pytest.skip("root reads files whatever their permissions, and cannot set that aside here")
        with pytest.raises(CheckpointError, match="model.safetensors: cannot read it"):
            load_fast(model_dir)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_an_unreadable_file_is_a_checkpoint_error_with_its_path(tmp_path, template, monkeypatch, name):
    # Simulated, since tests may run as root, whom permissions do not stop. Every file from outside is
    # opened by weights/reading.py, with os.open.
    real_open = os.open

    def deny(path, *args, **kwargs):
        if str(path).endswith(name):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    model_dir = fresh_copy(template, tmp_path)
    monkeypatch.setattr(reading.os, "open", deny)
    with pytest.raises(CheckpointError, match=f"{name}: cannot read it.*Permission denied"):
        load_fast(model_dir)


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
# Fault 6: the Linux-only calls are optional
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


# ---------------------------------------------------------------------------
# What the user sees
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"n_layer": 10 ** 9}, {"n_layer": 1}, {"layer_norm_epsilon": float("nan")}, []],
                         ids=["a billion layers", "fewer layers", "epsilon NaN", "a list"])
def test_a_bad_checkpoint_is_one_line_from_the_command_line(tmp_path, tiny_dirs, change):
    model_dir = str(tmp_path / "oracle")
    shutil.copytree(tiny_dirs["oracle"], model_dir, ignore=shutil.ignore_patterns(BLOCKED_FILE))
    if isinstance(change, dict):
        edit_config(model_dir, **change)
    else:
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(change, f)
    r = subprocess.run([sys.executable, "speculative.py", "the cat", "-n", "4", "--draft", tiny_dirs["draft"],
                        "--oracle", model_dir], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and model_dir in errors[0], r.stderr
