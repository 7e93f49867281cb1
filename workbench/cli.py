"""The workbench's command line: flags, models, one method, the text as it comes, the statistics.

    python workbench.py "The meaning of life is" [--method sps] [--trace] [--html run.html] ...
    python workbench.py --interactive       (a session: session.py)
    python workbench.py bench ...           (the benchmarks: bench/main.py)

Text goes to stdout as it is accepted, statistics to stderr (runner.run).
Every error a user can cause is one line on stderr (program.py).
"""

import argparse
import os
import sys
import textwrap

import errors
from workbench import display, methods, program, runner, session, settings
from errors import printable
from processors import Processor
from weights import files
from weights.models import DEFAULT_MODELS_DIR, LOOKUP_ORDER


DESCRIPTION = ("Speculative decoding and its relatives on GPT-2: every method, its trace and its page, many prompts "
               "at once, and a session. The reading path is python speculative.py \"prompt\".")


def main(argv=None):
    args = parse_args(argv)
    chosen = settings_from(args)
    models_dir = args.models_dir or DEFAULT_MODELS_DIR
    display.as_utf8(sys.stdout, errors="replace")
    second_core = False
    if not args.plain:
        from workbench.speed import cores  # here: a --plain run imports nothing of speed/
        if args.second_core or cores.SECOND_CORE_SETTING in os.environ:
            # imported only when asked for: it and the layouts it needs take milliseconds to import
            from workbench.speed import second_core as helper
            if args.second_core:
                helper.use(True)
            second_core = helper.asked()  # a setting that is neither on nor off: one line, now
    if args.verbose:
        print(f"speed: {'plain NumPy (--plain)' if args.plain else speed_line()}", file=sys.stderr)
    if args.interactive:
        display.as_utf8(sys.stdin, errors="surrogateescape")
        return session.Session(args.draft, args.oracle, models_dir, chosen, trace=args.trace, html=args.html,
                               compare=args.compare, color=args.color, plain=args.plain, second_core=second_core).loop()
    names = {"draft": args.draft, "oracle": args.oracle}
    if args.prompts is not None:  # many prompts, one batch (batch.py)
        from workbench import batch_run
        prompts = runner.read_prompt_lines(args.prompts)  # before the models load: a bad file is one line at once
        # The models and their tokenizer; each prompt's room is checked by the batch, with its number.
        loaded = runner.prepare(lambda role: runner.load_model(names[role], models_dir, plain=args.plain), args.method,
                                "", 0, names, by_token_id=True)
        view = runner.View(sys.stdout, sys.stderr, trace=args.trace)
        return batch_run.run(chosen, loaded, prompts, view)
    loaded = runner.prepare(lambda role: runner.load_model(names[role], models_dir, plain=args.plain), args.method,
                            args.prompt, args.max_new_tokens, names)
    view = runner.View(sys.stdout, sys.stderr, color=display.use_color(args.color, sys.stdout), trace=args.trace,
                       html=args.html, compare=args.compare)
    runner.run(chosen, loaded, args.prompt, view)


