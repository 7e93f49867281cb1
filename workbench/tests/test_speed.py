"""speed/: every regime of the blocked product against a plain product, on 1, 2 and 3 threads; the
threads it owns (whatever the program imported first); errors and concurrent callers; the
accelerated model against the plain one.

No timing is asserted here: PERFORMANCE.md has the measurements, from bench.py.
"""

import json
import mmap
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import threadpoolctl

from fixtures import ROOT, make_model_dir
from gpt2 import GPT2
from kvcache import KVCache
from speculative import greedy_generate
from workbench.speed import blocked, panels, threads
from workbench.speed.accelerate import BLOCKED_FILE, FastGPT2, accelerate, load_fast
from test_beam import MEMORY_CASES, assert_the_estimate_holds_the_peak
from test_gpt2 import reference_logits


@pytest.fixture
def shared_over(monkeypatch):
    """shared_over(n): make every product share its work over n threads, however small the weight."""
    def use(n):
        monkeypatch.setattr(threads, "THREADED_MIN_SIZE", 0)
        monkeypatch.setattr(threads, "N_THREADS", n)
        monkeypatch.setattr(threads, "_pool", None)  # a pool sized for n threads
    return use


def blocks_of(w):  # checkpoint layout [n_in, n_out] -> the blocks product() multiplies
    return blocked.to_blocks(w.T)


