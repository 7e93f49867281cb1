"""The command line of speculative.py: flags, models, one method, the text as it comes, the statistics.

    python speculative.py "The meaning of life is" [--method sps] [--trace] [--html run.html] ...
    python speculative.py --interactive       (the workbench: session.py)

Text goes to stdout as it is accepted, statistics to stderr (runner.run).
Every error a user can cause is one line on stderr (program.py).
"""

import argparse
import os
import sys
import textwrap

import speculative
from app import display, methods, program, runner, session
from errors import printable
from processors import Processor
from weights import files
from weights.models import DEFAULT_MODELS_DIR, LOOKUP_ORDER


BATCH_METHODS = ("greedy", "speculative", "sps")  # what --prompts runs (app/batch_run.py)


def main(argv=None):
    args = parse_args(argv)
    settings = settings_from(args)
    models_dir = args.models_dir or DEFAULT_MODELS_DIR
    display.as_utf8(sys.stdout, errors="replace")
    second_core = False
    if not args.plain:
        from speed import second_core as helper  # here: a --plain run imports nothing of speed/
        if args.second_core:
            helper.use(True)
        second_core = helper.asked()  # a setting that is neither on nor off: one line, now
    if args.verbose:
        print(f"speed: {'plain NumPy (--plain)' if args.plain else speed_line()}", file=sys.stderr)
    if args.interactive:
        display.as_utf8(sys.stdin, errors="surrogateescape")
        return session.Session(args.draft, args.oracle, models_dir, settings, trace=args.trace, html=args.html,
                               compare=args.compare, color=args.color, plain=args.plain, second_core=second_core).loop()
    names = {"draft": args.draft, "oracle": args.oracle}
    if args.prompts is not None:  # many prompts, one batch (batch.py)
        from app import batch_run
        prompts = runner.read_prompt_lines(args.prompts)  # before the models load: a bad file is one line at once
        # The models and their tokenizer; each prompt's room is checked by the batch, with its number.
        loaded = runner.prepare(lambda role: runner.load_model(names[role], models_dir, plain=args.plain), args.method,
                                "", 0, names, by_token_id=True)
        view = runner.View(sys.stdout, sys.stderr, trace=args.trace)
        return batch_run.run(settings, loaded, prompts, view)
    loaded = runner.prepare(lambda role: runner.load_model(names[role], models_dir, plain=args.plain), args.method,
                            args.prompt, args.max_new_tokens, names)
    view = runner.View(sys.stdout, sys.stderr, color=display.use_color(args.color, sys.stdout), trace=args.trace,
                       html=args.html, compare=args.compare)
    runner.run(settings, loaded, args.prompt, view)


