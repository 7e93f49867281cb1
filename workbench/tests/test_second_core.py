"""workbench/speed/second_core.py: half of each product of a small model on a helper process, the same output bit for bit.

The helper is off unless asked for; these tests ask for it (SPECULATIVE_GPT2_SECOND_CORE=1). Each
compares against the same product on one core (SPECULATIVE_GPT2_ONE_CORE=1), and checks that the
helper really took its half (its job count moved). Products are called here outside any forward,
with the BLAS as the test run left it: the same bits must come out whatever its threads
(.ci/run runs this file alone under OPENBLAS_NUM_THREADS unset, 1 and 2, and three kernels). Where
the helper cannot run (not Linux on x86-64, one core), the products must run on one core, which the
last test checks.
"""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from fixtures import ROOT
from kvcache import KVCache
from workbench.speed import panels, second_core
from workbench.speed.accelerate import load_fast

needs_helper = pytest.mark.skipif(not second_core.supported(), reason="the helper runs on Linux x86-64 with 2 cores")


@pytest.fixture
def fresh(monkeypatch):
    """A module with no helper and nothing broken, before and after: each test starts its own. Every
    product of two rows or more is shared, however small (MIN_WORK 0), unless a test says otherwise."""
    ask_for_the_helper(monkeypatch)
    stop_helper()
    monkeypatch.setattr(second_core, "_broken", False)
    monkeypatch.setattr(second_core, "MIN_WORK", 0)
    yield
    stop_helper()


@pytest.fixture
def running(monkeypatch):
    """As `fresh`, but a helper left by an earlier test of this kind is kept: starting one per case would
    cost more than the cases."""
    ask_for_the_helper(monkeypatch)
    monkeypatch.setattr(second_core, "MIN_WORK", 0)
    if second_core._broken:
        monkeypatch.setattr(second_core, "_broken", False)


def ask_for_the_helper(monkeypatch):
    monkeypatch.delenv(second_core.ONE_CORE_SETTING, raising=False)
    monkeypatch.setenv(second_core.SECOND_CORE_SETTING, "1")
    monkeypatch.setattr(second_core, "_asked", None)


def stop_helper():
    if second_core._helper is not None:
        second_core._helper.stop()


