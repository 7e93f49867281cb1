"""The fifth attack pass: a forged fast copy, tokenizer files the two BPEs read apart, Ctrl-C inside a read or at
teardown, a batch with nothing to make, a mapped file cut short; and the smaller cases found beside them.

Each defect reproduced as the pass found it, with a negative control where the test could pass for the wrong
reason, then held. tests/test_security.py holds the earlier passes.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import batch
from workbench import display, runner, session
from workbench.settings import Settings
from fixtures import ROOT, gpt2_pair_bpe, make_model_dir, write_bpe
from errors import quoted
from gpt2 import GPT2
from workbench.speed import accelerate, second_core
from workbench.speed import plan as planning
from weights import checkpoint, derived, files, reading, tokenizer

IDS = [5, 0, 17]


def run(script, *args, env=None, **kwargs):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, **(env or {})}, **kwargs)


def one_line_error(r, *fragments, code=1):
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and lines and lines[-1].startswith("error:"), r.stderr
    assert sum(line.startswith("error:") for line in lines) == 1 and all(f in lines[-1] for f in fragments), r.stderr
    assert r.returncode == code, (r.returncode, r.stderr)
    return lines[-1]


# ---------------------------------------------------------------------------
# 1. The converted copy is bound to its content, under a key; --compare proves the oracle it times
# ---------------------------------------------------------------------------

def unsampled_row(model_dir, key="wte.weight"):
    """(byte offset in the converted copy, row) of a row of key's matrix that this process's sampled check never
    reads: an edit there is seen by nothing but the record's binding."""
    copy = os.path.join(model_dir, accelerate.BLOCKED_FILE)
    with open(copy, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        begin = json.loads(f.read(n))[key]["data_offsets"][0]
    rows, cols = checkpoint.load_safetensors(os.path.join(model_dir, "model.safetensors"))[key].shape
    sampled = set(checkpoint.sample_positions((rows, cols))[0].tolist())
    row = next(r for r in range(rows // 2, rows) if r not in sampled)
    return 8 + n + begin + 4 * row * cols, row


def forge(model_dir, value=5.0, sha=False, key=None):
    """The attack: write over a row of the copy's wte, then write the copy's new identity into its record (and its
    new SHA-256: sha; and sign it: key)."""
    copy, record_path = os.path.join(model_dir, accelerate.BLOCKED_FILE), os.path.join(model_dir, accelerate.RECORD_FILE)
    offset, _ = unsampled_row(model_dir)
    with open(copy, "r+b") as f:
        f.seek(offset)
        f.write(np.full(64, value, np.float32).tobytes())
    with open(record_path) as f:
        record = json.load(f)
    record["derived"]["identity"] = derived.identity(os.stat(copy))
    if sha:
        record["derived"]["sha256"] = derived.sha256_of(copy)[0]
    if key is not None:
        record["hmac"] = derived.signed(key, derived.without_hmac(record))
    with open(record_path, "w") as f:
        json.dump(record, f)


@pytest.mark.parametrize("sha", [False, True], ids=["identity", "identity and sha256"])
def test_1_a_forged_record_of_an_edited_copy_is_not_trusted(tmp_path, capfd, monkeypatch, sha):
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    plain = GPT2.from_pretrained(model_dir).forward(IDS)
    accelerate.load_fast(model_dir)
    forge(model_dir, sha=sha)
    with monkeypatch.context() as m:  # the negative control: a record's word taken unsigned, as before
        m.setattr(derived, "signed", lambda key, record: str(derived.read(os.path.join(model_dir, "model.blocked.json"))["hmac"]))
        assert not np.allclose(accelerate.load_fast(model_dir).forward(IDS), plain, rtol=1e-4, atol=1e-5)
    capfd.readouterr()
    np.testing.assert_allclose(accelerate.load_fast(model_dir).forward(IDS), plain, rtol=1e-4, atol=1e-5)
    copy = os.path.join(model_dir, accelerate.BLOCKED_FILE)
    assert capfd.readouterr().err.splitlines() == [
        f"note: {copy} has no signed record of its check (model.blocked.json, signed with derived.key); rebuilding it"]
    accelerate.load_fast(model_dir)
    assert capfd.readouterr().err == ""  # rebuilt once, trusted since


def test_1_a_copy_or_a_touch_costs_a_hash_not_a_conversion(tmp_path, capfd):
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    expected = accelerate.load_fast(model_dir).forward(IDS)
    copy = os.path.join(model_dir, accelerate.BLOCKED_FILE)
    inode = os.stat(copy).st_ino
    for name in ("model.safetensors", accelerate.BLOCKED_FILE):
        os.utime(os.path.join(model_dir, name))  # a new identity, the same bytes
    capfd.readouterr()
    np.testing.assert_array_equal(accelerate.load_fast(model_dir).forward(IDS), expected)
    assert capfd.readouterr().err == "" and os.stat(copy).st_ino == inode  # hashed, not rebuilt
    record = derived.read(os.path.join(model_dir, accelerate.RECORD_FILE))
    assert record["derived"]["identity"] == derived.identity(os.stat(copy))  # renewed: the next load need not hash


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes")
def test_1_a_key_others_may_read_is_not_used(tmp_path, capfd):
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    accelerate.load_fast(model_dir)
    key = os.path.join(model_dir, derived.KEY_FILE)
    assert os.stat(key).st_mode & 0o777 == 0o600
    os.chmod(key, 0o644)
    capfd.readouterr()
    plain = GPT2.from_pretrained(model_dir).forward(IDS)
    np.testing.assert_allclose(accelerate.load_fast(model_dir).forward(IDS), plain, rtol=1e-4, atol=1e-5)
    said = capfd.readouterr().err
    assert "has no signed record of its check" in said and said.strip().splitlines()[-1] == (
        f"note: {key} is not a key of this user's alone (a file of 32 bytes that only its owner may read and write): "
        "remove it, and a new one is made; converting in memory instead"), said
    assert os.stat(key).st_mode & 0o777 == 0o644  # said, never replaced: it may be another user's
    os.remove(key)
    accelerate.load_fast(model_dir)
    assert "rebuilding it" in capfd.readouterr().err and derived.key_of(model_dir) is not None
    accelerate.load_fast(model_dir)
    assert capfd.readouterr().err == ""


def test_1_compare_checks_the_oracle_against_its_checkpoint_in_full(tmp_path, tiny_dirs):
    oracle = make_model_dir(tmp_path / "oracle", seed=2, n_layer=3)
    accelerate.load_fast(oracle)
    forge(oracle, value=40.0, sha=True, key=derived.key_of(oracle))  # whoever holds the key: no binding sees it
    fast = accelerate.load_fast(oracle)
    with pytest.raises(checkpoint.CheckpointError, match=f"{accelerate.BLOCKED_FILE}: the fast model's wte.weight is not"):
        accelerate.same_as_checkpoint(fast)
    planning.write(oracle, planning.Plan({r: "fast" for r in planning.ROWS}, {}))  # a plan that runs the copy
    r = run("workbench.py", "the cat", "--draft", tiny_dirs["draft"], "--oracle", oracle, "-n", "4", "--compare")
    one_line_error(r, accelerate.BLOCKED_FILE, "wte.weight", "remove")
    assert r.stdout == ""  # proven before any text


def test_1_a_failed_record_write_names_the_record(tmp_path, capfd, monkeypatch):
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    record = os.path.join(model_dir, accelerate.RECORD_FILE)

    def full_disk(path, text):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(derived.files, "write_text", full_disk)
    accelerate.load_fast(model_dir)
    assert capfd.readouterr().err.splitlines() == [
        f"note: cannot write {record} (No space left on device); converting in memory instead"]


# ---------------------------------------------------------------------------
# 2. Tokenizer files: tiktoken and GPT-2's own pair-merge BPE split every text alike
# ---------------------------------------------------------------------------

def random_merges(rng, alphabet, n):
    tokens, merges = list(alphabet), []
    for _ in range(n):
        a, b = rng.choice(tokens), rng.choice(tokens)
        if a + b not in tokens:
            merges.append(f"{a} {b}")
            tokens.append(a + b)
    return merges


def test_2_merges_the_two_bpes_read_apart_are_refused_in_one_line(tmp_path):
    write_bpe(tmp_path / "t", ["b c", "a b", "ab c"])  # the pass's: tiktoken makes "abc" one token, GPT-2 'a' + 'bc'
    with pytest.raises(tokenizer.TokenizerError) as e:
        tokenizer.load_tokenizer(str(tmp_path / "t"))
    assert str(e.value) == (f"{tmp_path / 't' / 'merges.txt'}: line 4 (ab c) makes 'abc', which GPT-2's pair-merge BPE "
                            "splits as 'a' + 'bc': tiktoken and GPT-2's encoder would split such text differently")


def test_2_what_is_accepted_is_split_alike_and_what_is_refused_would_not_be(tmp_path, monkeypatch):
    # Random merges over three letters, many of them inconsistent: each file is accepted exactly when every merged
    # token comes back as itself under GPT-2's pair-merge BPE, and an accepted file's tiktoken splits random words
    # as GPT-2's encoder does. The negative control: with the check off, a refused file's tokenizer disagrees.
    rng, seen = random.Random(5), {"accepted": 0, "refused": 0}
    for case in range(150):
        merges = random_merges(rng, "abc", rng.randint(2, 9))
        ranks = {tuple(m.split()): r for r, m in enumerate(merges)}
        sound = all(gpt2_pair_bpe(m.replace(" ", ""), ranks) == [m.replace(" ", "")] for m in merges)
        folder = str(write_bpe(tmp_path / str(case), merges))
        words = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 9))) for _ in range(60)]
        words += [m.replace(" ", "") for m in merges]
        try:
            enc = tokenizer.load_tokenizer(folder)
        except tokenizer.TokenizerError as e:
            assert not sound and "pair-merge BPE splits" in str(e), (merges, e)
            with monkeypatch.context() as m:
                m.setattr(tokenizer, "first_disagreement", lambda merges, n: None)
                enc = tokenizer.load_tokenizer(folder)
            assert any([enc.decode([t]) for t in enc.encode(w)] != gpt2_pair_bpe(w, ranks) for w in words), merges
            seen["refused"] += 1
            continue
        assert sound, merges
        for word in words:
            assert [enc.decode([t]) for t in enc.encode(word)] == gpt2_pair_bpe(word, ranks), (merges, word)
        seen["accepted"] += 1
    assert min(seen.values()) > 30, seen


