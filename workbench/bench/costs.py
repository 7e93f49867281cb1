"""python workbench.py bench cost and python workbench.py bench rounds: what a forward of k tokens costs, and where a run's time goes.

    python workbench.py bench cost [MODEL ...]   T(k)/T(1), k = 1..32 (default: the learned pair), rounds taking turns;
                                       beside T(k), its weight products alone and its LM head alone.
    python workbench.py bench rounds             speculative decoding against greedy decoding on the learned pair's
                                       held-out prompts, every forward timed as it ran: the prediction the
                                       suite makes from its cost probe, and step by step what it leaves out
                                       (the passes' prices as they ran, the rounds as they ran, the prompt
                                       passes, the work between the passes), to the measured speedup.
The measuring machinery is speed/measure.py's.
"""

import contextlib
import json
import statistics
import sys
import time

import numpy as np

import roofline
from workbench import program, runner
from workbench.bench import suite, tables
from workbench.settings import Settings
from stats import Stats
from errors import printable
from speedup import expected_tokens_per_round, predicted_speedup
from workbench.bench import measure
from workbench.speed import cores, plan as planning, second_core, threads
from weights import files

MAX_CONTEXT = 1024 - 64  # GPT-2's window, less the largest k
COST_OUTPUTS = ("cost.md", "cost.csv", "cost.json")
WAYS = ("default", "numpy", "numpy-1")  # the planned model; NumPy's own product on every core; on one
COST_COLUMNS = ["model", "k", "way", "default_ms", "numpy_ms", "numpy-1_ms", "roofline_ms", "default/roofline",
                "numpy/roofline", "numpy-1/roofline", "default/best_T1", "default/best", "products_ms", "head_ms",
                "rest_ms", "norms_ms", "attention_ms", "gelu_ms", "other_ms"]


