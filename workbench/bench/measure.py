"""The benchmark's machinery: what checking k tokens costs on the machine it runs on, and a draft of known quality.

  memory bandwidth   a probe reading as many bytes as a model's weights, one thread per core;
  cost curve         the time of a forward of k new tokens on a warm KV cache, the runs taking
                     turns with the probe, and one forward's weight products alone;
  loading            a model loaded in a fresh process: seconds and peak RSS;
  SyntheticDraft     a draft that pays a real model's compute but proposes the oracle's token
                     at exactly a chosen share of the positions;
  round_costs        a round's passes timed as decoding runs them.
What is run and printed is bench/main.py's (python workbench.py bench) and costs.py's.
"""

import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time

import numpy as np
import threadpoolctl

import gpt2
from speedup import expected_tokens_per_round
from kvcache import KVCache
from roofline import forward_run, turns, weight_bytes  # noqa: F401  (forward_run, turns: the benchmarks' too)
from workbench.speed.cores import cpu_seconds
from workbench.speed.accelerate import load_fast
from workbench.speed.threads import N_THREADS, threads_for
from weights import checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project: workbench.py
SHAPES = {  # the real GPT-2 configurations
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),
}
# ---------------------------------------------------------------------------
# Models: real when downloaded, else random weights of the real shape
# ---------------------------------------------------------------------------

def has_checkpoint(model_dir):
    return os.path.isfile(os.path.join(model_dir, "model.safetensors"))


def bench_model(name, models_dir):
    """(model, directory, True if real weights) for a GPT-2 size, in the fast layout."""
    real = os.path.join(models_dir, name)
    if has_checkpoint(real):
        return load_fast(real), real, True
    fake = os.path.join(models_dir, f"random-{name}")
    if not has_checkpoint(fake):
        checkpoint.random_checkpoint(fake, {**SHAPES[name], "n_positions": 1024, "vocab_size": 50257}, seed=0)
    return load_fast(fake), fake, False


# ---------------------------------------------------------------------------
# 1. Memory bandwidth
# ---------------------------------------------------------------------------

def probe_array(gib=2):
    # Made once: first-touching gigabytes of fresh memory takes seconds on a VM.
    return np.ones(gib * (1 << 28), dtype=np.float32)


