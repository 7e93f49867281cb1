"""How many drafts each verification rule keeps per round on the learned pair, paired over prompts and seeds.

    python workbench/tools/verification_rules.py line --n-new 64 --seeds 8     # sps against sps-block, n_draft 4
    python workbench/tools/verification_rules.py tree --n-new 32 --seeds 4     # tree-sps against tree-sps-wor, depth 4, width 2

Each of the suite's held-out prompts (assets/learned-pair/prompts.json, its last 200 tokens) is continued by both
methods with the same seed, at temperatures 0.6 and 1. The figures are counts, not timings: the load of the
machine does not move them. For the line, the sps-block runs also give, on the very drafts they drew, the
expected number kept by each rule (E[tau | the block] for block verification, sum_i prod_{j<=i} min(1, q/p) for
token verification): the rules compared on identical blocks, without the noise of two different texts.
"""

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from beyond.block_verification import block_sample  # noqa: E402
from beyond.tree_sampling import tree_sample_generate  # noqa: E402
from beyond.tree_without_replacement import tree_sample_wor_generate  # noqa: E402
from stats import Stats  # noqa: E402
from sps import speculative_sample  # noqa: E402
from workbench.speed.accelerate import load_fast  # noqa: E402
from weights.tokenizer import encode, load_tokenizer  # noqa: E402

PAIRS = {"line": (("sps", speculative_sample, {}), ("sps-block", block_sample, {})),
         "tree": (("tree-sps", tree_sample_generate, {"width": 2}), ("tree-sps-wor", tree_sample_wor_generate, {"width": 2}))}
KINDS = ("prose", "code", "lists", "repeat")


def expected_kept(trace):
    """(sum over sps-block's rounds of E[tau | the drafted block], the same for token verification)."""
    block = token = 0.0
    for r in trace:
        h, ratios = [s["h"] for s in r.details.steps], [s["ratio"] for s in r.details.steps]
        block += sum(1 - np.prod([1 - x for x in h[i:]]) for i in range(len(h)))  # P(some prefix >= i + 1 passes)
        token += float(np.cumprod([min(1.0, x) for x in ratios]).sum())
    return block, token


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pair", choices=PAIRS)
    parser.add_argument("--n-new", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    args = parser.parse_args()
    draft, oracle = (load_fast(os.path.join(args.models_dir, f"demo-{role}")) for role in ("draft", "oracle"))
    enc = load_tokenizer(os.path.join(args.models_dir, "demo-oracle"))
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    (a, gen_a, kw_a), (b, gen_b, kw_b) = PAIRS[args.pair]
    for temperature in (0.6, 1.0):
        rows, kept = [], [0.0, 0.0, 0]
        for prompt in prompts:
            ids = encode(enc, prompt["prompt"])[-200:]
            for seed in range(args.seeds):
                row = {"kind": prompt["kind"]}
                for name, gen, kw in ((a, gen_a, kw_a), (b, gen_b, kw_b)):
                    stats = Stats(trace=[] if name == "sps-block" else None)
                    list(gen(draft, oracle, ids, args.n_new, n_draft=4, rng=np.random.default_rng(seed),
                             temperature=temperature, stats=stats, **kw))
                    row[name] = (stats.accepted, stats.rounds, stats.drafted)
                    if name == "sps-block":
                        block, token = expected_kept(stats.trace)
                        kept = [kept[0] + block, kept[1] + token, kept[2] + len(stats.trace)]
                rows.append(row)
        print(f"temperature {temperature}: {len(rows)} runs ({len(prompts)} prompts x {args.seeds} seeds), "
              f"{args.n_new} new tokens each, n_draft 4")
        for name in (a, b):
            accepted, rounds, drafted = (sum(r[name][i] for r in rows) for i in range(3))
            print(f"  {name:12s} accepted per round {accepted / rounds:.3f}, drafted per round {drafted / rounds:.1f}, "
                  f"kept {accepted / drafted:.3f} of the drafts, {rounds} rounds")
        d = np.array([r[b][0] / r[b][1] - r[a][0] / r[a][1] for r in rows])
        print(f"  per run, {b} - {a}: mean {d.mean():+.3f} (standard error {d.std(ddof=1) / np.sqrt(len(d)):.3f}), "
              f"median {np.median(d):+.3f}; higher in {np.mean(d > 0):.0%} of the runs, lower in {np.mean(d < 0):.0%}")
        if kept[2]:
            print(f"  on the {kept[2]} blocks sps-block drew: expected kept per round {kept[0] / kept[2]:.3f} by block "
                  f"verification, {kept[1] / kept[2]:.3f} by token verification ({(kept[0] / kept[1] - 1) * 100:+.1f}%)")
        for kind in KINDS:
            mine = [r for r in rows if r["kind"] == kind]
            per = [sum(r[n][0] for r in mine) / sum(r[n][1] for r in mine) for n in (a, b)]
            print(f"    {kind:6s} {a} {per[0]:.3f}, {b} {per[1]:.3f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
