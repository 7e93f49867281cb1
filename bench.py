"""Benchmarks: what checking k tokens costs, and what speculative decoding gains, on your machine.

    python bench.py            # everything (about 13 minutes here, 2 more the first time)
    python bench.py --quick    # gpt2 and gpt2-xl shapes, a smaller sweep

1. machine:    memory bandwidth, the bound on decoding speed.
2. cost curve: time of a forward of k = 1..16 new tokens on a warm KV cache
               (best of 5, median beside it), over the time of 1 token, for
               each GPT-2 size; ms per token, GB/s of weights streamed, share
               of the bandwidth (read by a probe taking turns with the
               forwards, as many bytes as the weights); and one token's weight
               products alone, back to back: forward / products alone is what
               the NumPy code between them adds. The products alone of 8
               tokens over those of 1: the least T(8)/T(1) can be with the
               BLAS's kernels, whatever the code between them does.
3. loading:    gpt2-xl + gpt2 loaded in a fresh process: seconds and peak RSS.
4. end to end: greedy, speculative, threshold, SpS, tree, n-gram, staged and
               adaptive decoding on fixed prompts:
               tokens/s, acceptance, tokens per oracle pass, speedup over the
               oracle alone, next to Leviathan et al.'s prediction and one from
               the measured costs.

Real weights are used when models/NAME holds them (python download_weights.py
NAME). Otherwise: random weights of the real shapes in models/random-NAME (a
forward's cost does not depend on the values), and for the end-to-end runs a
SYNTHETIC draft that pays the real draft model's compute but proposes the
oracle's token at exactly round(alpha * n) of the n new positions (the
realised rate, beside every row). Every table says which.
Results: a table on screen; bench_results/summary.md (the tables in markdown,
with the command, date and how busy the machine was), CSV and JSON; a plot of
the cost curve when matplotlib is installed."""

import json
import os
import subprocess
import sys
import threading
import time

import gpt2
import numpy as np
import threadpoolctl

import ablation
import atomic
import checkpoint
import errors
import matmul
from download_weights import DEFAULT_MODELS_DIR
from kvcache import KVCache
from report import expected_tokens_per_round
from adaptive import adaptive_generate
from ngram import ngram_generate, staged_generate
from sps import autoregressive_sample, speculative_sample
from decoding import Stats
from speculative import greedy_generate, speculative_generate
from threshold import threshold_generate
from tokenizer import encode, load_tokenizer
from tree import tree_generate

SHAPES = {  # the real GPT-2 configurations
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),
}
PROMPTS = [
    "The meaning of life is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The following is a list of the largest cities in Europe by population:\n1.",
    "Once upon a time, in a small village at the edge of the forest, there lived",
]


# ---------------------------------------------------------------------------
# Models: real when downloaded, else random weights of the real shape
# ---------------------------------------------------------------------------

def has_checkpoint(model_dir):
    return os.path.isfile(os.path.join(model_dir, "model.safetensors"))


def bench_model(name, models_dir):
    """(model, directory, True if real weights) for a GPT-2 size."""
    real = os.path.join(models_dir, name)
    if has_checkpoint(real):
        return gpt2.GPT2.from_pretrained(real), real, True
    fake = os.path.join(models_dir, f"random-{name}")
    if not has_checkpoint(fake):
        checkpoint.random_checkpoint(fake, {**SHAPES[name], "n_positions": 1024, "vocab_size": 50257}, seed=0)
    return gpt2.GPT2.from_pretrained(fake), fake, False


def weight_bytes(model):
    """Bytes a single-token forward streams: every weight (wpe only has a row read)."""
    def total(node):
        if isinstance(node, dict):
            return sum(total(v) for v in node.values())
        if isinstance(node, list):
            return sum(total(v) for v in node)
        return node.nbytes
    return total(model.params) - model.params["wpe"].nbytes


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
    parts = np.array_split(data, matmul.N_THREADS)
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
    """{name: the seconds of each call of run, fastest first} for runs = {name: run}.

    The runs take turns, `repeats` rounds of one call each, rather than all
    repeats of one run and then the next: a bandwidth probe and the forward it
    bounds then get the same chances at a quiet moment of the shared host.
    """
    seconds = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    return {name: sorted(s) for name, s in seconds.items()}


