"""Nothing outside the project's files is touched, no server is trusted, no terminal is written into: the third
attack pass (every name the project writes, every read bounded, one guard per program), each case reproduced, then
held. The first two passes: test_security.py; the fourth: test_security_fourth_pass.py."""

import contextlib
import io
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from workbench import session
from workbench.settings import Settings
from fixtures import ROOT
from weights import download as downloader
from weights import files
from weights.download import DownloadError
from test_security import ESC, hub, one_line_error, pair, run  # noqa: F401 (hub, pair: fixtures)

pytestmark = pytest.mark.slow  # as test_security.py is (conftest.py's SLOW_FILES)


# ---------------------------------------------------------------------------
# The third pass (issue 33): every name the project writes, every read bounded, one guard per program
# ---------------------------------------------------------------------------

LIMITED = """import resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a read without a bound ends here, not in the machine's RAM
sys.path.insert(0, {root!r})
"""


def limited(code, *args, timeout=60, env=None, cwd=ROOT):
    """Run code in a child with at most 3 GB of address space and a deadline: what was unbounded fails
    there (MemoryError, or the deadline for a FIFO that never ends), the test's process untouched."""
    try:
        return subprocess.run([sys.executable, "-c", LIMITED.format(root=ROOT) + code, *map(str, args)], cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s (a FIFO waited on, a file read without end)")


def copy_model(source, dest):
    import shutil
    shutil.copytree(source, dest)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(dest, "model.blocked.safetensors"))
    return str(dest)


def snapshot(path):
    """What a victim is: its bytes, or its kind for a FIFO or a socket (never opened)."""
    mode = os.lstat(path).st_mode
    if stat.S_ISREG(mode):
        with open(path, "rb") as f:
            return f.read()
    return stat.S_IFMT(mode)


@pytest.mark.parametrize("victim_kind", ["file", "fifo", "socket"])
def test_33_1_a_link_at_the_converted_copys_name_is_never_followed(tiny_dirs, tmp_path, victim_kind):
    model = copy_model(tiny_dirs["draft"], tmp_path / "ckpt")
    victim = tmp_path / "victim"
    sock = None
    if victim_kind == "file":
        victim.write_bytes(b"the user's own file\n")
    elif victim_kind == "fifo":
        os.mkfifo(victim)
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(victim))
    before = snapshot(victim)
    os.symlink(victim, os.path.join(model, "model.blocked.safetensors"))
    try:
        r = limited("from workbench.speed.accelerate import load_fast; load_fast(sys.argv[1])", model, timeout=30)
    finally:
        if sock:
            sock.close()
    assert r.returncode == 0, r.stderr
    assert snapshot(victim) == before  # byte for byte; a FIFO still a FIFO, a socket still a socket
    assert os.path.islink(os.path.join(model, "model.blocked.safetensors"))
    assert "is a link, not a file this program wrote" in r.stderr and "converting in memory instead" in r.stderr


def test_33_1_a_link_in_a_demo_models_directory_is_named_not_followed(tmp_path):
    from weights import demo_pair
    draft_dir, _ = demo_pair.build_pair(str(tmp_path / "models"))
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's own file\n")
    os.symlink(victim, os.path.join(draft_dir, "model.blocked.safetensors"))
    r = limited("from workbench.speed.accelerate import load_fast; load_fast(sys.argv[1])", draft_dir, timeout=60)
    assert r.returncode == 0 and victim.read_bytes() == b"the user's own file\n", r.stderr
    assert "demo-draft/model.blocked.safetensors is a link" in r.stderr


def test_33_1_the_programs_run_with_a_link_there_and_name_it(tiny_dirs, tmp_path):
    model = copy_model(tiny_dirs["draft"], tmp_path / "ckpt")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"echo hello\n")
    os.symlink(victim, os.path.join(model, "model.blocked.safetensors"))
    from workbench.speed import plan as planning
    planning.write(str(model), planning.Plan({r: "fast" for r in planning.ROWS}, {}))  # a plan that maps the copy
    r = run("workbench.py", "hi", "--draft", model, "--oracle", tiny_dirs["oracle"], "-n", "4")
    assert r.returncode == 0 and victim.read_bytes() == b"echo hello\n", r.stderr
    assert "model.blocked.safetensors is a link" in r.stderr


def tokenizer_dir(tiny_dirs, tmp_path):
    import shutil
    folder = tmp_path / "tok"
    folder.mkdir()
    for name in ("vocab.json", "merges.txt", "config.json"):
        shutil.copy(os.path.join(tiny_dirs["draft"], name), folder / name)
    return folder


