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

from workbench import program, runner
from workbench.bench import suite, tables
from workbench.settings import Settings
from stats import Stats
from errors import printable
from speedup import expected_tokens_per_round, predicted_speedup
from workbench.bench import measure
from workbench.speed import second_core, threads
from workbench.bench.measure import SHAPES
from weights import files

MAX_CONTEXT = 1024 - 64  # GPT-2's window, less the largest k
COST_OUTPUTS = ("cost.md", "cost.csv", "cost.json")
COST_COLUMNS = ["model", "k", "T_ms", "T_min_ms", "T_max_ms", "ratio", "ratio_q1", "ratio_q3", "products_ms", "head_ms",
                "rest_ms"]


def cost_main(argv):
    """python workbench.py bench cost: T(k)/T(1) of named models, k = 1..32, the median of rounds taking turns."""
    parser = program.Parser(
        prog="workbench.py bench cost", description="What checking k tokens costs: a forward of k new tokens after --context "
        "cached ones, T(k), over T(1), for each model; its weight products alone and its LM head alone beside it.",
        epilog="Every k and every part take turns in each round; the figures are medians over the rounds, T(k) with "
               "its min-max, T(k)/T(1) the median of the rounds' own ratios with their quartiles. gpt2 ... gpt2-xl: "
               "real weights when --models-dir holds them, else random weights of the real shape (as bench.py). "
               "--second-core runs a small model's products of two rows or more half on a second core "
               "(speed/second_core.py), to compare with the default, one core; each figure says which ran.")
    parser.add_argument("models", nargs="*", default=["demo-oracle", "demo-draft"],
                        help="models: names or directories (default: the learned pair, demo-oracle demo-draft)")
    parser.add_argument("--ks", nargs="+", type=int, default=list(range(1, 33)), help="k values (default: 1 to 32)")
    parser.add_argument("--rounds", type=int, default=21, help="rounds, 1 to 1000 (default: 21)")
    parser.add_argument("--context", type=int, default=128, help="cached tokens before each forward (default: 128)")
    parser.add_argument("--second-core", action="store_true", help="a small model's products of two rows or more half "
                        "on a helper process (speed/second_core.py; off by default: one core)")
    parser.add_models_and_results(COST_OUTPUTS)
    args = parser.parse_args(argv)
    if args.second_core:
        second_core.use(True)
    if not 1 <= args.rounds <= 1000 or not all(1 <= k <= 64 for k in args.ks) or not 1 <= args.context <= MAX_CONTEXT:
        parser.error(f"--rounds must be from 1 to 1000, --ks from 1 to 64, --context from 1 to {MAX_CONTEXT}")
    parser.check_results(args.out, COST_OUTPUTS)
    ks = sorted(set(args.ks) | {1})
    start = measure.cpu_snapshot()
    facts = {"command": " ".join(["python workbench.py bench cost", *argv]), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
             "cpu": measure.cpu_name(), "cores": threads.N_THREADS, "numpy": np.__version__, "blas": measure.blas_description(),
             "load_before": measure.load_average(), "rounds": args.rounds, "context": args.context}
    rows = []
    for name in args.models:
        if name in SHAPES:
            model, _, real = measure.bench_model(name, args.models_dir)
            shown = name if real else f"{name} (random weights)"
        else:
            model, _ = runner.load_model(name, args.models_dir)
            shown = name
        if args.context + max(ks) > model.n_positions:
            raise program.UsageError(f"{name}: --context {args.context} and k up to {max(ks)} pass its window of "
                                     f"{model.n_positions}")
        costs = measure.wide_costs(model, ks, args.context, args.rounds)
        ones = costs[1]["forward"]
        for k in ks:
            t, ratios = costs[k]["forward"], [a / b for a, b in zip(costs[k]["forward"], ones)]
            q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
            ms = {part: statistics.median(costs[k][part]) * 1e3 for part in ("forward", "products", "head")}
            rows.append({"model": shown, "k": k, "T_ms": round(ms["forward"], 3), "T_min_ms": round(min(t) * 1e3, 3),
                         "T_max_ms": round(max(t) * 1e3, 3), "ratio": round(statistics.median(ratios), 3),
                         "ratio_q1": round(q1, 3), "ratio_q3": round(q3, 3), "products_ms": round(ms["products"], 3),
                         "head_ms": round(ms["head"], 3), "rest_ms": round(ms["forward"] - ms["products"], 3)})
        print(f"{printable(shown)}: T(1) {rows[-len(ks)]['T_ms']} ms, "
              + ", ".join(f"T({k})/T(1) {r['ratio']}" for k, r in zip(ks, rows[-len(ks):]) if k in (5, 9, 17, 32))
              + f"; {second_core.status()}", file=sys.stderr)
        del model
    end = measure.cpu_snapshot()
    others = measure.others_load(start, end)
    facts.update(minutes=round((end[0] - start[0]) / 60, 1), cores_used=second_core.status(),
                 others_load="unknown" if others is None else f"{others:.2f} cores")
    header = (f"{facts['date']}, {facts['minutes']} min; {facts['cpu']}, {facts['cores']} cores; NumPy {facts['numpy']}, "
              f"{facts['blas']}; load average before {facts['load_before']}, other processes used {facts['others_load']} "
              f"during the run; {facts['cores_used']}. T(k): a forward of k new tokens after {args.context} cached, "
              f"{args.rounds} rounds, "
              "every k and part taking turns; medians over the rounds (T with its min-max; T(k)/T(1) the median of the "
              "rounds' own ratios, with their quartiles); products: its weight products alone, head: the LM head's "
              "alone, rest: T minus the products.")
    print(f"\n{header}\n{tables.text(rows, COST_COLUMNS)}")
    titles = ["model", "k", "T(k) ms", "min", "max", "T(k)/T(1)", "q1", "q3", "products ms", "of which LM head ms",
              "rest ms"]
    files.write_together(args.out, {
        "cost.md": lambda path: files.write_text(path, f"# `{facts['command']}`\n\n{header}\n\n"
                                                         + tables.markdown(rows, COST_COLUMNS, titles) + "\n"),
        "cost.csv": lambda path: tables.write_csv(path, rows, COST_COLUMNS),
        "cost.json": lambda path: files.write_text(path, json.dumps({"facts": facts, "rows": rows}, indent=1))})
    print(f"wrote {printable(args.out)}/{', '.join(COST_OUTPUTS)}", file=sys.stderr)


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
    names = {"draft": args.draft, "oracle": args.oracle}
    loaded = runner.prepare(lambda role: runner.load_model(names[role], args.models_dir), "speculative", "", 1, names,
                            by_token_id=True)
    draft, oracle = loaded.draft, loaded.oracle
    prompts = [runner.prompt_ids(loaded.enc, p["prompt"]) for p in suite.read_prompts(suite.PROMPTS)]
    context = int(np.median([len(ids) for ids in prompts]))
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