def stream(data, n_bytes):
    """A run() that reads n_bytes of `data`, over it as many times as needed, one thread per core.

    NumPy reductions release the GIL, so the threads read in parallel. Reading
    as many bytes as a model's weights makes the probe last as long as the
    forward it bounds, so both meet the same noise from other tenants.
    """
    parts = np.array_split(data, N_THREADS)
    passes, rest = divmod(n_bytes, data.nbytes)
    tails = [p[:p.size * rest // data.nbytes] for p in parts]

    def read(part, tail):
        for _ in range(passes):
            np.max(part)
        if tail.size:
            np.max(tail)

    def run():
        threads = [threading.Thread(target=read, args=pair) for pair in zip(parts, tails)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return run


def memory_bandwidth(data, repeats=5):
    """GB/s reading `data` once, best of `repeats`."""
    return data.nbytes / best_seconds({"read": stream(data, data.nbytes)}, repeats)["read"] / 1e9


# ---------------------------------------------------------------------------
# 2. The verification-cost curve
# ---------------------------------------------------------------------------

def timings(runs, repeats):
    """{name: the seconds of each call of run, fastest first}, the runs taking turns (turns)."""
    return {name: sorted(s) for name, s in turns(runs, repeats).items()}


def best_seconds(runs, repeats):
    """{name: seconds of the fastest call of run}, the runs taking turns (timings).

    The fastest, because on a shared host other tenants only ever add time, so
    it is the closest to the cost itself.
    """
    return {name: s[0] for name, s in timings(runs, repeats).items()}


def median(seconds):
    return seconds[len(seconds) // 2]


def products_run(model, k=1):
    """A run() of the weight products of a forward of k tokens alone, back to back.

    The same 4 * n_layer + 1 products of k rows a forward makes (the LM head
    last), without the layer norms, attention and the rest of the NumPy work
    between them: what the forward would cost if that work were free. T(1)
    minus this (k = 1) is the time the code between the products adds, and
    for k = 8 over k = 1 it is the least T(8)/T(1) can be with these kernels.
    """
    h = model.params["h"]
    weights = [p["weight"] for layer in h for p in (layer["attn"]["c_attn"], layer["attn"]["c_proj"],
                                                    layer["mlp"]["c_fc"], layer["mlp"]["c_proj"])]
    weights.append(model.params["wte"].T)  # the LM head
    x = {n_in: np.ones((k, n_in), dtype=np.float32) for n_in in {w.shape[0] for w in weights}}

    def run():
        with products_setting(model, k):
            for w in weights:
                x[w.shape[0]] @ w

    return run


def products_setting(model, k):
    """The threads a model's products of k rows run on: as FastGPT2.forward sets them; a plain model's as they are
    (its way's prepare() set them)."""
    return threads_for(k, model.shares) if hasattr(model, "shares") else contextlib.nullcontext()


def cost_curve(model, ks, context, probe_data, repeats):
    """timings() of a forward of each k in ks (keys 1, 2, ...), of the products
    alone of 1 and of 8 tokens ("products", "products of 8") and of the
    bandwidth probe beside them ("probe").
    The probe reads as many bytes as the weights, just before T(1) in every
    round, so its time is the bound: the weights streamed once at the measured
    bandwidth."""
    cache = KVCache()
    model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)
    run_1 = forward_run(model, cache, context, 1)
    run_1()  # warm-up: page in the weights
    n_bytes = weight_bytes(model)
    runs = {"probe": stream(probe_data, n_bytes), 1: run_1, "products": products_run(model),
            "products of 8": products_run(model, 8)}
    runs.update({k: forward_run(model, cache, context, k) for k in ks if k != 1})
    return timings(runs, repeats)


def part_runs(model, k, context):
    """{part: run()} of the rest of a forward of k tokens after `context` cached ones, each part alone and back to
    back, with gpt2.py's own functions on arrays of the forward's shapes (their values do not change the time):

      norms      the 2 * n_layer + 1 layer norms of [k, n_embd]
      attention  n_layer attentions of k queries over context + k keys, the causal mask added where k > 1
      gelu       n_layer GELUs of [k, 4 * n_embd]

    What a forward costs beyond its products and these (the residual adds, the embedding, the heads' reshapes and
    the KV cache's copies, the Python between the calls) is the forward's time less all of them."""
    n_head, n_embd, n_layer = model.n_head, model.n_embd, model.n_layer
    x = np.ones((k, n_embd), dtype=np.float32)
    g, b = np.ones(n_embd, dtype=np.float32), np.zeros(n_embd, dtype=np.float32)
    q = np.ones((n_head, k, n_embd // n_head), dtype=np.float32)
    kv = np.ones((n_head, context + k, n_embd // n_head), dtype=np.float32)
    mask = gpt2.causal_mask(k, context + k) if k > 1 else None
    h = np.ones((k, 4 * n_embd), dtype=np.float32)

    def norms():
        for _ in range(2 * n_layer + 1):
            gpt2.layer_norm(x, g, b, model.eps)

    def attention():
        for _ in range(n_layer):
            gpt2.attention(q, kv, kv, mask)

    def gelu():
        for _ in range(n_layer):
            gpt2.gelu(h)

    return {"norms": norms, "attention": attention, "gelu": gelu}


def head_run(model, k):
    """A run() of the LM head's product alone for k rows, as the forward runs it."""
    h = np.ones((k, model.n_embd), dtype=np.float32)
    wte_t = model.params["wte"].T

    def run():
        with products_setting(model, k):
            h @ wte_t

    return run


def wide_costs(model, ks, context, rounds, seed=0):
    """{k: {"forward", "products", "head": the seconds of each round}}: a forward of k new tokens after
    `context` cached ones, its weight products alone (products_run) and the LM head's alone (head_run),
    every k and every part taking turns in each round, in an order shuffled anew each round: a run
    can be slower right after another (PERFORMANCE.md), and no k may always be the one that pays."""
    cache = KVCache()
    model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)
    runs = {}
    for k in ks:
        runs["forward", k] = forward_run(model, cache, context, k)
        runs["products", k] = products_run(model, k)
        runs["head", k] = head_run(model, k)
    for run in runs.values():  # warm-up: page the weights in, make the panels' and caches' first pass
        run()
    seconds = {key: [] for key in runs}
    order, rng = list(runs), np.random.default_rng(seed)
    for _ in range(rounds):
        for i in rng.permutation(len(order)):
            key, run = order[i], runs[order[i]]
            start = time.perf_counter()
            run()
            seconds[key].append(time.perf_counter() - start)
    return {k: {part: seconds[part, k] for part in ("forward", "products", "head")} for k in ks}


def planned_model(name, models_dir):
    """(the workbench's model, as the plan runs it, and how to show it) of a GPT-2 size (its real weights when
    models_dir holds them, else random ones of its shape) or of a named model or directory."""
    from workbench.runner import load_model
    from workbench.speed.planned import load_planned
    if name not in SHAPES:
        return load_model(name, models_dir)[0], name
    real = os.path.join(models_dir, name)
    if has_checkpoint(real):
        return load_planned(real), name
    fake = os.path.join(models_dir, f"random-{name}")
    if not has_checkpoint(fake):
        checkpoint.random_checkpoint(fake, {**SHAPES[name], "n_positions": 1024, "vocab_size": 50257}, seed=0)
    return load_planned(fake), f"{name} (random weights)"


REST_PARTS = ("norms", "attention", "gelu")  # part_runs': the rest of a forward beside its products, part by part
PARTS = ("products", "head", *REST_PARTS)  # way_costs' parts of a forward, each timed alone


def way_costs(planned, ks, context, rounds, seed=0):
    """{way: {k: the seconds of each round}} of a forward of k new tokens after `context` cached ones, for the ways
    default (the planned model), numpy and numpy-1 (its plain model, the BLAS on every core and on one), and of the
    default way's parts alone (PARTS: its weight products, its LM head's, and part_runs'); every k, way and part
    taking turns, in an order shuffled anew each round: no k or way may always be the one that pays. The ways
    and parts of one k run one right after the other, so that the i-th rounds of two ways make a fair pair."""
    from workbench.speed.plan import prepared
    from workbench.speed.planned import numpy_way
    ways = {"default": (planned, lambda: None), "numpy": (planned.plain, numpy_way(N_THREADS)),
            "numpy-1": (planned.plain, numpy_way(1))}
    runs = {}
    for way, (model, prepare) in ways.items():
        cache = KVCache()
        prepare()
        model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)
        for k in ks:
            runs[way, k] = prepared(forward_run(model, cache, context, k), prepare)
    for k in ks:
        planned_way = planned.plan.way(k)
        parts_of = (planned.fast_model() if planned_way == "fast" else None) or planned.plain
        prepare = ways["numpy" if planned_way == "numpy" else "numpy-1"][1] if parts_of is planned.plain else (lambda: None)
        runs["products", k] = prepared(products_run(parts_of, k), prepare)
        runs["head", k] = prepared(head_run(parts_of, k), prepare)
        for part, run in part_runs(planned.plain, k, context).items():
            runs[part, k] = prepared(run, prepare)
    for run in runs.values():  # warm-up: page the weights in, make every way's first pass
        run()
    seconds = {key: [] for key in runs}
    names, rng = (*ways, *PARTS), np.random.default_rng(seed)
    for _ in range(rounds):
        for j in rng.permutation(len(ks)):
            k = ks[j]
            for i in rng.permutation(len(names)):
                start = time.perf_counter()
                runs[names[i], k]()
                seconds[names[i], k].append(time.perf_counter() - start)
    return {name: {k: seconds[name, k] for k in ks} for name in (*ways, *PARTS)}


def cpu_name():
    """The processor's name as the system gives it ('AMD EPYC', 'Intel(R) Xeon(R) ...'), with its L3 where Linux says."""
    name = None
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "unknown"
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            name += f", L3 {f.read(32).strip()}"  # a size such as "32768K": a short read is all it takes
    except OSError:
        pass
    return name


# ---------------------------------------------------------------------------
# 3. Loading, in a fresh process so that peak RSS means something
# ---------------------------------------------------------------------------

def load_probe(dirs):
    start = time.perf_counter()
    models = [load_fast(d) for d in dirs]
    load = time.perf_counter() - start
    start = time.perf_counter()
    for m in models:
        m.forward([0])  # touches every weight: the mapped pages come in
    first = time.perf_counter() - start
    print(json.dumps({"load_s": load, "first_forward_s": first, "peak_rss_bytes": peak_rss()}))


def peak_rss():
    """Bytes: the most this process has had resident."""
    try:  # Linux. ru_maxrss would not do: across fork + exec it keeps the parent's peak.
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        pass
    try:  # macOS and other Unixes
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    except ImportError:  # Windows: not measured
        return None


def peak_rss_text(loading):
    rss = loading["peak_rss_bytes"]
    if rss is None:
        return "peak RSS not measured on this system"
    return f"peak RSS {rss / 1e9:.2f} GB = {rss / loading['files_bytes']:.2f}x the checkpoint files"


def measure_loading(dirs):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "bench", "--load-probe", *dirs],
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["files_bytes"] = sum(os.path.getsize(os.path.join(d, "model.safetensors")) for d in dirs)
    return result


# ---------------------------------------------------------------------------
# 4. End to end
# ---------------------------------------------------------------------------

class SyntheticDraft:
    """A draft that pays the real draft model's compute but is right a chosen share alpha of the time.

    It knows the oracle's greedy continuation (measured beforehand), and which
    of the new positions it gets right is drawn once from the seed: exactly
    round(alpha * n) of the n new positions, in random order. So the rate it
    realises is alpha up to rounding (independent draws per position would
    realise anything from 0.6 to 0.9 at 0.8 over 64 tokens), and every method
    and draft length meets the same luck and they compare fairly. Each
    position on its own is right with probability alpha, Leviathan et al.'s
    model. It gives its proposal the probability alpha (calibrated, as
    threshold drafting assumes).
    """

    def __init__(self, model, reference, alpha, start, seed=0):
        """reference: prompt and continuation; the new positions are reference[start:]."""
        self.model, self.reference, self.alpha = model, list(reference), alpha
        self.vocab_size, self.n_positions = model.vocab_size, model.n_positions
        self.rng = np.random.default_rng(seed)
        n_new = len(reference) - start
        self.right = np.ones(len(reference), dtype=bool)  # right[i]: the guess for token i is the oracle's
        self.right[start:] = self.rng.permutation(np.arange(n_new) < round(alpha * n_new))
        self.realised = float(self.right[start:].mean()) if n_new else alpha
        # logit L on one token, 0 elsewhere: softmax gives it e^L / (e^L + V - 1) = alpha
        self.confidence = np.float32(np.log(alpha * (self.vocab_size - 1) / (1 - alpha)))

    def forward(self, ids, kvcache=None, positions=None, mask=None, n_logits=None):
        self.model.forward(ids, kvcache, positions=positions, mask=mask, n_logits=n_logits)  # the real cost
        n_logits = n_logits or len(ids)
        if positions is None:  # consecutive, ending at the cache's end
            positions = range(kvcache.n_tokens() - len(ids), kvcache.n_tokens())
        logits = np.zeros((n_logits, self.vocab_size), dtype=np.float32)
        for row, i in enumerate(p + 1 for p in list(positions)[-n_logits:]):  # row predicts token i
            right = self.reference[i] if i < len(self.reference) else 0
            wrong = (right + 1 + self.rng.integers(self.vocab_size - 1)) % self.vocab_size
            logits[row, right if i < len(self.right) and self.right[i] else wrong] = self.confidence
        return logits


def prompt_costs(draft_model, oracle, ids, n_drafts, draft_curve, oracle_curve, repeats=3):
    """The cost curves plus the first passes over the prompt (best of `repeats`), for predicted_seconds."""
    runs = {"draft": lambda: draft_model.forward(ids, KVCache(), n_logits=1),
            "oracle": lambda: oracle.forward(ids, KVCache(), n_logits=1)}
    for n_draft in n_drafts:  # the first verification: the prompt and n_draft drafts
        runs[n_draft] = lambda n_draft=n_draft: oracle.forward(ids + [0] * n_draft, KVCache(), n_logits=n_draft + 1)
    best = best_seconds(runs, repeats)
    return ({**draft_curve, "prompt": best["draft"]},
            {**oracle_curve, "prompt": best["oracle"], **{("prompt", n_draft): best[n_draft] for n_draft in n_drafts}})


def round_costs(draft_model, oracle, ids, n_drafts, repeats=5):
    """{n_draft: best seconds of a round's passes, run as decoding runs them}, after the prompt,
    and {0: best seconds of a step of the oracle alone}, the runs taking turns.

    A round: n_draft single-token draft passes, then at once the oracle's pass
    over n_draft + 1 tokens: what a round costs with whatever one pass leaves
    for the next (the caches full of the other model's weights, the BLAS's
    threads stopped by the oracle's pass and restarted by the draft's), which
    the cost curve, timing each kind of pass after its own kind, does not
    see. A step: two single-token oracle passes, greedy decoding's, halved.
    Both sides of the prediction are timed in the same turns, so a quiet or
    a busy spell of the host moves them together.
    """
    draft_cache, oracle_cache = KVCache(), KVCache()
    draft_model.forward(ids, draft_cache, n_logits=1)
    oracle.forward(ids, oracle_cache, n_logits=1)

    def a_round(n_draft):
        def run():
            for i in range(n_draft):
                draft_model.forward([i], draft_cache)
            oracle.forward(list(range(n_draft + 1)), oracle_cache)
            draft_cache.truncate(len(ids))
            oracle_cache.truncate(len(ids))
        return run

    def two_steps():
        for i in range(2):
            oracle.forward([i], oracle_cache)
        oracle_cache.truncate(len(ids))

    best = best_seconds({0: two_steps, **{n_draft: a_round(n_draft) for n_draft in n_drafts}}, repeats)
    return {**best, 0: best[0] / 2}


def cpu_snapshot():
    """(wall seconds, cores.cpu_seconds(): the whole machine's CPU seconds and this run's own, its children's
    among them, or None where the machine's cannot be read). Two of them give cores.others_cores(start, end),
    the cores' worth other programs used between, as the plan's watch counts them (a virtual machine's steal
    left out)."""
    return time.time(), cpu_seconds()


def blas_description():
    """Which BLAS NumPy uses, as threadpoolctl sees it: 'openblas 0.3.31 (SkylakeX)'."""
    libraries = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    return ", ".join(f"{i['internal_api']} {i['version']} ({i.get('architecture', '?')})" for i in libraries) or "unknown"


def load_average():
    """The system's 1, 5 and 15 minute load averages, as text; 'unknown' where there are none (Windows)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "unknown"


def predicted_seconds(alpha, n_draft, n_new, draft, oracle, rounds=None):
    """(oracle alone, speculative) seconds for n_new tokens after a prompt, from measured costs.

    draft and oracle: {n_tokens: seconds of a forward}, the cost curve (k new
    tokens on a warm cache) plus "prompt", the first forward over the prompt,
    and for the oracle ("prompt", n_draft), the prompt with the first drafts.
    The oracle alone: the prompt pass gives the first token, then one pass per
    token. Speculative: n_new / expected_tokens_per_round rounds, each n_draft draft passes
    (the first of them over 2 tokens after a round that accepted everything,
    which happens with probability alpha^n_draft) and one oracle pass of n_draft + 1;
    the first round's passes include the prompt instead. rounds, when given,
    is round_costs() above: an oracle-alone step (key 0) and a round (key n_draft)
    timed as decoding runs them, in the same turns, replacing the cost
    curves' passes on both sides.
    """
    step = oracle[1] if rounds is None else rounds[0]
    alone = oracle["prompt"] + (n_new - 1) * step
    drafting = (n_draft - 1) * draft[1] + alpha ** n_draft * draft[2] + (1 - alpha ** n_draft) * draft[1]
    a_round = drafting + oracle[n_draft + 1] if rounds is None else rounds[n_draft] + alpha ** n_draft * (draft[2] - draft[1])
    n_rounds = n_new / expected_tokens_per_round(alpha, n_draft)
    first = draft["prompt"] + (n_draft - 1) * draft[1] + oracle["prompt", n_draft]
    return alone, first + (n_rounds - 1) * a_round
