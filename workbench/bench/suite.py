"""python workbench.py bench suite: every method on held-out text of four kinds, on the learned pair.

In the spirit of Spec-Bench (Xia et al. 2024): prompts cut from documents
the pair never saw in training (assets/learned-pair/prompts.json, made by
workbench/tools/make_prompts.py), four of each kind:
  prose    continue a paragraph of the documentation;
  code     continue an example (a >>> session, a code block);
  lists    more items of a list, more rows of a table;
  repeat   text that repeats its prompt, as editing or quoting does.
Every verifying method of the registry (workbench/methods/) runs on every prompt
against its baseline, the oracle alone: greedy decoding for the greedy
methods, sampling at the same temperature for the sampling ones. The runs
take turns, three rounds of everything, so that a busy spell of the machine
meets every method alike. Per method and kind:
  speedup          the baseline's seconds over the method's, per round, summed over the kind's
                   prompts: the median of the three rounds, and their min-max;
  acceptance       drafts kept / drafts proposed; tokens per oracle pass; draft and oracle passes;
  repeats          the share of the method's new tokens that end a 4-gram already in the text: a speedup
                   on text that loops is not a speedup on text that does not;
  output           greedy methods: "identical" when every token equals the baseline's (a proven
                   float32 near-tie, top-2 gap under 1e-5, is named as one); sampling: the seeds.
A draft with a vocabulary of its own (demo-draft-4k, a tokenizer of 4,096
tokens; crossvocab.py) runs too, with every method that takes one
(speculative and sps): its rows are named "speculative (demo-draft-4k)", beside
the same methods' rows with the pair's draft.
And per method over all kinds, prediction against measurement: c, a drafted
token's cost in oracle single-token passes (T_draft(1) / T_oracle(1), timed
in this run; for drafts without a model, their own drafting time), the
realised alpha_estimate and the mean draft length mean_k, and the
speedup Leviathan et al.'s formula predicts from them, with checking assumed
free and with T_oracle(mean_k + 1) / T_oracle(1) as measured; and the tokens a
round made beside those its own paper's model predicts (registry.Method's
predict_tokens: EAGLE-2's and DDTree's sum of confidences, Sequoia's F(T) for a
tree from the run's acceptance per child rank; else Leviathan's from alpha).
Each row's acceptance by draft position (vLLM's acceptance per position).
For the draft of another vocabulary c is its own T_draft(1) over the oracle's, while
alpha and mean_k count the oracle's candidates, the text its drafts made: the formula
then prices one draft token per candidate, an approximation.
Results: a table on the terminal, suite.csv and suite.md, and suite.html with
the speedup of every method on every kind of text.
"""

import functools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from workbench import methods, program, runner
from workbench.bench import tables
from workbench.page.suite import write_suite_page
from workbench.settings import Settings
from decoding import check_room
from stats import Stats
from errors import printable
from kvcache import KVCache
from processors import Processor
from speedup import expected_tokens_per_round, predicted_speedup
from workbench.bench import measure
from weights import files, reading
from weights.demo_pair import ASSETS

PROMPTS = os.path.join(ASSETS, "prompts.json")
KINDS = ("prose", "code", "lists", "repeat")
ROUNDS = 3
MAX_PROMPTS = 1000  # every method runs every prompt, ROUNDS times: as the ablations' bound (ablation.MAX_PROMPTS)
NEAR_TIE = 1e-5  # a top-2 logit gap below this: batched and single-token passes may pick either
COLUMNS = ["method", "kind", "speedup", "speedup_min", "speedup_max", "acceptance", "tokens_per_pass", "by_position",
           "draft_passes", "oracle_passes", "repeats", "output"]
REPEAT_N = 4  # a new token "repeats" when it ends a 4-gram that already occurred in the prompt or the output
OUTPUTS = ("suite.csv", "suite_prediction.csv", "suite.md", "suite.json", "suite.html")
PREDICTION_COLUMNS = ["method", "c", "alpha", "mean_k", "tokens_per_round", "predicted_tokens", "predicted_paper",
                      "predicted_measured_check", "measured", "verdict"]


def pair_and_prompts(draft_name, oracle_name, models_dir):
    """(draft, oracle, the held-out prompts' ids, their median length) for the benchmarks that time one pair."""
    names = {"draft": draft_name, "oracle": oracle_name}
    loaded = runner.prepare(lambda role: runner.load_model(names[role], models_dir), "speculative", "", 1, names,
                            by_token_id=True)
    prompts = [runner.prompt_ids(loaded.enc, p["prompt"]) for p in read_prompts(PROMPTS)]
    return loaded.draft, loaded.oracle, prompts, int(np.median([len(ids) for ids in prompts]))


