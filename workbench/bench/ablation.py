"""The ablations of the project documentation's workbench (docs/sources.md), on your prompts: every method against the oracle alone.

    python workbench.py bench ablation "The meaning of life is" ["another prompt" ...] [--prompts FILE] [--out ablation.csv]
    python workbench.py bench ablation --draft demo-draft --oracle demo-oracle -n 32      (offline)

One row per method, summed over the prompts: tokens/s, acceptance, tokens per
oracle pass, speedup over the oracle alone, and for the greedy methods whether
the text matched the oracle's own greedy text token for token (it must).
A table on screen and a CSV. The set, as the project documentation runs it and more:
the oracle alone (its "target AR"), the draft alone, speculative with a fixed
draft length n_draft (the project documentation's /gamma), adaptive by
entropy (EGAG), Hugging Face's +2/-1, threshold, tree, staged, n-gram drafts
(NASD), and SpS at a temperature against sampling.
"""

import functools
import sys
import time

from tqdm import tqdm

from workbench import methods, program, runner
from workbench.bench import tables
from workbench.settings import MAX_NEW_TOKENS, N_DRAFT, SEED, TEMPERATURE, Settings, argparse_type
from decoding import check_room
from stats import Stats
from errors import printable
from processors import Processor
from weights import files
from weights.models import DEFAULT_MODELS_DIR

GREEDY_BASELINE, SAMPLING_BASELINE = "greedy", "sample"
MAX_PROMPTS = 1000  # every method runs every prompt: a file of a million lines would run for weeks
COLUMNS = ["method", "setting", "tokens", "seconds", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup",
           "matches_greedy"]


def ablation_set(n_draft=4, temperature=1.0):
    """(method, what its settings are, Settings changes) for each row, the baselines first: the
    set of the project documentation (docs/sources.md), then every other registered method (workbench/methods/) with its own defaults."""
    sampling = Processor(temperature)
    document = [
        (GREEDY_BASELINE, "the oracle alone (target AR)", {}),
        ("draft-alone", "the draft alone, greedy", {"processor": Processor(0.0)}),
        ("speculative", f"fixed n_draft {n_draft}", {"n_draft": n_draft}),
        ("adaptive", "entropy-adaptive draft length (EGAG)", {"n_draft": n_draft}),
        ("adaptive-hf", "+2 / -1 heuristic", {"n_draft": n_draft}),
        ("threshold", "max 16 drafts", {"n_draft": 16}),
        ("tree", "depth 4, branch 2", {"n_draft": 4}),
        ("staged", f"n-gram -> draft -> oracle, n_draft {n_draft}", {"n_draft": n_draft}),
        ("ngram", f"NASD, no draft model, n_draft {n_draft}", {"n_draft": n_draft}),
        (SAMPLING_BASELINE, f"the oracle alone sampling, {sampling}", {"processor": sampling}),
        ("sps", f"n_draft {n_draft}, {sampling}", {"n_draft": n_draft, "processor": sampling}),
    ]
    named = {name for name, _, _ in document}
    others = [(m.name, "its defaults" + (f", {sampling}" if m.samples else ""), {"processor": sampling} if m.samples else {})
              for m in methods.METHODS.values() if m.name not in named]
    return document + others


def run_ablations(draft, oracle, prompts_ids, n_new, n_draft=4, temperature=1.0, seed=0, progress=True):
    """One row per method of ablation_set, over all the prompts' ids."""
    rows, reference, totals = [], {}, {}
    plan = [row for row in ablation_set(n_draft, temperature) if not methods.missing_head(methods.get(row[0]), oracle, draft)]
    with tqdm(total=len(plan) * len(prompts_ids), desc="ablations", disable=not progress, file=sys.stderr) as bar:
        for method, setting, changes in plan:
            stats, seconds, matches = Stats(), 0.0, True
            for i, ids in enumerate(prompts_ids):
                settings = Settings(**{"method": method, "max_new_tokens": n_new, "seed": seed + i, **changes})
                start = time.perf_counter()
                tokens = list(runner.generator(settings, draft, oracle, ids, stats))
                seconds += time.perf_counter() - start
                if method == GREEDY_BASELINE:
                    reference[i] = tokens
                matches = matches and tokens == reference[i]
                bar.update()
            totals[method] = seconds
            rows.append(row(method, setting, stats, seconds, matches))
    for r in rows:  # speedups against the matching baseline: sampling methods against sampling
        base = totals[methods.get(r["method"]).baseline]
        r["speedup"] = round(base / r["seconds"], 2) if r["seconds"] else ""
    return rows


