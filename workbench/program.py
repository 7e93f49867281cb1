"""The workbench's flags: a mistyped flag is one line (the script's name and --help), never a usage dump.

Every program runs through errors.run, which makes each error a user can cause one line on stderr.
"""

import errors
from errors import UserError


class UsageError(UserError):
    """A setting that cannot be used (a flag's value, a session command)."""


class Parser(errors.Parser):
    """errors.Parser, and the benchmarks' two flags: where the models live and where the results go."""

    def add_models_and_results(self, outputs):
        """--models-dir, and --out: the directory a benchmark writes its files `outputs` into."""
        from weights.models import DEFAULT_MODELS_DIR  # imported here: most programs need no weights/ to parse flags
        self.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where named models live (default: models/)")
        self.add_argument("--out", default="bench_results", help=f"directory for {', '.join(outputs)} (default: bench_results/)")

    def check_results(self, out, outputs):
        """Refuse --out before any work unless every file of the set can be written there (weights/files.py)."""
        from weights import files
        problem = files.why_not_writable_in(out, outputs)
        if problem:
            self.error(f"--out {problem}")