def best_seconds(runs, repeats):
    """{name: seconds of the fastest call of run}, the runs taking turns (timings).

    The fastest, because on a shared host other tenants only ever add time, so
    it is the closest to the cost itself.
    """
    return {name: s[0] for name, s in timings(runs, repeats).items()}


def median(seconds):
    return seconds[len(seconds) // 2]


def forward_run(model, cache, context, k):
    """A run() of one forward of k new tokens after `context` cached ones."""
    ids = np.arange(k) % model.vocab_size

    def run():
        model.forward(ids, cache)  # all k rows of logits: verification needs them all
        cache.truncate(context)  # back to `context` cached tokens: O(1), only the length changes

    return run


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
        with matmul.threads_for(k):  # as forward() runs them
            for w in weights:
                x[w.shape[0]] @ w

    return run


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


# ---------------------------------------------------------------------------
# 3. Loading, in a fresh process so that peak RSS means something
# ---------------------------------------------------------------------------

def load_probe(dirs):
    start = time.perf_counter()
    models = [gpt2.GPT2.from_pretrained(d) for d in dirs]
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
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--load-probe", *dirs],
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


def predicted_speedup(alpha, gamma, c, verify_ratio=1.0):
    """Leviathan et al. 2023: expected tokens per round over the cost of a round, in oracle passes.

    verify_ratio = T_oracle(gamma + 1) / T_oracle(1); the paper assumes 1.
    """
    return expected_tokens_per_round(alpha, gamma) / (gamma * c + verify_ratio)


def predicted_seconds(alpha, gamma, n_new, draft, oracle, rounds=None):
    """(oracle alone, speculative) seconds for n_new tokens after a prompt, from measured costs.

    draft and oracle: {n_tokens: seconds of a forward}, the cost curve (k new
    tokens on a warm cache) plus "prompt", the first forward over the prompt,
    and for the oracle ("prompt", gamma), the prompt with the first drafts.
    The oracle alone: the prompt pass gives the first token, then one pass per
    token. Speculative: n_new / expected_tokens_per_round rounds, each gamma draft passes
    (the first of them over 2 tokens after a round that accepted everything,
    which happens with probability alpha^gamma) and one oracle pass of gamma + 1;
    the first round's passes include the prompt instead. rounds, when given,
    is round_costs(): an oracle-alone step (key 0) and a round (key gamma)
    timed as decoding runs them, in the same turns, replacing the cost
    curves' passes on both sides.
    """
    step = oracle[1] if rounds is None else rounds[0]
    alone = oracle["prompt"] + (n_new - 1) * step
    drafting = (gamma - 1) * draft[1] + alpha ** gamma * draft[2] + (1 - alpha ** gamma) * draft[1]
    a_round = drafting + oracle[gamma + 1] if rounds is None else rounds[gamma] + alpha ** gamma * (draft[2] - draft[1])
    n_rounds = n_new / expected_tokens_per_round(alpha, gamma)
    first = draft["prompt"] + (gamma - 1) * draft[1] + oracle["prompt", gamma]
    return alone, first + (n_rounds - 1) * a_round


def timed(generator_fn):
    stats = Stats()
    start = time.perf_counter()
    tokens = list(generator_fn(stats))
    return tokens, time.perf_counter() - start, stats


def row(pair, method, setting, tokens, elapsed, stats, baseline_time, **extra):
    return {"pair": pair, "method": method, "setting": setting, "tokens": len(tokens),
            "tokens_per_s": round(len(tokens) / elapsed, 2),
            "acceptance": round(stats.acceptance_rate, 3) if stats.drafted else "",
            "tokens_per_pass": round(stats.tokens_per_round, 2),
            "speedup": round(baseline_time / elapsed, 2), "seconds": elapsed,
            "draft_seconds": stats.draft_time, "oracle_seconds": stats.oracle_time, **extra}


def end_to_end_real(draft, oracle, pair, enc, n_new, ks, log):
    """All methods on PROMPTS with real weights; speedups against the oracle alone."""
    rows = []
    for i, text in enumerate(PROMPTS):
        ids = encode(enc, text)
        reference, base, stats = timed(lambda s: greedy_generate(oracle, ids, n_new, stats=s))
        rows.append(row(pair, "greedy (oracle alone)", "", reference, base, stats, base, prompt=i))
        for k in ks:
            out, t, s = timed(lambda s: speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=s))
            if out != reference:
                log(f"note: prompt {i}, n_draft {k}: output differs from greedy (a floating-point near-tie?)")
            rows.append(row(pair, "speculative", f"n_draft={k}", out, t, s, base, prompt=i))
        out, t, s = timed(lambda s: threshold_generate(draft, oracle, ids, n_new, stats=s))
        rows.append(row(pair, "threshold", "max_draft=16", out, t, s, base, prompt=i))
        sample_base = timed(lambda s: autoregressive_sample(oracle, ids, n_new, rng=np.random.default_rng(i), stats=s))
        rows.append(row(pair, "sample (oracle alone)", "T=1", sample_base[0], sample_base[1], sample_base[2], sample_base[1], prompt=i))
        out, t, s = timed(lambda s: speculative_sample(draft, oracle, ids, n_new, K=4, rng=np.random.default_rng(i), stats=s))
        rows.append(row(pair, "sps", "K=4, T=1", out, t, s, sample_base[1], prompt=i))
        for method, setting, generate in beyond_methods(oracle, ids, n_new):
            out, t, s = timed(lambda s: generate(draft, s))
            rows.append(row(pair, method, setting, out, t, s, base, prompt=i))
        out, t, s = timed(lambda s: ngram_generate(oracle, ids, n_new, stats=s))
        rows.append(row(pair, "ngram (no draft model)", "n_draft=8", out, t, s, base, prompt=i))
        log(f"  prompt {i} done")
    return rows