def cost_main(argv):
    """python workbench.py bench cost: T(k) of named models, k = 1..32, each way taking turns, beside the roofline."""
    parser = program.Parser(
        prog="workbench.py bench cost", description="What checking k tokens costs: a forward of k new tokens after "
        "--context cached ones, T(k), run the default way (the plan's), by NumPy's own product on every core and on "
        "one, beside this machine's roofline max(bytes / bandwidth, k x FLOPs / rate), and the plan that ran.",
        epilog="Every k and every way take turns in each round, in an order shuffled anew each round; the figures are "
               "medians over the rounds. best_T1: the fastest T(1) of the three ways, the denominator of every ratio "
               "of speed (a ratio over a path's own slower T(1) would flatter it). The ridge: the k past which a check "
               "costs more than one token even on the roofline. products/head/rest: the default way's weight products "
               "alone, its LM head alone, and the rest of its forward; that rest's layer norms, attentions and GELUs "
               "each alone, and the other: what is left (residual adds, the embedding, the heads' reshapes, the KV "
               "cache's copies, the Python between the calls). gpt2 ... gpt2-xl: real weights when --models-dir "
               "holds them, else random weights of the real shape.")
    parser.add_argument("models", nargs="*", default=["demo-oracle", "demo-draft"],
                        help="models: names or directories (default: the learned pair, demo-oracle demo-draft)")
    parser.add_argument("--ks", nargs="+", type=int, default=[1, 2, 3, 4, 5, 6, 8, 9, 12, 17, 24, 32],
                        help="k values, 1 to 64 (default: 1 to 32, those the methods use most)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds, 1 to 1000 (default: 15)")
    parser.add_argument("--context", type=int, default=128, help="cached tokens before each forward (default: 128)")
    parser.add_models_and_results(COST_OUTPUTS)
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 1000 or not all(1 <= k <= 64 for k in args.ks) or not 1 <= args.context <= MAX_CONTEXT:
        parser.error(f"--rounds must be from 1 to 1000, --ks from 1 to 64, --context from 1 to {MAX_CONTEXT}")
    parser.check_results(args.out, COST_OUTPUTS)
    ks = sorted(set(args.ks) | {1})
    start = measure.cpu_snapshot()
    facts = {"command": " ".join(["python workbench.py bench cost", *argv]), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
             "cpu": measure.cpu_name(), "cores": threads.N_THREADS, "numpy": np.__version__,
             "blas": measure.blas_description(), "load_before": measure.load_average(), "rounds": args.rounds,
             "context": args.context}
    print("measuring this machine: its memory bandwidth and its float32 product rate (all cores)", file=sys.stderr)
    threads.use_blas_threads(threads.N_THREADS)
    bandwidth, rate = roofline.memory_bandwidth(), roofline.product_rate()
    facts.update(bandwidth_gb_s=round(bandwidth / 1e9, 1), rate_gflop_s=round(rate / 1e9, 1))
    rows, models = [], []
    for name in args.models:
        planned, shown = measure.planned_model(name, args.models_dir)
        if args.context + max(ks) > planned.n_positions:
            raise program.UsageError(f"{name}: --context {args.context} and k up to {max(ks)} pass its window of "
                                     f"{planned.n_positions}")
        n_bytes, flops = roofline.weight_bytes(planned), roofline.flops_per_token(planned, args.context)
        about = {"model": shown, "MB_per_token": round(n_bytes / 1e6, 1), "GFLOP_per_token": round(flops / 1e9, 3),
                 "memory_roof_ms": round(n_bytes / bandwidth * 1e3, 3),
                 "ridge_k": round(roofline.ridge(n_bytes, flops, bandwidth, rate), 1),
                 "plan": {str(r): w for r, w in planned.plan.ways.items()}}
        models.append(about)
        costs = measure.way_costs(planned, ks, args.context, args.rounds)
        medians = {way: {k: statistics.median(costs[way][k]) for k in ks} for way in WAYS}
        best_one = min(medians[way][1] for way in WAYS)
        for k in ks:
            roof = roofline.roofline(k, n_bytes, flops, bandwidth, rate)
            ms = {way: medians[way][k] * 1e3 for way in WAYS}
            parts = {part: statistics.median(costs[part][k]) * 1e3 for part in measure.PARTS}
            rest = ms["default"] - parts["products"]
            rows.append({"model": shown, "k": k, "way": planned.plan.way(k),
                         **{f"{way}_ms": figure(ms[way]) for way in WAYS}, "roofline_ms": figure(roof * 1e3),
                         **{f"{way}/roofline": round(ms[way] / (roof * 1e3), 2) for way in WAYS},
                         "default/best_T1": round(ms["default"] / (best_one * 1e3), 2),
                         "default/best": round(paired(costs, k), 2),
                         "products_ms": figure(parts["products"]), "head_ms": figure(parts["head"]),
                         "rest_ms": figure(rest),
                         **{f"{part}_ms": figure(parts[part]) for part in measure.REST_PARTS},
                         "other_ms": figure(rest - sum(parts[part] for part in measure.REST_PARTS))})
        print(printable(f"{shown}: {about['MB_per_token']} MB and {about['GFLOP_per_token']} GFLOP a token; memory roof "
                        f"{about['memory_roof_ms']} ms; ridge at k = {about['ridge_k']}; best T(1) "
                        f"{best_one * 1e3:.3f} ms"), file=sys.stderr)
        del planned
    end = measure.cpu_snapshot()
    others = cores.others_cores(start, end)
    facts.update(minutes=round((end[0] - start[0]) / 60, 1), models=models, fallbacks=planning.CORES.fallbacks,
                 others_load="unknown" if others is None else f"{others:.2f} cores")
    header = cost_header(facts, args)
    print(f"\n{header}\n{tables.text(rows, COST_COLUMNS)}")
    files.write_together(args.out, {
        "cost.md": lambda path: files.write_text(path, f"# `{facts['command']}`\n\n{header}\n\n"
                                                         + tables.markdown(rows, COST_COLUMNS) + "\n"),
        "cost.csv": lambda path: tables.write_csv(path, rows, COST_COLUMNS),
        "cost.json": lambda path: files.write_text(path, json.dumps({"facts": facts, "rows": rows}, indent=1))})
    print(f"wrote {printable(args.out)}/{', '.join(COST_OUTPUTS)}", file=sys.stderr)


def paired(costs, k):
    """The default's T(k) over the best plain way's (numpy or numpy-1, whichever has the lower median): the median
    of the rounds' ratios, each of two forwards run one right after the other (measure.way_costs)."""
    best = min(("numpy", "numpy-1"), key=lambda way: statistics.median(costs[way][k]))
    return statistics.median([a / b for a, b in zip(costs["default"][k], costs[best][k])])


