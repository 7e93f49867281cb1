"""python workbench.py bench layers: how deep should a self-speculative draft be? (beyond/self_speculative.py)

Two measurements side by side, one per question:
  1. on the learned oracle (8 layers), for every draft depth L = 1..7: the acceptance on the
     held-out prompts and the measured speedup over the oracle's greedy decoding (the text is
     checked to be greedy decoding's, token for token);
  2. on a gpt2-xl-shaped oracle (48 layers, random weights of the real shape: a forward's cost does
     not depend on the values), what a round costs at depth L = 6, 12, ..., 42 (the same fractions
     of the depth as 1..7 of 8): c(L), one early-exit draft token in oracle passes, and v(L), the
     verification of k drafts from layer L on. With the acceptance measured at the same fraction
     of the learned oracle's depth, Leviathan et al.'s formula predicts the speedup at each L.
     That acceptance is the learned oracle's, not gpt2-xl's: GPT-2 was not trained to exit early
     (LayerSkip trains for it), so real gpt2-xl's shallow layers would be accepted less often.
"""

import contextlib
import json
import os
import sys
import time

import numpy as np

from workbench import program, runner
from workbench.bench import tables
from workbench.bench.suite import PROMPTS, read_prompts  # the held-out prompts of the real-text suite
from beyond.self_speculative import early_exit_draft, self_speculative_generate, upper_layers
from stats import Stats
from errors import printable
from kvcache import KVCache
from speculative import greedy_generate, speculative_generate
from speedup import expected_tokens_per_round, predicted_speedup
from workbench.bench import measure
from weights import files

N_DRAFT = 4     # drafts per round
CONTEXT = 128   # cached tokens before each timed pass
XL_LAYERS = (6, 12, 18, 24, 30, 36, 42)
OUTPUTS = ("layers.md", "layers.json")
LEARNED_COLUMNS = ["L", "acceptance", "tokens_per_round", "alpha", "speedup", "speedup_unshared"]
XL_COLUMNS = ["L", "fraction", "c", "verify_ratio", "alpha_at_fraction", "predicted_speedup"]  # alpha: part 1's


def alpha_of(tokens_per_round, n_draft=N_DRAFT):
    """Leviathan et al.'s alpha that gives this many tokens per round of n_draft drafts (bisection: the mean
    grows with alpha). The share of drafts kept is lower: it also counts drafts after a rejection."""
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if expected_tokens_per_round(mid, n_draft) < tokens_per_round else (low, mid)
    return low


def measure_layers(oracle, prompts_ids, n_new, k, layers):
    """Per draft depth L in layers: {L: acceptance rate, seconds per token of self-speculative decoding, of
    plain greedy, and of speculative_generate with the same early-exit draft as a separate model (no sharing)}.
    Every prompt makes n_new tokens; each method's seconds are summed over all of them."""
    def seconds_per_token(make):  # make(ids, stats) -> the generator
        stats, start = Stats(), time.perf_counter()
        for ids in prompts_ids:
            for _ in make(list(ids), stats):
                pass
        return (time.perf_counter() - start) / max(stats.n_generated, 1), stats

    greedy, _ = seconds_per_token(lambda ids, s: greedy_generate(oracle, ids, n_new, stats=s))
    results = {}
    for n_layers in layers:
        shared, stats = seconds_per_token(
            lambda ids, s: self_speculative_generate(oracle, ids, n_new, n_draft=k, n_layers_draft=n_layers, stats=s))
        draft = early_exit_draft(oracle, n_layers)
        unshared, _ = seconds_per_token(lambda ids, s: speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=s))
        results[n_layers] = {"acceptance": stats.kept_fraction, "tokens_per_round": stats.tokens_per_round,
                             "seconds_per_token": shared, "greedy_seconds_per_token": greedy,
                             "unshared_seconds_per_token": unshared, "speedup": greedy / shared}
    return results


def learned_rows(oracle, prompts_ids, n_new):
    """Part 1: per L, the acceptance and the measured speedup on the learned oracle."""
    results = measure_layers(oracle, prompts_ids, n_new, N_DRAFT, range(1, oracle.n_layer))
    return [{"L": n, "acceptance": round(r["acceptance"], 3), "tokens_per_round": round(r["tokens_per_round"], 2),
             "alpha": round(alpha_of(r["tokens_per_round"]), 3),
             "speedup": round(r["speedup"], 2),
             "speedup_unshared": round(r["greedy_seconds_per_token"] / r["unshared_seconds_per_token"], 2)}
            for n, r in results.items()]


