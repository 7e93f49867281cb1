"""The command line of speculative.py: flags, models, one method, the text as it comes, the statistics.

    python speculative.py "The meaning of life is" [--method sps] [--trace] ...

Text goes to stdout as it is accepted, statistics to stderr. Every error a
user can cause is one line on stderr (errors.py).
"""

import argparse
import filecmp
import math
import os
import sys
import time

import numpy as np

import display
import errors
import speculative
from adaptive import adaptive_generate
from decoding import GenerationError, Stats, check_pair, check_room
from download_weights import DEFAULT_MODELS_DIR
from gpt2 import GPT2
from models import resolve_model_dir
from ngram import ngram_generate, staged_generate
from sps import autoregressive_sample, speculative_sample
from speculative import greedy_generate, speculative_generate
from threshold import threshold_generate
from tokenizer import ENDOFTEXT, TokenizerError, encode, load_tokenizer
from tree import tree_generate

METHODS = {
    "speculative": "greedy speculative decoding (speculative.py); output = the oracle's greedy output",
    "threshold": "greedy speculative decoding, draft length set by the draft's confidence (threshold.py)",
    "sps": "speculative sampling, Chen et al. 2023 Algorithm 2 (sps.py); output ~ the oracle's distribution",
    "tree": "greedy, tree-shaped drafts checked in one pass with a tree attention mask (tree.py)",
    "ngram": "greedy, drafts from the text itself: prompt lookup and an n-gram table, no draft model (ngram.py)",
    "staged": "greedy, n-gram -> draft -> oracle: the draft's own drafts come from the n-gram drafter (ngram.py)",
    "adaptive": "greedy, draft length set by the draft's entropy and a moving average (adaptive.py)",
    "adaptive-hf": "greedy, draft length by Hugging Face's rule: +2 after a clean round, -1 otherwise (adaptive.py)",
    "greedy": "the oracle alone, greedy (the baseline of all the greedy methods)",
    "sample": "the oracle alone, sampling (Algorithm 1, the baseline of sps)",
}
SAMPLING = ("sps", "sample")
ORACLE_ALONE = ("greedy", "sample")
NO_DRAFT_MODEL = ORACLE_ALONE + ("ngram",)
DEFAULT_N_DRAFT = {"speculative": 8, "threshold": 16, "sps": 4, "tree": 6, "ngram": 8, "staged": 8, "adaptive": 4, "adaptive-hf": 4}


def main(argv=None):
    args = parse_args(argv)
    models_dir = args.models_dir or DEFAULT_MODELS_DIR
    color = display.use_color(args.color, sys.stdout)
    display.utf8_output(sys.stdout)

    oracle, oracle_dir = load_model(args.oracle, models_dir)
    draft = draft_dir = None
    if args.method not in NO_DRAFT_MODEL:
        draft, draft_dir = load_model(args.draft, models_dir)
        check_pair(draft, oracle)
    enc = load_shared_tokenizer(draft_dir, oracle_dir)
    ids = prompt_ids(enc, args.prompt)
    check_room(ids, args.max_new_tokens, *[m for m in (draft, oracle) if m])

    if color and args.method not in ORACLE_ALONE:  # every method with drafts, ngram included
        print(f"{display.GREEN}green{display.RESET}: proposed by the draft and accepted; plain: chosen by the oracle",
              file=sys.stderr)
    sys.stdout.write(args.prompt)
    stats = Stats(trace=[] if args.trace else None)
    start = time.perf_counter()
    generated = display.stream(run_method(args, draft, oracle, ids, stats), enc.decode_single_token_bytes,
                               stats.from_draft, color, sys.stdout)
    elapsed = time.perf_counter() - start
    print(file=sys.stdout, flush=True)
    if args.trace:
        print("\n" + "\n".join(display.format_trace(stats.trace, enc.decode_single_token_bytes, len(ids))), file=sys.stderr)
    print(display.summary(args.method, stats, elapsed), file=sys.stderr)
    if args.compare:
        print(compare(args, oracle, ids, generated, elapsed), file=sys.stderr)


