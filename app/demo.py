"""python demo.py: the learned pair written into the models directory, one speculative run on it, and what to do next."""

import sys

from app import cli, program
from errors import printable
from weights import files
from weights.demo_pair import build_pair
from weights.models import DEFAULT_MODELS_DIR

PROMPT = "If the file does not exist, the function"  # PROMPT and N_NEW: the README's demo session shows this run
N_NEW, K = 48, 4
NEXT = """
Next:
  1. read the code, in this order: kvcache.py, gpt2.py, speculative.py (READING.md puts each
     step of the pseudocode beside its line);
  2. do the first exercise: open exercises/ex03_accepted_prefix.py, then
     pytest exercises/ -k ex03   (EXERCISES.md has the path through all of them).
Or watch every round:  python speculative.py "{prompt}" --draft demo-draft --oracle demo-oracle --trace"""


def parse_args(argv):
    parser = program.Parser(prog="demo.py", description="Write the offline demo pair (demo-draft, demo-oracle: a small "
                                                        "GPT-2 trained on the Python documentation and its draft) and "
                                                        "run speculative decoding on it, with no network.",
                            epilog="Then try: python speculative.py \"...\" --draft demo-draft --oracle demo-oracle "
                                   "[--method sps] [--trace] [--html run.html]")
    parser.add_argument("prompt", nargs="?", default=PROMPT, help=f"the text to continue (default: {PROMPT!r})")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where to write the pair (default: models/)")
    args = parser.parse_args(argv)
    problem = files.why_not_a_folder_to_write(args.models_dir)
    if problem:
        parser.error(f"--models-dir {problem}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    build_pair(args.models_dir)
    cli.main([args.prompt, "--draft", "demo-draft", "--oracle", "demo-oracle", "--models-dir", args.models_dir,
              "-n", str(N_NEW), "-K", str(K), "--compare"])
    print(printable(NEXT.format(prompt=args.prompt.replace('"', '\\"'))), file=sys.stderr)


def main_entry():
    program.run(main)