def figure(x):
    """x to four significant digits: a tiny model's roofline is thousandths of a millisecond."""
    return float(f"{x:.4g}")


def cost_header(facts, args):
    """The run's facts, the machine's roofline, and each model's bytes, FLOPs, ridge and plan, as prose."""
    lines = [f"{facts['date']}, {facts['minutes']} min; {facts['cpu']}, {facts['cores']} cores; NumPy {facts['numpy']}, "
             f"{facts['blas']}; load average before {facts['load_before']}, other processes used {facts['others_load']} "
             f"during the run.",
             f"This machine: memory bandwidth {facts['bandwidth_gb_s']} GB/s, float32 product rate "
             f"{facts['rate_gflop_s']} GFLOP/s (NumPy's 2048 x 2048 product, all cores). The roofline of a forward of "
             f"k tokens: max(bytes / bandwidth, k x FLOPs / rate).",
             f"T(k): a forward of k new tokens after {args.context} cached, {args.rounds} rounds, every k and way taking "
             "turns; medians. default: the plan's way for k rows (way); numpy / numpy-1: NumPy's own product on every "
             "core / on one. default/best_T1: its T(k) over the fastest T(1) of the three. default/best: the median "
             "of the rounds' ratios of its T(k) to the plain way's with the lower median, each pair run back to back. "
             f"The cores were found taken by another program {facts['fallbacks']} times (the default then runs on one "
             "thread for a while: plan.Cores)."]
    for m in facts["models"]:
        ways = ", ".join(f"{r}: {w}" for r, w in m["plan"].items())
        lines.append(f"{m['model']}: {m['MB_per_token']} MB of weights and {m['GFLOP_per_token']} GFLOP a token; "
                     f"memory roof {m['memory_roof_ms']} ms; ridge at k = {m['ridge_k']}; its plan (rows: way) {ways}.")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# bench.py rounds: where speculative decoding's time goes
# ---------------------------------------------------------------------------

ROUNDS_OUTPUTS = ("rounds.md", "rounds.json")


class Recorder:
    """Every forward of the draft and the oracle as it ran: (role, rows, seconds), and the seconds spent
    setting the BLAS's threads around them (threads.threads_for, inside those forwards)."""

    def __init__(self):
        self.passes, self.setting = [], 0.0

    @contextlib.contextmanager
    def attached(self, draft, oracle):
        real_setting = threads.threads_for

        @contextlib.contextmanager
        def timed_setting(n_rows, share=True):
            start = time.perf_counter()
            setting = real_setting(n_rows, share)
            setting.__enter__()
            self.setting += time.perf_counter() - start
            try:
                yield
            finally:
                start = time.perf_counter()
                setting.__exit__(None, None, None)
                self.setting += time.perf_counter() - start

        def timed(model, role):
            forward = model.forward

            def run(ids, *args, **kwargs):
                start = time.perf_counter()
                try:
                    return forward(ids, *args, **kwargs)
                finally:
                    self.passes.append((role, int(np.size(ids)), time.perf_counter() - start))
            return run

        threads.threads_for = timed_setting
        draft.forward, oracle.forward = timed(draft, "draft"), timed(oracle, "oracle")
        try:
            yield self
        finally:
            threads.threads_for = real_setting
            del draft.forward, oracle.forward  # the class's own forward again


def run_timed(method, draft, oracle, ids, n_new, n_draft):
    """(seconds, Stats, Recorder) of one generation, every forward recorded."""
    recorder, stats = Recorder(), Stats()
    settings = Settings(method=method, max_new_tokens=n_new, n_draft=n_draft)
    with recorder.attached(draft, oracle):
        start = time.perf_counter()
        for _ in runner.generator(settings, draft, oracle, ids, stats):
            pass
        seconds = time.perf_counter() - start
    return seconds, stats, recorder