def parse_args(argv):
    parser = errors.Parser(prog="speculative.py", formatter_class=argparse.RawDescriptionHelpFormatter,
                           description=speculative.__doc__.split("\n\n")[0] + "\n\nmethods:\n" +
                           "\n".join(f"  {name:12s} {text}" for name, text in METHODS.items()),
                           epilog="Models are downloaded to --models-dir on first use (gpt2 548 MB, gpt2-large 3.2 GB); "
                                  "demo-draft and demo-oracle are written there offline (python demo.py). "
                                  "Text goes to stdout, statistics to stderr.")
    parser.add_argument("prompt", nargs="?", default="", help='the text to continue (default "": start from <|endoftext|>)')
    parser.add_argument("--draft", default="gpt2", help="draft model: a name or a checkpoint directory (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-large", help="oracle model: a name or a checkpoint directory (default: gpt2-large)")
    parser.add_argument("--method", default="speculative", choices=METHODS, help="decoding method (default: speculative)")
    parser.add_argument("--n-draft", "-K", type=positive_int, default=None,
                        help="draft tokens per round: the most for threshold, the starting value for adaptive, the "
                             "tree depth for tree (default: " + ", ".join(f"{k} {m}" for m, k in DEFAULT_N_DRAFT.items()) + ")")
    parser.add_argument("--max-new-tokens", "-n", type=non_negative_int, default=64, help="tokens to generate (default: 64)")
    parser.add_argument("--temperature", type=non_negative_float, default=None,
                        help="sampling temperature for sps/sample (default: 1); 0 is greedy, and a tiny temperature "
                             "approaches greedy")
    parser.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k most likely tokens (sps/sample)")
    parser.add_argument("--top-p", type=probability, default=None, help="sample only from the smallest set of tokens with this much mass (sps/sample)")
    parser.add_argument("--seed", type=non_negative_int, default=None, help="random seed for sps/sample, a whole number >= 0: "
                        "the same seed gives the same text")
    parser.add_argument("--models-dir", default=None, help="where named models are stored and downloaded (default: models/ beside this file)")
    parser.add_argument("--compare", action="store_true", help="also run the oracle alone on the same prompt and report the speedup")
    parser.add_argument("--trace", action="store_true", help="print every round: drafted, the oracle's choices (for sps: p(x), "
                        "q(x), r and the decision), kept, what the caches hold")
    parser.add_argument("--color", default="auto", choices=("auto", "always", "never"),
                        help="colour accepted draft tokens (default: auto = on a terminal, unless NO_COLOR is set)")
    args = parser.parse_args(argv)
    if args.method not in SAMPLING:
        for flag in ("temperature", "top_k", "top_p", "seed"):
            if getattr(args, flag) is not None:
                parser.error(f"--{flag.replace('_', '-')} applies to --method sps or sample, not {args.method}")
    if args.n_draft is not None and args.method in ORACLE_ALONE:
        parser.error(f"--n-draft applies to the speculative methods, not {args.method}")
    if args.trace and args.method in ORACLE_ALONE:
        parser.error(f"--trace shows verification rounds; --method {args.method} has none (the oracle alone)")
    return args


def positive_int(text):
    return _number(text, int, lambda v: v >= 1, "a whole number >= 1")


def non_negative_int(text):
    return _number(text, int, lambda v: v >= 0, "a whole number >= 0")


