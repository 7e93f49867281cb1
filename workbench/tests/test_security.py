"""Nothing outside the project's files is touched, no server is trusted, no terminal is written into.

Each numbered case of the second attack pass, reproduced first (a FIFO, a symlink, /dev/null, a
stand-in hub on 127.0.0.1, a pseudo-terminal, a closed descriptor), then held; and every command's
output flags walked through the one write path (weights/files.py).
"""

import contextlib
import csv
import io
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import download_server
from workbench import cli, demo, runner, session
from workbench.bench import ablation, main as bench, tables
from workbench.runner import LIMITS
from fixtures import ROOT, make_model_dir, save_tensors
from errors import printable
from gpt2 import GPT2
from permissions import bound_command
from processors import Processor, nucleus_filtered
from test_download import FILES
from weights import download as downloader
from weights import files, http
from weights.download import DownloadError

ESC = "\x1b[2J\x1b[31m"  # clear the screen, then red: what a hostile text would send a terminal


def run(script, *args, cwd=ROOT, env=None, **kwargs):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, **(env or {})}, **kwargs)


def one_line_error(r, *fragments, code=None):
    """r ended in exactly one line on stderr, 'error: ...', holding the fragments, and no traceback."""
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and lines and lines[-1].startswith("error:"), r.stderr
    assert sum(line.startswith("error:") for line in lines) == 1, r.stderr
    assert all(f in lines[-1] for f in fragments), r.stderr
    assert code is None or r.returncode == code, (r.returncode, r.stderr)
    return lines[-1]


@pytest.fixture
def pair(tiny_dirs):
    return ["--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"]]


@pytest.fixture
def hub(monkeypatch):
    server = download_server.start(FILES)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    server.state["port"] = server.server_address[1]
    yield server.state
    download_server.stop(server)


def is_device(path):
    return stat.S_ISCHR(os.stat(path).st_mode)


# ---------------------------------------------------------------------------
# 1-4. Writes that reach outside the project's files
# ---------------------------------------------------------------------------

def test_1_dev_null_stays_a_device(pair, tmp_path):
    r = run("workbench.py", "the cat", *pair, "-n", "6", "--html", os.devnull)
    assert r.returncode == 0, r.stderr
    assert is_device(os.devnull)
    r = run("workbench.py", "bench", "ablation", "the cat", *pair, "-n", "4", "--out", os.devnull)
    assert r.returncode == 0, r.stderr
    assert is_device(os.devnull)