def end_to_end_synthetic(draft_model, oracle, pair, n_new, alphas, gammas, draft_curve, oracle_curve, log,
                         beyond_alphas=(0.7, 0.9)):
    """Speculative, threshold, SpS (T=0) and the methods beyond, with synthetic drafts of known alpha.

    Each speculative row (the faster of two runs) carries three predictions at
    the rate the draft realised: the paper's (verification free, no prompt),
    one from the cost curves (predicted_seconds: drafting and the prompt passes
    both sides make included), and the same with a round's passes and the
    oracle alone's steps timed as decoding runs them (round_costs), with the
    measured speedup's gap to the last.
    """
    ids = (np.arange(48) * 7919 % oracle.vocab_size).tolist()  # a fixed 48-token prompt
    draft_costs, oracle_costs = prompt_costs(draft_model, oracle, ids, gammas, draft_curve, oracle_curve)
    measured_rounds = round_costs(draft_model, oracle, ids, gammas)
    c = draft_curve[1] / oracle_curve[1]

    def oracle_alone():  # the baseline row, its own speedup 1
        tokens, t, s = timed(lambda s: greedy_generate(oracle, ids, n_new, stats=s))
        return row(pair, "greedy (oracle alone)", "", tokens, t, s, t), tokens

    first, reference = oracle_alone()
    rows, base = [first], first["seconds"]
    reference = ids + reference
    for alpha in alphas:
        for gamma in gammas:
            if gamma >= 8 and alpha < 0.8:  # long drafts lose even at 0.8: skip the slowest runs
                continue
            # Twice, the faster counting, as for the oracle alone: these rows carry the predictions.
            # A fresh draft for each run: its wrong guesses come from its own generator.
            drafts = [SyntheticDraft(draft_model, reference, alpha, start=len(ids)) for _ in range(2)]
            runs = [timed(lambda s: speculative_generate(d, oracle, ids, n_new, n_draft=gamma, stats=s)) for d in drafts]
            assert all(tokens == reference[len(ids):] for tokens, _, _ in runs)
            out, t, s = min(runs, key=lambda run: run[1])
            realised = drafts[0].realised  # both drafts make the same draw
            alone_from_curve, from_curve = predicted_seconds(realised, gamma, n_new, draft_costs, oracle_costs)
            alone, speculative = predicted_seconds(realised, gamma, n_new, draft_costs, oracle_costs, measured_rounds)
            rows.append(row(pair, "speculative", f"n_draft={gamma}", out, t, s, base, alpha=alpha,
                            realised=round(realised, 3), predicted=round(predicted_speedup(realised, gamma, c), 2),
                            predicted_with_cost_curve=round(alone_from_curve / from_curve, 2),
                            predicted_with_costs=round(alone / speculative, 2),
                            predicted_seconds=speculative, predicted_alone_seconds=alone,
                            seconds_of_both_runs=", ".join(f"{seconds:.2f}" for _, seconds, _ in runs)))
        methods = [("threshold", "max_draft=16", lambda d, s: threshold_generate(d, oracle, ids, n_new, stats=s))]
        if alpha >= 0.8:
            methods.append(("sps (T=0)", "K=4", lambda d, s: speculative_sample(
                d, oracle, ids, n_new, K=4, temperature=0, rng=np.random.default_rng(0), stats=s)))
        if alpha in beyond_alphas:
            methods += beyond_methods(oracle, ids, n_new)
        for method, setting, generate in methods:
            draft = SyntheticDraft(draft_model, reference, alpha, start=len(ids))
            out, t, s = timed(lambda s: generate(draft, s))
            assert out == reference[len(ids):], method
            rows.append(row(pair, method, setting, out, t, s, base, alpha=alpha, realised=round(draft.realised, 3)))
        log(f"  alpha {alpha} done")
    out, t, s = timed(lambda s: ngram_generate(oracle, ids, n_new, stats=s))
    rows.append(row(pair.split(" -> ")[-1], "ngram (no draft model)", "n_draft=8", out, t, s, base))
    # The oracle alone once more: a baseline run caught in another tenant's burst
    # would inflate every speedup, so the faster of the two counts.
    again, _ = oracle_alone()
    both = f"{base:.2f}, {again['seconds']:.2f}"
    if again["seconds"] < base:
        rows[0] = again
        for r in rows[1:]:
            r["speedup"] = round(again["seconds"] / r["seconds"], 2)
    rows[0]["seconds_of_both_runs"] = both
    for r in rows:
        if r.get("predicted_with_costs"):
            r["gap"] = f"{r['speedup'] / r['predicted_with_costs'] - 1:+.0%}"
    return rows