def read_prompts(path):
    try:
        prompts = json.loads(reading.read_text(path, "prompts"))  # bounded, a regular file only
        ok = isinstance(prompts, list) and prompts and all(
            isinstance(p, dict) and p.get("kind") in KINDS and isinstance(p.get("prompt"), str) and p["prompt"] for p in prompts)
    except reading.ReadError:
        raise
    except (OSError, ValueError, RecursionError) as e:
        raise program.UsageError(f"{path}: cannot read its prompts ({getattr(e, 'strerror', None) or e})") from None
    if not ok:
        raise program.UsageError(f"{path}: not a list of {{\"kind\": one of {', '.join(KINDS)}, \"prompt\": text}}")
    if len(prompts) > MAX_PROMPTS:  # before any model loads
        raise program.UsageError(f"{printable(path, newlines=False)}: {len(prompts)} prompts, more than the {MAX_PROMPTS} "
                                 "the suite takes (each runs every method)")
    return prompts


def suite_methods():
    """The verifying methods of the registry: each one's baseline runs beside it."""
    return [m for m in methods.METHODS.values() if m.verifies]


@dataclass(frozen=True)
class Entrant:
    """One line of the tables: a method with its draft."""
    name: str           # as the tables show it: the method's name, or "METHOD (DRAFT)" for the draft of another vocabulary
    method: object      # a registry.Method
    draft: object
    encs: tuple = None  # (the draft's tokenizer, the oracle's) for a draft of another vocabulary (runner.generator)
    c: float = None     # T_draft(1) / T_oracle(1) of this draft, timed in this run


def entrants(chosen, draft, c, crossvocab=None):
    """Each chosen method with the pair's draft; then, with crossvocab = (its name, the draft, (its tokenizer,
    the oracle's), its c), each chosen method that takes a draft of another vocabulary (methods.variant)."""
    lines = [Entrant(m.name, m, draft, c=c) for m in chosen]
    if crossvocab is not None:
        name, other, encs, other_c = crossvocab
        lines += [Entrant(f"{m.name} ({name})", m, other, encs, other_c) for m in chosen
                  if methods.variant(m, other_vocabulary=True) is not None]
    return lines


def cost_probe(draft, oracle, context, repeats=7):
    """Best seconds of T_draft(1) and T_oracle(k), k = 1..9, after `context` cached tokens, taking turns."""
    runs = {}
    for model, role, ks in ((draft, "draft", [1]), (oracle, "oracle", range(1, 10))):
        cache = KVCache()
        model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)
        for k in ks:
            runs[role, k] = measure.forward_run(model, cache, context, k)
    best = measure.best_seconds(runs, repeats)
    return best["draft", 1], {k: best["oracle", k] for k in range(1, 10)}


def near_tie(oracle, ids, a, b):
    """True when the first token where a and b differ is a float32 near-tie of the oracle's top two."""
    i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    logits = np.sort(oracle.forward(list(ids) + list(a[:i]), n_logits=1)[-1])
    return float(logits[-1] - logits[-2]) < NEAR_TIE