def test_1_a_fifo_is_written_in_place(pair, tmp_path):
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    r = run("workbench.py", "the cat", *pair, "-n", "6", "--html", fifo)
    reader.join(60)
    assert r.returncode == 0, r.stderr
    assert got and got[0].startswith(b"<!DOCTYPE html>") and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_1_a_link_stays_a_link_and_its_file_gets_the_page(pair, tmp_path):
    target, link = tmp_path / "real.html", tmp_path / "link.html"
    target.write_text("old")
    link.symlink_to(target)
    r = run("workbench.py", "the cat", *pair, "-n", "6", "--html", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_text().startswith("<!DOCTYPE html>")
    assert sorted(os.listdir(tmp_path)) == ["link.html", "real.html"]  # no temporary file left


def test_1_a_socket_or_a_directory_is_refused_before_the_run(pair, tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s"))
        one_line_error(run("workbench.py", "the cat", *pair, "--html", tmp_path / "s"), "is a socket", code=2)
    one_line_error(run("workbench.py", "the cat", *pair, "--html", tmp_path), "is a directory", code=2)


@pytest.mark.parametrize("planted", ["config.json.incomplete", "config.json.lock"])
def test_2_a_link_planted_at_a_downloads_own_files_is_not_followed(hub, tmp_path, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file")
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / planted).symlink_to(victim)
    with pytest.raises(DownloadError, match="remove it"):
        downloader.download("gpt2", str(tmp_path))
    assert victim.read_text() == "the user's own file"


def test_2_a_partial_download_is_opened_without_following_links(tmp_path):
    victim, link = tmp_path / "victim", tmp_path / "x.incomplete"
    victim.write_text("keep")
    link.symlink_to(victim)
    with pytest.raises(files.WriteError, match="is a link"):
        files.open_for_appending(str(link), fresh=False)
    assert victim.read_text() == "keep" and files.size_of(str(link)) == 0


def test_3_bench_refuses_an_out_that_is_a_file_before_measuring(tmp_path):
    out = tmp_path / "results"
    out.write_text("my notes")
    r = run("workbench.py", "bench", "--quick", "--out", out)
    one_line_error(r, "is not a directory", code=2)
    assert r.stdout == "" and out.read_text() == "my notes"  # nothing measured, nothing replaced


def test_3_bench_says_before_the_run_that_it_replaces_earlier_results(tmp_path, capsys):
    (tmp_path / "summary.md").write_text("an earlier run")
    bench.note_earlier_results(str(tmp_path))
    assert "holds an earlier run's results (summary.md): this run replaces them" in capsys.readouterr().err


def denying(monkeypatch, folder):
    """os.access as a non-root user sees a read-only folder (root may write anywhere, so CI, as root, simulates)."""
    real = os.access
    monkeypatch.setattr(files.os, "access", lambda path, mode, **kw: False if os.path.abspath(path) == str(folder)
                        and mode & os.W_OK else real(path, mode, **kw))


def test_4_a_read_only_place_is_refused_before_the_work(monkeypatch, tmp_path, capsys):
    folder = tmp_path / "read-only"
    folder.mkdir()
    denying(monkeypatch, folder)
    checks = [lambda: cli.parse_args(["x", "--html", str(folder / "page.html")]),
              lambda: bench.parse_args(["--out", str(folder / "results")]),
              lambda: ablation.parse_args(["x", "--out", str(folder / "a.csv")]),
              lambda: demo.parse_args(["--models-dir", str(folder / "models")])]
    for check in checks:
        with pytest.raises(SystemExit) as e:
            check()
        assert e.value.code == 2 and "permission denied" in capsys.readouterr().err
    s = session.Session("d", "o", None, runner.Settings(), out=io.StringIO())
    s.handle(f"/html {folder / 'page.html'}")
    assert "permission denied" in s.out.getvalue() and s.html is None


@pytest.mark.skipif(bound_command([]) is None, reason="root writes into read-only directories, and cannot set that aside here")
def test_4_a_read_only_directory_is_refused_before_the_run(pair, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    command = bound_command([sys.executable, os.path.join(ROOT, "workbench.py"), "the cat", *pair,
                             "--html", folder / "p.html"])
    r = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    one_line_error(r, "permission denied", code=2)
    assert list(folder.iterdir()) == []


# ---------------------------------------------------------------------------
# 5-9. A downloader that trusts the server
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["config.json", "vocab.json", "merges.txt"])
def test_5_an_error_answered_with_200_is_never_stored(hub, tmp_path, name):
    hub["page"], hub["page_for"] = (b'{"error": "Repository not found"}', "application/json"), name
    with pytest.raises(DownloadError, match=f"{name}: what arrived is not"):
        downloader.download("gpt2", str(tmp_path))
    assert not (tmp_path / "gpt2" / name).exists() and not (tmp_path / "gpt2" / f"{name}.incomplete").exists()


def test_5_a_config_with_wrong_types_is_never_stored(hub, tmp_path):
    hub["files"]["config.json"] = b'{"n_layer": "12", "n_head": 12, "n_embd": 768, "n_positions": 1024, "vocab_size": 50257}'
    with pytest.raises(DownloadError, match="n_layer must be a positive integer"):
        downloader.download("gpt2", str(tmp_path))
    assert not (tmp_path / "gpt2" / "config.json").exists()


def test_6_headers_that_trickle_in_end_in_one_line_naming_the_server(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(http, "HEADERS_SECONDS", 1)
    hub["drip_headers"] = 0.05  # a byte every 50 ms: never a read timeout, never the end of the headers
    with pytest.raises(DownloadError, match=r"127\.0\.0\.1:\d+ sent no complete answer within 1 s"):
        downloader.download("gpt2", str(tmp_path))


def test_7_the_servers_words_are_shown_escaped(hub, tmp_path):
    hub["status"] = (418, f"{ESC}I am a teapot")
    r = run("download_weights.py", "gpt2", "--models-dir", tmp_path)
    line = one_line_error(r, "HTTP 418", "\\x1b[2J", code=1)
    assert "\x1b" not in r.stderr and "I am a teapot" in line


def test_8_credentials_in_the_endpoint_are_never_shown(hub, tmp_path):
    endpoint = f"http://someone:s3cret@127.0.0.1:{hub['port']}"
    ok = run("download_weights.py", "gpt2", "--models-dir", tmp_path / "a", env={"HF_ENDPOINT": endpoint})
    assert ok.returncode == 0 and "s3cret" not in ok.stderr + ok.stdout and "127.0.0.1" in ok.stderr, ok.stderr
    hub["error"], hub["files"] = 404, {}
    failed = run("download_weights.py", "gpt2", "--models-dir", tmp_path / "b", env={"HF_ENDPOINT": endpoint})
    one_line_error(failed, "HTTP 404", "127.0.0.1", code=1)
    assert "s3cret" not in failed.stderr and "someone" not in failed.stderr
    bad = run("download_weights.py", "gpt2", "--models-dir", tmp_path / "c", env={"HF_ENDPOINT": "ftp://u:s3cret@host/"})
    one_line_error(bad, "must start with http", code=1)
    assert "s3cret" not in bad.stderr


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_9_what_a_killed_run_left_is_removed_and_said(tmp_path, capsys):
    dead = dead_pid()
    (tmp_path / f".speculative-gpt2-{dead}-0a1b2c3d4e5f6a7b.tmp").mkdir()
    (tmp_path / f".speculative-gpt2-{dead}-0a1b2c3d4e5f6a7b.tmp" / "model.safetensors").write_bytes(b"half")
    (tmp_path / f".speculative-gpt2-{dead}-deadbeefdeadbeef.tmp").write_bytes(b"half")
    live = f".speculative-gpt2-{os.getppid()}-feedfacefeedface.tmp"
    (tmp_path / live).write_bytes(b"a live writer's")
    files.write_text(str(tmp_path / "page.html"), "a page")
    assert sorted(os.listdir(tmp_path)) == [live, "page.html"]
    said = capsys.readouterr().err
    assert said.count("note: removed") == 2 and "left by a run that was stopped before it finished" in said


# ---------------------------------------------------------------------------
# 10-15. Bad values that are accepted
# ---------------------------------------------------------------------------

def test_10_a_top_p_too_small_for_float32_keeps_the_most_likely_token(pair):
    probs = np.array([0.1, 0.5, 0.4], np.float32)
    for p in (1e-40, 1e-46, 5e-324):
        assert nucleus_filtered(probs, p).tolist() == [0, 1, 0]
    texts = {p: run("workbench.py", "the cat", *pair, "--method", "sample", "--top-p", p, "--seed", "3", "-n", "12").stdout
             for p in ("1e-40", "1e-46", "5e-324")}
    assert len(set(texts.values())) == 1 and texts["1e-40"].startswith("the cat")


# 11: beam search's memory estimate against the peak it measures, in tests/test_beam.py.


def test_12_every_number_has_a_bound_stated_and_held_alike(pair, tiny_dirs):
    out = io.StringIO()
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, runner.Settings(processor=Processor(0.0)), out=out)
    s.handle("/ngram_n 1000000000")
    assert "error: ngram_n must be a whole number from 2 to 64" in out.getvalue() and s.settings.ngram_n == 4
    for line in ("/n_draft 1000000", "/egag_ema 2", "/beams 0", "/top_k_filler 99999", "/length 1e9", "/seed -1",
                 "/temperature nan", "/processor topk 0", "/processor nucleus 0"):
        before = out.getvalue().count("error:")
        s.handle(line)
        assert out.getvalue().count("error:") == before + 1, line
    s.handle("/help")
    helped = " ".join(out.getvalue().split())
    shown_in_help = {field for field in LIMITS if runner.bounds(field) in helped}
    r = run("workbench.py", "--help")
    flags = " ".join(r.stdout.split())
    shown_in_help |= {field for field in LIMITS if runner.bounds(field) in flags}
    assert shown_in_help >= set(LIMITS) - {"top_k", "top_p"}  # those two: the processor's, on the command line
    assert runner.bounds("top_k") in flags and runner.bounds("top_p") in flags
    one_line_error(run("workbench.py", "x", *pair, "--n-draft", "1000000"), "--n-draft", "from 1 to 128", code=2)


def test_13_a_bench_context_outside_the_window_is_one_line():
    one_line_error(run("workbench.py", "bench", "--context", "5000"), "--context must be from 1 to 1008", code=2)
    one_line_error(run("workbench.py", "bench", "--new-tokens", "0"), "--new-tokens must be from 1", code=2)


def test_14_demo_models_dir_naming_a_file_is_one_line(tmp_path):
    f = tmp_path / "models"
    f.write_text("a file")
    one_line_error(run("demo.py", "--models-dir", f), "is not a directory", code=2)
    assert f.read_text() == "a file"


def test_15_a_folder_named_like_a_model_is_not_taken_for_it(tmp_path, tiny_dirs):
    # ./gpt2 in the working directory is a user's folder; the name gpt2 is the models directory's model.
    models = tmp_path / "models"
    models.mkdir()
    make_model_dir(models / "gpt2", seed=5, n_layer=1)
    make_model_dir(tmp_path / "gpt2", seed=6, n_layer=2)
    by_name = run("workbench.py", "the cat", "--oracle", "gpt2", "--method", "greedy", "-n", "6", "--models-dir", models,
                  cwd=tmp_path)
    by_path = run("workbench.py", "the cat", "--oracle", "./gpt2", "--method", "greedy", "-n", "6", cwd=tmp_path)
    assert by_name.returncode == 0 and by_path.returncode == 0, by_name.stderr + by_path.stderr
    assert "loaded gpt2 from models/gpt2 (1 layer of" in by_name.stderr and "loaded ./gpt2 (2 layers" in by_path.stderr
    assert "looked up in --models-dir" in run("workbench.py", "--help").stdout


# ---------------------------------------------------------------------------
# 16-18. Terminals and pipes
# ---------------------------------------------------------------------------

def test_16_a_closed_stdout_ends_quietly(pair):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "the cat", *pair, "-n", "6"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_16_a_pipe_closed_by_its_reader_ends_quietly_with_the_conventional_status(pair):
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "workbench.py"), "the cat", *pair, "-n", "100"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(3)  # as `| head -c 3` does
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(120)
    assert "Traceback" not in err and "error" not in err, err
    assert p.returncode in (0, 141)  # 0: it wrote everything before the reader went


def test_16_a_closed_stdin_ends_the_session_like_quit(pair):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "-i", *pair], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, preexec_fn=lambda: os.close(0))
    assert r.returncode == 0 and "Traceback" not in r.stderr and "workbench" in r.stdout, r.stderr


