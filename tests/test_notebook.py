"""walkthrough.ipynb runs top to bottom on the learned pair: no cell fails, every plot is drawn, and its
prose states no figure of its own.

The notebook checks itself as it goes (greedy speculative text == greedy text,
its hand-made rounds == the library's first rounds); this test runs it the way
Jupyter would, in a python3 kernel, and looks at what came out. Its measured
figures (acceptance, costs, speedups, the best and the break-even draft
length) must come from its cells, which print them with the conclusion they
support; the markdown only says what to look at, so it may hold no
percentage, no speedup factor and no duration.
"""

import os
import re

import pytest

from fixtures import ROOT

EXTRAS = "needs the notebook extras: pip install -r requirements-extras.txt"
nbformat = pytest.importorskip("nbformat", reason=EXTRAS)
nbclient = pytest.importorskip("nbclient", reason=EXTRAS)
pytest.importorskip("ipykernel", reason=EXTRAS)
pytest.importorskip("matplotlib", reason=EXTRAS)

NOTEBOOK = os.path.join(ROOT, "walkthrough.ipynb")
N_PLOTS = 5  # acceptance by kind, drafts kept per round, the SpS residual, the cost curve, the speedup
# A measured figure: a percentage, a factor (1.5x), a duration or a size, a ratio in words ("2 times").
FIGURE = re.compile(r"\d\s*(%|x\b|×|ms\b|µs\b|s\b|sec|seconds?\b|minutes?\b|hours?\b|[KMG]i?B\b|times\b)", re.I)
# What the random demo pair's notebook said, and the learned pair makes untrue.
OUTDATED = re.compile(r"random weights|gibberish|random demo pair", re.I)


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def markdown_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "markdown"]


def printed(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_the_notebook_is_committed_without_outputs():
    for cell in code_cells(nbformat.read(NOTEBOOK, as_version=4)):
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_it_opens_with_the_path_after_the_demo():
    first = nbformat.read(NOTEBOOK, as_version=4).cells[0]
    assert first.cell_type == "markdown"
    text = first.source
    for name in ("python demo.py", "READING.md", "exercises/ex03_accepted_prefix.py", "pytest exercises/ -k ex03",
                 "EXERCISES.md"):
        assert name in text, f"the first cell does not mention {name}"
    order = [text.find(f"`{name}`") for name in ("kvcache.py", "gpt2.py", "speculative.py")]
    assert -1 not in order and order == sorted(order), "the reading order is kvcache.py, gpt2.py, speculative.py"


def test_the_prose_states_no_figure_and_nothing_of_the_random_pair():
    for cell in markdown_cells(nbformat.read(NOTEBOOK, as_version=4)):
        figure = FIGURE.search(cell.source)
        assert figure is None, (f"a markdown cell states a figure, {figure.group(0)!r}: print it from the cell "
                                f"that measures it ({cell.source[:60]!r})")
        outdated = OUTDATED.search(cell.source)
        assert outdated is None, f"the demo pair is learned, not random: {outdated.group(0)!r} in {cell.source[:60]!r}"
    for cell in code_cells(nbformat.read(NOTEBOOK, as_version=4)):
        assert OUTDATED.search(cell.source) is None, cell.source[:60]


@pytest.mark.slow
def test_the_walkthrough_runs_top_to_bottom_and_draws_every_plot(demo_dirs, monkeypatch):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    monkeypatch.setenv("NOTEBOOK_MODELS_DIR", os.path.dirname(demo_dirs["draft"]))  # the session's pair: nothing built
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend is what turns plots into PNGs
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if any cell fails

    cells = code_cells(nb)
    errors = [o for cell in cells for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors
    plotting = [cell for cell in cells if "plt.show()" in cell.source]
    with_image = [cell for cell in cells if any("image/png" in o.get("data", {}) for o in cell.outputs)]
    assert len(plotting) == N_PLOTS
    assert with_image == plotting, "a cell that plots drew nothing, or a cell drew without plotting"

    # The runs on held-out text, coloured: on real text some drafts are kept and some rejected.
    pages = [o["data"]["text/html"] for cell in cells for o in cell.outputs if "text/html" in o.get("data", {})]
    runs = [page for page in pages if 'title="kept' in page or 'title="rejected' in page]
    assert len(runs) == 4, "one coloured run per kind of text"
    assert any('title="kept' in page for page in runs) and any('title="rejected' in page for page in runs)

    # The conclusions are printed, each from the cell's own measurement.
    out = "\n".join(printed(cell) for cell in cells)
    for kind in ("prose", "code", "lists", "repeat"):
        assert re.search(rf"^{kind} +\d+\.\d%", out, re.M), f"no acceptance printed for {kind}"
    assert "one oracle pass over 9 tokens" in out and "break-even" in out and "best draft length" in out
    assert re.search(r"This notebook ran in \d+ s", out)
