"""The command line of speculative.py: flags, models, one method, the text as it comes, the statistics.

    python speculative.py "The meaning of life is" [--method sps] [--trace] [--html run.html] ...
    python speculative.py --interactive       (the workbench: session.py)

Text goes to stdout as it is accepted, statistics to stderr. Every error a
user can cause is one line on stderr (errors.py).
"""

import argparse
import math
import os
import sys
import time

import display
import errors
import report
import runner
import session
import speculative
from decoding import Stats, check_pair, check_room
from download_weights import DEFAULT_MODELS_DIR
from processors import Processor
from runner import DEFAULT_N_DRAFT, METHODS, SAMPLING, VERIFYING


def main(argv=None):
    args = parse_args(argv)
    settings = settings_from(args)
    models_dir = args.models_dir or DEFAULT_MODELS_DIR
    if args.interactive:
        return session.Session(args.draft, args.oracle, models_dir, settings, trace=args.trace, html=args.html,
                               compare=args.compare, color=args.color).loop()
    color = display.use_color(args.color, sys.stdout)
    display.utf8_output(sys.stdout)

    oracle, oracle_dir = runner.load_model(args.oracle, models_dir)
    draft = draft_dir = None
    if runner.needs_draft_model(args.method):
        draft, draft_dir = runner.load_model(args.draft, models_dir)
        check_pair(draft, oracle)
    enc = runner.load_shared_tokenizer(draft_dir, oracle_dir, draft, oracle)
    ids = runner.prompt_ids(enc, args.prompt)
    check_room(ids, args.max_new_tokens, *[m for m in (draft, oracle) if m])

    if color and args.method in VERIFYING:
        print(f"{display.GREEN}green{display.RESET}: proposed by the draft and accepted; plain: chosen by the oracle",
              file=sys.stderr)
    sys.stdout.write(args.prompt)
    stats = Stats(trace=[] if args.trace or args.html else None)
    start = time.perf_counter()
    generated = display.stream(runner.generator(settings, draft, oracle, ids, stats), enc.decode_single_token_bytes,
                               stats.from_draft, color, sys.stdout)
    elapsed = time.perf_counter() - start
    print(file=sys.stdout, flush=True)
    if args.trace:
        print("\n" + "\n".join(display.format_trace(stats.trace, enc.decode_single_token_bytes, len(ids))), file=sys.stderr)
    print(display.summary(args.method, stats, elapsed), file=sys.stderr)
    if args.compare:
        print(compare(settings, oracle, ids, generated, elapsed), file=sys.stderr)
    if args.html:
        report.write_page(args.html, report.Run(
            prompt=args.prompt, prompt_ids=ids, tokens=generated, stats=stats, method=args.method,
            settings=describe_settings(settings), models=describe_models(args, draft, oracle), elapsed=elapsed,
            token_bytes=enc.decode_single_token_bytes))
        print(f"wrote {args.html}: open it in a browser", file=sys.stderr)