SLOW = ("import sys, time; from workbench.speed.accelerate import FastGPT2; real = FastGPT2.forward; "
        "FastGPT2.forward = lambda self, *a, **k: time.sleep(0.05) or real(self, *a, **k); "
        "from workbench.cli import main_entry; main_entry(sys.argv[1:])")


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX-only")
def test_17_ctrl_c_while_streaming_starts_its_message_on_a_new_line(pair):
    import pty
    fd, terminal = pty.openpty()  # started, not forked from this process and its threads
    proc = subprocess.Popen([sys.executable, "-c", SLOW, "the cat", *pair, "-n", "100", "--color", "never"], cwd=ROOT,
                            stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    pid = proc.pid
    seen = b""
    try:
        while b"the cat" not in seen or len(seen.split(b"the cat", 1)[1]) < 3:  # some text after the prompt
            if select.select([fd], [], [], 60)[0]:
                seen += os.read(fd, 4096)
        os.kill(pid, signal.SIGINT)
        with contextlib.suppress(OSError):
            while select.select([fd], [], [], 30)[0]:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                seen += chunk
    finally:
        status = proc.wait()
        os.close(fd)
    text = seen.decode("utf-8", "replace").replace("\r\n", "\n")
    assert "\nerror: interrupted" in text and status == 130, text


def test_18_csv_cells_a_spreadsheet_would_run_are_quoted(tmp_path):
    rows = [{"a": "+2 / -1", "b": "=1+1", "c": "@SUM(A1)", "d": "-x", "e": -3, "f": "plain", "g": 0.5}]
    path = tmp_path / "t.csv"
    tables.write_csv(str(path), rows, list(rows[0]))
    with open(path, newline="") as f:
        got = list(csv.DictReader(f))[0]
    assert got == {"a": "'+2 / -1", "b": "'=1+1", "c": "'@SUM(A1)", "d": "'-x", "e": "-3", "f": "plain", "g": "0.5"}


def test_18_the_ablation_csv_quotes_the_heuristics_rule(pair, tmp_path):
    out = tmp_path / "a.csv"
    r = run("workbench.py", "bench", "ablation", "the cat", *pair, "-n", "4", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "'+2 / -1 heuristic" in out.read_text()


# ---------------------------------------------------------------------------
# Every command's output flags through the one write path
# ---------------------------------------------------------------------------

def test_every_commands_output_flag_meets_the_same_rules(pair, tmp_path, tiny_dirs):
    # A file: written whole. /dev/null: written in place, still a device. A directory where a file
    # goes, or a device where a directory goes: refused in one line, before any work.
    page, table = tmp_path / "p.html", tmp_path / "a.csv"
    assert run("workbench.py", "x", *pair, "-n", "4", "--html", page).returncode == 0 and page.read_text().startswith("<!")
    assert run("workbench.py", "bench", "ablation", "x", *pair, "-n", "3", "--out", table).returncode == 0 and table.exists()
    for script, args in [("workbench.py", ["x", *pair, "--html", tmp_path]),
                         ("workbench.py", ["bench", "ablation", "x", *pair, "--out", tmp_path]),
                         ("workbench.py", ["bench", "--out", os.devnull]), ("demo.py", ["--models-dir", os.devnull]),
                         ("download_weights.py", ["gpt2", "--models-dir", os.devnull]),
                         ("workbench.py", ["x", *pair, "--models-dir", os.devnull])]:
        one_line_error(run(script, *args), code=2)
    out = io.StringIO()
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, runner.Settings(max_new_tokens=3,
                                                                                       processor=Processor(0.0)), out=out)
    for line in (f"/html {os.devnull}", "the cat", f"/ablation {os.devnull}", f"/html {tmp_path}"):
        s.handle(line)
    assert out.getvalue().count("error:") == 1 and "is a directory" in out.getvalue()
    assert is_device(os.devnull)


def test_every_command_escapes_what_it_shows(pair, tmp_path):
    # A name with an escape sequence in it, each command's way to meet one: shown escaped, never sent raw.
    evil = tmp_path / f"evil{ESC}name"
    evil.write_text("a file")
    results = [run("workbench.py", "x", *pair, "--html", evil / "p.html"),
               run("workbench.py", "bench", "--out", evil), run("demo.py", "--models-dir", evil),
               run("download_weights.py", "gpt2", "--models-dir", evil),
               run("workbench.py", "bench", "ablation", "x", *pair, "--prompts", tmp_path / f"missing{ESC}.txt")]
    for r in results:
        assert r.returncode != 0 and "\x1b" not in r.stderr and "\\x1b[2J" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "-i", *pair], input=f"/html {evil}/p.html\n",
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "\x1b" not in r.stdout and "\\x1b[2J" in r.stdout, r.stdout


