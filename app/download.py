"""python download_weights.py NAME ...: the downloader's command line (the downloader is weights/download.py)."""

import argparse

from app import program
from errors import printable
from weights import download, files
from weights.download import DEFAULT_ENDPOINT, MIRROR, MODEL_NAMES, MODEL_SIZES
from weights.models import DEFAULT_MODELS_DIR

EPILOG = "sizes:\n" + "".join(f"  {n:<12} {s}\n" for n, s in MODEL_SIZES.items()) + f"""
Downloads resume where they stopped: run the same command again.
To download through a mirror (e.g. from mainland China), set HF_ENDPOINT:
  HF_ENDPOINT={MIRROR} python download_weights.py gpt2           (Linux, macOS)
  $env:HF_ENDPOINT="{MIRROR}"; python download_weights.py gpt2   (Windows PowerShell)
The default is HF_ENDPOINT={DEFAULT_ENDPOINT}."""


def main(argv=None):
    parser = program.Parser(prog="download_weights.py", description=download.__doc__.split("\n\n")[0], epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", default=["gpt2", "gpt2-large"], metavar="NAME",
                        help=f"models to fetch, from {', '.join(MODEL_NAMES)} (default: gpt2 gpt2-large, the CLI's default pair)")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR,
                        help="where models are stored (default: models/ beside this file)")
    args = parser.parse_args(argv)
    problem = files.why_not_a_folder_to_write(args.models_dir)
    if problem:
        parser.error(f"--models-dir {problem}")
    for name in args.names:
        if name not in MODEL_NAMES:
            program.fail(f"unknown model {name!r}: choose from {', '.join(MODEL_NAMES)}", code=2)
    for name in args.names:
        print(printable(download.download(name, args.models_dir)))


def main_entry():
    program.run(main)
