"""READING.md cites a function by name (file and function) next to the code it quotes; every quote must still be
in the function named, and its traced round is what the code prints today."""

import ast
import os
import re
import shlex
import subprocess
import sys

import pytest

from fixtures import ROOT

with open(os.path.join(ROOT, "READING.md"), encoding="utf-8") as f:
    GUIDE = f.read()
CITATIONS = re.findall(r"\| `([\w/]+\.py)` `([\w.]+)` \| `([^`]+)` \|", GUIDE)


def test_the_guide_cites_code():
    assert len(CITATIONS) >= 25
    cited = {path for path, _, _ in CITATIONS}
    decoders = {"speculative.py", "threshold.py", "sps.py", "tree.py", "ngram.py", "adaptive.py", "beam.py"}
    assert decoders <= cited, f"READING.md cites no line of {sorted(decoders - cited)}"


def test_the_traced_round_is_what_the_code_prints(demo_dirs):
    # The command as READING.md prints it, on the test run's own demo pair (the same seeded construction).
    command = re.search(r"```bash\n(python speculative.py [^\n]*--trace)\n```", GUIDE).group(1)
    shown = re.search(r"```\n(round 1: .*?)\n```", GUIDE, re.S).group(1)
    args = shlex.split(command)[2:] + ["--models-dir", os.path.dirname(demo_dirs["draft"])]
    r = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), *args], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    printed = r.stderr[r.stderr.index("round 1:"):].split("\nspeculative:")[0].rstrip()
    assert printed == shown


def function_source(path, name):
    """The source of function `name` of a module ("Class.method" for a method), or None."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        source = f.read()
    node = ast.parse(source)
    for part in name.split("."):
        node = next((n for n in ast.iter_child_nodes(node)
                     if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
    return "\n".join(source.splitlines()[node.lineno - 1:node.end_lineno])  # its last line's comment too


def test_no_citation_names_a_line():
    # A line number rots at every edit above it; a function's name does not.
    assert not re.findall(r"`[\w/]+\.py:\d+`", GUIDE.split("## Stepping through the code")[0])


@pytest.mark.parametrize("path, function, code", CITATIONS, ids=[f"{p}:{f}" for p, f, _ in CITATIONS])
def test_citation_holds(path, function, code):
    source = function_source(path, function)
    assert source is not None, f"READING.md: {path} has no function {function}"
    assert code in source, f"READING.md: {path}'s {function} no longer holds `{code}`"
