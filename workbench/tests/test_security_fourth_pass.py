"""Nothing outside the project's files is touched, no server is trusted, no terminal is written into: the fourth
attack pass (no silent wrong result, no user file lost, no secret printed, no permission widened), each case
reproduced, then held. The first two passes: test_security.py; the third: test_security_third_pass.py."""

import io
import json
import os
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from workbench import methods, session
from workbench.bench import ablation
from workbench.settings import Settings
from fixtures import ROOT, make_model_dir, save_tensors
from gpt2 import GPT2
from weights import download as downloader
from weights import files, http
from weights.download import DownloadError
from test_security import hub, one_line_error, pair, run  # noqa: F401 (hub, pair: fixtures)
from test_security_third_pass import copy_model, limited

pytestmark = pytest.mark.slow  # as test_security.py is (conftest.py's SLOW_FILES)


# ---------------------------------------------------------------------------
# 43. The fourth pass: no silent wrong result, no user file lost, no secret printed, no permission widened
# (the acceptance rules' own tests: tests/test_non_finite.py; the concurrent loads: workbench/tests/test_fast_copy.py)
# ---------------------------------------------------------------------------

def poke(path, name, value, where=slice(None)):
    from test_non_finite import poke as poke_values
    poke_values(path, name, value, where)


@pytest.mark.parametrize("method", [m.name for m in methods.METHODS.values() if m.samples and m.verifies and m.draft_model])
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


SCRIPTS = ("speculative.py", "demo.py", "workbench.py", "download_weights.py")  # every script a user runs


@pytest.mark.parametrize("script,module", [(s, m) for s in SCRIPTS for m in ("argparse", "numpy")]
                         + [("speculative.py", "decoding"), ("workbench.py", "workbench.methods")])
def test_43_7_ctrl_c_at_the_first_import_of_numpy_argparse_or_the_decoders_is_one_line(tmp_path, script, module):
    args = {"workbench.py": ["bench", "--quick", "--out", tmp_path / "o"], "download_weights.py": ["gpt2", "--models-dir", tmp_path]
            }.get(script, ["--models-dir", tmp_path] if script == "demo.py" else ["the cat"])
    r = subprocess.run([sys.executable, "-c", CTRL_C_AT_IMPORT, module, os.path.join(ROOT, script), *map(str, args)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert "Traceback" not in r.stderr and r.stderr.strip().splitlines() == ["error: interrupted"], r.stderr
    assert r.returncode == 130 and r.stdout == ""


def test_43_7_the_ctrl_c_test_sees_a_moment_no_handler_covers(tmp_path):
    # The negative control: at the import of the handler's own module, nothing is set yet.
    r = subprocess.run([sys.executable, "-c", CTRL_C_AT_IMPORT, "errors", os.path.join(ROOT, "demo.py"),
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
    s = session.Session("d", "o", None, Settings(), out=io.StringIO())
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
