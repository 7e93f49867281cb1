"""Benchmarks: what checking k tokens costs, and what speculative decoding gains, on your machine.

    python workbench.py bench            # everything (about 13 minutes here, 2 more the first time)
    python workbench.py bench --quick    # gpt2 and gpt2-xl shapes, a smaller sweep
    python workbench.py bench suite      # every method on held-out text of four kinds, on the learned pair (suite.py)
    python workbench.py bench layers     # self-speculative decoding: acceptance and cost against the draft's depth (layers.py)
    python workbench.py bench cost       # T(k), k = 1..32, of the learned pair (or named models) beside the roofline (costs.py)
    python workbench.py bench plan       # how your machine runs each model's forwards, and why (plans.py)
    python workbench.py bench rounds     # where speculative decoding's time goes on the learned pair, against its prediction (costs.py)
    python workbench.py bench batch      # many prompts at once: where batched speculative decoding stops paying (batch.py)
    python workbench.py bench ablation "prompt" ...   # every method on your prompts, against the oracle alone (ablation.py)

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

import argparse
import json
import os
import sys
import time

import numpy as np

import errors

from workbench import methods, program
from workbench.bench import ablation, costs, layers, suite, tables
from errors import printable
from workbench.runner import generator
from workbench.settings import Settings
from stats import Stats
from processors import Processor
from workbench.bench import measure
from workbench.speed import cores, second_core
from workbench.bench.measure import SHAPES, SyntheticDraft
from speedup import predicted_speedup
from workbench.speed.threads import N_THREADS, parking
from weights import files
from weights.models import DEFAULT_MODELS_DIR
from weights.tokenizer import encode, load_tokenizer

PROMPTS = [
    "The meaning of life is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The following is a list of the largest cities in Europe by population:\n1.",
    "Once upon a time, in a small village at the edge of the forest, there lived",
]


def timed(generate):
    """(tokens, seconds, stats) of generate(stats), a generator of token ids run to its end."""
    stats = Stats()
    start = time.perf_counter()
    tokens = list(generate(stats))
    return tokens, time.perf_counter() - start, stats


def method_run(name, draft, oracle, ids, n_new, n_draft=None, seed=0, processor=None):
    """generate(stats) for a registered method (workbench/methods/) with these settings."""
    settings = Settings(method=name, max_new_tokens=n_new, n_draft=n_draft, seed=seed,
                        processor=processor if processor is not None else Processor())
    return lambda stats: generator(settings, draft, oracle, ids, stats)


def row(pair, method, setting, tokens, elapsed, stats, baseline_time, **extra):
    return {"pair": pair, "method": method, "setting": setting, "tokens": len(tokens),
            "tokens_per_s": round(len(tokens) / elapsed, 2),
            "acceptance": round(stats.kept_fraction, 3) if stats.drafted else "",
            "tokens_per_pass": round(stats.tokens_per_round, 2),
            "speedup": round(baseline_time / elapsed, 2), "seconds": elapsed,
            "draft_seconds": stats.draft_time, "oracle_seconds": stats.oracle_time, **extra}


WINDOW = 1024  # GPT-2's context window, every size's
MAX_CONTEXT, MAX_NEW = WINDOW - 16, WINDOW - 48
RESULTS = ("summary.md", "bench.json", "cost_curve.csv", "one_token.csv", "end_to_end.csv", "cost_curve.png")
BEYOND = (("tree", 4), ("staged", 4), ("adaptive", None), ("adaptive-hf", None))  # the methods beyond, and their draft lengths


def end_to_end_real(draft, oracle, pair, enc, n_new, ks, log):
    """Every registered method with a draft length on PROMPTS, real weights; speedups against the oracle alone."""
    rows = []
    for i, text in enumerate(PROMPTS):
        ids = encode(enc, text)
        reference, base, stats = timed(method_run("greedy", draft, oracle, ids, n_new))
        rows.append(row(pair, "greedy (oracle alone)", "", reference, base, stats, base, prompt=i))
        for k in ks:
            out, t, s = timed(method_run("speculative", draft, oracle, ids, n_new, n_draft=k))
            if out != reference:
                log(f"note: prompt {i}, n_draft {k}: output differs from greedy (a floating-point near-tie?)")
            rows.append(row(pair, "speculative", f"n_draft={k}", out, t, s, base, prompt=i))
        out, t, s = timed(method_run("threshold", draft, oracle, ids, n_new))
        rows.append(row(pair, "threshold", "n_draft=16", out, t, s, base, prompt=i))
        sample_base = timed(method_run("sample", draft, oracle, ids, n_new, seed=i))
        rows.append(row(pair, "sample (oracle alone)", "T=1", *sample_base, sample_base[1], prompt=i))
        out, t, s = timed(method_run("sps", draft, oracle, ids, n_new, n_draft=4, seed=i))
        rows.append(row(pair, "sps", "n_draft=4, T=1", out, t, s, sample_base[1], prompt=i))
        for name, k in BEYOND:
            out, t, s = timed(method_run(name, draft, oracle, ids, n_new, n_draft=k))
            rows.append(row(pair, name, f"n_draft={k or methods.get(name).n_draft}", out, t, s, base, prompt=i))
        out, t, s = timed(method_run("ngram", None, oracle, ids, n_new))
        rows.append(row(pair, "ngram (no draft model)", "n_draft=8", out, t, s, base, prompt=i))
        log(f"  prompt {i} done")
    return rows


def end_to_end_synthetic(draft_model, oracle, pair, n_new, alphas, n_drafts, draft_curve, oracle_curve, log,
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
    draft_costs, oracle_costs = measure.prompt_costs(draft_model, oracle, ids, n_drafts, draft_curve, oracle_curve)
    measured_rounds = measure.round_costs(draft_model, oracle, ids, n_drafts)
    c = draft_curve[1] / oracle_curve[1]

    def oracle_alone():  # the baseline row, its own speedup 1
        tokens, t, s = timed(method_run("greedy", None, oracle, ids, n_new))
        return row(pair, "greedy (oracle alone)", "", tokens, t, s, t), tokens

    first, reference = oracle_alone()
    rows, base = [first], first["seconds"]
    reference = ids + reference
    for alpha in alphas:
        for n_draft in n_drafts:
            if n_draft >= 8 and alpha < 0.8:  # long drafts lose even at 0.8: skip the slowest runs
                continue
            # Twice, the faster counting, as for the oracle alone: these rows carry the predictions.
            # A fresh draft for each run: its wrong guesses come from its own generator.
            drafts = [SyntheticDraft(draft_model, reference, alpha, start=len(ids)) for _ in range(2)]
            runs = [timed(method_run("speculative", d, oracle, ids, n_new, n_draft=n_draft)) for d in drafts]
            assert all(tokens == reference[len(ids):] for tokens, _, _ in runs)
            out, t, s = min(runs, key=lambda run: run[1])
            realised = drafts[0].realised  # both drafts make the same draw
            alone_from_curve, from_curve = measure.predicted_seconds(realised, n_draft, n_new, draft_costs, oracle_costs)
            alone, speculative = measure.predicted_seconds(realised, n_draft, n_new, draft_costs, oracle_costs, measured_rounds)
            rows.append(row(pair, "speculative", f"n_draft={n_draft}", out, t, s, base, alpha=alpha,
                            realised=round(realised, 3), predicted=round(predicted_speedup(realised, n_draft, c), 2),
                            predicted_with_cost_curve=round(alone_from_curve / from_curve, 2),
                            predicted_with_costs=round(alone / speculative, 2),
                            predicted_seconds=speculative, predicted_alone_seconds=alone,
                            seconds_of_both_runs=", ".join(f"{seconds:.2f}" for _, seconds, _ in runs)))
        others = [("threshold", "n_draft=16", "threshold", None, None)]
        if alpha >= 0.8:
            others.append(("sps (T=0)", "n_draft=4", "sps", 4, Processor(0.0)))
        if alpha in beyond_alphas:
            others += [(name, f"n_draft={k or methods.get(name).n_draft}", name, k, None) for name, k in BEYOND]
        for shown, setting, name, k, processor in others:
            draft = SyntheticDraft(draft_model, reference, alpha, start=len(ids))
            out, t, s = timed(method_run(name, draft, oracle, ids, n_new, n_draft=k, processor=processor))
            assert out == reference[len(ids):], shown
            rows.append(row(pair, shown, setting, out, t, s, base, alpha=alpha, realised=round(draft.realised, 3)))
        log(f"  alpha {alpha} done")
    out, t, s = timed(method_run("ngram", None, oracle, ids, n_new))
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


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def print_table(title, rows, columns):
    print(f"\n{title}\n{tables.text(rows, columns)}")


def csv_writer(rows):  # a writer of rows as a CSV for files.write_together; every key of any row is a column
    return lambda path: tables.write_csv(path, rows, columns=list(dict.fromkeys(k for r in rows for k in r)))


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
              f"forward of each {loading['first_forward_s']:.2f} s, {measure.peak_rss_text(loading)}.", ""]
    e2e = results["end_to_end"]
    if any("alpha" in r for r in e2e):
        base = e2e[0]
        lines += [f"End to end, {e2e[0]['pair']}, synthetic draft, {base['tokens']} new tokens after a 48-token prompt; "
                  f"the oracle alone: {base['tokens_per_s']} tokens/s (runs of {base['seconds_of_both_runs']} s). "
                  "Predictions at the realised rate: the paper's (verification free); from the cost curves, "
                  "drafting and the prompt passes; and the same with a round's passes, and the oracle alone's "
                  "steps, timed as decoding runs them (round_costs); gap = measured / that last prediction - 1. "
                  "Speculative rows: the faster of two runs; the other methods: one run.", ""]
        columns = ["alpha", "realised", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup",
                   "predicted", "predicted_with_cost_curve", "predicted_with_costs", "gap"]
        titles = ["alpha", "realised", "method", "setting", "tokens/s", "acceptance", "tokens per pass", "speedup",
                  "predicted (paper)", "predicted (cost curve)", "predicted (measured rounds)", "gap"]
    else:
        lines += [f"End to end, {e2e[0]['pair']}, real weights, {len(PROMPTS)} prompts.", ""]
        columns = ["prompt", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup"]
        titles = ["prompt", "method", "setting", "tokens/s", "acceptance", "tokens per pass", "speedup"]
    lines.append(tables.markdown(e2e, columns, titles))
    files.write_text(path, "\n".join(lines) + "\n")


def plot(curves):
    """A writer of the cost curves as a PNG for files.write_together; None without matplotlib."""
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
    return lambda path: fig.savefig(path, format="png", dpi=120, bbox_inches="tight")  # path: a temporary name, no .png


def parse_args(argv):
    parser = program.Parser(prog="workbench.py bench", description="\n\n".join(__doc__.split("\n\n")[:2]),  # what it is, and the benchmarks
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--quick", action="store_true", help="gpt2 and gpt2-xl shapes only, a smaller sweep")
    parser.add_argument("--sizes", nargs="+", choices=SHAPES, help="sizes for the cost curve (default: all four)")
    parser.add_argument("--draft", default="gpt2", choices=SHAPES, help="draft for the end-to-end runs (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-xl", choices=SHAPES, help="oracle for the end-to-end runs (default: gpt2-xl)")
    parser.add_argument("--new-tokens", type=int, default=None,
                        help=f"tokens per end-to-end run, 1 to {MAX_NEW} (default: 64, 32 with --quick)")
    parser.add_argument("--context", type=int, default=128,
                        help=f"cached tokens before the cost-curve forwards, 1 to {MAX_CONTEXT} (default: 128)")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where real or random checkpoints live (default: models/)")
    parser.add_argument("--out", default="bench_results", help="directory for CSV, JSON and the plot (default: bench_results/)")
    parser.add_argument("--load-probe", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.context <= MAX_CONTEXT:  # a forward of up to 16 tokens after it must fit GPT-2's window
        parser.error(f"--context must be from 1 to {MAX_CONTEXT} (the window of 1024 holds it and 16 new tokens)")
    if args.new_tokens is not None and not 1 <= args.new_tokens <= MAX_NEW:
        parser.error(f"--new-tokens must be from 1 to {MAX_NEW} (the window of 1024 holds it and the 48-token prompt)")
    problem = files.why_not_writable_in(args.out, RESULTS)  # every file of the set, before minutes of timing
    if problem and not args.load_probe:
        parser.error(f"--out {problem}")
    return args


def main(argv=None):
    """python workbench.py bench [ablation ...]: the machine benchmark, or with a first word, the other benchmarks."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["ablation"]:
        return ablation.main(argv[1:])
    if argv[:1] == ["suite"]:
        return suite.main(argv[1:])
    if argv[:1] == ["layers"]:
        return layers.main(argv[1:])
    if argv[:1] == ["cost"]:
        return costs.cost_main(argv[1:])
    if argv[:1] == ["plan"]:
        from workbench.bench import plans
        return plans.main(argv[1:])
    if argv[:1] == ["rounds"]:
        return costs.rounds_main(argv[1:])
    if argv[:1] == ["batch"]:
        from workbench.bench import batch as batch_bench
        return batch_bench.main(argv[1:])
    args = parse_args(argv)
    if args.load_probe:
        return measure.load_probe(args.load_probe)
    machine(args, argv)