def account(runs):
    """Seconds of a method's generations (summed over the prompts): the prompt passes, the other passes by role,
    the thread setting inside them, and the work between the passes."""
    out = {"wall": 0.0, "prompt passes": 0.0, "draft passes": 0.0, "oracle passes": 0.0, "thread setting": 0.0,
           "n draft": 0, "n oracle": 0, "verify rows": 0}
    for seconds, _, recorder, ids in runs:
        out["wall"] += seconds
        out["thread setting"] += recorder.setting
        seen = set()
        for role, n_rows, s in recorder.passes:
            if role not in seen:  # each model's first pass reads the prompt
                seen.add(role)
                out["prompt passes"] += s
                continue
            out[f"{role} passes"] += s
            out[f"n {role}"] += 1
            out["verify rows"] += n_rows if role == "oracle" else 0
    out["between passes"] = out["wall"] - out["prompt passes"] - out["draft passes"] - out["oracle passes"]
    return out


def rounds_main(argv):
    parser = program.Parser(prog="workbench.py bench rounds", description="Where speculative decoding's time goes on the learned "
                            "pair: every forward timed as it ran, against the suite's prediction.")
    parser.add_argument("--draft", default="demo-draft", help="draft model (default: demo-draft)")
    parser.add_argument("--oracle", default="demo-oracle", help="oracle model (default: demo-oracle)")
    parser.add_argument("-n", "--new-tokens", type=int, default=64, help="tokens per run, 1 to 512 (default: 64)")
    parser.add_argument("--n-draft", type=int, default=4, help="speculative's draft length, 1 to 16 (default: 4)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every run taking turns, 1 to 50 (default: 5)")
    parser.add_argument("--second-core", action="store_true", help="a small model's products of two rows or more half "
                        "on a helper process (speed/second_core.py; off by default: one core)")
    parser.add_models_and_results(ROUNDS_OUTPUTS)
    args = parser.parse_args(argv)
    if args.second_core:
        second_core.use(True)
    if not 1 <= args.new_tokens <= 512 or not 1 <= args.n_draft <= 16 or not 1 <= args.rounds <= 50:
        parser.error("--new-tokens must be from 1 to 512, --n-draft from 1 to 16, --rounds from 1 to 50")
    parser.check_results(args.out, ROUNDS_OUTPUTS)
    draft, oracle, prompts, context = suite.pair_and_prompts(args.draft, args.oracle, args.models_dir)
    t_draft, t_oracle = suite.cost_probe(draft, oracle, context)  # the suite's prices
    by_round = []
    for _ in range(args.rounds):
        runs = {"greedy": [], "speculative": []}
        for ids in prompts:
            for method in runs:
                runs[method].append((*run_timed(method, draft, oracle, ids, args.new_tokens, args.n_draft), ids))
                if method == "speculative" and runs["speculative"][-1][1].n_generated != args.new_tokens:
                    raise AssertionError("speculative made another number of tokens")
        by_round.append(runs)
    rows, facts = rounds_table(by_round, t_draft, t_oracle, args.n_draft)
    facts.update(command=" ".join(["python workbench.py bench rounds", *argv]), date=time.strftime("%Y-%m-%d %H:%M %Z"),
                 cpu=measure.cpu_name(), load=measure.load_average(), prompts=len(prompts), context=context,
                 n_new=args.new_tokens, rounds=args.rounds, T_draft_ms=round(t_draft * 1e3, 3), cores_used=second_core.status(),
                 T_oracle_ms={k: round(t * 1e3, 3) for k, t in t_oracle.items()})
    header = (f"{facts['date']}; {facts['cpu']}; load average {facts['load']}; {facts['cores_used']}. "
              f"{len(prompts)} held-out prompts, "
              f"{args.new_tokens} new tokens, n_draft {args.n_draft}, {args.rounds} rounds taking turns (greedy, then "
              f"speculative, prompt by prompt); seconds summed over the prompts, medians over the rounds. The suite's "
              f"cost probe (best of 7 after {context} cached tokens): T_draft(1) {facts['T_draft_ms']} ms, "
              f"T_oracle(1) {facts['T_oracle_ms'][1]} ms.")
    print(f"\n{header}\n{tables.text(rows, ['step', 'greedy', 'speculative', 'speedup'])}")
    files.write_together(args.out, {
        "rounds.md": lambda path: files.write_text(path, f"# `{facts['command']}`\n\n{header}\n\n" + tables.markdown(
            rows, ["step", "greedy", "speculative", "speedup"]) + "\n"),
        "rounds.json": lambda path: files.write_text(path, json.dumps({"facts": facts, "rows": rows}, indent=1))})
    print(f"wrote {printable(args.out)}/{', '.join(ROUNDS_OUTPUTS)}", file=sys.stderr)