@pytest.mark.parametrize("n_seq", [1, 2, 3, 8, 16, 24, 25, 40])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("n_in, n_out", [(96, 37), (64, 16), (33, 200), (2000, 200)])
def test_every_regime_matches_a_plain_product(shared_over, n_seq, n_threads, n_in, n_out):
    # 1 row (matrix-vector), 2..24 rows (small products, rows_per_call rows each, and
    # the rest of a share in one more), 25 and more (one big product); widths that
    # need padding and one that does not; more shares than blocks (3 threads, 1 block).
    shared_over(n_threads)
    rng = np.random.default_rng(n_seq * 1000 + n_in)
    w = rng.standard_normal((n_in, n_out), dtype=np.float32) / np.float32(np.sqrt(n_in))  # outputs of about 1
    x = rng.standard_normal((n_seq, n_in), dtype=np.float32)
    got = blocked.product(x, blocks_of(w))
    assert got.dtype == np.float32 and got.shape == (n_seq, -(-n_out // blocked.BLOCK) * blocked.BLOCK)
    np.testing.assert_allclose(got[:, :n_out], x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    assert not got[:, n_out:].any()  # the padding rows of W.T are zero


@pytest.mark.parametrize("n_seq", range(1, 25))
@pytest.mark.parametrize("n_in", [64, 768, 1600, 6400])
def test_rows_per_call_is_the_most_the_small_kernel_takes(n_seq, n_in):
    rows = blocked.rows_per_call(n_seq, n_in)
    assert rows in (1, 2, 4, 8, 16, 32, 64, 128, 256)

    def fits(r):
        return r * n_seq <= blocked.SMALL_MN and r * n_seq * n_in <= blocked.SMALL_MNK

    assert fits(rows) or rows == 1
    assert rows == 256 or not fits(2 * rows)


@pytest.mark.parametrize("n_seq", [1, 5, 30])
def test_weight_and_rows_read_as_the_math(n_seq):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((48, 21), dtype=np.float32)
    x = rng.standard_normal((n_seq, 48), dtype=np.float32)
    weight = blocked.Rows(blocks_of(w), 21).T  # W for x @ W
    np.testing.assert_allclose(x @ weight, x @ w, rtol=1e-5, atol=1e-5)
    assert weight.shape == w.shape and np.array_equal(np.asarray(weight), w)
    wte = blocked.Rows(blocked.to_blocks(w), 48)  # an embedding: rows looked up, and x @ wte.T
    assert np.array_equal(wte[[0, 47, 3]], w[[0, 47, 3]])
    h = rng.standard_normal((n_seq, 21), dtype=np.float32)
    np.testing.assert_allclose(h @ wte.T, h @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_seq", [1, 2, 3, 5, 16, 17, 24, 25, 40, 70])
@pytest.mark.parametrize("n_in, n_out", [(96, 37), (64, 16), (33, 200), (288, 864), (1152, 288), (2000, 70)])
def test_every_panel_product_matches_a_plain_product(n_seq, n_in, n_out):
    # One row (as two), rows in one call, rows over several calls, padded panels: the math of x @ W.
    rng = np.random.default_rng(n_seq + n_in)
    w = rng.standard_normal((n_in, n_out), dtype=np.float32)
    x = rng.standard_normal((n_seq, n_in), dtype=np.float32)
    weight = panels.Panels(panels.to_panels(w), n_out)
    got = x @ weight
    assert got.shape == (n_seq, n_out) and got.dtype == np.float32
    np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4 * np.sqrt(n_in))
    assert np.array_equal(np.asarray(weight), w)


@pytest.mark.parametrize("n_in", [48, 288, 768, 1152, 6400])
def test_a_panel_takes_a_verification_in_one_small_kernel_call(n_in):
    width = panels.panel_width(n_in)
    rows = panels.rows_per_call(width, n_in)
    assert width * n_in * panels.VERIFY_ROWS <= blocked.SMALL_MNK or width == panels.WIDTHS[-1]
    assert rows >= panels.VERIFY_ROWS or width == panels.WIDTHS[-1]
    assert width * rows * n_in <= blocked.SMALL_MNK or rows == 1


def test_the_table_looks_rows_up_and_multiplies_by_its_transpose():
    rng = np.random.default_rng(2)
    wte = rng.standard_normal((100, 24), dtype=np.float32)  # 100 tokens: not a whole number of panels
    table = panels.Table(panels.Panels(panels.to_panels(wte.T), 100))
    assert table.shape == wte.shape and np.array_equal(np.asarray(table), wte)
    assert np.array_equal(table[[0, 99, 3, 3]], wte[[0, 99, 3, 3]]) and np.array_equal(table[7], wte[7])
    with pytest.raises(IndexError):
        table[[100]]
    h = rng.standard_normal((3, 24), dtype=np.float32)
    np.testing.assert_allclose(h @ table.T, h.astype(np.float64) @ wte.T, rtol=1e-5, atol=1e-5)


def test_a_small_model_keeps_its_weights_in_panels_and_a_big_one_its_blocked_copy(tiny_dirs, monkeypatch):
    small = load_fast(tiny_dirs["oracle"])
    assert not small.shares and isinstance(small.params["wte"], panels.Table)
    assert all(isinstance(layer[part][name]["weight"], panels.Panels) for layer in small.params["h"]
               for part, name in (("attn", "c_attn"), ("attn", "c_proj"), ("mlp", "c_fc"), ("mlp", "c_proj")))
    monkeypatch.setattr(threads, "SHARE_MIN_BYTES", 0)
    big = load_fast(tiny_dirs["oracle"])
    assert big.shares and isinstance(big.params["wte"], blocked.Rows)
    ids = [5, 1, 4, 1, 5, 9, 2, 6]
    # Two layouts sum in two orders, each a few float32 roundings from the float64 GPT-2 at the logits'
    # scale (this model's logits reach about 9; no BLAS promises the same bits across its kernels).
    want = reference_logits(tiny_dirs["oracle"], ids)
    for model in (small, big):
        np.testing.assert_allclose(model.forward(ids), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert (small.forward(ids).argmax(-1) == big.forward(ids).argmax(-1)).all()  # the same greedy tokens


def test_an_error_in_a_share_reaches_the_caller_and_the_threads_keep_working(shared_over):
    shared_over(2)
    failed = []

    def part(share):
        if share.start > 0:  # the share another thread runs
            failed.append(share)
            raise RuntimeError("share failed")

    with pytest.raises(RuntimeError, match="share failed"):
        threads.in_shares(part, 10, True)
    assert failed
    w = np.arange(64 * 40, dtype=np.float32).reshape(64, 40) / 1000
    x = np.ones((4, 64), dtype=np.float32)
    np.testing.assert_allclose(blocked.product(x, blocks_of(w))[:, :40], x @ w, rtol=1e-5)


def test_threads_calling_at_once_each_get_their_own_product(shared_over):
    # A program may run forwards from several threads (a server, a notebook): the
    # shares of different products must never mix.
    shared_over(2)
    rng = np.random.default_rng(2)
    weights = [rng.standard_normal((128, 96), dtype=np.float32) for _ in range(4)]
    xs = [rng.standard_normal((n, 128), dtype=np.float32) for n in (1, 3, 8, 30)]
    expected = [[x.astype(np.float64) @ w for w in weights] for x in xs]
    mismatches = []

    def caller(i):
        for _ in range(20):
            for j, w in enumerate(weights):
                got = blocked.product(xs[i], blocks_of(w))[:, :96]
                if not np.allclose(got, expected[i][j], rtol=1e-4, atol=1e-4):
                    mismatches.append((i, j))

    callers = [threading.Thread(target=caller, args=(i,)) for i in range(len(xs))]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert not mismatches


IMPORT_ORDER_PROBE = """
import json, sys
if sys.argv[2] == "numpy first":
    import numpy
    numpy.ones((300, 300)) @ numpy.ones((300, 300))  # the BLAS's own threads are started
import threadpoolctl
from kvcache import KVCache
from workbench.speed import accelerate, blocked, threads
seen = set()
real = blocked.product
def watched(x, w):
    seen.add((threadpoolctl.threadpool_info()[0]["num_threads"], x.shape[0]))
    return real(x, w)
blocked.product = watched
threads.THREADED_MIN_SIZE = 0  # the tiny model's weights shared out too
threads.SHARE_MIN_BYTES = 0    # and the tiny model counted as big enough for threads at all
before = threadpoolctl.threadpool_info()[0]["num_threads"]
model = accelerate.load_fast(sys.argv[1])
cache = KVCache()
prompt = model.forward([1, 2, 3], cache, n_logits=1)  # the blocks with three rows, the LM head with one
verification = model.forward([4, 5, 6, 7], cache)  # k rows right after it
one = model.forward([8], cache)  # a single token
try:
    model.forward([10 ** 9], cache)  # an error inside forward: the program's setting must still come back
except ValueError:
    pass
after = threadpoolctl.threadpool_info()[0]["num_threads"]
print(json.dumps({"threads": sorted(seen), "restored": before == after,
                  "logits": [a.tobytes().hex() for a in (prompt, verification, one)]}))
"""


def test_importing_numpy_first_changes_nothing(tiny_dirs):
    # speed/threads.py sets the BLAS's threads at run time, inside forward only, so a program
    # that imported NumPy (and started the BLAS's own threads) before the model gets the
    # same threads in every regime (the BLAS's for a single token, one BLAS thread and
    # this module's for several), the same logits bit for bit, and its own setting
    # back afterwards, even when forward raises.
    outputs = {}
    for order in ("numpy first", "gpt2 first"):
        r = subprocess.run([sys.executable, "-c", IMPORT_ORDER_PROBE, tiny_dirs["oracle"], order], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outputs[order] = r.stdout
    assert outputs["numpy first"] == outputs["gpt2 first"]
    probe = json.loads(outputs["numpy first"])
    assert probe["restored"]
    one_row = threads.N_THREADS if threads.blas_thread_stoppers() else 1  # the BLAS's threads only where they park
    # Each step in the setting for its own rows: the prompt's three, then its LM head's one row, as a single token's.
    assert probe["threads"] == [list(t) for t in sorted({(one_row, 1), (1, 3), (1, 4)})]


def test_threads_for_one_row_lets_the_blas_share_out_and_restores_the_setting():
    # Where the BLAS's idle threads cannot be parked (OpenBLAS 0.3.34), it stays single-threaded for one row too.
    blas_shares = threads.N_THREADS > 1 and bool(threads.blas_thread_stoppers())
    before = threadpoolctl.threadpool_info()[0]["num_threads"]
    with threads.threads_for(1):
        assert threads._blas_shares_rows == blas_shares
        assert threadpoolctl.threadpool_info()[0]["num_threads"] == (threads.N_THREADS if blas_shares else 1)
        with threads.threads_for(5):  # nested: a verification inside a single-token context
            assert not threads._blas_shares_rows and threadpoolctl.threadpool_info()[0]["num_threads"] == 1
        assert threads._blas_shares_rows == blas_shares
    assert not threads._blas_shares_rows and threadpoolctl.threadpool_info()[0]["num_threads"] == before
    w = np.arange(64 * 40, dtype=np.float32).reshape(64, 40) / 1000
    x = np.ones((1, 64), dtype=np.float32)
    with threads.threads_for(1):
        shared_by_blas = blocked.product(x, blocks_of(w))
    np.testing.assert_allclose(shared_by_blas, blocked.product(x, blocks_of(w)), rtol=1e-6)


def test_a_small_model_runs_on_the_calling_thread_alone(tiny_dirs, monkeypatch):
    # Under SHARE_MIN_BYTES per token no product is handed to any other thread: the BLAS is limited
    # to one thread for one row as for several, and in_shares never queues a share; same logits.
    model = load_fast(tiny_dirs["oracle"])
    assert not model.shares
    queued = []
    monkeypatch.setattr(threads, "THREADED_MIN_SIZE", 0)  # a big model would share even these weights out
    monkeypatch.setattr(threads, "_tasks", type("Queue", (), {"put": lambda self, task: queued.append(task)})())
    seen = []
    real = panels.product  # a small model's weights are in panels (speed/panels.py)

    def watched(x, w):
        seen.append((threadpoolctl.threadpool_info()[0]["num_threads"], threads.blas_shares_rows()))
        return real(x, w)
    monkeypatch.setattr(panels, "product", watched)
    cache = KVCache()
    logits = [model.forward([1, 2, 3], cache), model.forward([4], cache)]
    assert queued == [] and set(seen) == {(1, False)}
    plain = GPT2.from_pretrained(tiny_dirs["oracle"])
    expected = [plain.forward([1, 2, 3]), plain.forward([1, 2, 3, 4])[-1:]]
    for got, want in zip(logits, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)  # float32 sums in another order


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts the process's threads in /proc")
def test_a_small_models_forwards_leave_the_blas_single_threaded_and_start_no_thread(tiny_dirs):
    # Putting the program's setting back after every forward would have OpenBLAS start its threads
    # again, and the next forward end them: a thread started and joined around every forward.
    model = load_fast(tiny_dirs["oracle"])
    assert not model.shares
    with threadpoolctl.threadpool_limits(limits=max(2, threads.N_THREADS), user_api="blas"):  # the program's own
        model.forward([1, 2])
        assert {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"} == {1}
        n_threads = len(os.listdir("/proc/self/task"))
        for _ in range(5):
            model.forward([3])
            model.forward([4, 5, 6])
        assert len(os.listdir("/proc/self/task")) == n_threads


def openblas_with_its_own_threads():
    return any(i["internal_api"] == "openblas" and i.get("threading_layer") == "pthreads"
               for i in threadpoolctl.threadpool_info())


def spinning_threads(n_rows, token_product):
    """How many other threads of this process are running or runnable while it sleeps inside
    threads_for(n_rows), right after token_product() ran inside threads_for(1): the BLAS's idle
    threads that spin meanwhile. Their state (Linux's /proc), not the CPU they get, which other
    processes on a loaded machine take."""
    with threads.threads_for(1):
        token_product()
    with threads.threads_for(n_rows):
        counts = []
        for _ in range(4):  # over the first 40 ms of OpenBLAS's 0.1 s of spinning
            time.sleep(0.01)
            counts.append(running_other_threads())
        return max(counts)


def running_other_threads():
    me, running = threading.get_native_id(), 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]  # after "pid (name)"
        except OSError:  # the thread ended meanwhile
            continue
        running += int(tid) != me and state == "R"
    return running


@pytest.mark.skipif(not sys.platform.startswith("linux") or threads.N_THREADS < 2,
                    reason="OpenBLAS's idle threads spin on Linux, with 2 or more cores")
def test_products_of_several_rows_run_beside_no_spinning_blas_thread():
    # After sharing out a product, OpenBLAS's threads spin for about 0.1 s waiting for the
    # next: beside a verification that follows a draft's single-token passes they would
    # take half a core from this module's worker. Two designs keep them quiet, whichever this
    # OpenBLAS allows (parking(), which --verbose prints).
    if not openblas_with_its_own_threads():
        pytest.skip("the BLAS is not OpenBLAS with its own thread pool")
    a, v = np.ones((4096, 4096), dtype=np.float32), np.ones(4096, dtype=np.float32)
    w = blocks_of(np.ones((4096, 4096), dtype=np.float32))

    def raw_blas_product():  # the BLAS's threads sharing a product out, whatever threads_for set
        with threadpoolctl.threadpool_limits(threads.N_THREADS, user_api="blas"):
            a @ v

    def token_product():  # what a single-token forward runs
        blocked.product(v[None, :], w)

    assert spinning_threads(1, raw_blas_product) > 0  # the probe sees spinning threads
    if threads.blas_thread_stoppers():  # blas_thread_shutdown_ (OpenBLAS up to NumPy 2.4's)
        assert spinning_threads(1, token_product) > 0  # kept spinning from one row to the next
        assert spinning_threads(8, token_product) == 0  # several rows: stopped
        assert spinning_threads(8, raw_blas_product) == 0  # whoever woke them
    else:  # OpenBLAS 0.3.34: the BLAS stays single-threaded, a token's products run on this module's threads
        assert "could not be parked" in threads.parking()
        time.sleep(0.3)  # the raw product's threads fall asleep
        assert spinning_threads(1, token_product) == 0 and spinning_threads(8, token_product) == 0
    with threads.threads_for(1):  # and a single-token product after it is right
        np.testing.assert_array_equal(blocked.product(v[None, :], w)[0], np.full(4096, 4096, dtype=np.float32))


def product_on_two_threads(x, blocks):  # in a child process: blocked.product shared out over 2 threads
    threads.THREADED_MIN_SIZE, threads.N_THREADS = 0, 2
    return blocked.product(x, blocks)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_child_process_starts_its_own_threads(shared_over, method):
    # A program using the model may start processes. After a fork only the forking thread
    # exists in the child: a child that handed shares to its parent's workers would wait
    # forever (forget_workers). Spawn and forkserver children start afresh.
    import multiprocessing
    import warnings
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    shared_over(2)
    w = np.arange(64 * 40, dtype=np.float32).reshape(64, 40) / 1000
    x = np.ones((3, 64), dtype=np.float32)
    expected = blocked.product(x, blocks_of(w))  # the parent's workers are running now
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a process with threads may deadlock the child: the
        # very case checked here. The project itself never forks after its threads start.
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        with multiprocessing.get_context(method).Pool(1) as pool:
            got = pool.apply_async(product_on_two_threads, (x, blocks_of(w))).get(timeout=120)
    np.testing.assert_array_equal(got, expected)


def test_forwards_from_two_threads_take_turns_and_leave_the_setting_as_it_was():
    # The BLAS's thread count is the whole process's: two forwards at once must not restore
    # each other's setting in the wrong order.

    class Model:
        weight = blocked.Rows(np.ones((256, blocked.BLOCK, 64), np.float32), 256 * blocked.BLOCK).T  # shared out

        def forward(self, ids):  # as FastGPT2.forward does
            with threads.threads_for(len(ids)):
                return np.ones((len(ids), 64), np.float32) @ self.weight

    before = threadpoolctl.threadpool_info()[0]["num_threads"]
    callers = [threading.Thread(target=lambda ids=ids: [Model().forward(ids) for _ in range(300)])
               for ids in ([1], [1, 2, 3])]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert not threads._blas_shares_rows and threadpoolctl.threadpool_info()[0]["num_threads"] == before


def test_a_ctrl_c_while_waiting_for_the_shares_waits_for_all_of_them():
    # No worker may still be writing into a product's output once the caller has moved on.
    class Answers:
        def __init__(self):
            self.asked = 0

        def get(self):
            self.asked += 1
            if self.asked == 1:
                raise KeyboardInterrupt  # Ctrl-C while the first share is still running
            return None
    done = Answers()
    with pytest.raises(KeyboardInterrupt):
        threads.answers(done, 3)
    assert done.asked == 4  # the interrupted wait, then all three answers


# ---------------------------------------------------------------------------
# The accelerated model against the plain one
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine_dir(tmp_path_factory):
    # std 0.1, as tests/test_gpt2.py's model: float32 logits ~1e-6 from the float64 reference
    return make_model_dir(tmp_path_factory.mktemp("speed"), seed=2, n_layer=3, scale=0.1)


@pytest.mark.parametrize("n", [1, 12, 30])  # one row, the small products, one big product
def test_the_fast_model_matches_the_float64_reference(engine_dir, n):
    ids = np.random.default_rng(n).integers(0, 200, n)
    np.testing.assert_allclose(load_fast(engine_dir).forward(ids), reference_logits(engine_dir, ids), rtol=1e-5, atol=1e-5)


def test_the_plain_and_the_accelerated_model_give_the_same_greedy_tokens(engine_dir):
    # gpt2.py's `x @ w + b` on the checkpoint's arrays, against the same model in the blocked
    # layout, converted in memory (accelerate) and from the copy on disk (load_fast):
    # exactly the same tokens; the logits differ only by float32 rounding.
    plain = GPT2.from_pretrained(engine_dir)
    ids = np.random.default_rng(7).integers(0, plain.vocab_size, 10).tolist()
    expected = list(greedy_generate(plain, ids, 40))
    for fast in (accelerate(plain), load_fast(engine_dir)):
        assert isinstance(fast, FastGPT2)
        assert list(greedy_generate(fast, ids, 40)) == expected
        np.testing.assert_allclose(fast.forward(ids), plain.forward(ids), rtol=1e-5, atol=1e-5)


def test_threads_change_the_logits_by_rounding_only(shared_over, engine_dir):
    # Shared over threads, each product sums in another order, and another BLAS kernel
    # (OPENBLAS_CORETYPE) blocks its sums differently again: no BLAS promises the same
    # bits. What holds is float32 rounding: about 1e-6 on these logits of about 1; 1e-5
    # leaves a margin of 10. The greedy tokens are exactly the same.
    model = load_fast(engine_dir)
    ids = np.random.default_rng(3).integers(0, model.vocab_size, 12)
    single = model.forward(ids)
    for n in (2, 3):
        shared_over(n)
        shared = model.forward(ids)
        np.testing.assert_allclose(shared, single, rtol=1e-5, atol=1e-5)
        assert np.array_equal(shared.argmax(-1), single.argmax(-1))


def test_without_a_way_to_park_the_blas_threads_the_tokens_are_the_same(monkeypatch, engine_dir, tiny_dirs):
    # macOS's Accelerate, MKL, Windows: no blas_thread_shutdown_. Nothing is parked, nothing fails,
    # and --verbose and the benchmark say so in one line.
    model = load_fast(engine_dir)
    ids = np.random.default_rng(4).integers(0, model.vocab_size, 6).tolist()
    expected = list(greedy_generate(model, ids, 20))
    monkeypatch.setattr(threads, "_stop_blas_threads", [])  # as found where the function does not exist
    assert list(greedy_generate(model, ids, 20)) == expected
    assert "could not be parked" in threads.parking()
    code = ("import sys; from workbench.speed import threads; threads._stop_blas_threads = []; from workbench import cli; "
            "cli.main_entry(sys.argv[1:])")
    r = subprocess.run([sys.executable, "-c", code, "the cat", "--verbose", "-n", "8", "--draft", tiny_dirs["related"],
                        "--oracle", tiny_dirs["oracle"], "--compare"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "could not be parked" in r.stderr and "identical output" in r.stderr, r.stderr


def test_parking_is_reported_where_it_works():
    line = threads.parking()
    assert ("parked before a verification" in line) == bool(threads.blas_thread_stoppers())


def test_fast_weights_are_mapped_from_the_converted_copy(tiny_dirs, monkeypatch):
    monkeypatch.setattr(threads, "SHARE_MIN_BYTES", 0)  # a model as big as GPT-2's: its blocked copy, mapped
    m = load_fast(tiny_dirs["oracle"])
    owner = m.params["wte"].blocks
    while isinstance(owner, (np.ndarray, memoryview)):
        owner = owner.obj if isinstance(owner, memoryview) else owner.base
    assert isinstance(owner, mmap.mmap)


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE") or not os.path.exists("/sys/kernel/mm/transparent_hugepage"),
                    reason="needs Linux with transparent huge pages")
def test_weights_are_mapped_with_huge_pages_requested(tiny_dirs, monkeypatch):
    monkeypatch.setattr(threads, "SHARE_MIN_BYTES", 0)  # a model as big as GPT-2's: its blocked copy, mapped
    model = load_fast(tiny_dirs["oracle"])  # kept alive: its mapping must exist below
    model.forward([1])
    path = os.path.realpath(os.path.join(tiny_dirs["oracle"], BLOCKED_FILE))
    flags, current = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            if line.startswith("VmFlags:") and current == path:
                flags.append(line.split()[1:])
            elif "-" in line.split()[0]:  # a mapping's first line: address range ... path
                current = line.split()[-1]
    assert flags and "hg" in flags[0]  # hg: madvise(MADV_HUGEPAGE) is in force


@pytest.mark.parametrize("vocab_size, n_embd, n_beams, n_new", MEMORY_CASES)
@pytest.mark.slow
def test_beam_searchs_memory_estimate_holds_the_fast_models_peak(tmp_path, vocab_size, n_embd, n_beams, n_new):
    # The workbench runs beam search on the fast model, with the budget the estimate is checked against.
    assert_the_estimate_holds_the_peak(load_fast, str(tmp_path / "m"), vocab_size, n_embd, n_beams, n_new)
