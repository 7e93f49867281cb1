"""walkthrough.ipynb runs top to bottom on the offline demo pair: no cell fails and every plot is drawn.

The notebook checks itself as it goes (greedy speculative text == greedy text,
its hand-made rounds == the library's first rounds); this test runs it the way
Jupyter would, in a python3 kernel, and looks at what came out.
"""

import os

import pytest

from conftest import ROOT

EXTRAS = "needs the notebook extras: pip install -r requirements-extras.txt"
nbformat = pytest.importorskip("nbformat", reason=EXTRAS)
nbclient = pytest.importorskip("nbclient", reason=EXTRAS)
pytest.importorskip("ipykernel", reason=EXTRAS)
pytest.importorskip("matplotlib", reason=EXTRAS)

NOTEBOOK = os.path.join(ROOT, "walkthrough.ipynb")
N_PLOTS = 4  # the SpS residual, drafts kept per round, the cost curve, the speedup


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def test_the_notebook_is_committed_without_outputs():
    for cell in code_cells(nbformat.read(NOTEBOOK, as_version=4)):
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


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