def rounds_table(by_round, t_draft, t_oracle, n_draft):
    """Rows from the suite's prediction to the measured speedup, each step replacing one assumption by what ran."""
    def med(values):
        return statistics.median(values)

    acc = [{m: account(runs[m]) for m in runs} for runs in by_round]
    alpha, mean_k, check = suite.realised([s for runs in by_round for _, s, _, _ in runs["speculative"]], t_oracle)
    c = t_draft / t_oracle[1]
    expected = expected_tokens_per_round(alpha, mean_k)
    # the passes as they ran: a draft pass, a verification and a greedy step, in seconds, mean over everything
    step = med([a["greedy"]["oracle passes"] / a["greedy"]["n oracle"] for a in acc])
    draft_pass = med([a["speculative"]["draft passes"] / a["speculative"]["n draft"] for a in acc])
    verify = med([a["speculative"]["oracle passes"] / a["speculative"]["n oracle"] for a in acc])

    def ms(method, *parts):
        return round(med([sum(a[method][p] for p in parts) for a in acc]) * 1e3, 1)

    def ratio(*parts):
        return round(med([sum(a["greedy"][p] for p in parts) / sum(a["speculative"][p] for p in parts) for a in acc]), 2)

    rows = [
        {"step": f"1. the suite's prediction: alpha {alpha:.3f}, mean_k {mean_k:.2f}, c {c:.3f}, T(mean_k+1)/T(1) {check:.2f} "
                 "(cost probe)", "greedy": "", "speculative": "",
         "speedup": round(predicted_speedup(alpha, mean_k, c, check), 2)},
        {"step": f"2. the same formula, the passes' prices as they ran: greedy step {step * 1e3:.3f} ms, draft pass "
                 f"{draft_pass * 1e3:.3f} ms, verification {verify * 1e3:.3f} ms (c {draft_pass / step:.3f}, "
                 f"T(mean_k+1)/T(1) {verify / step:.2f})", "greedy": "", "speculative": "",
         "speedup": round(expected / (mean_k * draft_pass / step + verify / step), 2)},
        {"step": "3. the passes as they ran, but the prompts' (ms)", "greedy": ms("greedy", "oracle passes"),
         "speculative": ms("speculative", "draft passes", "oracle passes"),
         "speedup": ratio("draft passes", "oracle passes")},
        {"step": "4. + the prompt passes (ms)", "greedy": ms("greedy", "draft passes", "oracle passes", "prompt passes"),
         "speculative": ms("speculative", "draft passes", "oracle passes", "prompt passes"),
         "speedup": ratio("draft passes", "oracle passes", "prompt passes")},
        {"step": "5. + the work between the passes: measured (ms)", "greedy": ms("greedy", "wall"),
         "speculative": ms("speculative", "wall"), "speedup": ratio("wall")},
        {"step": "   of which the work between the passes (ms)", "greedy": ms("greedy", "between passes"),
         "speculative": ms("speculative", "between passes"), "speedup": ""},
        {"step": "   and, inside the passes, setting the BLAS's threads (ms)", "greedy": ms("greedy", "thread setting"),
         "speculative": ms("speculative", "thread setting"), "speedup": ""},
        {"step": "   passes: oracle (greedy: steps; speculative: verifications), draft",
         "greedy": f"{acc[0]['greedy']['n oracle']}, 0",
         "speculative": f"{acc[0]['speculative']['n oracle']}, {acc[0]['speculative']['n draft']}", "speedup": ""},
    ]
    facts = {"alpha": alpha, "mean_k": mean_k, "c": c, "check": check, "greedy_step_ms": step * 1e3,
             "draft_pass_ms": draft_pass * 1e3, "verification_ms": verify * 1e3,
             "speedups_by_round": [a["greedy"]["wall"] / a["speculative"]["wall"] for a in acc]}
    return rows, facts