def parse_args(argv):
    parser = program.Parser(prog="workbench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=DESCRIPTION + "\n\nmethods:\n" +
                            "\n".join(f"  {m.name:16s} {m.summary}" for m in methods.METHODS.values()),
                            epilog=textwrap.fill(LOOKUP_ORDER[0].upper() + LOOKUP_ORDER[1:] + ". Downloads: gpt2 548 MB, "
                                                 "gpt2-large 3.2 GB (set HF_ENDPOINT=https://hf-mirror.com to use the "
                                                 "mirror); the demo pair is written offline (python demo.py). Text goes "
                                                 "to stdout, statistics to stderr. The benchmarks: python workbench.py "
                                                 "bench --help.", 100))
    parser.add_argument("prompt", nargs="?", default="", help='the text to continue (default "": start from <|endoftext|>)')
    parser.add_argument("--prompts", metavar="FILE", default=None,
                        help=f"a file of prompts ({runner.PROMPT_ESCAPES}), decoded together as one batch "
                             "(batch.py); the continuations are printed in the file's order, each after a line naming "
                             "it, indented. Methods: " + ", ".join(m.name for m in methods.METHODS.values() if m.batched))
    parser.add_argument("--draft", default="gpt2", help="draft model: a name or a checkpoint directory, as below (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-large",
                        help="oracle model: a name or a checkpoint directory, as below (default: gpt2-large)")
    parser.add_argument("--method", default="speculative", choices=list(methods.METHODS),
                        help="decoding method (default: speculative)")
    parser.add_argument("--n-draft", type=settings.argparse_type(settings.N_DRAFT), default=None,
                        help=f"{settings.N_DRAFT.help}; {settings.N_DRAFT.bounds()} (default: "
                             + ", ".join(f"{m.n_draft} {m.name}" for m in methods.METHODS.values() if m.n_draft) + ")")
    parser.add_argument("--max-new-tokens", "-n", type=settings.argparse_type(settings.MAX_NEW_TOKENS), default=64,
                        help=f"{settings.MAX_NEW_TOKENS.help}, {settings.MAX_NEW_TOKENS.bounds()} (default: 64)")
    sampling = ", ".join(m.name for m in methods.METHODS.values() if m.samples)
    for option, default in ((settings.TEMPERATURE, "1; draft-alone: 0"), (settings.TOP_K, "none"),
                            (settings.TOP_P, "none"), (settings.SEED, "none: another text each run")):
        parser.add_argument(option.flag, type=settings.argparse_type(option), default=None,
                            help=f"{option.help}, {option.bounds()}; the sampling methods ({sampling}) (default: {default})")
    for option in methods.options():  # the methods' own: each applies to the methods that declare it
        default = "half the oracle's layers" if option.default is None else \
            ("on" if option.default else "off") if option.type is bool else option.default
        parser.add_argument(option.flag, type=settings.argparse_type(option), default=None,
                            help=f"{option.help}, {option.bounds()} (default: {default}; "
                                 f"{', '.join(methods.methods_taking(option.name))})")
    parser.add_argument("--models-dir", default=None, help="where named models are stored and downloaded (default: models/ beside this file)")
    parser.add_argument("--compare", action="store_true", help="also run the oracle alone on the same prompt (the method's "
                        "baseline: greedy, or sampling at the same settings) and report the speedup and whether the text "
                        "is the oracle's")
    parser.add_argument("--trace", action="store_true", help="print every round: drafted, the oracle's choices (for sps: p(x), "
                        "q(x), r and the decision), kept, what the caches hold")
    parser.add_argument("--html", metavar="FILE", default=None, help="write a page that shows every round (open it in a browser)")
    parser.add_argument("--color", default="auto", choices=("auto", "always", "never"),
                        help="colour accepted draft tokens (default: auto = on a terminal, unless NO_COLOR is set)")
    parser.add_argument("--interactive", "-i", action="store_true",
                        help="a session: type prompts, change settings with /commands (/help lists them)")
    parser.add_argument("--plain", action="store_true",
                        help="the models exactly as gpt2.GPT2.from_pretrained gives them, NumPy's own products, nothing of "
                             "workbench/speed/ run: logits within about 1e-5 of the fast path's (the same greedy text but at "
                             "a near-tie; a seeded sample may differ); python speculative.py always runs them")
    parser.add_argument("--second-core", action="store_true",
                        help="a small model's checks of several tokens run half on a helper process "
                             "(workbench/speed/second_core.py): faster on a quiet machine, slower when other programs "
                             "want the cores; off by default (also SPECULATIVE_GPT2_SECOND_CORE=1)")
    parser.add_argument("--verbose", action="store_true", help="also say how the products are run (threads, layout)")
    args = parser.parse_args(argv)
    method = methods.METHODS[args.method]
    if not args.interactive:  # the session starts from these settings and may change method: it checks its own
        for option in (settings.TEMPERATURE, settings.TOP_K, settings.TOP_P, settings.SEED):
            if getattr(args, option.name) is not None:
                try:
                    runner.check_sampling(args.method, option.flag)
                except program.UsageError as e:
                    parser.error(str(e))
        if args.n_draft is not None and method.n_draft is None:
            parser.error(f"--n-draft applies to the speculative methods, not {args.method}")
        for option in methods.options():
            if getattr(args, option.name) is not None and option not in method.options:
                parser.error(f"{option.flag} applies to --method {' or '.join(methods.methods_taking(option.name))}, "
                             f"not {args.method}")
        if (args.trace or args.html is not None) and not method.verifies:
            parser.error(f"{'--trace' if args.trace else '--html'} shows verification rounds; --method {args.method} has none")
    else:  # the session starts as it goes on: a processor that samples only with a method that does
        processor = settings_from(args).processor
        if processor.temperature > 0:
            try:
                runner.check_sampling(args.method, f"--interactive with the processor {processor}")
            except program.UsageError as e:
                parser.error(str(e))
    if args.second_core and args.plain:
        parser.error("--second-core speeds up the fast models; --plain runs NumPy's own products")
    if args.prompts is not None:
        if not args.prompts:
            parser.error("--prompts needs a file name (one prompt a line)")
        if args.prompt or args.interactive:
            parser.error("--prompts reads its prompts from the file: give no prompt and no --interactive")
        if method.batched is None:
            parser.error(f"--method {args.method} decodes one prompt at a time; --prompts runs "
                         f"{', '.join(m.name for m in methods.METHODS.values() if m.batched)}")
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
    from workbench.speed import second_core, threads
    return f"{threads.parking()}; small models: {second_core.status()}"


def settings_from(args):
    temperature = args.temperature
    if temperature is None:  # sampling's default is 1; the draft alone and the session start greedy
        greedy_default = methods.get(args.method).draft_writes or args.interactive
        temperature = 0.0 if greedy_default and args.top_k is None and args.top_p is None else 1.0
    given = {option.name: getattr(args, option.name) for option in methods.options() if getattr(args, option.name) is not None}
    return settings.Settings(method=args.method, max_new_tokens=args.max_new_tokens, n_draft=args.n_draft,
                             processor=Processor(temperature, args.top_k, args.top_p), seed=args.seed, options=given)


def main_entry(argv=None):
    """`python workbench.py ...`: main(), or with the first word bench the benchmarks; every expected error one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        from workbench.bench import main as bench  # imported here: the benchmarks' machinery only for them
        errors.run(lambda: bench.main(argv[1:]))
    else:
        errors.run(lambda: main(argv))
