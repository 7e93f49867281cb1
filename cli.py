"""The command line of speculative.py: flags, models, one method, the text as it comes, the statistics.

    python speculative.py "The meaning of life is" [--method sps] [--trace] [--html run.html] ...
    python speculative.py --interactive       (the workbench: session.py)

Text goes to stdout as it is accepted, statistics to stderr. Every error a
user can cause is one line on stderr (errors.py).
"""

import argparse
import math
import sys
import time

import atomic
import display
import errors
import report
import runner
import session
import speculative
from decoding import Stats
from download_weights import DEFAULT_MODELS_DIR
from processors import Processor
from runner import DEFAULT_N_DRAFT, METHODS, SAMPLING, VERIFYING


def main(argv=None):
    args = parse_args(argv)
    settings = settings_from(args)
    models_dir = args.models_dir or DEFAULT_MODELS_DIR
    display.as_utf8(sys.stdout, errors="replace")
    if args.interactive:
        display.as_utf8(sys.stdin, errors="surrogateescape")
        return session.Session(args.draft, args.oracle, models_dir, settings, trace=args.trace, html=args.html,
                               compare=args.compare, color=args.color).loop()
    color = display.use_color(args.color, sys.stdout)
    names = {"draft": args.draft, "oracle": args.oracle}
    run = runner.prepare(lambda role: runner.load_model(names[role], models_dir), args.method, args.prompt,
                         args.max_new_tokens)

    if color and args.method in VERIFYING:
        print(f"{display.GREEN}green{display.RESET}: proposed by the draft and accepted; plain: chosen by the oracle",
              file=sys.stderr)
    stats = Stats(trace=[] if args.trace or args.html is not None else None)
    tokens = runner.generator(settings, run.draft, run.oracle, run.ids, stats)  # its eager checks: before any output
    sys.stdout.write(args.prompt)
    start = time.perf_counter()
    try:
        generated = display.stream(tokens, run.enc.decode_single_token_bytes, stats.from_draft, color, sys.stdout)
    except errors.UserError:
        print(file=sys.stdout, flush=True)  # a check a generator makes on its first step: its line starts afresh
        raise
    elapsed = time.perf_counter() - start
    print(file=sys.stdout, flush=True)
    if args.trace:
        print("\n" + "\n".join(display.format_trace(stats.trace, run.enc.decode_single_token_bytes, len(run.ids))),
              file=sys.stderr)
    print(display.summary(args.method, stats, elapsed), file=sys.stderr)
    if args.compare:
        print(runner.compare(settings, run, generated, elapsed), file=sys.stderr)
    if args.html is not None:
        report.write_page(args.html, report.Run(
            prompt=args.prompt, prompt_ids=run.ids, tokens=generated, stats=stats, method=args.method,
            settings=runner.describe_settings(settings), models=runner.describe_models(names, run), elapsed=elapsed,
            token_bytes=run.enc.decode_single_token_bytes))
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
    parser.add_argument("--n-beams", type=positive_int, default=None,
                        help="beams for --method beam (default: 4; 1 is greedy decoding, but for float32 near-ties)")
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
    if args.n_beams is not None and args.method != "beam" and not args.interactive:
        parser.error(f"--n-beams applies to --method beam, not {args.method}")
    if (args.trace or args.html is not None) and args.method not in VERIFYING and not args.interactive:
        flag = "--trace" if args.trace else "--html"
        parser.error(f"{flag} shows verification rounds; --method {args.method} has none")
    if args.interactive and args.prompt:
        parser.error("--interactive reads its prompts from the session: give no prompt")
    if args.html is not None:
        problem = atomic.why_not_writable(args.html)
        if problem:
            parser.error(f"--html {problem}")
    return args


def settings_from(args):
    temperature = args.temperature
    if temperature is None:  # sampling's default is 1; the draft alone and the session start greedy
        greedy_default = args.method == "drafter" or args.interactive
        temperature = 0.0 if greedy_default and args.top_k is None and args.top_p is None else 1.0
    return runner.Settings(method=args.method, max_new_tokens=args.max_new_tokens, n_draft=args.n_draft,
                           processor=Processor(temperature, args.top_k, args.top_p), seed=args.seed, n_beams=args.n_beams or 4)


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


def main_entry(argv=None):
    """`python speculative.py ...`: main() with every expected error as one line."""
    errors.run(lambda: main(argv))
