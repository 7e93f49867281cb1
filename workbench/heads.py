"""The trained heads some methods read (weights/heads.py reads the files), each read once per model.

The oracle's: EAGLE's head, Medusa's heads, Kangaroo's exit adapter (ORACLE/heads/NAME); the draft's:
SpecDec++'s acceptance head (DRAFT/heads/accept). A method names the heads it reads (registry.Method's head
and draft_head); missing_head says, before any work, which one is not there.
"""

import os

from beyond.eagle import EagleHead
from beyond.early_exit import ExitAdapter
from beyond.medusa import MedusaHeads
from beyond.specdec_pp import AcceptanceHead
from decoding import GenerationError
from gpt2 import nest
from weights import heads as trained_heads

# weights/heads.HEADS and DRAFT_HEADS, each read by its module's class
HEAD_CLASSES = {"eagle": EagleHead, "medusa": MedusaHeads, "exit": ExitAdapter, "accept": AcceptanceHead}
_read_heads = {}  # (head, the model's directory) -> (the model, its head): each head read once per model


def head_of(model, head):
    """The model's trained head `head` (the oracle's "eagle", "medusa", "exit"; the draft's "accept"), read from
    MODEL/heads/HEAD once."""
    key = (head, model.directory)
    if key not in _read_heads or _read_heads[key][0] is not model:
        if model.directory is None:
            raise GenerationError(f"{model.name} was not read from a directory: no trained {head} head to read")
        config, tensors = trained_heads.load(model.directory, head, model)
        _read_heads[key] = (model, HEAD_CLASSES[head](nest(tensors), config, model))
    return _read_heads[key][1]


def missing_head(method, oracle, draft=None):
    """Why `method` cannot run on `oracle` and `draft` (a head it reads is not beside its model), or None."""
    for head, model in ((method.head, oracle), (method.draft_head, draft)):
        if head is None or model is None and head == method.draft_head:
            continue
        directory = getattr(model, "directory", None)
        if directory is None or not os.path.isdir(trained_heads.head_dir(directory, head)):
            return f"{model.name} has no trained {head} head (heads/{head} beside it)"
    return None
