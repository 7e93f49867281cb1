"""Nothing outside the project's files is touched, no server is trusted, no terminal is written into.

Each numbered case of the second attack pass, reproduced first (a FIFO, a symlink, /dev/null, a
stand-in hub on 127.0.0.1, a pseudo-terminal, a closed descriptor), then held; and every command's
output flags walked through the one write path (weights/files.py). The third and fourth passes:
test_security_third_pass.py and test_security_fourth_pass.py, with the helpers here.
"""

import contextlib
import csv
import io
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest

import demo
import download_server
from workbench import cli, methods, session
from workbench import settings as common
from workbench.bench import ablation, main as bench, tables
from workbench.settings import Settings
from fixtures import ROOT, make_model_dir
from errors import printable
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
    s = session.Session("d", "o", None, Settings(), out=io.StringIO())
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
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, Settings(processor=Processor(0.0)), out=out)
    s.handle("/ngram_n 1000000000")
    assert "error: ngram_n must be a whole number from 2 to 64" in out.getvalue() and "ngram_n" not in s.settings.options
    for line in ("/n_draft 1000000", "/egag_ema 2", "/ema 2", "/n_beams 0", "/top_k_filler 99999", "/length 1e9",
                 "/seed -1", "/draft_layers 0", "/n_draft_min 0", "/n_draft_max 129", "/temperature nan",
                 "/processor topk 0", "/processor nucleus 0"):
        before = out.getvalue().count("error:")
        s.handle(line)
        assert out.getvalue().count("error:") == before + 1, line
    s.handle("/help")
    helped = " ".join(out.getvalue().split())
    options = {o.name: o for o in common.COMMON + tuple(methods.options())}  # every setting, the methods' own too
    in_session = {name for name, o in options.items() if o.bounds() in helped}
    r = run("workbench.py", "--help")
    flags = " ".join(r.stdout.split())
    on_command_line = {name for name, o in options.items() if o.bounds() in flags}
    assert in_session >= set(options) - {"top_k", "top_p"}  # those two: the processor's (/processor topk 20)
    assert on_command_line == set(options)
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
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, Settings(max_new_tokens=3,
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