def verify_run(oracle, n_layers, k):
    """A run() of the verification from layer n_layers on: k + 1 rows after CONTEXT cached ones."""
    cache, rng, upper = KVCache(), np.random.default_rng(0), upper_layers(oracle, n_layers)
    upper.blocks(rng.standard_normal((CONTEXT, oracle.n_embd), dtype=np.float32), cache)
    hidden = rng.standard_normal((k + 1, oracle.n_embd), dtype=np.float32)

    def run():
        oracle.logits(upper.blocks(hidden, cache))
        cache.truncate(CONTEXT)
    return run


def xl_rows(oracle, alpha_at, repeats=5):
    """Part 2: per L, c(L) and v(L) = T_verify(L, k) / T_oracle(1) on the gpt2-xl shape, taking turns."""
    runs = {}
    cache = KVCache()
    oracle.forward(np.arange(CONTEXT) % oracle.vocab_size, cache, n_logits=1)
    runs["oracle"] = measure.forward_run(oracle, cache, CONTEXT, 1)
    for n in XL_LAYERS:
        draft, draft_cache = early_exit_draft(oracle, n), KVCache()
        draft.forward(np.arange(CONTEXT) % oracle.vocab_size, draft_cache, n_logits=1)
        runs["draft", n] = measure.forward_run(draft, draft_cache, CONTEXT, 1)
        runs["verify", n] = verify_run(oracle, n, N_DRAFT)
    best = measure.best_seconds(runs, repeats)
    rows = []
    for n in XL_LAYERS:
        fraction = n / oracle.n_layer
        c, v = best["draft", n] / best["oracle"], best["verify", n] / best["oracle"]
        alpha = alpha_at(fraction)
        rows.append({"L": n, "fraction": round(fraction, 3), "c": round(c, 3), "verify_ratio": round(v, 2),
                     "alpha_at_fraction": round(alpha, 3),
                     "predicted_speedup": round(predicted_speedup(alpha, N_DRAFT, c, check_ratio=v), 2)})
    return rows, best["oracle"]


def main(argv):
    parser = program.Parser(prog="workbench.py bench layers", description="Self-speculative decoding: acceptance and speedup "
                                                                 "against the draft's depth L, on the learned oracle, "
                                                                 "and the cost of each L on a gpt2-xl-shaped oracle.")
    parser.add_argument("--oracle", default="demo-oracle", help="the learned oracle (default: demo-oracle)")
    parser.add_argument("-n", "--new-tokens", type=int, default=48, help="tokens per prompt, 1 to 256 (default: 48)")
    parser.add_argument("--no-xl", action="store_true", help="skip part 2 (it writes a 6.2 GB random gpt2-xl the first "
                                                             "time, into --models-dir)")
    parser.add_models_and_results(OUTPUTS)
    args = parser.parse_args(argv)
    if not 1 <= args.new_tokens <= 256:
        parser.error("--new-tokens must be from 1 to 256")
    parser.check_results(args.out, OUTPUTS)
    loaded = runner.prepare(lambda role: runner.load_model(args.oracle, args.models_dir, warm=True), "self-speculative", "", 1)
    oracle = loaded.oracle
    prompts = [runner.prompt_ids(loaded.enc, p["prompt"]) for p in read_prompts(PROMPTS)]
    start = time.perf_counter()
    learned = learned_rows(oracle, prompts, args.new_tokens)
    print(tables.text(learned, LEARNED_COLUMNS))
    xl, t_xl = [], None
    if not args.no_xl:
        by_fraction = {row["L"] / oracle.n_layer: row["alpha"] for row in learned}
        xl_model, _, _ = measure.bench_model("gpt2-xl", args.models_dir)
        fractions = sorted(by_fraction)
        print("gpt2-xl shape: timing each L, taking turns", file=sys.stderr)
        xl, t_xl = xl_rows(xl_model, lambda f: float(np.interp(f, fractions, [by_fraction[x] for x in fractions])))
        print(tables.text(xl, XL_COLUMNS))
    command = " ".join(["python workbench.py bench layers", *argv])
    text = [f"# `{command}`", "", f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {time.perf_counter() - start:.0f} s; k = {N_DRAFT}; "
            f"{len(prompts)} held-out prompts, {args.new_tokens} new tokens each.", "",
            tables.markdown(learned, LEARNED_COLUMNS)]
    if xl:
        text += ["", f"gpt2-xl shape, T_oracle(1) = {t_xl * 1000:.1f} ms after {CONTEXT} cached tokens:", "",
                 tables.markdown(xl, XL_COLUMNS)]
    with contextlib.suppress(FileExistsError):
        os.mkdir(args.out)  # its parent checked before the work (check_results): never a tree of directories
    files.write_text(os.path.join(args.out, "layers.md"), "\n".join(text) + "\n")
    files.write_text(os.path.join(args.out, "layers.json"), json.dumps({"learned": learned, "gpt2-xl": xl}, indent=1))
    print(f"\nwrote {printable(args.out)}/layers.md, layers.json", file=sys.stderr)