@pytest.mark.parametrize("name,how", [("merges.txt", "dev-zero"), ("merges.txt", "fifo"), ("vocab.json", "sparse"),
                                      ("config.json", "sparse"), ("vocab.json", "dev-zero")])
def test_33_2_tokenizer_and_config_files_are_read_with_a_bound(tiny_dirs, tmp_path, name, how):
    folder = tokenizer_dir(tiny_dirs, tmp_path)
    path = folder / name
    path.unlink()
    if how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as f:  # 1 GB that takes no disk
            f.truncate(1 << 30)
    code = ("from weights import checkpoint, tokenizer\n"
            "from errors import UserError\n"
            "try:\n"
            "    tokenizer.load_tokenizer(sys.argv[1]) if sys.argv[2] != 'config.json' else checkpoint.load_config(sys.argv[1])\n"
            "except UserError as e:\n"
            "    print(e)\n")
    r = limited(code, folder, name, timeout=30)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    expected = {"dev-zero": "is a character device, not a file", "fifo": "is a pipe, not a file",
                "sparse": "more than the"}[how]
    assert name in r.stdout and expected in r.stdout, r.stdout


def test_33_suspected_a_huge_safetensors_header_is_refused_before_it_is_parsed(tmp_path):
    from weights import checkpoint
    path = tmp_path / "model.safetensors"
    header = b'{"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}' + b" " * (20 << 20) + b"}"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    start = time.perf_counter()
    with pytest.raises(checkpoint.CheckpointError, match="bad header length"):
        checkpoint.open_safetensors(str(path))
    assert time.perf_counter() - start < 1


def test_33_3_the_downloader_stores_no_small_file_past_its_bound(hub, tmp_path):
    from weights import reading
    big = b'{"n_layer": 1' + b" " * (reading.LIMITS["config.json"] + 10) + b"}"
    hub["files"]["config.json"] = big
    with pytest.raises(DownloadError, match="config.json: the server announced .* more than a config.json may have"):
        downloader.download("gpt2", str(tmp_path))
    assert not any(m == "GET" and p.endswith("config.json") for m, p, _ in hub["log"])  # refused before a byte came
    hub["unsized"] = True  # no Content-Length: stopped at the bound, as it arrives
    with pytest.raises(DownloadError, match="config.json: the server sent more than .* bytes"):
        downloader.download("gpt2", str(tmp_path))
    assert not (tmp_path / "gpt2" / "config.json").exists() and not (tmp_path / "gpt2" / "config.json.incomplete").exists()


def suite_args(tiny_dirs, out):
    return ["suite", "--draft", tiny_dirs["draft"], "--oracle", tiny_dirs["oracle"], "--methods", "speculative",
            "-n", "1", "--rounds", "1", "--out", out]


@pytest.mark.parametrize("planted", ["link", "read-only", "directory", "fifo"])
def test_33_4_suite_outputs_are_checked_together_before_the_work(tiny_dirs, tmp_path, planted):
    out, victim = tmp_path / "out", tmp_path / "victim.md"
    out.mkdir()
    victim.write_text("the user's notes")
    (out / "suite.csv").write_text("an earlier run")
    target = out / {"link": "suite.md", "read-only": "suite.csv", "directory": "suite.html", "fifo": "suite.json"}[planted]
    if planted == "link":
        target.symlink_to(victim)
    elif planted == "read-only":
        target.chmod(0o444)
    elif planted == "directory":
        target.mkdir()
    else:
        os.mkfifo(target)
    r = run("workbench.py", "bench", *suite_args(tiny_dirs, out))
    one_line_error(r, "--out", "suite.", code=2)
    assert r.stdout == "" and victim.read_text() == "the user's notes" and (out / "suite.csv").read_text() == "an earlier run"
    assert sorted(os.listdir(out)) == sorted({"suite.csv", target.name})