def run_suite(draft, oracle, enc, prompts, n_new=64, temperature=1.0, rounds=ROUNDS, progress=True, names=None,
              crossvocab=None):
    """(rows per method and kind, prediction rows per method, facts): see the module docstring.
    names: the methods to run (default: every verifying method of the registry); crossvocab: (its name, the
    draft, its tokenizer) of a draft with a vocabulary of its own, or None."""
    ids = {i: runner.prompt_ids(enc, p["prompt"]) for i, p in enumerate(prompts)}
    for i in ids:
        check_room(ids[i], n_new, draft, oracle)  # the other vocabulary's draft: crossvocab.py's check, in its tokens
    context = int(np.median([len(x) for x in ids.values()]))
    t_draft, t_oracle = cost_probe(draft, oracle, context)
    chosen = [m for m in suite_methods() if (names is None or m.name in names) and not methods.missing_head(m, oracle, draft)]
    for m in chosen:  # a trained head is read before the clock starts, as the models are
        if m.head:
            methods.head_of(oracle, m.head)
        if m.draft_head:
            methods.head_of(draft, m.draft_head)
    other = None
    if crossvocab is not None:
        name, other_draft, other_enc = crossvocab
        t_other, t_oracle_beside = cost_probe(other_draft, oracle, context)  # timed in turns with the oracle's, as above
        other = (name, other_draft, (other_enc, enc), t_other / t_oracle_beside[1])
    lines = entrants(chosen, draft, t_draft / t_oracle[1], other)
    baselines = sorted({m.baseline for m in chosen} | {"greedy"})  # greedy: what "identical" is checked against
    seconds = {}  # (line's name, prompt, round) -> seconds
    stats = {}    # (line's name, prompt) -> [Stats of each round]
    outputs = {}  # (line's name, prompt, round) -> tokens
    runs = [Entrant(name, methods.get(name), draft) for name in baselines] + lines
    with tqdm(total=rounds * len(prompts) * len(runs), desc="suite", disable=not progress, file=sys.stderr) as bar:
        for r in range(rounds):
            for i in ids:
                for line in runs:
                    settings = Settings(method=line.method.name, max_new_tokens=n_new, seed=r,
                                               processor=Processor(temperature if line.method.samples else 0.0))
                    s = Stats(trace=[] if line.method.predict_tokens else None)  # its model reads the rounds
                    start = time.perf_counter()
                    outputs[line.name, i, r] = list(runner.generator(settings, line.draft, oracle, ids[i], s,
                                                                     encs=line.encs))
                    seconds[line.name, i, r] = time.perf_counter() - start
                    stats.setdefault((line.name, i), []).append(s)
                    bar.update()
    rows = [kind_row(line, kind, prompts, ids, seconds, stats, outputs, oracle, rounds) for line in lines for kind in KINDS
            if any(p["kind"] == kind for p in prompts)]
    predictions = [prediction_row(line, prompts, seconds, stats, t_oracle, rounds) for line in lines]
    facts = {"n_new": n_new, "temperature": temperature, "rounds": rounds, "prompts": len(prompts), "context": context,
             "T_draft_ms": round(t_draft * 1000, 3), "T_oracle_ms": {k: round(t * 1000, 3) for k, t in t_oracle.items()},
             "c": round(t_draft / t_oracle[1], 3)}
    if other is not None:
        facts["crossvocab"] = {"draft": other[0], "vocabulary": other[2][0].n_vocab, "T_draft_ms": round(t_other * 1000, 3),
                               "c": round(other[3], 3)}
    return rows, predictions, facts


def repeated_share(prompt, output, n=REPEAT_N):
    """The share of output tokens that end an n-gram seen earlier in prompt + output: how much the text loops.
    Drafts from the text (and a draft that learnt the loop) are accepted most where this is high."""
    text, seen, repeats = list(prompt), set(), 0
    for j in range(n, len(prompt) + 1):
        seen.add(tuple(prompt[j - n:j]))
    for token in output:
        text.append(token)
        gram = tuple(text[-n:])
        repeats += len(gram) == n and gram in seen
        seen.add(gram)
    return repeats / max(len(output), 1)


def kind_row(line, kind, prompts, ids, seconds, stats, outputs, oracle, rounds):
    method, name = line.method, line.name
    chosen = [i for i, p in enumerate(prompts) if p["kind"] == kind]
    speedups = [sum(seconds[method.baseline, i, r] for i in chosen) / sum(seconds[name, i, r] for i in chosen)
                for r in range(rounds)]
    all_stats = [s for i in chosen for s in stats[name, i]]
    drafted, accepted = sum(s.drafted for s in all_stats), sum(s.accepted for s in all_stats)
    tokens, oracle_passes = sum(s.n_generated for s in all_stats), sum(s.oracle_passes for s in all_stats)
    if method.exact:
        differs = [(i, r) for i in chosen for r in range(rounds) if outputs[name, i, r] != outputs["greedy", i, r]]
        ties = [near_tie(oracle, ids[i], outputs[name, i, r], outputs["greedy", i, r]) for i, r in differs]
        output = "identical" if not differs else f"near-tie ({len(differs)} runs)" if all(ties) else "DIFFERS"
    else:
        output = f"sampled: seeds {', '.join(map(str, range(rounds)))}"
    return {"method": name, "kind": kind, "speedup": round(statistics.median(speedups), 2),
            "speedup_min": round(min(speedups), 2), "speedup_max": round(max(speedups), 2),
            "acceptance": round(accepted / drafted, 3) if drafted else "",
            "tokens_per_pass": round(tokens / oracle_passes, 2) if oracle_passes else "",  # Spec-Bench's accepted tokens per pass
            "by_position": by_position(all_stats),
            "draft_passes": round(sum(s.draft_passes for s in all_stats) / rounds),
            "oracle_passes": round(sum(s.oracle_passes for s in all_stats) / rounds),
            "repeats": round(statistics.mean(repeated_share(ids[i], outputs[name, i, r])
                                             for i in chosen for r in range(rounds)), 2), "output": output}


