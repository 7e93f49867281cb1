"""The shipped pair, and every checkpoint the project writes, load in the ecosystem's tools.

transformers' from_pretrained refuses a safetensors file whose header metadata lacks the
hub's {"format": "pt"} ("Incompatible safetensors file. File metadata is not ['pt', 'tf',
'flax', 'mlx'] but None"). These tests read the headers themselves, so they need no PyTorch.
"""

import json
import os

import pytest

from weights.checkpoint import open_safetensors, random_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = [os.path.join(ROOT, "assets", "learned-pair", role, "model.safetensors")
           for role in ("oracle", "draft", "heads/eagle", "heads/medusa", "heads/exit")]


def header_metadata(path):
    """The raw __metadata__ of a safetensors file, read as transformers reads it: None when absent."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)).get("__metadata__")


@pytest.mark.parametrize("path", SHIPPED, ids=["oracle", "draft", "eagle head", "medusa heads", "exit adapter"])
def test_the_shipped_models_carry_the_hubs_format(path):
    assert header_metadata(path) == {"format": "pt"}
    _, metadata, _ = open_safetensors(path)  # and the project's own reader still takes them
    assert metadata == {"format": "pt"}


def test_every_checkpoint_the_project_writes_carries_it(tmp_path):
    model_dir = random_checkpoint(str(tmp_path / "m"), {"n_layer": 1, "n_embd": 8, "n_head": 2, "n_positions": 16,
                                                        "vocab_size": 32})
    assert header_metadata(os.path.join(model_dir, "model.safetensors"))["format"] == "pt"


def test_the_check_sees_a_file_without_it(tmp_path):
    """Negative control: the header the pair had before carried no format, and the check says so."""
    path = tmp_path / "old.safetensors"
    header = json.dumps({"__metadata__": {}, "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    assert header_metadata(str(path)) != {"format": "pt"}