def test_printable_escapes_controls_and_keeps_text():
    assert printable(f"a{ESC}b\u202ec\td\ne") == "a\\x1b[2J\\x1b[31mb\\u202ec\td\ne"
    assert printable("中文 🙂 👨\u200d👩\u200d👧") == "中文 🙂 👨\u200d👩\u200d👧"  # joiners stay: emoji need them
    assert printable("a\nb", newlines=False) == "a\\nb"
    assert printable(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\\xe9"


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
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, runner.Settings(max_new_tokens=2), out=out)
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
    where = ["--out", tmp_path / "o"] if script == "bench.py" else ["--models-dir", tmp_path / "m"]
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
    from workbench import program

    def greedy():
        raise MemoryError

    with pytest.raises(SystemExit) as e:
        program.run(greedy)
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


# ---------------------------------------------------------------------------
# 43. The fourth pass: no silent wrong result, no user file lost, no secret printed, no permission widened
# (the acceptance rules' own tests: tests/test_non_finite.py; the concurrent loads: tests/test_checkpoint.py)
# ---------------------------------------------------------------------------

def poke(path, name, value, where=slice(None)):
    from test_non_finite import poke as poke_values
    poke_values(path, name, value, where)


@pytest.mark.parametrize("method", ["sps", "sps-block", "tree-sps", "tree-sps-wor"])
def test_43_1_a_nan_draft_is_one_line_for_every_sampling_method(tiny_dirs, tmp_path, method):
    draft = copy_model(tiny_dirs["related"], tmp_path / "draft")
    poke(os.path.join(draft, "model.safetensors"), "ln_f.weight", float("nan"))
    r = run("workbench.py", "the cat", "--draft", draft, "--oracle", tiny_dirs["oracle"], "--method", method,
            "-n", "8", "--temperature", "0.8", "--seed", "1")
    one_line_error(r, f"{draft}/model.safetensors: tensor ln_f.weight holds NaN", code=1)
    assert r.stdout == "" and "rebuilding" not in r.stderr


