"""READING.md cites file:line next to the code it quotes; every citation must still hold."""

import os
import re

import pytest

from conftest import ROOT

with open(os.path.join(ROOT, "READING.md"), encoding="utf-8") as f:
    CITATIONS = re.findall(r"\| `([\w/]+\.py):(\d+)` \| `([^`]+)` \|", f.read())


def test_the_guide_cites_code():
    assert len(CITATIONS) >= 25


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
    import sys
    if sys.argv[1:] == ["--fix"]:
        fix()