def test_2_the_shipped_tokenizers_pass(tmp_path):
    for folder in ("assets/gpt2-tokenizer", "assets/learned-pair", "assets/learned-pair/draft-4k"):
        assert tokenizer.load_tokenizer(os.path.join(ROOT, folder)).n_vocab > 4000


# ---------------------------------------------------------------------------
# 3. Ctrl-C inside a read: a KeyboardInterrupt, every time; no descriptor closed twice or lost
# ---------------------------------------------------------------------------

# Thousands of SIGINTs from a thread of the process itself, each landing wherever the reads are (a thread that
# needs the interpreter lock runs while the main thread waits in a system call: open, fstat, read). The handler
# raises only while an operation runs, so the counting around it is never cut.
INTERRUPTS = textwrap.dedent("""
    import collections, gc, json, os, random, signal, sys, threading, time
    sys.path.insert(0, ROOT)
    from weights import files, reading
    target, folder, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
    operations = {
        "read_bytes": lambda: reading.read_bytes(os.path.join(ROOT, "assets", "learned-pair", "SHA256SUMS"), "SHA256SUMS"),
        "sha256_of": lambda: __import__("weights.derived").derived.sha256_of(os.path.join(ROOT, "assets", "learned-pair", "merges.txt")),
        "write_text": lambda: files.write_text(os.path.join(folder, "out.txt"), "x" * 100),
        "open_for_appending": lambda: files.open_for_appending(os.path.join(folder, "part"), fresh=True).close(),
    }
    counts, armed, stop = collections.Counter(), [False], [False]
    def on_sigint(signum, frame):
        if armed[0]:
            armed[0] = False  # one interrupt per operation: the counting after it is never cut
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    def killer():
        rng = random.Random(1)
        while not stop[0]:
            time.sleep(rng.uniform(0, 2e-4))
            os.kill(os.getpid(), signal.SIGINT)
    fds = len(os.listdir("/proc/self/fd"))
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    operation = operations[target]
    while counts["interrupted"] < wanted:
        try:
            armed[0] = True
            operation()
            armed[0] = False
            counts["done"] += 1
        except KeyboardInterrupt:
            armed[0] = False
            counts["interrupted"] += 1
        except OSError as e:
            armed[0] = False
            counts["OSError " + str(e.strerror)] += 1
    stop[0] = True
    thread.join()
    gc.collect()
    counts["descriptors left open"] = len(os.listdir("/proc/self/fd")) - fds
    print(json.dumps(counts))
""").replace("ROOT", repr(ROOT))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
@pytest.mark.parametrize("target", ["read_bytes", "sha256_of", "write_text", "open_for_appending"])
def test_3_thousands_of_interrupts_inside_reads_and_writes_are_each_a_keyboard_interrupt(tmp_path, target):
    r = subprocess.run([sys.executable, "-c", INTERRUPTS, target, str(tmp_path), "3000"], capture_output=True,
                       text=True, timeout=600)
    counts = json.loads(r.stdout)
    done = counts.pop("done", 0)  # however many finished between interrupts: none, on a machine slow enough
    assert counts == {"interrupted": 3000, "descriptors left open": 0}, (counts, done)
    assert [f for f in os.listdir(tmp_path) if files.is_temporary(f)] == []