def test_43_1_a_nan_oracle_is_one_line_not_a_text_of_token_0(tiny_dirs, tmp_path):
    oracle = copy_model(tiny_dirs["oracle"], tmp_path / "oracle")
    poke(os.path.join(oracle, "model.safetensors"), "h.0.attn.c_proj.weight", float("nan"), [5])
    for plain in ([], ["--plain"]):
        r = run("workbench.py", "the cat", "--draft", tiny_dirs["related"], "--oracle", oracle, "--method", "greedy",
                "-n", "8", *plain)
        one_line_error(r, "tensor h.0.attn.c_proj.weight holds NaN", code=1)
        assert r.stdout == ""


def test_43_1_a_nan_eagle_head_is_one_line(demo_dirs, tmp_path):
    from test_non_finite import f32_eagle_head
    oracle = f32_eagle_head(demo_dirs["oracle"], tmp_path / "o")
    poke(os.path.join(oracle, "heads", "eagle", "model.safetensors"), "fc.weight", float("inf"), [3])
    r = run("workbench.py", "If the file does not exist, the function", "--method", "eagle-sps", "--draft",
            demo_dirs["draft"], "--oracle", oracle, "-n", "24", "--temperature", "0.8", "--seed", "1")
    one_line_error(r, "heads/eagle/model.safetensors: tensor fc.weight holds an infinity", code=1)


def edit_keeping_the_time(path, offset, data):
    """Write data at offset of the file at path, then give it back its modification time, as an editor
    that keeps it, `cp -a`, `tar` or `touch -r` would: only the change time, which no call can set, moves."""
    st = os.stat(path)
    deadline = st.st_ctime_ns + 50_000_000  # past the tick of the kernel's clock that stamped the file
    while time.time_ns() < deadline:
        time.sleep(0.01)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns) and after.st_ctime_ns != st.st_ctime_ns


