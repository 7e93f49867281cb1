"""python demo.py: the offline demo pair written into the models directory, then one speculative run on it."""

import sys

from app import cli, program
from weights.demo_pair import build_pair
from weights.models import DEFAULT_MODELS_DIR


def parse_args(argv):
    parser = program.Parser(prog="demo.py", description="Write the offline demo pair (demo-draft, demo-oracle) and run "
                                                        "speculative decoding on it, with no network.",
                            epilog="Then try: python speculative.py \"...\" --draft demo-draft --oracle demo-oracle "
                                   "[--method sps] [--trace] [--html run.html]")
    parser.add_argument("prompt", nargs="?", default="The meaning of life is", help="the text to continue")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where to write the pair (default: models/)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    build_pair(args.models_dir)
    cli.main([args.prompt, "--draft", "demo-draft", "--oracle", "demo-oracle", "--models-dir", args.models_dir,
              "-n", "48", "-K", "4", "--compare"])


def main_entry():
    program.run(main)