def non_negative_float(text):
    return _number(text, float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")


def probability(text):
    return _number(text, float, lambda v: 0 < v <= 1, "a number in (0, 1]")


def _number(text, kind, ok, what):
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def load_model(name_or_path, models_dir):
    model_dir = resolve_model_dir(name_or_path, models_dir)
    start = time.perf_counter()
    model = GPT2.from_pretrained(model_dir)
    # The weights are memory-mapped: one forward pages them in now, so that the
    # timings below (and --compare's speedup) measure decoding, not disk reads.
    model.forward([0])
    print(f"loaded {name_or_path} ({model.n_layer} layers of width {model.n_embd}) in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)
    return model, os.path.abspath(model_dir)


def load_shared_tokenizer(draft_dir, oracle_dir):
    """The tokenizer of the draft (else the oracle); both must have the same one."""
    dirs = [d for d in (draft_dir, oracle_dir) if d and os.path.isfile(os.path.join(d, "vocab.json"))]
    if not dirs:
        raise TokenizerError("neither model directory has vocab.json and merges.txt")
    if len(dirs) == 2 and not all(filecmp.cmp(os.path.join(draft_dir, f), os.path.join(oracle_dir, f), shallow=False)
                                  for f in ("vocab.json", "merges.txt")):
        raise GenerationError(f"the draft ({draft_dir}) and the oracle ({oracle_dir}) have different tokenizers; "
                              "they must share a vocabulary")
    return load_tokenizer(dirs[0])


def prompt_ids(enc, prompt):
    """The prompt's tokens; an empty prompt starts from <|endoftext|>, as GPT-2's unconditional samples do."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode arrive as lone surrogates
        raise GenerationError("the prompt is not valid UTF-8 text (is the terminal's locale UTF-8? try LANG=C.UTF-8)") from None
    return encode(enc, prompt) if prompt else [enc.encode_single_token(ENDOFTEXT)]


def run_method(args, draft, oracle, ids, stats):
    n_new, k = args.max_new_tokens, args.n_draft or DEFAULT_N_DRAFT.get(args.method)
    if args.method in SAMPLING:
        sampling = dict(rng=np.random.default_rng(args.seed), temperature=1.0 if args.temperature is None else args.temperature,
                        top_k=args.top_k, top_p=args.top_p, stats=stats)
        if args.method == "sample":
            return autoregressive_sample(oracle, ids, n_new, **sampling)
        return speculative_sample(draft, oracle, ids, n_new, K=k, **sampling)
    if args.method == "threshold":
        return threshold_generate(draft, oracle, ids, n_new, max_draft=k, stats=stats)
    if args.method == "tree":
        return tree_generate(draft, oracle, ids, n_new, max_depth=k, stats=stats)
    if args.method == "ngram":
        return ngram_generate(oracle, ids, n_new, n_draft=k, stats=stats)
    if args.method == "staged":
        return staged_generate(draft, oracle, ids, n_new, n_draft=k, stats=stats)
    if args.method.startswith("adaptive"):
        rule = "heuristic" if args.method == "adaptive-hf" else "entropy"
        return adaptive_generate(draft, oracle, ids, n_new, rule=rule, gamma=k, gamma_max=max(16, k), stats=stats)
    if args.method == "greedy":
        return greedy_generate(oracle, ids, n_new, stats=stats)
    return speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=stats)


def compare(args, oracle, ids, generated, elapsed):
    """Run the oracle alone (its greedy or sampling baseline) and report the speedup."""
    baseline = argparse.Namespace(**{**vars(args), "method": "sample" if args.method in SAMPLING else "greedy"})
    stats = Stats()
    start = time.perf_counter()
    alone = list(run_method(baseline, None, oracle, ids, stats))
    alone_time = time.perf_counter() - start
    line = (f"oracle alone ({baseline.method}): {len(alone)} tokens in {alone_time:.2f} s, "
            f"{len(alone) / max(alone_time, 1e-9):.1f} tokens/s; speedup {alone_time / max(elapsed, 1e-9):.2f}x")
    if baseline.method == "greedy":
        line += "; identical output" if alone == generated else "; OUTPUT DIFFERS (see README: near-ties)"
    return line


def main_entry(argv=None):
    """`python speculative.py ...`: main() with every expected error as one line."""
    errors.run(lambda: main(argv))