def middle_of(path, name):
    """The byte offset of the middle of tensor `name` in the safetensors file at path: no sampled check looks there."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        begin, end = json.loads(f.read(n))[name]["data_offsets"]
    return 8 + n + (begin + end) // 2 // 4 * 4


def test_43_2_an_edited_fast_copy_whose_time_is_restored_is_rebuilt(tmp_path, capfd, monkeypatch):
    from workbench.speed import accelerate
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    expected = GPT2.from_pretrained(model_dir).forward([5, 0, 17])
    accelerate.load_fast(model_dir)
    copy = os.path.join(model_dir, accelerate.BLOCKED_FILE)
    edit_keeping_the_time(copy, middle_of(copy, "wte.weight"), np.full(256, np.nan, np.float32).tobytes())
    with monkeypatch.context() as m:  # the negative control: the copy taken as it is, unbound and unsampled
        m.setattr(accelerate.derived, "bound", lambda *args, **kwargs: None)
        m.setattr(accelerate, "faithful", lambda path, entries, data, tensors: {
            key: accelerate.checkpoint.raw_view(data, entries[key]) for key in tensors})
        assert not np.allclose(accelerate.load_fast(model_dir).forward([5, 0, 17]), expected, equal_nan=False)
    capfd.readouterr()
    np.testing.assert_allclose(accelerate.load_fast(model_dir).forward([5, 0, 17]), expected, rtol=1e-4, atol=1e-5)
    lines = capfd.readouterr().err.strip().splitlines()
    assert lines == [f"note: {copy} has changed since it was made and checked; rebuilding it"], lines
    accelerate.load_fast(model_dir)
    assert capfd.readouterr().err == ""  # rebuilt once, trusted since


def test_43_2_an_edited_checkpoint_whose_time_is_restored_is_converted_again(tmp_path, capfd):
    from workbench.speed import accelerate
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    accelerate.load_fast(model_dir)
    source = os.path.join(model_dir, "model.safetensors")
    edit_keeping_the_time(source, middle_of(source, "wte.weight"), np.full(64, 2.5, np.float32).tobytes())
    capfd.readouterr()
    np.testing.assert_allclose(accelerate.load_fast(model_dir).forward([5, 0, 17]),
                               GPT2.from_pretrained(model_dir).forward([5, 0, 17]), rtol=1e-4, atol=1e-5)
    assert "was made from a model.safetensors that has changed since" in capfd.readouterr().err


def test_43_2_a_copied_model_directory_is_hashed_again_once_not_converted(tmp_path, capfd):
    import shutil
    from workbench.speed import accelerate
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    expected = accelerate.load_fast(model_dir).forward([5, 0, 17])
    copied = shutil.copytree(model_dir, tmp_path / "copied", copy_function=shutil.copy2)  # cp -a: times kept
    copy = os.path.join(copied, accelerate.BLOCKED_FILE)
    inode = os.stat(copy).st_ino
    capfd.readouterr()
    np.testing.assert_array_equal(accelerate.load_fast(str(copied)).forward([5, 0, 17]), expected)
    assert capfd.readouterr().err == "" and os.stat(copy).st_ino == inode  # new identities, the same SHA-256s: kept
    record = accelerate.derived.read(os.path.join(copied, accelerate.RECORD_FILE))
    assert record["derived"]["identity"] == accelerate.derived.identity(os.stat(copy))  # and recorded once
    np.testing.assert_array_equal(accelerate.load_fast(str(copied)).forward([5, 0, 17]), expected)
    assert capfd.readouterr().err == ""


LOOKALIKES = ["notes.4000000-0badf00d.tmp", "budget.4000000-0badf00d.tmp", "x.99999999999999999999-00000000.tmp",
              ".speculative-gpt2-99999999999999999999-0123456789abcdef.tmp",
              ".speculative-gpt2-4294967296-0123456789abcdef.tmp"]


def plant(folder, names=LOOKALIKES):
    for name in names:
        (folder / name).write_text("the user's own")
    photos = folder / ".writing-4000000-photos"
    photos.mkdir()
    (photos / "a.jpg").write_text("the user's own")


def planted(folder, names=LOOKALIKES):
    return all((folder / n).read_text() == "the user's own" for n in names) and \
        (folder / ".writing-4000000-photos" / "a.jpg").read_text() == "the user's own"


def test_43_3_4_names_like_temporaries_survive_loads_pages_and_the_demo(tiny_dirs, tmp_path, monkeypatch, capsys):
    killed, kill = [], os.kill
    monkeypatch.setattr(files.os, "kill", lambda pid, sig: killed.append(pid) or kill(pid, sig))
    model = copy_model(tiny_dirs["oracle"], tmp_path / "model")
    plant(tmp_path / "model")
    from workbench.speed.accelerate import load_fast
    load_fast(model)  # converts: a writer in that directory
    load_fast(model)
    GPT2.from_pretrained(model)
    assert planted(tmp_path / "model")
    pages = tmp_path / "pages"
    pages.mkdir()
    plant(pages)
    page = str(pages / "x.html")
    assert files.why_not_writable(page) is None
    files.write_text(page, "a page")
    assert planted(pages)
    models = tmp_path / "models"
    models.mkdir()
    plant(models)
    from weights import demo_pair
    demo_pair.build_pair(str(models))
    assert planted(models) and "note: removed" not in capsys.readouterr().err
    assert all(0 < pid <= files.MAX_PID for pid in killed)  # no process id out of range asked about: no OverflowError


def test_43_3_a_demo_rewrite_refuses_a_users_temporary_like_file_and_keeps_a_live_writers(tmp_path):
    from weights import demo_pair
    models = tmp_path / "models"
    demo_pair.build_pair(str(models))
    oracle = models / "demo-oracle"
    (oracle / "vocab.json").write_text("{}")  # no longer the shipped pair: the next build rewrites it
    (oracle / "notes.4000000-0badf00d.tmp").write_text("the user's own")
    with pytest.raises(files.WriteError, match="notes.4000000-0badf00d.tmp, which this program did not write"):
        demo_pair.build_pair(str(models))
    assert (oracle / "notes.4000000-0badf00d.tmp").read_text() == "the user's own"
    os.remove(oracle / "notes.4000000-0badf00d.tmp")
    live = f".speculative-gpt2-{os.getppid()}-0123456789abcdef.tmp"  # a live process's: perhaps writing it now
    (oracle / live).write_text("a live writer's")
    demo_pair.build_pair(str(models))
    assert demo_pair.is_current(str(oracle), "demo-oracle", demo_pair.shipped_sums())
    kept = [p for p in models.rglob(live)]
    assert len(kept) == 1 and kept[0].read_text() == "a live writer's"  # moved aside with its directory, not deleted


@pytest.mark.parametrize("password", ["Qx/Zy7", "Qx#Zy7", "Qx?Zy7", "12/Zy7", "Qx[Zy7"])
def test_43_5_a_password_with_reserved_characters_is_never_printed(hub, tmp_path, password):
    r = run("download_weights.py", "gpt2", "--models-dir", tmp_path,
            env={"HF_ENDPOINT": f"http://someone:{password}@127.0.0.1:{hub['port']}"})
    one_line_error(r, "HF_ENDPOINT", code=1)
    for part in ("someone", "Qx", "Zy7", "12/"):
        assert part not in r.stderr + r.stdout, r.stderr
    assert "Port could not be cast" not in r.stderr and not os.listdir(tmp_path)


@pytest.mark.parametrize("password", ["Qx%2FZy7", "Qx%23Zy7", "Qx@Zy7"])  # an @ before the host's: still the password's
def test_43_5_a_percent_encoded_password_works_and_is_never_printed(hub, tmp_path, password):
    r = run("download_weights.py", "gpt2", "--models-dir", tmp_path,
            env={"HF_ENDPOINT": f"http://someone:{password}@127.0.0.1:{hub['port']}"})
    assert r.returncode == 0 and "127.0.0.1" in r.stderr, r.stderr
    assert not any(part in r.stderr + r.stdout for part in ("someone", "Qx", "Zy7"))


def test_43_5_an_address_that_is_not_a_url_is_named_by_nothing_of_it():
    for url in ("http://[::1", "http://someone:Qx/Zy7@h:1/x", "\x00\x1b[2J"):
        assert "Qx" not in http.host_of(url) + http.shown_url(url) and "\x1b" not in http.shown_url(url)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX's")
def test_43_6_a_replaced_output_keeps_its_mode(pair, tmp_path):
    page, csv_file, out = tmp_path / "page.html", tmp_path / "a.csv", tmp_path / "suite"  # suite: its set's one path
    out.mkdir()
    for path, mode in ((page, 0o600), (csv_file, 0o640), (out / "suite.md", 0o600), (out / "suite.html", 0o604)):
        path.write_text("old")
        path.chmod(mode)
    assert run("workbench.py", "the cat", *pair, "-n", "4", "--html", page).returncode == 0
    assert run("workbench.py", "bench", "ablation", "the cat", *pair, "-n", "2", "--out", csv_file).returncode == 0
    files.write_together(str(out), {name: lambda path: files.write_text(path, "new") for name in ("suite.md", "suite.html")})
    assert [mode_of(p) for p in (page, csv_file, out / "suite.md", out / "suite.html")] == [0o600, 0o640, 0o600, 0o604]
    assert page.read_text().startswith("<!DOCTYPE html>") and (out / "suite.md").read_text() == "new"
    fresh = tmp_path / "fresh.txt"
    files.write_text(str(fresh), "new")
    umask = os.umask(0)
    os.umask(umask)
    assert mode_of(fresh) == 0o666 & ~umask  # a new file: the usual mode


def sticky_folder(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)  # as /tmp
    return folder


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="gives a link to another user: root only")
def test_43_6_another_users_link_in_a_sticky_directory_is_not_followed(pair, tmp_path):
    victim = tmp_path / "root-only"
    victim.write_text("root's own")
    victim.chmod(0o600)
    folder = sticky_folder(tmp_path)
    link = folder / "page.html"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)  # nobody's link
    r = run("workbench.py", "the cat", *pair, "-n", "4", "--html", link)
    one_line_error(r, "is another user's link", "protected_symlinks", code=2)
    (folder / "dir").symlink_to(tmp_path, target_is_directory=True)
    os.lchown(folder / "dir", 65534, 65534)
    assert "another user's link" in files.why_not_writable(str(folder / "dir" / "root-only"))
    # planted after the check: refused at the write too
    os.remove(link)
    assert files.why_not_writable(str(link)) is None
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    with pytest.raises(files.WriteError, match="another user's link"):
        files.write_text(str(link), "a page")
    assert victim.read_text() == "root's own" and mode_of(victim) == 0o600
    # the user's own link, or the directory owner's, is followed, as the kernel follows them
    os.lchown(link, os.geteuid(), -1)
    assert files.why_not_writable(str(link)) is None
    files.write_text(str(link), "a page")
    assert victim.read_text() == "a page" and mode_of(victim) == 0o600
    os.chown(folder, 65534, 65534)
    os.lchown(link, 65534, 65534)
    assert files.why_link_refused(str(link)) is None


CTRL_C_AT_IMPORT = """
import os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal: the test run may have SIGINT ignored
target, sent = sys.argv.pop(1), []
def hook(event, args):
    if event == "import" and args[0] == target and not sent:
        sent.append(1)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as that module starts to load
