"""python workbench.py bench batch: where speculative decoding stops paying as the batch grows (batch.py).

For each batch size B, on the learned pair and its held-out prompts (the first B of them), rounds
taking turns, each a fresh run of:
  - greedy decoding of the B prompts one after another (speculative.greedy_generate),
  - batched greedy decoding (batch.greedy_generate_batch),
  - batched greedy speculative decoding (batch.speculative_generate_batch),
and beside them what a round costs at that size: T_B(k), a forward of k new tokens for each of B rows
after the prompts' median length cached, for the oracle at k = 1 and n_draft + 1, the draft at k = 1,
taking turns. Leviathan et al.'s formula (decoding.py) then predicts batched speculative over
batched greedy from this size's own alpha (kept / (kept + rejections), every row's), c_B =
T_draft,B(1) / T_oracle,B(1) and T_oracle,B(n_draft + 1) / T_oracle,B(1).
"""

import json
import statistics
import sys
import time

import numpy as np

from workbench import program
from workbench.bench import suite, tables
import batch
from batch import BatchKVCache, greedy_generate_batch, speculative_generate_batch
from stats import Stats
from errors import printable
from speculative import greedy_generate
from speedup import predicted_speedup
from workbench.bench import measure
from workbench.speed import second_core
from weights import files

OUTPUTS = ("batch.md", "batch.csv", "batch.json")
COLUMNS = ["B", "one_at_a_time_tok_s", "greedy_tok_s", "speculative_tok_s", "greedy_over_one_at_a_time",
           "speculative_over_greedy", "ratio_min", "ratio_max", "alpha", "c_B", "check_ratio", "predicted"]
TITLES = ["B", "greedy, one prompt after another (tokens/s)", "batched greedy (tokens/s)",
          "batched speculative (tokens/s)", "batched greedy / one after another", "speculative / greedy",
          "min", "max", "alpha", "c_B", "T_B(k+1)/T_B(1)", "predicted"]


def parse_args(argv):
    parser = program.Parser(prog="workbench.py bench batch", description=__doc__.split("\n\n")[0],
                            epilog="Figures are medians over the rounds; tokens/s counts every row's new tokens.")
    parser.add_argument("--draft", default="demo-draft", help="draft model (default: demo-draft)")
    parser.add_argument("--oracle", default="demo-oracle", help="oracle model (default: demo-oracle)")
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 8, 16],
                        help="batch sizes, 1 to 16: as many held-out prompts (default: 1 2 4 8 16)")
    parser.add_argument("-n", "--new-tokens", type=int, default=48, help="new tokens per prompt, 1 to 256 (default: 48)")
    parser.add_argument("--n-draft", type=int, default=4, help="speculative's draft length, 1 to 16 (default: 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds taking turns, 1 to 20 (default: 3)")
    parser.add_models_and_results(OUTPUTS)
    args = parser.parse_args(argv)
    if not all(1 <= b <= 16 for b in args.sizes) or not 1 <= args.new_tokens <= 256 or not 1 <= args.n_draft <= 16 \
            or not 1 <= args.rounds <= 20:
        parser.error("--sizes must be from 1 to 16, --new-tokens from 1 to 256, --n-draft from 1 to 16, "
                     "--rounds from 1 to 20")
    parser.check_results(args.out, OUTPUTS)
    return args


def main(argv):
    args = parse_args(argv)
    draft, oracle, prompts, context = suite.pair_and_prompts(args.draft, args.oracle, args.models_dir)
    facts = {"command": " ".join(["python workbench.py bench batch", *argv]), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
             "cpu": measure.cpu_name(), "load_before": measure.load_average(), "new_tokens": args.new_tokens,
             "n_draft": args.n_draft, "rounds": args.rounds, "context": context, "cores_used": second_core.status()}
    rows = []
    for size in sorted(set(args.sizes)):
        batch_ids = (prompts * 16)[:size]
        row = measure_size(draft, oracle, batch_ids, args.new_tokens, args.n_draft, args.rounds, context)
        rows.append({"B": size, **row})
        print(f"B {size}: batched speculative / batched greedy {row['speculative_over_greedy']}x, predicted "
              f"{row['predicted']}x; batched greedy / one after another {row['greedy_over_one_at_a_time']}x",
              file=sys.stderr, flush=True)
    facts["crossover"] = crossover(rows)
    header = (f"{facts['date']}; {facts['cpu']}; load average before {facts['load_before']}; {facts['cores_used']}. "
              f"The learned pair ({args.draft}, {args.oracle}); the first B held-out prompts, {args.new_tokens} new "
              f"tokens each, n_draft {args.n_draft}; {args.rounds} rounds taking turns, medians (the ratio's min-max "
              f"over the rounds). T_B(k): a forward of k new tokens for each of B rows after {context} cached, taking "
              f"turns; predicted: Leviathan et al.'s formula from this size's alpha, c_B and T_B(k+1)/T_B(1). "
              f"{facts['crossover']}")
    print(f"\n{header}\n{tables.text(rows, COLUMNS)}")
    files.write_together(args.out, {
        "batch.md": lambda path: files.write_text(path, f"# `{facts['command']}`\n\n{header}\n\n"
                                                          + tables.markdown(rows, COLUMNS, TITLES) + "\n"),
        "batch.csv": lambda path: tables.write_csv(path, rows, COLUMNS),
        "batch.json": lambda path: files.write_text(path, json.dumps({"facts": facts, "rows": rows}, indent=1))})
    print(f"wrote {printable(args.out)}/{', '.join(OUTPUTS)}", file=sys.stderr)