def started(weights):
    """The helper, once ready to take a product of `weights`."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not second_core._broken:  # broken: given up, it never starts
        helper = second_core.helper_for(second_core.MAILBOX_ROWS, weights)
        if helper is not None:
            return helper
        time.sleep(0.01)
    raise AssertionError("the helper did not start in 30 s" if not second_core._broken else "the helper did not start")


def split(shape, seed=0):
    n_in, n_out = shape
    w = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return second_core.SplitPanels(panels.to_panels(w), n_out)


def one_core(x, weights, monkeypatch):
    monkeypatch.setenv(second_core.ONE_CORE_SETTING, "1")
    try:
        return x @ weights
    finally:
        monkeypatch.delenv(second_core.ONE_CORE_SETTING)


@needs_helper
# Every shape of the learned pair (oracle 288 wide, draft 128), a width that is no multiple of a panel, and a tiny one.
@pytest.mark.parametrize("shape", [(288, 864), (288, 288), (288, 1152), (1152, 288), (288, 8192), (128, 384),
                                   (128, 128), (128, 512), (512, 128), (128, 8192), (40, 200), (16, 128)])
@pytest.mark.parametrize("n_rows", [2, 5, 17, 19, 64, 65, 129, 150])
def test_split_products_equal_one_core_bit_for_bit(running, monkeypatch, shape, n_rows):
    w = split(shape)
    helper = started(w)
    x = np.random.default_rng(n_rows).standard_normal((n_rows, shape[0])).astype(np.float32)
    jobs = helper.job
    got = x @ w
    assert helper.job > jobs  # the helper took its half
    np.testing.assert_array_equal(got, one_core(x, w, monkeypatch))
    assert got.shape == (n_rows, shape[1])


@needs_helper
def test_a_verification_on_the_learned_oracle_is_bit_for_bit_the_one_core_forward(fresh, monkeypatch, demo_dirs):
    oracle = load_fast(demo_dirs["oracle"])
    started(oracle.params["h"][0]["mlp"]["c_fc"]["weight"])
    ids = np.random.default_rng(1).integers(0, oracle.vocab_size, 40)
    caches = {setting: KVCache() for setting in ("", "1")}
    logits = {}
    for setting, cache in caches.items():
        monkeypatch.setenv(second_core.ONE_CORE_SETTING, setting)
        oracle.forward(ids[:23], cache)
        logits[setting] = oracle.forward(ids[23:], cache)  # 17 rows after 23 cached
    np.testing.assert_array_equal(logits[""], logits["1"])


@needs_helper
def test_one_row_and_the_setting_keep_products_on_this_core(fresh, monkeypatch):
    w = split((288, 1152))
    helper = started(w)
    jobs = helper.job
    x = np.ones((1, 288), dtype=np.float32)
    x @ w  # one row: a matrix-vector product, bound by memory
    monkeypatch.setattr(second_core, "MIN_WORK", 2 * 288 * 1152 + 1)
    np.ones((2, 288), dtype=np.float32) @ w  # less work than a hand-over is worth
    monkeypatch.setenv(second_core.ONE_CORE_SETTING, "1")  # read at every product, not once at import
    np.ones((17, 288), dtype=np.float32) @ w
    assert helper.job == jobs
    assert second_core.ONE_CORE_SETTING in second_core.status()


@needs_helper
@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_helper_that_dies_or_hangs_costs_a_note_not_the_answer(fresh, monkeypatch, capfd, how):
    w = split((288, 1152))
    helper = started(w)
    x = np.random.default_rng(3).standard_normal((17, 288)).astype(np.float32)
    x @ w  # its half is sent
    monkeypatch.setattr(second_core, "WAIT_SECONDS", 0.2)
    os.kill(helper.process.pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
    if how == "killed":
        helper.process.wait()
    got = x @ w
    got_again = x @ w
    expected = one_core(x, w, monkeypatch)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_again, expected)
    err = capfd.readouterr().err
    assert err.count("note:") == 1 and "one core from here on" in err, err
    assert "Traceback" not in err
    assert helper.process.poll() is not None  # a hung helper is ended, not left behind
    assert second_core.helper_for(17, w) is None and "failed" in second_core.status()


@needs_helper
def test_the_helper_ignores_ctrl_c_and_forgets_dropped_weights(fresh, monkeypatch):
    w, other = split((288, 1152)), split((288, 864), seed=1)
    helper = started(w)
    x = np.random.default_rng(4).standard_normal((5, 288)).astype(np.float32)
    x @ w, x @ other
    assert {w.key, other.key} <= helper.kept
    os.kill(helper.process.pid, signal.SIGINT)  # a Ctrl-C at the terminal reaches the whole process group
    time.sleep(0.1)
    assert helper.process.poll() is None
    gone = other.key
    del other
    gc.collect()
    np.testing.assert_array_equal(x @ w, one_core(x, w, monkeypatch))
    assert gone not in helper.kept and w.key in helper.kept


CHILD = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from workbench.speed import panels, second_core
    w = second_core.SplitPanels(panels.to_panels(np.ones((288, 1152), np.float32)), 1152)
    deadline = time.monotonic() + 30
    while second_core.helper_for(second_core.MAILBOX_ROWS, w) is None and not second_core._broken and time.monotonic() < deadline:
        time.sleep(0.01)
    np.ones((17, 288), np.float32) @ w
    print(second_core.helper_pid(), flush=True)
    time.sleep(float(sys.argv[2]))
    os.kill(os.getpid(), 9)  # no atexit, no goodbye: the helper must notice on its own
""")


