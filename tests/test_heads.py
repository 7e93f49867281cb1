"""The oracle's trained heads (weights/heads.py, workbench/tools/train_heads.py): shipped beside the learned pair, written
into demo-oracle/heads/ with it, read shape-checked; and on held-out text they draft what they were trained to."""

import os

import numpy as np
import pytest

from beyond.eagle import EagleHead, eagle_generate
from beyond.early_exit import ExitAdapter, early_exit_generate
from beyond.medusa import MedusaHeads
from beyond.self_speculative import self_speculative_generate
from fixtures import held_out, make_model_dir
from gpt2 import GPT2
from stats import Stats
from speculative import greedy_generate, speculative_generate
from weights import demo_pair, files, heads
from weights.checkpoint import CheckpointError
from weights.tokenizer import encode, load_tokenizer


HEAD_CLASSES = {"eagle": EagleHead, "medusa": MedusaHeads, "exit": ExitAdapter}  # weights/heads.HEADS, each its module's


@pytest.fixture(scope="module")
def learned(demo_dirs):
    draft, oracle = (GPT2.from_pretrained(demo_dirs[k]) for k in ("draft", "oracle"))
    read = {head: HEAD_CLASSES[head](*read_head(demo_dirs["oracle"], head, oracle), oracle) for head in heads.HEADS}
    return draft, oracle, load_tokenizer(demo_dirs["oracle"]), read


def read_head(oracle_dir, head, oracle):  # -> (params, config), as the workbench builds a head
    from gpt2 import nest
    config, tensors = heads.load(oracle_dir, head, oracle)
    assert all(t.dtype == np.float32 for t in tensors.values())
    return nest(tensors), config


def test_every_head_is_written_beside_the_demo_oracle_and_checked(demo_dirs):
    sums = demo_pair.shipped_sums()
    for head in heads.HEADS:
        for name in ("config.json", "model.safetensors"):
            assert demo_pair.same_file(os.path.join(demo_dirs["oracle"], "heads", head, name), sums[f"heads/{head}/{name}"])
    assert os.listdir(os.path.join(demo_dirs["draft"], "heads")) == ["accept"]  # the draft's own: SpecDec++'s
    assert not set(heads.DRAFT_HEADS) & set(os.listdir(os.path.join(demo_dirs["oracle"], "heads")))


def test_a_head_for_another_oracle_is_refused(demo_dirs, tmp_path):
    other = GPT2.from_pretrained(make_model_dir(tmp_path / "other", n_embd=32))  # another width
    with pytest.raises(CheckpointError, match="n_embd"):
        heads.load(demo_dirs["oracle"], "eagle", other)
    with pytest.raises(CheckpointError, match="has no medusa head"):
        heads.load(str(tmp_path / "other"), "medusa", other)


@pytest.mark.parametrize("stranger", ["file", "link", "kind"])
def test_a_strangers_entry_among_the_heads_is_refused_and_kept(tmp_path, stranger):
    models = tmp_path / "models"
    demo_pair.build_pair(str(models))
    eagle = models / "demo-oracle" / "heads" / "eagle"
    if stranger == "file":
        victim = eagle / "notes.txt"
        victim.write_text("mine")
    elif stranger == "link":
        target = tmp_path / "elsewhere"
        target.write_text("mine")
        (eagle / "model.safetensors").unlink()
        os.symlink(target, eagle / "model.safetensors")
        victim = target
    else:
        victim = models / "demo-oracle" / "heads" / "mine" / "config.json"
        victim.parent.mkdir()
        victim.write_text("mine")
    with pytest.raises(files.WriteError, match="this program did not write|not a file this program wrote"):
        demo_pair.write_model(str(models / "demo-oracle"), "demo-oracle")
    assert victim.read_text() == "mine"


def acceptance(generate, oracle, enc, n_new=40):
    """The acceptance rate of generate(ids, stats) over two held-out prompts of each kind, its text checked
    against greedy decoding's."""
    stats = Stats()
    for kind, prompt in held_out(n_per_kind=2):
        ids = encode(enc, prompt)[:48]
        assert list(generate(ids, stats)) == list(greedy_generate(oracle, ids, n_new)), kind
    return stats.kept_fraction


@pytest.mark.slow
def test_the_trained_exit_is_kept_more_often_than_the_untrained_one(learned):
    _, oracle, enc, read = learned
    layer = read["exit"].exit_layer
    trained = acceptance(lambda ids, s: early_exit_generate(read["exit"], oracle, ids, 40, stats=s), oracle, enc)
    untrained = acceptance(lambda ids, s: self_speculative_generate(oracle, ids, 40, n_layers_draft=layer, stats=s),
                           oracle, enc)
    assert trained > untrained + 0.05, (trained, untrained)


@pytest.mark.slow
def test_the_eagle_head_is_kept_about_as_often_as_the_distilled_draft(learned):
    draft, oracle, enc, read = learned
    eagle = acceptance(lambda ids, s: eagle_generate(read["eagle"], oracle, ids, 40, stats=s), oracle, enc)
    separate = acceptance(lambda ids, s: speculative_generate(draft, oracle, ids, 40, stats=s), oracle, enc)
    assert eagle > separate - 0.03, (eagle, separate)  # a chain of guesses: each step reads the last guess