def measure_size(draft, oracle, batch_ids, n_new, n_draft, n_rounds, context):
    """One batch size: its three ways of decoding, timed in rounds taking turns, and what its rounds cost."""
    size = len(batch_ids)
    seconds = {"one": [], "greedy": [], "speculative": []}
    kept = rejected = 0
    for _ in range(n_rounds):
        start = time.perf_counter()
        alone = [list(greedy_generate(oracle, ids, n_new)) for ids in batch_ids]
        seconds["one"].append(time.perf_counter() - start)
        start = time.perf_counter()
        greedy = greedy_generate_batch(oracle, batch_ids, n_new)
        seconds["greedy"].append(time.perf_counter() - start)
        stats = Stats()
        start = time.perf_counter()
        speculative = speculative_generate_batch(draft, oracle, batch_ids, n_new, n_draft=n_draft, stats=stats)
        seconds["speculative"].append(time.perf_counter() - start)
        if not greedy == speculative == alone:
            raise AssertionError("the batched text differs from greedy decoding's")  # a bug, not the user's input
        kept, rejected = kept + stats.accepted, rejected + stats.rejections
    costs = batch_costs(draft, oracle, size, context, n_draft)
    alpha = kept / (kept + rejected) if kept + rejected else 0.0
    c = costs["draft", 1] / costs["oracle", 1]
    check = costs["oracle", n_draft + 1] / costs["oracle", 1]
    tokens = size * n_new
    ratios = [g / s for g, s in zip(seconds["greedy"], seconds["speculative"])]
    median = {name: statistics.median(s) for name, s in seconds.items()}
    return {"one_at_a_time_tok_s": round(tokens / median["one"], 1), "greedy_tok_s": round(tokens / median["greedy"], 1),
            "speculative_tok_s": round(tokens / median["speculative"], 1),
            "greedy_over_one_at_a_time": round(median["one"] / median["greedy"], 2),
            "speculative_over_greedy": round(statistics.median(ratios), 2), "ratio_min": round(min(ratios), 2),
            "ratio_max": round(max(ratios), 2), "alpha": round(alpha, 3), "c_B": round(c, 3), "check_ratio": round(check, 2),
            "predicted": round(predicted_speedup(alpha, n_draft, c, check), 2)}


def batch_costs(draft, oracle, size, context, n_draft, repeats=9):
    """{(role, k): median seconds} of a forward of k new tokens for each of `size` rows after `context` cached,
    the oracle at k = 1 and n_draft + 1, the draft at k = 1, taking turns (speed/measure.py)."""
    runs = {}
    for role, model, ks in (("oracle", oracle, (1, n_draft + 1)), ("draft", draft, (1,))):
        cache = BatchKVCache(size)
        batch.forward_batch(model, np.arange(size * context).reshape(size, context) % model.vocab_size, cache, [context] * size)
        for k in ks:
            runs[role, k] = forward_run(model, cache, size, context, k)
    return {key: statistics.median(s) for key, s in measure.turns(runs, repeats).items()}


def forward_run(model, cache, size, context, k):
    """A run() of one batched forward of k new tokens per row after `context` cached (measure.forward_run's twin)."""
    ids = np.arange(size * k).reshape(size, k) % model.vocab_size

    def run():
        batch.forward_batch(model, ids, cache, [k] * size, n_logits=k)
        cache.truncate(context)

    return run


def crossover(rows):
    """The sentence that says where batched speculative decoding stops beating batched greedy decoding."""
    losing = [r["B"] for r in rows if r["speculative_over_greedy"] < 1]
    predicted = [r["B"] for r in rows if r["predicted"] < 1]
    measured = (f"Batched speculative decoding stops beating batched greedy decoding at B = {losing[0]}"
                if losing else "Batched speculative decoding beat batched greedy decoding at every size measured")
    said = (f"; the formula predicts it at B = {predicted[0]}." if predicted
            else "; the formula predicts no size where it loses.")
    return measured + said