def note_earlier_results(out):
    """Say before the run, not after it, that it replaces the results of an earlier run in out."""
    earlier = [name for name in RESULTS if os.path.exists(os.path.join(out, name))]
    if earlier:
        print(f"note: {printable(out)} holds an earlier run's results ({', '.join(earlier)}): this run replaces them",
              file=sys.stderr)


def machine(args, argv):
    note_earlier_results(args.out)
    sizes = args.sizes or (["gpt2", "gpt2-xl"] if args.quick else list(SHAPES))
    ks = range(1, 17)
    args.new_tokens = args.new_tokens or (32 if args.quick else 64)
    alphas, n_drafts = ([0.6, 0.8], [2, 4]) if args.quick else ([0.5, 0.7, 0.8, 0.9], [2, 4, 8])

    def log(message):
        print(message, file=sys.stderr, flush=True)
        return True

    enc = None  # real draft and oracle: their tokenizer, read now rather than fail after minutes of timing
    if all(measure.has_checkpoint(os.path.join(args.models_dir, name)) for name in (args.draft, args.oracle)):
        enc = load_tokenizer(os.path.join(args.models_dir, args.draft))

    start = measure.cpu_snapshot()
    command = " ".join(["python workbench.py bench", *map(str, argv)])
    results = {"machine": {"cores": N_THREADS, "numpy": np.__version__, "blas": measure.blas_description(),
                           "threads": parking(), "small models": second_core.status()},
               "run": {"command": command, "date": time.strftime("%Y-%m-%d %H:%M %Z"), "context": args.context,
                       "load_before": measure.load_average()}}
    print(f"threads: {parking()}")
    print(f"small models: {second_core.status()}")
    log("1. memory bandwidth")
    probe_data = measure.probe_array()
    bandwidth = measure.memory_bandwidth(probe_data)
    results["machine"]["bandwidth_gb_s"] = round(bandwidth, 1)
    print(f"memory bandwidth: {bandwidth:.1f} GB/s ({N_THREADS} threads reading 2 GiB)")

    log("2. cost curve")
    curves, curve_rows, one_token_rows, real = {}, [], [], {}
    for name in sorted(set(sizes) | {args.draft, args.oracle}, key=list(SHAPES).index):
        model, _, real[name] = measure.bench_model(name, args.models_dir)
        seconds = measure.cost_curve(model, ks, args.context, probe_data, repeats=5)
        curve = curves[name] = {k: seconds[k][0] for k in ks}
        products, bound = seconds["products"][0], seconds["probe"][0]
        n_bytes = measure.weight_bytes(model)
        bandwidth = n_bytes / bound / 1e9

        def share(seconds):  # of the bandwidth, when streaming the weights once took `seconds`
            return f"{bound / seconds:.0%}"

        one_token_rows.append({"model": name, "T(1)_ms": round(curve[1] * 1000, 1),
                               "products_alone_ms": round(products * 1000, 1),
                               "between_products_ms": round((curve[1] - products) * 1000, 1),
                               "forward/products": round(curve[1] / products, 3),
                               "bound_ms": round(bound * 1000, 1),
                               "products_share": share(products), "forward_share": share(curve[1]),
                               "T(1)_median_ms": round(measure.median(seconds[1]) * 1000, 1),
                               "products_median_ms": round(measure.median(seconds["products"]) * 1000, 1),
                               "products_of_8_ms": round(seconds["products of 8"][0] * 1000, 1),
                               "products_of_8/products": round(seconds["products of 8"][0] / products, 2)})
        for k, t in curve.items():
            curve_rows.append({"model": name, "weights": "real" if real[name] else "random", "k": k,
                               "ms": round(t * 1000, 1), "T(k)/T(1)": round(t / curve[1], 2),
                               "ms_per_token": round(t * 1000 / k, 1), "GB/s": round(n_bytes / t / 1e9, 1),
                               "bandwidth_GB/s": round(bandwidth, 1), "share_of_bandwidth": share(t),
                               "median_ms": round(measure.median(seconds[k]) * 1000, 1)})
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
    draft_model, draft_dir, draft_real = measure.bench_model(args.draft, args.models_dir)
    oracle, oracle_dir, oracle_real = measure.bench_model(args.oracle, args.models_dir)
    loading = measure.measure_loading([oracle_dir, draft_dir])
    results["loading"] = {"models": [args.oracle, args.draft], **loading}
    print(f"\nloading {args.oracle} + {args.draft} ({loading['files_bytes'] / 1e9:.2f} GB of checkpoints) in a fresh process: "
          f"{loading['load_s']:.2f} s, first forward of each {loading['first_forward_s']:.2f} s, "
          f"{measure.peak_rss_text(loading)}")

    log("4. end to end")
    pair = f"{args.draft} -> {args.oracle}"
    c = curves[args.draft][1] / curves[args.oracle][1]
    columns = ["pair", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup"]
    if draft_real and oracle_real:
        e2e = end_to_end_real(draft_model, oracle, pair, enc, args.new_tokens, [4, 8], log)
        print_table(f"end to end, real weights, {len(PROMPTS)} prompts, {args.new_tokens} new tokens each (c = {c:.3f})",
                    e2e, ["prompt"] + columns)
    else:
        e2e = end_to_end_synthetic(draft_model, oracle, pair, args.new_tokens, alphas, n_drafts, curves[args.draft],
                                   curves[args.oracle], log, beyond_alphas=alphas[-1:] if args.quick else (0.7, 0.9))
        print_table(f"end to end, SYNTHETIC draft (real {args.draft} compute, proposals right at a realised rate alpha), "
                    f"random weights of the real shapes, {args.new_tokens} new tokens; c = T_draft(1)/T_oracle(1) = {c:.3f}",
                    e2e, ["alpha", "realised"] + columns + ["predicted", "predicted_with_cost_curve", "predicted_with_costs", "gap"])
    results["end_to_end"] = e2e

    end = measure.cpu_snapshot()
    results["run"].update(minutes=(end[0] - start[0]) / 60, others_load=cores.others_cores(start, end),
                          weights=", ".join(f"{n} {'real' if r else 'random, of the real shape'}" for n, r in real.items()))
    png = plot(curves)
    # One set: a failure leaves the earlier run's files as they were, never half of each run's.
    files.write_together(args.out, {
        "cost_curve.csv": csv_writer(curve_rows), "one_token.csv": csv_writer(one_token_rows),
        "end_to_end.csv": csv_writer(e2e), "bench.json": lambda path: files.write_text(path, json.dumps(results, indent=2)),
        "summary.md": lambda path: write_summary(path, results), **({"cost_curve.png": png} if png else {})})
    print(f"\nwrote {printable(args.out)}/summary.md, cost_curve.csv, one_token.csv, end_to_end.csv, bench.json"
          + (", cost_curve.png" if png else " (pip install matplotlib for a plot)"))


def main_entry():
    errors.run(main)