def test_3_a_record_or_a_checksum_file_that_is_interrupted_is_not_taken_for_a_missing_one(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(reading, "read_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        derived.read("model.blocked.json")
    from weights import demo_pair
    with pytest.raises(KeyboardInterrupt):
        demo_pair.shipped_sums()
    monkeypatch.setattr(reading, "open_regular", interrupted)
    with pytest.raises(KeyboardInterrupt):
        demo_pair.same_file(os.path.join(ROOT, "assets", "learned-pair", "merges.txt"), "0" * 64)


# ---------------------------------------------------------------------------
# 4. A batch with nothing to make returns at once
# ---------------------------------------------------------------------------

def test_4_a_batch_of_no_new_tokens_runs_no_model(draft, oracle, monkeypatch):
    monkeypatch.setattr(batch, "forward_batch", None)  # any pass would fail
    for model in (draft, oracle):
        monkeypatch.setattr(model, "forward", None)
    prompts = [[1, 2, 3], [4]]
    assert batch.greedy_generate_batch(oracle, prompts, 0) == [[], []]
    assert batch.speculative_generate_batch(draft, oracle, prompts, 0, n_draft=4) == [[], []]
    assert batch.speculative_sample_batch(draft, oracle, prompts, 0, n_draft=4) == [[], []]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["greedy", "speculative", "sps", "speculative --plain"])
def test_4_prompts_with_no_new_tokens_end_at_once(tiny_dirs, tmp_path, method):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\nthe dog sat\n")
    r = run("workbench.py", "--prompts", prompts, "-n", "0", "--method", *method.split(), "--draft",
            tiny_dirs["draft"], "--oracle", tiny_dirs["oracle"])
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == "=== 1 of 2 ===\n  the cat\n=== 2 of 2 ===\n  the dog sat\n"
    assert "0 new tokens" in r.stderr


# ---------------------------------------------------------------------------
# 5. A mapped file cut short under a run or a session: one line naming it, no bus error
# ---------------------------------------------------------------------------

CUT_UNDER_A_RUN = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, ROOT)
    from workbench.speed import accelerate, threads
    if sys.argv[2] == "big":
        threads.SHARE_MIN_BYTES = 0  # a model as big as GPT-2's: every weight read from the mapped copy
    model = accelerate.load_fast(sys.argv[1])
    model.forward([1, 2])
    os.truncate(os.path.join(sys.argv[1], accelerate.BLOCKED_FILE), 4096)  # as `cp` over it would, in place
    print(model.forward([1, 2, 3]).sum())