def parse_args(argv):
    parser = errors.Parser(prog="speculative.py", formatter_class=argparse.RawDescriptionHelpFormatter,
                           description=speculative.__doc__.split("\n\n")[0] + "\n\nmethods:\n" +
                           "\n".join(f"  {name:12s} {text}" for name, text in METHODS.items()),
                           epilog="Models are downloaded to --models-dir on first use (gpt2 548 MB, gpt2-large 3.2 GB; "
                                  "set HF_ENDPOINT=https://hf-mirror.com to use the mirror); demo-draft and demo-oracle "
                                  "are written there offline (python demo.py). Text goes to stdout, statistics to stderr.")
    parser.add_argument("prompt", nargs="?", default="", help='the text to continue (default "": start from <|endoftext|>)')
    parser.add_argument("--draft", default="gpt2", help="draft model: a name or a checkpoint directory (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-large", help="oracle model: a name or a checkpoint directory (default: gpt2-large)")
    parser.add_argument("--method", default="speculative", choices=METHODS, help="decoding method (default: speculative)")
    parser.add_argument("--n-draft", "-K", type=positive_int, default=None,
                        help="draft tokens per round: the most for threshold, the starting value for adaptive, the "
                             "tree depth for tree (default: " + ", ".join(f"{k} {m}" for m, k in DEFAULT_N_DRAFT.items()) + ")")
    parser.add_argument("--max-new-tokens", "-n", type=non_negative_int, default=64, help="tokens to generate (default: 64)")
    parser.add_argument("--temperature", type=non_negative_float, default=None,
                        help="sampling temperature for sps/sample/drafter (default: 1; drafter: 0); 0 is greedy, and a "
                             "tiny temperature approaches greedy")
    parser.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k most likely tokens (sps/sample/drafter)")
    parser.add_argument("--top-p", type=probability, default=None,
                        help="sample only from the smallest set of most likely tokens with this much mass (sps/sample/drafter)")
    parser.add_argument("--seed", type=non_negative_int, default=None, help="random seed for sps/sample/drafter, a whole number "
                        ">= 0: the same seed gives the same text")
    parser.add_argument("--n-beams", type=positive_int, default=4, help="beams for --method beam (default: 4; 1 is greedy)")
    parser.add_argument("--models-dir", default=None, help="where named models are stored and downloaded (default: models/ beside this file)")
    parser.add_argument("--compare", action="store_true", help="also run the oracle alone on the same prompt and report the speedup")
    parser.add_argument("--trace", action="store_true", help="print every round: drafted, the oracle's choices (for sps: p(x), "
                        "q(x), r and the decision), kept, what the caches hold")
    parser.add_argument("--html", metavar="FILE", default=None, help="write a page that shows every round (open it in a browser)")
    parser.add_argument("--color", default="auto", choices=("auto", "always", "never"),
                        help="colour accepted draft tokens (default: auto = on a terminal, unless NO_COLOR is set)")
    parser.add_argument("--interactive", "-i", action="store_true",
                        help="a session: type prompts, change settings with /commands (/help lists them)")
    args = parser.parse_args(argv)
    if args.method not in SAMPLING:
        for flag in ("temperature", "top_k", "top_p", "seed"):
            if getattr(args, flag) is not None and not args.interactive:
                parser.error(f"--{flag.replace('_', '-')} applies to --method sps, sample or drafter, not {args.method}")
    if args.n_draft is not None and args.method not in runner.DEFAULT_N_DRAFT and not args.interactive:
        parser.error(f"--n-draft applies to the speculative methods, not {args.method}")
    if (args.trace or args.html) and args.method not in VERIFYING and not args.interactive:
        flag = "--trace" if args.trace else "--html"
        parser.error(f"{flag} shows verification rounds; --method {args.method} has none")
    if args.interactive and args.prompt:
        parser.error("--interactive reads its prompts from the session: give no prompt")
    if args.html and not os.path.isdir(os.path.dirname(os.path.abspath(args.html))):  # say so now, not after the run
        parser.error(f"--html {args.html}: its directory does not exist")
    if args.html and os.path.isdir(args.html):
        parser.error(f"--html {args.html} is a directory: give a file name")
    return args


def settings_from(args):
    temperature = args.temperature
    if temperature is None:  # sampling's default is 1; the draft alone and the session start greedy
        greedy_default = args.method == "drafter" or args.interactive
        temperature = 0.0 if greedy_default and args.top_k is None and args.top_p is None else 1.0
    return runner.Settings(method=args.method, max_new_tokens=args.max_new_tokens, n_draft=args.n_draft,
                           processor=Processor(temperature, args.top_k, args.top_p), seed=args.seed, n_beams=args.n_beams)


def describe_settings(settings):
    """The settings a page shows for this method."""
    shown = {"n_draft": settings.k}
    if settings.method in SAMPLING:
        shown.update(processor=str(settings.processor), seed=settings.seed)
    return shown


def describe_models(args, draft, oracle):
    shown = {"oracle": f"{args.oracle} ({oracle.n_layer} layers of width {oracle.n_embd})"}
    if draft is not None:
        shown["draft"] = f"{args.draft} ({draft.n_layer} layers of width {draft.n_embd})"
    return shown


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


def compare(settings, oracle, ids, generated, elapsed):
    """Run the oracle alone (its greedy or sampling baseline) and report the speedup."""
    baseline = runner.baseline_method(settings.method)
    stats = Stats()
    start = time.perf_counter()
    alone = list(runner.generator(runner.Settings(**{**vars(settings), "method": baseline}), None, oracle, ids, stats))
    alone_time = time.perf_counter() - start
    line = (f"oracle alone ({baseline}): {len(alone)} tokens in {alone_time:.2f} s, "
            f"{len(alone) / max(alone_time, 1e-9):.1f} tokens/s; speedup {alone_time / max(elapsed, 1e-9):.2f}x")
    if baseline == "greedy" and settings.method not in ("beam", "drafter"):
        line += "; identical output" if alone == generated else "; OUTPUT DIFFERS (see README: near-ties)"
    return line


def main_entry(argv=None):
    """`python speculative.py ...`: main() with every expected error as one line."""
    errors.run(lambda: main(argv))