def test_33_4_a_set_of_outputs_is_the_old_set_or_the_new_one(tmp_path, monkeypatch):
    for name in ("a.md", "b.csv", "c.html"):
        (tmp_path / name).write_text(f"old {name}")

    def fails(path):
        raise OSError(28, "No space left on device")

    writers = {"a.md": lambda p: files.write_text(p, "new a"), "b.csv": lambda p: files.write_text(p, "new b"),
               "c.html": fails}
    with pytest.raises(OSError):
        files.write_together(str(tmp_path), writers)
    assert sorted(os.listdir(tmp_path)) == ["a.md", "b.csv", "c.html"]
    assert [(tmp_path / n).read_text() for n in ("a.md", "b.csv", "c.html")] == ["old a.md", "old b.csv", "old c.html"]
    real_replace, calls = os.replace, []

    def third_rename_fails(src, dst):  # the third rename into place fails: the two already made are undone
        if not str(dst).endswith(".tmp"):
            calls.append(dst)
            if len(calls) == 3:
                raise OSError(5, "Input/output error", dst)
        return real_replace(src, dst)

    writers["c.html"] = lambda p: files.write_text(p, "new c")
    monkeypatch.setattr(files.os, "replace", third_rename_fails)
    with pytest.raises(OSError):
        files.write_together(str(tmp_path), writers)
    monkeypatch.undo()
    assert [(tmp_path / n).read_text() for n in ("a.md", "b.csv", "c.html")] == ["old a.md", "old b.csv", "old c.html"]
    assert sorted(os.listdir(tmp_path)) == ["a.md", "b.csv", "c.html"]
    files.write_together(str(tmp_path), writers)
    assert [(tmp_path / n).read_text() for n in ("a.md", "b.csv", "c.html")] == ["new a", "new b", "new c"]


def demo_with(models, timeout=60, env=None):
    try:
        return subprocess.run([sys.executable, os.path.join(ROOT, "demo.py"), "--models-dir", str(models)], cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"demo.py still running after {timeout} s")


@pytest.mark.parametrize("name", ["demo-draft", "demo-oracle"])
def test_33_5_a_fifo_at_a_demo_model_is_refused_not_waited_on(tmp_path, name):
    models = tmp_path / "models"
    models.mkdir()
    os.mkfifo(models / name)
    r = demo_with(models, timeout=30)
    one_line_error(r, name, "is a pipe", code=1)
    assert stat.S_ISFIFO(os.lstat(models / name).st_mode)


@pytest.mark.parametrize("command", ["/html", "/ablation"])
def test_33_6_a_nul_byte_in_a_session_path_is_one_line(tiny_dirs, command):
    out = io.StringIO()
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, Settings(max_new_tokens=2), out=out)
    s.handle("the cat")
    assert s.handle(f"{command} page\0.html") is True
    assert "cannot hold a NUL byte" in out.getvalue() and "\0" not in out.getvalue()


@pytest.mark.parametrize("sums", [b"0123\n", b"a b c\n", b"\xff\xfe\x00binary\n", "dev-zero"])
def test_33_7_an_edited_sha256sums_is_one_line(tmp_path, sums):
    path = tmp_path / "SHA256SUMS"
    if sums == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(sums)
    code = ("from weights import demo_pair\n"
            "demo_pair.ASSETS = sys.argv[1]\n"
            "try:\n"
            "    demo_pair.shipped_sums()\n"
            "except demo_pair.CheckpointError as e:\n"
            "    print(e)\n")
    r = limited(code, tmp_path, timeout=30)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "SHA256SUMS" in r.stdout and "git checkout" in r.stdout, r.stdout


def test_33_8_the_downloaders_line_escapes_the_models_directory(hub, tmp_path):
    r = run("download_weights.py", "gpt2", "--models-dir", tmp_path / f"models{ESC}")
    assert r.returncode == 0 and "\x1b" not in r.stdout + r.stderr and "models\\x1b[2J" in r.stdout, r.stdout + r.stderr


def test_33_8_names_in_wrote_lines_and_headers_are_escaped(tiny_dirs, tmp_path):
    draft = copy_model(tiny_dirs["related"], tmp_path / f"draft{ESC}")
    out = tmp_path / f"out{ESC}.csv"
    r = run("workbench.py", "bench", "ablation", "the cat", "--draft", draft, "--oracle", tiny_dirs["oracle"], "-n", "2", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "\\x1b[2J" in r.stdout and "\\x1b[2J" in r.stderr


def numpy_loaded(pid):
    """True once the process has mapped NumPy's core library: mid-way through a program's imports."""
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/maps") as f:
            return "_multiarray_umath" in f.read()
    return False


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="waits for NumPy's library in /proc/PID/maps (Linux)")
@pytest.mark.parametrize("script,args", [("demo.py", []), ("workbench.py", ["bench", "--quick"]),
                                         ("download_weights.py", ["gpt2"])])
def test_33_9_ctrl_c_while_a_program_loads_is_one_line(tmp_path, script, args):
    # Sent as soon as NumPy is mapped: the program is in the middle of its imports (Python's own start,
    # before the entry script's first line, is the one moment no script can cover: SECURITY.md).
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"}  # never the network, if it got that far
    where = ["--out", tmp_path / "o"] if args[:1] == ["bench"] else ["--models-dir", tmp_path / "m"]
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, script), *args, *map(str, where)], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not numpy_loaded(p.pid) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "error: interrupted" and p.returncode == 130, err