def by_position(all_stats, most=6):
    """The share of rounds that kept their draft at each position 1, 2, ... (vLLM's acceptance per position), over
    all the runs: "88/75/62" in percent; "" where nothing was drafted."""
    made, kept = [], []
    for s in all_stats:
        for i, (m, k) in enumerate(zip(s.made_at, s.kept_at)):
            if i == len(made):
                made.append(0)
                kept.append(0)
            made[i] += m
            kept[i] += k
    return "/".join(f"{100 * k / m:.0f}" for m, k in list(zip(made, kept))[:most] if m)


def realised(all_stats, t_oracle):
    """(alpha_estimate, mean_k, T(mean_k + 1)/T(1)) of a method's runs: the chance a draft is kept until the first
    rejection (each rejection ends a round: Stats.alpha_estimate over all the runs), a round's mean draft length, and
    what checking mean_k + 1 tokens cost, interpolated in the oracle's measured costs t_oracle {k: seconds}."""
    accepted, rejections = sum(s.accepted for s in all_stats), sum(s.rejections for s in all_stats)
    drafted, n_rounds = sum(s.drafted for s in all_stats), sum(s.rounds for s in all_stats)
    alpha_estimate = Stats(accepted=accepted, rejections=rejections).alpha_estimate
    mean_k = drafted / n_rounds if n_rounds else 0.0
    return alpha_estimate, mean_k, float(np.interp(mean_k + 1, list(t_oracle), list(t_oracle.values())) / t_oracle[1])


def prediction_row(line, prompts, seconds, stats, t_oracle, rounds):
    """c, alpha_estimate, mean_k over all the line's runs, Leviathan's speedup from them, and the one measured."""
    method = line.method
    all_stats = [s for (name, _), runs in stats.items() if name == line.name for s in runs]
    alpha, mean_k, check = realised(all_stats, t_oracle)
    drafted = sum(s.drafted for s in all_stats)
    draft_seconds = sum(s.draft_time for s in all_stats)
    # a drafted token's cost in oracle passes: its model's, or for drafts without a model their own drafting time
    c = line.c if method.draft_model and sum(s.draft_passes for s in all_stats) else \
        (draft_seconds / max(drafted, 1)) / t_oracle[1]
    measured = statistics.median(
        sum(seconds[method.baseline, i, r] for i in range(len(prompts))) /
        sum(seconds[line.name, i, r] for i in range(len(prompts))) for r in range(rounds))
    paper = predicted_speedup(alpha, mean_k, c)
    with_check = predicted_speedup(alpha, mean_k, c, check_ratio=check)
    n_rounds = sum(s.rounds for s in all_stats)
    rounds_seen = [r for s in all_stats for r in (s.trace or [])]
    predicted = method.predict_tokens(rounds_seen) if method.predict_tokens else expected_tokens_per_round(alpha, mean_k)
    return {"method": line.name, "c": round(c, 3), "alpha": round(alpha, 3), "mean_k": round(mean_k, 2),
            "tokens_per_round": round(sum(s.n_generated for s in all_stats) / n_rounds, 2) if n_rounds else "",
            "predicted_tokens": round(predicted, 2), "predicted_paper": round(paper, 2),
            "predicted_measured_check": round(with_check, 2), "measured": round(measured, 2),
            "verdict": "faster" if measured >= 1 else "LOSES"}


def markdown(rows, predictions, facts, command):
    """suite.md: the tables for README.md and PERFORMANCE.md, with the command and what the run measured."""
    lines = [f"# `{command}`", "", f"{time.strftime('%Y-%m-%d %H:%M %Z')}: {facts['prompts']} held-out prompts, "
             f"{facts['n_new']} new tokens each, {facts['rounds']} rounds taking turns; sampling at temperature "
             f"{facts['temperature']:g}. T_draft(1) {facts['T_draft_ms']} ms, T_oracle(1) {facts['T_oracle_ms'][1]} ms "
             f"after {facts['context']} cached tokens: c = {facts['c']}." + crossvocab_said(facts), ""]
    lines += [tables.markdown(rows, COLUMNS), "", "Prediction against measurement (all kinds together):", "",
              tables.markdown(predictions, PREDICTION_COLUMNS)]
    return "\n".join(lines) + "\n"


def crossvocab_said(facts):
    """The sentence on the draft of another vocabulary, for suite.md and the terminal ("" without one)."""
    other = facts.get("crossvocab")
    if other is None:
        return ""
    return (f" {other['draft']}, a draft with a vocabulary of its own ({other['vocabulary']} tokens; crossvocab.py): "
            f"T_draft(1) {other['T_draft_ms']} ms, c = {other['c']}.")


