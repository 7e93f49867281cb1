"""A NaN or an infinity never loads and never keeps a draft in the workbench either: its fast copy of the weights
refuses what the plain loaders refuse, even when the copy was made while the weights were sound, and the
workbench's eagle-sps on a head of 3e38 keeps none of its drafts (tests/test_non_finite.py holds the reading
house's loaders and rules)."""

import os

import numpy as np
import pytest

from processors import Processor
from stats import Stats
from test_non_finite import INF, NAN, f32_eagle_head, poke
from fixtures import make_model_dir
from weights.checkpoint import CheckpointError
from workbench import methods, runner
from workbench.settings import Settings
from workbench.speed.accelerate import load_fast


@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["NaN", "Inf", "-Inf"])
def test_the_fast_loader_refuses_a_non_finite_weight_naming_file_and_tensor(tmp_path, value):
    model_dir = make_model_dir(tmp_path / "m", seed=5, n_layer=1, tokenizer=False)
    load_fast(model_dir)  # a converted copy made while the weights were sound
    source = os.path.join(model_dir, "model.safetensors")
    poke(source, "h.0.mlp.c_fc.weight", value, [100])
    said = f"{source}: tensor h.0.mlp.c_fc.weight holds {'NaN' if value != value else 'an infinity'}"
    with pytest.raises(CheckpointError) as e:
        load_fast(model_dir)
    assert str(e.value).startswith(said), str(e.value)


def test_a_head_of_3e38_loads_and_eagle_sps_keeps_none_of_its_drafts(demo_dirs, tmp_path):
    oracle_dir = f32_eagle_head(demo_dirs["oracle"], tmp_path / "o", **{"fc.weight": 3e38})
    draft, oracle = load_fast(demo_dirs["draft"]), load_fast(oracle_dir)
    stats = Stats()
    settings = Settings(method="eagle-sps", max_new_tokens=24, seed=1, processor=Processor(0.8))
    with np.errstate(all="ignore"):
        tokens = list(runner.generator(settings, draft, oracle, [464, 2393, 857], stats))
    assert len(tokens) == 24 and stats.drafted > 0 and stats.accepted == 0
    assert methods.get("eagle-sps").head == "eagle"
