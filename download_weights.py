"""Download OpenAI's GPT-2 checkpoints from the Hugging Face hub, or a mirror (HF_ENDPOINT).

    python download_weights.py gpt2 gpt2-large [--models-dir models]

Each model is four files in models/NAME/: config.json, model.safetensors,
vocab.json and merges.txt. A download resumes where it stopped, and a file is
kept only once it is what the server announced (its size and SHA-256, or the
shape of its kind). The downloader is weights/download.py. speculative.py
downloads the models it needs by itself.
"""

if __name__ == "__main__":  # first: Ctrl-C while the script loads is one line, not a traceback
    import errors
    errors.interrupt_quietly()

import argparse

from errors import Parser, fail, printable, run
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
    parser = Parser(prog="download_weights.py", description=download.__doc__.split("\n\n")[0], epilog=EPILOG,
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
            fail(f"unknown model {name!r}: choose from {', '.join(MODEL_NAMES)}", code=2)
    for name in args.names:
        print(printable(download.download(name, args.models_dir)))


if __name__ == "__main__":
    run(main)