def main(argv):
    parser = program.Parser(prog="workbench.py bench suite", description="Every method on held-out text of four kinds "
                                                                "(prose, code, lists, repeat), on the learned pair.",
                            epilog="The prompts come from documents held out of the pair's training "
                                   "(workbench/tools/make_prompts.py). Models are names or directories, as in speculative.py.")
    parser.add_argument("--draft", default="demo-draft", help="draft model (default: demo-draft, the learned pair's)")
    parser.add_argument("--oracle", default="demo-oracle", help="oracle model (default: demo-oracle)")
    parser.add_argument("--crossvocab-draft", default="demo-draft-4k", metavar="DRAFT",
                        help="a draft with a vocabulary of its own, run by speculative and sps across vocabularies "
                             "(crossvocab.py), its rows named 'METHOD (DRAFT)'; none leaves it out (default: "
                             "demo-draft-4k, 4,096 tokens of its own)")
    parser.add_argument("--prompts", default=PROMPTS, help="a JSON list of {kind, prompt} (default: the held-out prompts)")
    parser.add_argument("-n", "--new-tokens", type=int, default=64, help="tokens per run, 1 to 512 (default: 64)")
    parser.add_argument("--temperature", type=float, default=1.0, help="the sampling methods' temperature, 0 to 1000 "
                                                                       "(default: 1)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds of every run, 1 to 20 (default: {ROUNDS})")
    parser.add_argument("--methods", nargs="+", metavar="METHOD", choices=[m.name for m in suite_methods()],
                        help="only these methods (default: every verifying method: "
                             + ", ".join(m.name for m in suite_methods()) + ")")
    parser.add_models_and_results(OUTPUTS)
    args = parser.parse_args(argv)
    if not 1 <= args.new_tokens <= 512 or not 1 <= args.rounds <= 20 or not 0 <= args.temperature <= 1000:
        parser.error("--new-tokens must be from 1 to 512, --rounds from 1 to 20, --temperature from 0 to 1000")
    parser.check_results(args.out, OUTPUTS)
    prompts = read_prompts(args.prompts)
    names = {"draft": args.draft, "oracle": args.oracle}
    load = functools.lru_cache(maxsize=None)(lambda name: runner.load_model(name, args.models_dir, warm=True))  # the oracle once
    loaded = runner.prepare(lambda role: load(names[role]), "speculative", "", 1, names, by_token_id=True)
    crossvocab = None
    wanted = args.methods or [m.name for m in suite_methods()]
    if args.crossvocab_draft != "none" and any(methods.variant(methods.get(m), other_vocabulary=True) for m in wanted):
        other_names = {**names, "draft": args.crossvocab_draft}
        other = runner.prepare(lambda role: load(other_names[role]), "speculative", "", 1, other_names)
        if other.encs is None:
            raise program.UsageError(f"--crossvocab-draft {printable(args.crossvocab_draft)} has the oracle's vocabulary: "
                                     "give a draft with one of its own, or none")
        crossvocab = (args.crossvocab_draft, other.draft, other.encs[0])
    start = time.perf_counter()
    rows, predictions, facts = run_suite(loaded.draft, loaded.oracle, loaded.enc, prompts, args.new_tokens,
                                         args.temperature, args.rounds, names=args.methods, crossvocab=crossvocab)
    command = " ".join(["python workbench.py bench suite", *argv])
    print(f"\n{printable(args.draft)} -> {printable(args.oracle)}: {facts['prompts']} held-out prompts, {args.new_tokens} new tokens, "
          f"{args.rounds} rounds; c = T_draft(1)/T_oracle(1) = {facts['c']}{printable(crossvocab_said(facts))} "
          f"({time.perf_counter() - start:.0f} s)")
    print(tables.text(rows, COLUMNS))
    print("\nprediction (Leviathan et al.) against measurement, all kinds together:")
    print(tables.text(predictions, PREDICTION_COLUMNS))
    # One set: a failure leaves the earlier run's five files as they were, never a mix of two runs.
    files.write_together(args.out, {
        "suite.csv": lambda path: tables.write_csv(path, rows, COLUMNS),
        "suite_prediction.csv": lambda path: tables.write_csv(path, predictions, PREDICTION_COLUMNS),
        "suite.md": lambda path: files.write_text(path, markdown(rows, predictions, facts, command)),
        "suite.json": lambda path: files.write_text(path, json.dumps({"facts": facts, "rows": rows,
                                                                      "prediction": predictions}, indent=1)),
        "suite.html": lambda path: write_suite_page(path, rows, facts, command)})
    print(f"\nwrote {printable(args.out)}/{', '.join(OUTPUTS)}", file=sys.stderr)