@needs_helper
@pytest.mark.parametrize("idle", [0.0, 0.5])  # killed while the helper spins, and after it has gone to sleep
def test_the_helper_ends_when_its_parent_is_killed(idle):
    child = subprocess.run([sys.executable, "-c", CHILD, ROOT, str(idle)], capture_output=True, text=True, timeout=60,
                           env=asking())
    pid = int(child.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and "Z" not in state(pid):
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in state(pid), f"helper {pid} outlived its parent"


def asking():
    """The environment of a process of this test's that asks for the helper."""
    env = {**os.environ, second_core.SECOND_CORE_SETTING: "1"}
    env.pop(second_core.ONE_CORE_SETTING, None)
    return env


FORKS_THEN_DIES = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from workbench.speed import panels, second_core
    w = second_core.SplitPanels(panels.to_panels(np.ones((288, 1152), np.float32)), 1152)
    deadline = time.monotonic() + 30
    while second_core.helper_for(second_core.MAILBOX_ROWS, w) is None and not second_core._broken and time.monotonic() < deadline:
        time.sleep(0.01)
    np.ones((17, 288), np.float32) @ w
    if sys.argv[2] == "holding the pipe":  # a copy of the wake pipe's end that no fork hook knows of
        os.dup(second_core._helper.wake_w)
    helper = second_core.helper_pid()
    time.sleep(3 * second_core.IDLE_SECONDS)  # the helper has gone to sleep on its pipe
    child = os.fork()
    if child == 0:  # a child that outlives its parent by far
        time.sleep(60)
        os._exit(0)
    print(helper, child, flush=True)
    os.kill(os.getpid(), 9)
""")


@needs_helper
@pytest.mark.parametrize("child", ["plain", "holding the pipe"])
def test_the_helper_of_a_parent_killed_after_it_forked_is_gone_within_two_seconds(child):
    # The parent forks a child that goes on living, then is killed while its helper sleeps: the child
    # must not keep the helper alive (its copy of the pipe closed at the fork; the parent looked for).
    parent = subprocess.Popen([sys.executable, "-c", FORKS_THEN_DIES, ROOT, child], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=asking())
    helper, grandchild = (int(pid) for pid in parent.stdout.readline().split())
    try:
        parent.wait(timeout=60)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and os.path.exists(f"/proc/{helper}") and "Z" not in state(helper):
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{helper}") or "Z" in state(helper), f"helper {helper} outlived its parent"
    finally:
        os.kill(grandchild, signal.SIGKILL)
        parent.stdout.close()


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read(4096).rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


FORKED = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from workbench.speed import panels, second_core
    w = second_core.SplitPanels(panels.to_panels(np.arange(288 * 1152, dtype=np.float32).reshape(288, 1152) % 7), 1152)
    x = np.random.default_rng(5).standard_normal((17, 288)).astype(np.float32)
    expected = panels.product(x, w.panels)[:, :1152]
    deadline = time.monotonic() + 30
    while second_core.helper_for(17, w) is None and not second_core._broken and time.monotonic() < deadline:
        time.sleep(0.01)
    helper = second_core._helper
    assert np.array_equal(x @ w, expected) and helper.job > 0
    jobs = helper.job
    pid = os.fork()  # this process has no other thread: the child starts clean
    if pid == 0:  # its own helper or one core, and the parent's mailbox untouched
        os._exit(0 if second_core._helper is None and np.array_equal(x @ w, expected) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child"
    assert helper.job == jobs and np.array_equal(x @ w, expected) and helper.job > jobs
    print("ok")
""")


@needs_helper
def test_a_forked_child_does_not_use_its_parents_helper():
    # In a process of its own: forking the test run, with its threads, could deadlock the child.
    child = subprocess.run([sys.executable, "-c", FORKED, ROOT], capture_output=True, text=True, timeout=60, env=asking())
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr


def test_the_helper_is_off_unless_asked_for(fresh, monkeypatch):
    monkeypatch.delenv(second_core.SECOND_CORE_SETTING)
    w = split((288, 1152))
    x = np.random.default_rng(7).standard_normal((17, 288)).astype(np.float32)
    got = x @ w
    assert second_core._helper is None and second_core.status().startswith("one core")
    second_core.use(True)  # --second-core: asked for, whatever the environment says
    assert second_core.asked()
    monkeypatch.setenv(second_core.SECOND_CORE_SETTING, "on")
    second_core.use(False)
    assert not second_core.asked()
    np.testing.assert_array_equal(got, one_core(x, w, monkeypatch))


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("YES", True), ("on", True), (" On ", True),
                                       ("", False), ("0", False), ("false", False), ("no", False), ("OFF", False)])
def test_the_settings_mean_what_they_say(monkeypatch, value, on):
    monkeypatch.setattr(second_core, "_asked", None)
    monkeypatch.setenv(second_core.SECOND_CORE_SETTING, value)
    monkeypatch.delenv(second_core.ONE_CORE_SETTING, raising=False)
    assert second_core.asked() is on
    monkeypatch.setenv(second_core.SECOND_CORE_SETTING, "1")
    monkeypatch.setenv(second_core.ONE_CORE_SETTING, value)  # on: one core, whatever else asks
    assert second_core.asked() is not on


@pytest.mark.parametrize("value", ["00", "2", "maybe", "yes please", "\x1b[31mred"])
def test_a_setting_that_is_neither_on_nor_off_is_one_clear_line(monkeypatch, value):
    monkeypatch.setattr(second_core, "_asked", None)
    monkeypatch.setenv(second_core.SECOND_CORE_SETTING, value)
    with pytest.raises(second_core.SettingError) as e:
        second_core.asked()
    message = str(e.value)
    assert second_core.SECOND_CORE_SETTING in message and "\n" not in message and "\x1b" not in message


def test_without_a_helper_products_run_on_one_core(fresh, monkeypatch):
    # Not Linux on x86-64, or one core: no process is started, and the products are the same.
    monkeypatch.setattr(second_core, "supported", lambda: False)
    w = split((288, 1152))
    x = np.random.default_rng(6).standard_normal((17, 288)).astype(np.float32)
    got = x @ w
    assert second_core._helper is None and "one core" in second_core.status()
    np.testing.assert_array_equal(got, panels.product(x, w.panels)[:, :1152])