def row(method, setting, stats, seconds, matches):
    m = methods.get(method)
    return {"method": method, "setting": setting, "tokens": stats.n_generated, "seconds": round(seconds, 3),
            "tokens_per_s": round(stats.n_generated / seconds, 2) if seconds else "",
            "acceptance": round(stats.kept_fraction, 3) if stats.drafted else "",
            "tokens_per_pass": round(stats.tokens_per_round, 2) if stats.rounds else "",
            "speedup": "", "matches_greedy": ("yes" if matches else "NO") if m.exact else
            "n/a (the draft's own text)" if method == "draft-alone" else "n/a (sampling)" if m.samples else
            "n/a (not greedy decoding)"}


def parse_args(argv):
    parser = program.Parser(prog="workbench.py bench ablation", description=__doc__.split("\n\n")[0],
                           epilog="Models are names or directories, as in speculative.py.")
    parser.add_argument("prompts", nargs="*", help="prompts to run (default: two short English prompts)")
    parser.add_argument("--prompts", dest="prompts_file", metavar="FILE",
                        help=f"a file of prompts ({runner.PROMPT_ESCAPES}); with the prompts given, {MAX_PROMPTS} at "
                             "most")
    parser.add_argument("--draft", default="gpt2", help="draft model (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-large", help="oracle model (default: gpt2-large)")
    parser.add_argument("-n", "--max-new-tokens", type=argparse_type(MAX_NEW_TOKENS), default=64,
                        help=f"tokens per run, {MAX_NEW_TOKENS.bounds()} (default: 64)")
    parser.add_argument("--n-draft", type=argparse_type(N_DRAFT), default=4, dest="n_draft",
                        help=f"draft length of the fixed-length rows, {N_DRAFT.bounds()} (default: 4)")
    parser.add_argument("--temperature", type=argparse_type(TEMPERATURE), default=1.0,
                        help=f"SpS and sampling temperature, {TEMPERATURE.bounds()} (default: 1)")
    parser.add_argument("--seed", type=argparse_type(SEED), default=0,
                        help=f"seed of the sampling rows, {SEED.bounds()} (default: 0; prompt i uses seed + i)")
    parser.add_argument("--out", default="ablation.csv", help="the CSV to write (default: ablation.csv)")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where named models live (default: models/)")
    args = parser.parse_args(argv)
    if args.prompts_file == "":
        parser.error("--prompts needs a file name")
    if args.max_new_tokens < 1:
        parser.error("--max-new-tokens must be at least 1")
    problem = files.why_not_writable(args.out)
    if problem:
        parser.error(f"--out {problem}")
    return args


def main(argv=None):
    args = parse_args(argv)
    prompts = list(args.prompts) + (runner.read_prompt_lines(args.prompts_file) if args.prompts_file is not None else [])
    if len(prompts) > MAX_PROMPTS:  # before any model loads
        given = f"--prompts {printable(args.prompts_file, newlines=False)}" if args.prompts_file else "the command line"
        raise program.UsageError(f"{given}: {len(prompts)} prompts, more than the {MAX_PROMPTS} the ablations take "
                                 "(each runs every method)")
    prompts = prompts or ["The meaning of life is", "Once upon a time, in a small village at the edge of the forest,"]
    names = {"draft": args.draft, "oracle": args.oracle}
    load = functools.lru_cache(maxsize=None)(lambda role: runner.load_model(names[role], args.models_dir, warm=True))
    run = runner.prepare(load, "speculative", prompts[0], args.max_new_tokens, names,  # the models, the tokenizer, prompt 1
                         by_token_id=True)
    prompts_ids = [run.ids] + [runner.prompt_ids(run.enc, p) for p in prompts[1:]]
    draft, oracle = run.draft, run.oracle
    for ids in prompts_ids[1:]:
        check_room(ids, args.max_new_tokens, draft, oracle)
    rows = run_ablations(draft, oracle, prompts_ids, args.max_new_tokens, args.n_draft, args.temperature, args.seed)
    print(f"{printable(args.draft)} -> {printable(args.oracle)}, {len(prompts)} prompt(s), {args.max_new_tokens} new tokens each")
    print(tables.text(rows, COLUMNS))
    tables.write_csv(args.out, rows, COLUMNS)
    print(f"wrote {printable(args.out)}", file=sys.stderr)
