"""READING.md cites file:line next to the code it quotes; every citation must still hold,
and its traced round is what the code prints today."""

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

with open(os.path.join(ROOT, "READING.md"), encoding="utf-8") as f:
    GUIDE = f.read()
CITATIONS = re.findall(r"\| `([\w/]+\.py):(\d+)` \| `([^`]+)` \|", GUIDE)


def test_the_guide_cites_code():
    assert len(CITATIONS) >= 25
    cited = {path for path, _, _ in CITATIONS}
    decoders = {"speculative.py", "threshold.py", "sps.py", "tree.py", "ngram.py", "adaptive.py", "beam.py"}
    assert decoders <= cited, f"READING.md cites no line of {sorted(decoders - cited)}"


def test_the_traced_round_is_what_the_code_prints(demo_dirs):
    # The command as READING.md prints it, on the test run's own demo pair (the same seeded construction).
    command = re.search(r"```bash\n(python speculative.py [^\n]*--trace)\n```", GUIDE).group(1)
    shown = re.search(r"```\n(trace: .*?)\n```", GUIDE, re.S).group(1)
    args = shlex.split(command)[2:] + ["--models-dir", os.path.dirname(demo_dirs["draft"])]
    r = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), *args], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    printed = r.stderr[r.stderr.index("trace:"):].split("\nspeculative:")[0].rstrip()
    assert printed == shown


@pytest.mark.parametrize("path, line, code", CITATIONS, ids=[f"{p}:{n}" for p, n, _ in CITATIONS])
def test_citation_holds(path, line, code):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().splitlines()
    if code not in lines[int(line) - 1]:
        now = [i + 1 for i, text in enumerate(lines) if code in text]
        pytest.fail(f"READING.md: {path}:{line} no longer holds `{code}`; it is now at line(s) {now or 'nowhere'}")


def fix():
    """python tests/test_reading_guide.py --fix: point each citation at the line now holding its code."""
    path_md = os.path.join(ROOT, "READING.md")
    with open(path_md, encoding="utf-8") as f:
        text = f.read()

    def relink(m):
        path, code = m.group(1), m.group(3)
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            now = [i + 1 for i, t in enumerate(f.read().splitlines()) if code in t]
        if len(now) != 1:
            print(f"{path}: `{code}` is on lines {now}: fix by hand")
            return m.group(0)
        return f"| `{path}:{now[0]}` | `{code}` |"

    with open(path_md, "w", encoding="utf-8") as f:
        f.write(re.sub(r"\| `([\w/]+\.py):(\d+)` \| `([^`]+)` \|", relink, text))


if __name__ == "__main__":
    if sys.argv[1:] == ["--fix"]:
        fix()