""").replace("ROOT", repr(ROOT))


@pytest.mark.parametrize("size", ["small", "big"])
def test_5_a_copy_cut_short_under_a_run_is_one_line(tmp_path, size):
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    r = subprocess.run([sys.executable, "-c", CUT_UNDER_A_RUN, model_dir, size], capture_output=True, text=True,
                       timeout=300)
    one_line_error(r, os.path.join(model_dir, accelerate.BLOCKED_FILE), "was cut short", code=1)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="a pseudo-terminal")
def test_5_a_copy_cut_short_under_a_session_is_one_line(tiny_dirs, tmp_path):
    from test_session import Terminal
    oracle = make_model_dir(tmp_path / "oracle", seed=2, n_layer=3)
    planning.write(oracle, planning.Plan({r: "fast" for r in planning.ROWS}, {}))  # a plan that maps the copy
    term = Terminal("--draft", tiny_dirs["draft"], "--oracle", oracle)
    term.read_until("> ")
    term.command("/length 3")
    assert "new tokens" in term.command("the cat")
    os.truncate(os.path.join(oracle, accelerate.BLOCKED_FILE), 4096)
    term.type("the dog\n")
    shown = term.read_until(r"was cut short[^\n]*\n")
    assert re.search(rf"error: {re.escape(os.path.join(oracle, accelerate.BLOCKED_FILE))} was cut short", shown), shown
    assert term.proc.wait(timeout=30) == 1 and "Bus error" not in shown and "Traceback" not in shown


# ---------------------------------------------------------------------------
# 6. Teardown: no finalizer runs Python code, so a Ctrl-C there is raised where the program runs
# ---------------------------------------------------------------------------

def python_calls_while(action):
    """The Python functions called while action() runs (sys.setprofile sees every call of Python code)."""
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(frame.f_code.co_name) if event == "call" else None)
    try:
        action()
    finally:
        sys.setprofile(None)
    return [c for c in calls if c != "<lambda>"]


def test_6_freeing_a_model_runs_no_python_code(tmp_path):
    model_dir = make_model_dir(tmp_path / "m", seed=3, n_layer=2, tokenizer=False)
    models = [accelerate.load_fast(model_dir)]
    assert any(isinstance(layer["mlp"]["c_fc"]["weight"], second_core.SplitPanels) for layer in models[0].params["h"])
    assert python_calls_while(models.clear) == []
    cache = runner.Recompute(models and None or GPT2.from_pretrained(model_dir))
    from kvcache import KVCache
    caches = [KVCache()]
    cache.forward([1, 2], caches[0])
    assert python_calls_while(caches.clear) == []  # the session's /cache off: no weak dictionary's callback


# Small models freed while the kernel's timer interrupts every 0.1-0.3 ms, inside C code too (where a thread
# sending signals could not run: freeing holds the interpreter lock). The timer's handler is a Ctrl-C's: it raises
# KeyboardInterrupt, here only while models are freed. A finalizer running Python code would take some of them and
# lose them ("Exception ignored"); none may.
TEARDOWN = textwrap.dedent("""
    import collections, json, signal, sys
    sys.path.insert(0, ROOT)
    from gpt2 import GPT2
    from workbench.speed import accelerate
    plain, wanted = GPT2.from_pretrained(sys.argv[1]), int(sys.argv[2])
    counts, armed, ignored = collections.Counter(), [False], []
    def on_timer(signum, frame):
        if armed[0]:
            armed[0] = False  # one interrupt per round: the counting after it is never cut
            raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, on_timer)
    sys.unraisablehook = ignored.append  # C: no Python code of its own to interrupt
    signal.setitimer(signal.ITIMER_REAL, 1e-4, 1.7e-4)
    while counts["interrupted"] < wanted and counts["freed"] < 20 * wanted:
        models = [accelerate.accelerate(plain) for _ in range(20)]  # small models: their weights in SplitPanels
        try:
            armed[0] = True
            models.clear()
            armed[0] = False
            counts["freed"] += 1
        except KeyboardInterrupt:
            armed[0] = False
            counts["interrupted"] += 1
    signal.setitimer(signal.ITIMER_REAL, 0)
    counts["exceptions ignored"] = len(ignored)
    print(json.dumps(counts))