def prompt_costs(draft_model, oracle, ids, gammas, draft_curve, oracle_curve, repeats=3):
    """The cost curves plus the first passes over the prompt (best of `repeats`), for predicted_seconds."""
    runs = {"draft": lambda: draft_model.forward(ids, KVCache(), n_logits=1),
            "oracle": lambda: oracle.forward(ids, KVCache(), n_logits=1)}
    for gamma in gammas:  # the first verification: the prompt and gamma drafts
        runs[gamma] = lambda gamma=gamma: oracle.forward(ids + [0] * gamma, KVCache(), n_logits=gamma + 1)
    best = best_seconds(runs, repeats)
    return ({**draft_curve, "prompt": best["draft"]},
            {**oracle_curve, "prompt": best["oracle"], **{("prompt", gamma): best[gamma] for gamma in gammas}})


def round_costs(draft_model, oracle, ids, gammas, repeats=5):
    """{gamma: best seconds of a round's passes, run as decoding runs them}, after the prompt,
    and {0: best seconds of a step of the oracle alone}, the runs taking turns.

    A round: gamma single-token draft passes, then at once the oracle's pass
    over gamma + 1 tokens: what a round costs with whatever one pass leaves
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

    def a_round(gamma):
        def run():
            for i in range(gamma):
                draft_model.forward([i], draft_cache)
            oracle.forward(list(range(gamma + 1)), oracle_cache)
            draft_cache.truncate(len(ids))
            oracle_cache.truncate(len(ids))
        return run

    def two_steps():
        for i in range(2):
            oracle.forward([i], oracle_cache)
        oracle_cache.truncate(len(ids))

    best = best_seconds({0: two_steps, **{gamma: a_round(gamma) for gamma in gammas}}, repeats)
    return {**best, 0: best[0] / 2}


def beyond_methods(oracle, ids, n_new):
    """(name, setting, generate(draft, stats)) for the methods of tree.py, ngram.py and adaptive.py."""
    return [
        ("tree", "depth 4, branch 2", lambda d, s: tree_generate(d, oracle, ids, n_new, max_depth=4, branch=2, stats=s)),
        ("staged", "n_draft=4", lambda d, s: staged_generate(d, oracle, ids, n_new, n_draft=4, stats=s)),
        ("adaptive", "entropy", lambda d, s: adaptive_generate(d, oracle, ids, n_new, rule="entropy", stats=s)),
        ("adaptive-hf", "+2/-1", lambda d, s: adaptive_generate(d, oracle, ids, n_new, rule="heuristic", stats=s)),
    ]


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def print_table(title, rows, columns):
    print(f"\n{title}\n{ablation.table(rows, columns)}")


def save(out_dir, name, rows):  # every key of any row is a column
    os.makedirs(out_dir, exist_ok=True)
    ablation.write_csv(os.path.join(out_dir, f"{name}.csv"), rows, columns=list(dict.fromkeys(k for r in rows for k in r)))


def cpu_snapshot():
    """(wall seconds, CPU seconds of the whole machine, CPU seconds of this process and its children); Linux."""
    own = os.times()
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
    except (OSError, ValueError):
        busy = None
    return time.time(), busy, own.user + own.system + own.children_user + own.children_system


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


def others_load(start, end):
    """Cores' worth of CPU that other processes used between two cpu_snapshot()s, or None."""
    if start[1] is None or end[1] is None:
        return None
    return max(0.0, (end[1] - start[1]) - (end[2] - start[2])) / (end[0] - start[0])