def parse_args(argv):
    parser = program.Parser(prog="speculative.py", formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=speculative.__doc__.split("\n\n")[0] + "\n\nmethods:\n" +
                            "\n".join(f"  {m.name:12s} {m.summary}" for m in methods.METHODS.values()),
                            epilog=textwrap.fill(LOOKUP_ORDER[0].upper() + LOOKUP_ORDER[1:] + ". Downloads: gpt2 548 MB, "
                                                 "gpt2-large 3.2 GB (set HF_ENDPOINT=https://hf-mirror.com to use the "
                                                 "mirror); the demo pair is written offline (python demo.py). Text goes "
                                                 "to stdout, statistics to stderr.", 100))
    parser.add_argument("prompt", nargs="?", default="", help='the text to continue (default "": start from <|endoftext|>)')
    parser.add_argument("--prompts", metavar="FILE", default=None,
                        help=f"a file of prompts ({runner.PROMPT_ESCAPES}), decoded together as one batch "
                             "(batch.py); the continuations are printed in the file's order, each after a line naming "
                             "it, indented. Methods: " + ", ".join(BATCH_METHODS))
    parser.add_argument("--draft", default="gpt2", help="draft model: a name or a checkpoint directory, as below (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-large",
                        help="oracle model: a name or a checkpoint directory, as below (default: gpt2-large)")
    parser.add_argument("--method", default="speculative", choices=list(methods.METHODS),
                        help="decoding method (default: speculative)")
    parser.add_argument("--n-draft", type=runner.setting("n_draft"), default=None,
                        help="draft tokens per round: the most for threshold, the starting value for adaptive, the "
                             "tree depth for tree; " + runner.bounds("n_draft") + " (default: " +
                             ", ".join(f"{m.n_draft} {m.name}" for m in methods.METHODS.values() if m.n_draft) + ")")
    parser.add_argument("--max-new-tokens", "-n", type=runner.setting("max_new_tokens"), default=64,
                        help=f"tokens to generate, {runner.bounds('max_new_tokens')} (default: 64; the prompt and these "
                             "must fit the models' context window)")
    parser.add_argument("--temperature", type=runner.setting("temperature"), default=None,
                        help=f"sampling temperature of the sampling methods, {runner.bounds('temperature')} (default: 1; "
                             "draft-alone: 0); 0 is greedy, and a tiny temperature approaches greedy")
    parser.add_argument("--top-k", type=runner.setting("top_k"), default=None,
                        help=f"sample only among the k most likely tokens (the sampling methods), {runner.bounds('top_k')}")
    parser.add_argument("--top-p", type=runner.setting("top_p"), default=None,
                        help="sample only from the smallest set of most likely tokens with this much mass (the sampling "
                             f"methods), {runner.bounds('top_p')}; a p too small to matter keeps the most likely token")
    parser.add_argument("--seed", type=runner.setting("seed"), default=None,
                        help=f"random seed of the sampling methods, {runner.bounds('seed')}: the same seed gives the same text")
    parser.add_argument("--n-beams", type=runner.setting("n_beams"), default=None,
                        help=f"beams for --method beam, {runner.bounds('n_beams')} (default: 4; 1 is greedy decoding, but "
                             "for float32 near-ties)")
    parser.add_argument("--draft-layers", type=runner.setting("draft_layers"), default=None,
                        help="the oracle's first layers that draft for --method self-speculative, from 1 to one less "
                             "than the oracle has (default: half of them)")
    parser.add_argument("--models-dir", default=None, help="where named models are stored and downloaded (default: models/ beside this file)")
    parser.add_argument("--compare", action="store_true", help="also run the oracle alone on the same prompt and report the speedup")
    parser.add_argument("--trace", action="store_true", help="print every round: drafted, the oracle's choices (for sps: p(x), "
                        "q(x), r and the decision), kept, what the caches hold")
    parser.add_argument("--html", metavar="FILE", default=None, help="write a page that shows every round (open it in a browser)")
    parser.add_argument("--color", default="auto", choices=("auto", "always", "never"),
                        help="colour accepted draft tokens (default: auto = on a terminal, unless NO_COLOR is set)")
    parser.add_argument("--interactive", "-i", action="store_true",
                        help="a session: type prompts, change settings with /commands (/help lists them)")
    parser.add_argument("--plain", action="store_true",
                        help="the models exactly as gpt2.GPT2.from_pretrained gives them, NumPy's own @, nothing of "
                             "speed/ run: logits within about 1e-5 of the fast path's (the same greedy text but at a near-tie; a "
                             "seeded sample may differ), slower verification; for stepping through the code in a "
                             "debugger (READING.md, 'Stepping through the code')")
    parser.add_argument("--second-core", action="store_true",
                        help="a small model's checks of several tokens run half on a helper process (speed/second_core.py): "
                             "faster on a quiet machine, slower when other programs want the cores; off by default "
                             "(also SPECULATIVE_GPT2_SECOND_CORE=1)")
    parser.add_argument("--verbose", action="store_true", help="also say how the products are run (threads, layout)")
    args = parser.parse_args(argv)
    method = methods.METHODS[args.method]
    for flag in ("temperature", "top_k", "top_p", "seed"):
        if getattr(args, flag) is not None and not args.interactive:
            try:
                runner.check_sampling(args.method, f"--{flag.replace('_', '-')}")
            except program.UsageError as e:
                parser.error(str(e))
    if args.interactive:  # the session starts as it goes on: a processor that samples only with a method that does
        processor = settings_from(args).processor
        if processor.temperature > 0:
            try:
                runner.check_sampling(args.method, f"--interactive with the processor {processor}")
            except program.UsageError as e:
                parser.error(str(e))
    if args.n_draft is not None and method.n_draft is None and not args.interactive:
        parser.error(f"--n-draft applies to the speculative methods, not {args.method}")
    if args.n_beams is not None and args.method != "beam" and not args.interactive:
        parser.error(f"--n-beams applies to --method beam, not {args.method}")
    if args.draft_layers is not None and args.method != "self-speculative" and not args.interactive:
        parser.error(f"--draft-layers applies to --method self-speculative, not {args.method}")
    if (args.trace or args.html is not None) and not method.verifies and not args.interactive:
        flag = "--trace" if args.trace else "--html"
        parser.error(f"{flag} shows verification rounds; --method {args.method} has none")
    if args.second_core and args.plain:
        parser.error("--second-core speeds up the fast models; --plain runs NumPy's own products")
    if args.prompts is not None:
        if not args.prompts:
            parser.error("--prompts needs a file name (one prompt a line)")
        if args.prompt or args.interactive:
            parser.error("--prompts reads its prompts from the file: give no prompt and no --interactive")
        if args.method not in BATCH_METHODS:
            parser.error(f"--method {args.method} decodes one prompt at a time; --prompts runs "
                         f"{', '.join(BATCH_METHODS)}")
        for flag, value in (("--html", args.html), ("--compare", args.compare)):
            if value:
                parser.error(f"{flag} shows one prompt's run; with --prompts, use --trace")
    if args.interactive and args.prompt:
        parser.error("--interactive reads its prompts from the session: give no prompt")
    if args.html is not None:
        problem = files.why_not_writable(args.html)
        if problem:
            parser.error(f"--html {problem}")
    if args.models_dir is not None and os.path.lexists(args.models_dir) and not os.path.isdir(args.models_dir):
        parser.error(f"--models-dir {printable(args.models_dir)} is not a directory")
    return args


def speed_line():
    """How speed/ runs the products (--verbose); imported here, so that a --plain run imports nothing of speed/."""
    from speed import second_core, threads
    return f"{threads.parking()}; small models: {second_core.status()}"


def settings_from(args):
    temperature = args.temperature
    if temperature is None:  # sampling's default is 1; the draft alone and the session start greedy
        greedy_default = args.method == "draft-alone" or args.interactive
        temperature = 0.0 if greedy_default and args.top_k is None and args.top_p is None else 1.0
    return runner.Settings(method=args.method, max_new_tokens=args.max_new_tokens, n_draft=args.n_draft,
                           processor=Processor(temperature, args.top_k, args.top_p), seed=args.seed, n_beams=args.n_beams or 4,
                           draft_layers=args.draft_layers)


def main_entry(argv=None):
    """`python speculative.py ...`: main() with every expected error as one line."""
    program.run(lambda: main(argv))