@pytest.mark.parametrize("command", [["ablation", "x"], ["suite"]])
def test_33_10_prompts_from_dev_zero_are_one_line(tiny_dirs, tmp_path, command):
    out = tmp_path / ("a.csv" if command[0] == "ablation" else "results")
    r = limited("import runpy; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
                os.path.join(ROOT, "workbench.py"), "bench", *command, "--prompts", "/dev/zero", "--draft", tiny_dirs["draft"],
                "--oracle", tiny_dirs["oracle"], "--out", out, timeout=30)
    one_line_error(r, "/dev/zero is a character device, not a file", code=1)


@pytest.mark.parametrize("planted", ["file", "link", "directory of its own"])
def test_33_11_a_users_file_at_a_demo_models_name_is_never_moved(tmp_path, planted, capsys):
    from weights import demo_pair
    models = tmp_path / "models"
    models.mkdir()
    victim, target = tmp_path / "victim.txt", models / "demo-oracle"
    victim.write_text("the user's own")
    if planted == "file":
        target.write_text("the user's own")
    elif planted == "link":
        target.symlink_to(victim)
    else:
        target.mkdir()
        (target / "notes.txt").write_text("the user's own")
    with pytest.raises(files.WriteError, match="demo-oracle.*(not a demo model this program wrote|which this program did not write)"):
        demo_pair.build_pair(str(models))
    assert sorted(os.listdir(models)) == ["demo-draft", "demo-oracle"]  # nothing moved aside, nothing hidden
    assert victim.read_text() == "the user's own" and os.path.lexists(target)
    kept = target / "notes.txt" if planted.startswith("directory") else target
    assert kept.read_text() == "the user's own"
    files.remove_stale(str(models))
    assert "note: removed" not in capsys.readouterr().err


def test_33_12_a_full_disk_names_the_destination(tmp_path):
    code = ("import runpy\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "sys.argv = [sys.argv[1], '--models-dir', sys.argv[2]]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    r = limited(code, os.path.join(ROOT, "demo.py"), tmp_path / "models", timeout=60)
    line = one_line_error(r, code=1)
    assert os.path.join(str(tmp_path / "models"), "demo-") in line and "assets" not in line, line


@pytest.mark.parametrize("script,args", [("demo.py", []), ("download_weights.py", ["gpt2"])])
def test_33_12_an_empty_models_dir_is_one_line(tmp_path, script, args):
    r = subprocess.run([sys.executable, os.path.join(ROOT, script), *args, "--models-dir", ""], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"})
    one_line_error(r, "--models-dir needs a directory name", code=2)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("length", [256, 300])  # 250 was refused too while temporary names were NAME.PID-RANDOM.tmp
def test_33_12_a_too_long_html_name_fails_before_generating(pair, tmp_path, length):
    r = run("workbench.py", "the cat", *pair, "-n", "4", "--html", tmp_path / ("p" * (length - 5) + ".html"))
    one_line_error(r, "--html", "too long", code=2)
    assert r.stdout == "" and os.listdir(tmp_path) == []


def test_33_suspected_running_out_of_memory_is_one_line(capsys):
    import errors

    def greedy():
        raise MemoryError

    with pytest.raises(SystemExit) as e:
        errors.run(greedy)
    assert e.value.code == 1 and capsys.readouterr().err.startswith("error: out of memory")


def test_33_suspected_beam_searchs_memory_check_reads_the_limit_that_applies(tmp_path):
    r = limited("from workbench import system; print(system.memory_budget())", timeout=30)
    assert r.returncode == 0 and int(r.stdout) <= (3 << 30) // 2, r.stdout + r.stderr  # half of the RLIMIT_AS set
    from workbench import system
    for version, controllers, limit_file in (("v2", "", "memory.max"), ("v1", "memory", "memory/memory.limit_in_bytes")):
        root = tmp_path / version
        (root / os.path.dirname(limit_file) / "box").mkdir(parents=True)
        (root / os.path.dirname(limit_file) / "box" / os.path.basename(limit_file)).write_text("1073741824\n")
        (root / os.path.dirname(limit_file) / os.path.basename(limit_file)).write_text(
            "max\n" if version == "v2" else "9223372036854771712\n")
        membership = tmp_path / f"{version}.cgroup"
        membership.write_text(f"0:{controllers}:/box\n" if controllers else "0::/box\n")
        assert system.cgroup_memory_limit(str(root), str(membership)) == 1 << 30
