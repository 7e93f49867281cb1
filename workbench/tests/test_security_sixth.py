"""The sixth look from outside, at the workbench: what it found broken, each held here.

A plan is trusted as far as its signature (weights/derived.py), and a signature is only as sound as whoever holds
the key: what a signed plan says is still checked before a run goes by it. A setting echoed in a line is cut;
the suite's prompts are bounded.
"""

import json

import pytest

from errors import SHOWN_VALUE
from fixtures import make_model_dir
from weights import derived, files
from workbench.bench import plans
from workbench.speed import plan as planning
from workbench.speed.planned import PlannedGPT2


def signed_plan(model_dir, text):
    """The plan file holding text, signed as the owner of the directory's key can sign anything (derived.bind)."""
    path, record, source = planning.plan_paths(model_dir)
    files.write_text(path, text)
    derived.bind(record, path, source, planning.recipe())


def test_a_signed_plan_that_no_measuring_made_is_measured_again(tmp_path):
    """A plan with no row counts was read as a Plan, and the run's first forward ended in an IndexError (a
    traceback); one nested 30,000 deep was a RecursionError there. Each is now read as no plan."""
    model_dir = make_model_dir(tmp_path / "m", seed=3)
    good = planning.Plan({1: "numpy-1", 5: "fast"}, {"numpy-1": {1: 1e-3, 5: 2e-3}, "fast": {1: 1e-3, 5: 1e-3}})
    planning.write(model_dir, good)
    assert planning.read(model_dir).ways == good.ways  # the negative control: a plan as make_plan makes them is read
    for text in [json.dumps({"ways": {}, "seconds": {}}), "[" * 30000,
                 json.dumps({"ways": {"0": "numpy-1"}, "seconds": {}}),
                 json.dumps({"ways": {"1": "bogus"}, "seconds": {}}),
                 json.dumps({"ways": {"1": "numpy-1"}, "seconds": {"numpy-1": {"1": float("nan")}}}),
                 json.dumps({"ways": [1, 2], "seconds": {}})]:
        signed_plan(model_dir, text)
        path, record, source = planning.plan_paths(model_dir)
        assert derived.bound(record, path, source, planning.recipe()) is None  # signed and bound: its content is wrong
        assert planning.read(model_dir) is None, text[:60]


def test_a_run_by_a_signed_empty_plan_makes_a_new_one(tmp_path, monkeypatch):
    model_dir = make_model_dir(tmp_path / "m", seed=3)
    signed_plan(model_dir, json.dumps({"ways": {}, "seconds": {}}))
    measured = planning.Plan({1: "numpy-1"}, {"numpy-1": {1: 1e-3}})
    monkeypatch.setattr(planning, "make_plan", lambda *args, **kwargs: measured)  # no timing in a test
    from workbench.speed import planned
    model = planned.load_planned(model_dir, progress=False)
    assert isinstance(model, PlannedGPT2) and model.plan.ways == {1: "numpy-1"}
    model.forward([1, 2, 3])


def test_a_forced_kernel_of_any_length_is_shown_cut():
    """bench plan printed OPENBLAS_CORETYPE whole: 100 kB of it on one line."""
    key = dict(planning.machine_key(), forced={"OPENBLAS_CORETYPE": "x" * 100_000})
    line = plans.machine_line(key)
    assert len(line) < 1000 and "x" * SHOWN_VALUE in line
    assert "OPENBLAS_CORETYPE='Haswell'" in plans.machine_line(dict(key, forced={"OPENBLAS_CORETYPE": "Haswell"}))


def test_the_suite_takes_a_bounded_number_of_prompts(tmp_path):
    """bench suite --prompts took any number: 50,000 prompts of a 1.5 MB file made 150,000 runs (weeks), where the
    ablations refuse more than their bound before any model loads."""
    from workbench import program
    from workbench.bench import suite
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps([{"kind": "prose", "prompt": "a b"}] * suite.MAX_PROMPTS))
    assert len(suite.read_prompts(str(path))) == suite.MAX_PROMPTS
    path.write_text(json.dumps([{"kind": "prose", "prompt": "a b"}] * (suite.MAX_PROMPTS + 1)))
    with pytest.raises(program.UsageError, match=f"{suite.MAX_PROMPTS + 1} prompts, more than the {suite.MAX_PROMPTS}"):
        suite.read_prompts(str(path))