sys.addaudithook(hook)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("script,module", [(s, m) for s in ("speculative.py", "demo.py", "bench.py", "download_weights.py")
                                           for m in ("argparse", "numpy")] + [("speculative.py", "decoding")])
def test_43_7_ctrl_c_at_the_first_import_of_numpy_argparse_or_the_decoders_is_one_line(tmp_path, script, module):
    args = {"bench.py": ["--quick", "--out", tmp_path / "o"], "download_weights.py": ["gpt2", "--models-dir", tmp_path]
            }.get(script, ["--models-dir", tmp_path] if script == "demo.py" else ["the cat"])
    r = subprocess.run([sys.executable, "-c", CTRL_C_AT_IMPORT, module, os.path.join(ROOT, script), *map(str, args)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert "Traceback" not in r.stderr and r.stderr.strip().splitlines() == ["error: interrupted"], r.stderr
    assert r.returncode == 130 and r.stdout == ""


def test_43_7_the_ctrl_c_test_sees_a_moment_no_handler_covers(tmp_path):
    # The negative control: at the import of the handler's own module, nothing is set yet.
    r = subprocess.run([sys.executable, "-c", CTRL_C_AT_IMPORT, "app.interrupt", os.path.join(ROOT, "demo.py"),
                        "--models-dir", tmp_path], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "KeyboardInterrupt" in r.stderr and r.returncode != 130 and not os.listdir(tmp_path)


def assets_with_sums(tmp_path, text):
    import shutil
    from weights import demo_pair
    assets = shutil.copytree(demo_pair.ASSETS, tmp_path / "assets")
    (assets / "SHA256SUMS").write_text(text)
    return str(assets)


@pytest.mark.parametrize("sums", ["empty", "a name missing"])
def test_43_8_a_sha256sums_without_a_name_is_one_line(tmp_path, monkeypatch, sums):
    from weights import demo_pair
    with open(os.path.join(demo_pair.ASSETS, "SHA256SUMS")) as f:
        lines = f.read().splitlines()
    text = "" if sums == "empty" else "\n".join(line for line in lines if not line.endswith("draft/config.json")) + "\n"
    assets = assets_with_sums(tmp_path, text)
    monkeypatch.setattr(demo_pair, "ASSETS", assets)
    missing = "draft-4k/config.json" if sums == "empty" else "draft/config.json"  # the first missing, in sorted order
    with pytest.raises(demo_pair.CheckpointError, match=f"SHA256SUMS lists no {missing}: the demo pair ships"):
        demo_pair.build_pair(str(tmp_path / "models"))
    code = ("import runpy, sys\nfrom weights import demo_pair\ndemo_pair.ASSETS = sys.argv.pop(1)\n"
            "sys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", code, assets, os.path.join(ROOT, "workbench.py"), "Hi", "--draft",
                        "demo-draft", "--oracle", "demo-oracle", "--models-dir", tmp_path / "m2"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    one_line_error(r, f"SHA256SUMS lists no {missing}", code=1)


def test_43_9_a_full_disk_never_names_a_temporary_file(tmp_path):
    code = ("signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "from weights import files\n"
            "try:\n"
            "    files.write_together(sys.argv[1], {'suite.md': lambda p: files.write_text(p, 'ok'),\n"
            "                                       'suite.html': lambda p: files.write_text(p, 'x' * 100000)})\n"
            "except OSError as e:\n"
            "    print(e.filename, e.strerror)\n")
    r = limited(code, tmp_path / "out", timeout=60)
    assert r.stdout.startswith(f"{tmp_path / 'out' / 'suite.html'} File too large"), r.stdout + r.stderr
    assert ".tmp" not in r.stdout and sorted(os.listdir(tmp_path / "out")) == []


def test_43_9_a_full_disk_under_a_suite_page_names_the_page(tmp_path, monkeypatch):
    from workbench.page import suite as suite_page
    from workbench.page.suite import write_suite_page
    from workbench.page.report import ReportError
    monkeypatch.setattr(suite_page, "suite_svg", lambda rows: "<svg></svg>")  # no rows to draw here

    def full(path, text):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(files, "write_text", full)
    with pytest.raises(ReportError) as e:
        files.write_together(str(tmp_path / "out"), {"suite.html": lambda path: write_suite_page(
            path, [], {"prompts": 1, "n_new": 1, "rounds": 1, "c": 0.1}, "bench.py suite")})
    assert str(e.value) == f"cannot write the page to {tmp_path / 'out' / 'suite.html'}: No space left on device"


def test_43_9_a_failed_conversion_says_what_failed(tmp_path, capfd, monkeypatch):
    from workbench.speed import accelerate
    model_dir = make_model_dir(tmp_path / "m", n_layer=1, tokenizer=False)
    layout, failed = accelerate.to_memory_layout, []

    def fails_once(key, t):  # as numpy's tofile fails on a full disk: an OSError with a message, no errno
        if not failed:
            failed.append(key)
            raise OSError("could not write 4096 bytes")
        return layout(key, t)

    monkeypatch.setattr(accelerate, "to_memory_layout", fails_once)
    accelerate.load_fast(model_dir)
    err = capfd.readouterr().err
    assert "could not write 4096 bytes" in err and "[Errno None]" not in err and "None" not in err, err


def test_43_9_a_link_at_a_partial_download_is_said_once(hub, tmp_path):
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json.incomplete").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DownloadError) as e:
        downloader.download("gpt2", str(tmp_path))
    assert "is a link, not a partial download" in str(e.value) and "a link or" not in str(e.value)


@pytest.mark.parametrize("content", [b"\xff\xfe\xfd", "²".encode(), b"\x00"])
def test_43_9_a_cgroup_file_of_bytes_is_no_limit_not_a_traceback(tmp_path, content):
    from workbench import system
    root = tmp_path / "cg"
    (root / "box").mkdir(parents=True)
    (root / "box" / "memory.max").write_bytes(content)
    (root / "memory.max").write_bytes(b"1073741824\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/box\n")
    assert system.cgroup_memory_limit(str(root), str(membership)) == 1 << 30
    membership.write_bytes(b"0::/\xff\n")
    assert system.cgroup_memory_limit(str(root), str(membership)) is None


@pytest.mark.parametrize("args,said", [
    (["--n-draft", "1000000000"], "--n-draft: a whole number from 1 to 128"),
    (["--temperature", "1e300"], "--temperature: a number from 0 to 1000"),
    (["--seed", "12345678901234567890123"], "--seed: a whole number from 0 to 9223372036854775807"),
    (["-n", "0"], "--max-new-tokens must be at least 1"),
    (["-n", "100001"], "a whole number from 0 to 100000"),
    (["--out", "-"], "--out - is not a file name here"),
    (["--prompts", ""], "--prompts needs a file name"),
])
def test_43_9_ablation_flags_have_speculative_pys_bounds(args, said, capsys):
    with pytest.raises(SystemExit) as e:
        ablation.parse_args(["x", *args])
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_43_9_standard_output_is_no_file_name_for_any_output(pair, capsys):
    one_line_error(run("workbench.py", "the cat", *pair, "--html", "-"), "--html - is not a file name here", code=2)
    s = session.Session("d", "o", None, runner.Settings(), out=io.StringIO())
    s.handle("/html -")
    assert "- is not a file name here" in s.out.getvalue() and s.html is None


def test_43_9_an_lm_head_that_differs_from_wte_in_one_value_is_refused(tmp_path):
    from workbench.speed import accelerate
    from weights import checkpoint
    model_dir = make_model_dir(tmp_path / "m", n_layer=1, tokenizer=False)
    path = os.path.join(model_dir, "model.safetensors")
    tensors = checkpoint.load_safetensors(path)
    lm_head = np.array(tensors["wte.weight"])
    lm_head.flat[lm_head.size // 2 + 1] += 1  # where no sampled check looks
    save_tensors(path, {**{k: np.array(t) for k, t in tensors.items()}, "lm_head.weight": lm_head})
    for load in (accelerate.load_fast, GPT2.from_pretrained):
        with pytest.raises(checkpoint.CheckpointError, match="lm_head.weight is not wte.weight"):
            load(model_dir)


def test_43_6_where_there_are_no_modes_or_link_owners_files_are_still_written(tmp_path, monkeypatch):
    (tmp_path / "page.html").write_text("old")
    monkeypatch.delattr(files.os, "fchmod")  # Windows before Python 3.13
    files.write_text(str(tmp_path / "page.html"), "new")
    assert (tmp_path / "page.html").read_text() == "new"
    monkeypatch.setattr(files.os, "name", "nt")
    assert files.why_link_refused(str(tmp_path / "page.html")) is None