""").replace("ROOT", repr(ROOT))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the kernel's interval timer")
def test_6_interrupts_while_models_are_freed_are_raised_never_lost(tiny_dirs):
    r = subprocess.run([sys.executable, "-c", TEARDOWN, tiny_dirs["oracle"], "300"], capture_output=True, text=True,
                       timeout=600)
    counts = json.loads(r.stdout)
    assert counts.get("interrupted") == 300 and counts["exceptions ignored"] == 0 and r.stderr == "", (counts, r.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["speculative.py", "workbench.py"])
def test_6_ctrl_c_in_the_last_moments_of_a_run_is_one_line_or_nothing(tiny_dirs, script):
    # Interrupts timed from the statistics line, the run's last output, to past its end: each run ends with exit
    # 0 and nothing more, or "error: interrupted" and 130; never "Exception ignored", never a traceback.
    rng = random.Random(2)
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, script), "the cat", "-n", "8",
                                 "--draft", tiny_dirs["draft"], "--oracle", tiny_dirs["oracle"]], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        said, line = "", None
        while "new tokens" not in said and line != "":  # the statistics line, or the end of what it says
            line = proc.stderr.readline()
            said += line
        assert "new tokens" in said, said
        time.sleep(rng.uniform(0, 0.01))
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
        assert (code, rest) in ((0, ""), (130, "error: interrupted\n")), (code, rest)


# ---------------------------------------------------------------------------
# The smaller cases
# ---------------------------------------------------------------------------

def test_prompts_files_strip_a_byte_order_mark_and_say_their_escapes(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_bytes("\ufeffthe cat\\nsat\nC:\\\\new and C:\\x\nend \\\\n\n".encode())
    assert runner.read_prompt_lines(str(path)) == ["the cat\nsat", "C:\\new and C:\\x", "end \\n"]
    assert "\\n is a newline and \\\\ a backslash" in " ".join(run("workbench.py", "--help").stdout.split())


def test_no_text_can_pass_for_a_header_of_a_batch():
    listing = display.listed(1, 2, "the cat\n=== 2 of 2 ===\rsat\u2028=== 2 of 2 ===\x0b=== 2 of 2 ===") + \
        display.listed(2, 2, "the dog")
    assert [line for line in listing.splitlines() if line.startswith("===")] == ["=== 1 of 2 ===", "=== 2 of 2 ==="]


def test_out_refuses_a_missing_parent_as_html_does(tiny_dirs, tmp_path):
    r = run("workbench.py", "bench", "batch", "--out", tmp_path / "typo" / "deeper" / "results", "--draft", tiny_dirs["draft"],
            "--oracle", tiny_dirs["oracle"])
    one_line_error(r, "its parent directory does not exist", code=2)
    assert os.listdir(tmp_path) == []
    assert files.why_not_writable_in(str(tmp_path / "new"), ["a.md"]) is None  # one level is made


def test_a_setting_of_any_length_is_echoed_cut(monkeypatch):
    monkeypatch.setattr(second_core, "_asked", None)
    monkeypatch.setenv(second_core.SECOND_CORE_SETTING, "x" * 100_000)
    with pytest.raises(second_core.SettingError) as e:
        second_core.asked()
    assert len(str(e.value)) < 200 and quoted("x" * 100_000) in str(e.value)


def test_the_ablations_take_a_bounded_number_of_prompts(tmp_path):
    from workbench.bench import ablation
    path = tmp_path / "many.txt"
    path.write_text("a prompt\n" * (ablation.MAX_PROMPTS + 1))
    r = run("workbench.py", "bench", "ablation", "--prompts", path, "--draft", "no-such-model", "--out", tmp_path / "a.csv")
    one_line_error(r, f"{ablation.MAX_PROMPTS + 1} prompts", f"the {ablation.MAX_PROMPTS} the ablations take")


def test_the_session_names_a_file_called_off_and_paths_with_spaces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = session.Session("d", "o", str(tmp_path), Settings(), out=open(os.devnull, "w"))
    for line, html in [("/html my page.html", "my page.html"), ("/html ./off", "./off"), ("/html off", None)]:
        s.handle(line)
        assert s.html == html, line
    s.handle("/oracle a model dir")
    assert s.names["oracle"] == "a model dir"


@pytest.mark.slow
def test_compare_says_which_baseline_it_ran(tiny_dirs):
    r = run("workbench.py", "the cat", "--method", "draft-alone", "--temperature", "0.7", "--seed", "3", "-n", "6",
            "--compare", "--draft", tiny_dirs["draft"], "--oracle", tiny_dirs["oracle"])
    assert r.returncode == 0 and "oracle alone (sample: multinomial, temperature 0.7, seed 3)" in r.stderr, r.stderr