def write_summary(path, results):
    """The run's tables in markdown, for PERFORMANCE.md to copy from."""
    run, lines = results["run"], []
    others = "unknown" if run["others_load"] is None else f"{run['others_load']:.2f} cores"
    lines += [f"# `{run['command']}`", "",
              f"{run['date']}, {run['minutes']:.1f} min; {results['machine']['cores']} cores, NumPy "
              f"{results['machine']['numpy']}, {results['machine']['blas']}; memory bandwidth "
              f"{results['machine']['bandwidth_gb_s']} GB/s; load average before the run {run['load_before']}; "
              f"other processes used {others} on average during the run. Weights: {run['weights']}.", "",
              f"Cost of a forward of k new tokens after {run['context']} cached: best of 5 rounds "
              "(median in parentheses); products alone = one token's weight products back to back; "
              "the same for 8 tokens over 1 is the least T(8)/T(1) can be with these kernels.", "",
              "| model | T(1) ms | T(2)/T(1) | T(4)/T(1) | T(8)/T(1) | T(16)/T(1) | products alone ms "
              "| forward / products alone | share of bandwidth: products, forward | products alone: 8 tokens / 1 |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for one in results["one_token"]:
        ratio = {int(r["k"]): r["T(k)/T(1)"] for r in results["cost_curve"] if r["model"] == one["model"]}
        lines.append(f"| {one['model']} | {one['T(1)_ms']} ({one['T(1)_median_ms']}) | "
                     + " | ".join(str(ratio.get(k, "")) for k in (2, 4, 8, 16))
                     + f" | {one['products_alone_ms']} ({one['products_median_ms']}) | {one['forward/products']:.2f}"
                     f" | {one['products_share']}, {one['forward_share']} | {one['products_of_8/products']} |")
    loading = results["loading"]
    lines += ["", f"Loading {' + '.join(loading['models'])} in a fresh process: {loading['load_s']:.2f} s, first "
              f"forward of each {loading['first_forward_s']:.2f} s, {peak_rss_text(loading)}.", ""]
    e2e = results["end_to_end"]
    if any("alpha" in r for r in e2e):
        base = e2e[0]
        lines += [f"End to end, {e2e[0]['pair']}, synthetic draft, {base['tokens']} new tokens after a 48-token prompt; "
                  f"the oracle alone: {base['tokens_per_s']} tokens/s (runs of {base['seconds_of_both_runs']} s). "
                  "Predictions at the realised rate: the paper's (verification free); from the cost curves, "
                  "drafting and the prompt passes; and the same with a round's passes, and the oracle alone's "
                  "steps, timed as decoding runs them (round_costs); gap = measured / that last prediction - 1. "
                  "Speculative rows: the faster of two runs; the other methods: one run.", "",
                  "| alpha | realised | method | setting | tokens/s | acceptance | tokens per pass | speedup "
                  "| predicted (paper) | predicted (cost curve) | predicted (measured rounds) | gap |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        columns = ["alpha", "realised", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup",
                   "predicted", "predicted_with_cost_curve", "predicted_with_costs", "gap"]
    else:
        lines += [f"End to end, {e2e[0]['pair']}, real weights, {len(PROMPTS)} prompts.", "",
                  "| prompt | method | setting | tokens/s | acceptance | tokens per pass | speedup |", "|---|---|---|---|---|---|---|"]
        columns = ["prompt", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup"]
    for r in e2e:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |")
    atomic.write_text(path, "\n".join(lines) + "\n")


def plot(out_dir, curves):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ks = sorted(curve)
        ax.plot(ks, [curve[k] / curve[1] for k in ks], marker="o", label=name)
    ax.plot([1, 16], [1, 1], "k--", lw=0.8, label="ideal (memory-bound)")
    ax.set(xlabel="tokens per forward (k)", ylabel="T(k) / T(1)", title="Cost of checking k tokens at once")
    ax.legend()
    path = os.path.join(out_dir, "cost_curve.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def main(argv=None):
    parser = errors.Parser(prog="bench.py", description=__doc__.split("\n\n")[0],
                        formatter_class=__import__("argparse").RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--quick", action="store_true", help="gpt2 and gpt2-xl shapes only, a smaller sweep")
    parser.add_argument("--sizes", nargs="+", choices=SHAPES, help="sizes for the cost curve (default: all four)")
    parser.add_argument("--draft", default="gpt2", choices=SHAPES, help="draft for the end-to-end runs (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-xl", choices=SHAPES, help="oracle for the end-to-end runs (default: gpt2-xl)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per end-to-end run (default: 64, 32 with --quick)")
    parser.add_argument("--context", type=int, default=128, help="cached tokens before the cost-curve forwards (default: 128)")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where real or random checkpoints live (default: models/)")
    parser.add_argument("--out", default="bench_results", help="directory for CSV, JSON and the plot (default: bench_results/)")
    parser.add_argument("--load-probe", nargs="+", help=__import__("argparse").SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_probe:
        return load_probe(args.load_probe)
    sizes = args.sizes or (["gpt2", "gpt2-xl"] if args.quick else list(SHAPES))
    ks = range(1, 17)
    args.new_tokens = args.new_tokens or (32 if args.quick else 64)
    alphas, gammas = ([0.6, 0.8], [2, 4]) if args.quick else ([0.5, 0.7, 0.8, 0.9], [2, 4, 8])

    def log(message):
        print(message, file=sys.stderr, flush=True)
        return True

    enc = None  # real draft and oracle: their tokenizer, read now rather than fail after minutes of timing
    if all(has_checkpoint(os.path.join(args.models_dir, name)) for name in (args.draft, args.oracle)):
        enc = load_tokenizer(os.path.join(args.models_dir, args.draft))

    start = cpu_snapshot()
    command = " ".join(["python bench.py", *(sys.argv[1:] if argv is None else map(str, argv))])
    results = {"machine": {"cores": matmul.N_THREADS, "numpy": np.__version__, "blas": blas_description()},
               "run": {"command": command, "date": time.strftime("%Y-%m-%d %H:%M %Z"), "context": args.context,
                       "load_before": load_average()}}
    log("1. memory bandwidth")
    probe_data = probe_array()
    bandwidth = memory_bandwidth(probe_data)
    results["machine"]["bandwidth_gb_s"] = round(bandwidth, 1)
    print(f"memory bandwidth: {bandwidth:.1f} GB/s ({matmul.N_THREADS} threads reading 2 GiB)")

    log("2. cost curve")
    curves, curve_rows, one_token_rows, real = {}, [], [], {}
    for name in sorted(set(sizes) | {args.draft, args.oracle}, key=list(SHAPES).index):
        model, _, real[name] = bench_model(name, args.models_dir)
        seconds = cost_curve(model, ks, args.context, probe_data, repeats=5)
        curve = curves[name] = {k: seconds[k][0] for k in ks}
        products, bound = seconds["products"][0], seconds["probe"][0]
        n_bytes = weight_bytes(model)
        bandwidth = n_bytes / bound / 1e9

        def share(seconds):  # of the bandwidth, when streaming the weights once took `seconds`
            return f"{bound / seconds:.0%}"

        one_token_rows.append({"model": name, "T(1)_ms": round(curve[1] * 1000, 1),
                               "products_alone_ms": round(products * 1000, 1),
                               "between_products_ms": round((curve[1] - products) * 1000, 1),
                               "forward/products": round(curve[1] / products, 3),
                               "bound_ms": round(bound * 1000, 1),
                               "products_share": share(products), "forward_share": share(curve[1]),
                               "T(1)_median_ms": round(median(seconds[1]) * 1000, 1),
                               "products_median_ms": round(median(seconds["products"]) * 1000, 1),
                               "products_of_8_ms": round(seconds["products of 8"][0] * 1000, 1),
                               "products_of_8/products": round(seconds["products of 8"][0] / products, 2)})
        for k, t in curve.items():
            curve_rows.append({"model": name, "weights": "real" if real[name] else "random", "k": k,
                               "ms": round(t * 1000, 1), "T(k)/T(1)": round(t / curve[1], 2),
                               "ms_per_token": round(t * 1000 / k, 1), "GB/s": round(n_bytes / t / 1e9, 1),
                               "bandwidth_GB/s": round(bandwidth, 1), "share_of_bandwidth": share(t),
                               "median_ms": round(median(seconds[k]) * 1000, 1)})
        log(f"  {name}: T(1) {curve[1] * 1000:.0f} ms, T(8)/T(1) {curve[8] / curve[1]:.2f}, "
            f"{share(curve[1])} of {bandwidth:.1f} GB/s")
        del model
    del probe_data
    print_table(f"cost of a forward of k tokens after {args.context} cached (weights: "
                + ", ".join(f"{n} {'real' if r else 'random, real shape'}" for n, r in real.items()) + ")",
                [r for r in curve_rows if r["k"] in (1, 2, 4, 8, 12, 16)],
                ["model", "k", "ms", "T(k)/T(1)", "ms_per_token", "GB/s", "bandwidth_GB/s", "share_of_bandwidth"])
    print_table("one token: the weight products alone, back to back, against the whole forward "
                "(bound = weight bytes / bandwidth; share = bound / time)", one_token_rows,
                ["model", "T(1)_ms", "products_alone_ms", "between_products_ms", "forward/products", "bound_ms",
                 "products_share", "forward_share", "products_of_8_ms", "products_of_8/products"])
    results["cost_curve"] = curve_rows
    results["one_token"] = one_token_rows

    log("3. loading")
    draft_model, draft_dir, draft_real = bench_model(args.draft, args.models_dir)
    oracle, oracle_dir, oracle_real = bench_model(args.oracle, args.models_dir)
    loading = measure_loading([oracle_dir, draft_dir])
    results["loading"] = {"models": [args.oracle, args.draft], **loading}
    print(f"\nloading {args.oracle} + {args.draft} ({loading['files_bytes'] / 1e9:.2f} GB of checkpoints) in a fresh process: "
          f"{loading['load_s']:.2f} s, first forward of each {loading['first_forward_s']:.2f} s, "
          f"{peak_rss_text(loading)}")

    log("4. end to end")
    pair = f"{args.draft} -> {args.oracle}"
    c = curves[args.draft][1] / curves[args.oracle][1]
    columns = ["pair", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup"]
    if draft_real and oracle_real:
        e2e = end_to_end_real(draft_model, oracle, pair, enc, args.new_tokens, [4, 8], log)
        print_table(f"end to end, real weights, {len(PROMPTS)} prompts, {args.new_tokens} new tokens each (c = {c:.3f})",
                    e2e, ["prompt"] + columns)
    else:
        e2e = end_to_end_synthetic(draft_model, oracle, pair, args.new_tokens, alphas, gammas, curves[args.draft],
                                   curves[args.oracle], log, beyond_alphas=alphas[-1:] if args.quick else (0.7, 0.9))
        print_table(f"end to end, SYNTHETIC draft (real {args.draft} compute, proposals right at a realised rate alpha), "
                    f"random weights of the real shapes, {args.new_tokens} new tokens; c = T_draft(1)/T_oracle(1) = {c:.3f}",
                    e2e, ["alpha", "realised"] + columns + ["predicted", "predicted_with_cost_curve", "predicted_with_costs", "gap"])
    results["end_to_end"] = e2e

    end = cpu_snapshot()
    results["run"].update(minutes=(end[0] - start[0]) / 60, others_load=others_load(start, end),
                          weights=", ".join(f"{n} {'real' if r else 'random, of the real shape'}" for n, r in real.items()))
    save(args.out, "cost_curve", curve_rows)
    save(args.out, "one_token", one_token_rows)
    save(args.out, "end_to_end", e2e)
    atomic.write_text(os.path.join(args.out, "bench.json"), json.dumps(results, indent=2))
    write_summary(os.path.join(args.out, "summary.md"), results)
    png = plot(args.out, curves)
    print(f"\nwrote {args.out}/summary.md, cost_curve.csv, one_token.csv, end_to_end.csv, bench.json"
          + (f", {os.path.basename(png)}" if png else " (pip install matplotlib for a plot)"))


if __name__ == "__main__":
    errors.run(main)
