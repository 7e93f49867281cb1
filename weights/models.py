"""Where the models live: a name or a directory -> a checkpoint directory.

OpenAI's four GPT-2 sizes are downloaded into models/NAME on first use
(download.py); the offline demo pair, demo-draft and demo-oracle, and
demo-draft-4k, a draft with a vocabulary of its own, are written there on
first use (demo_pair.py); any directory in the Hugging Face
layout (config.json + model.safetensors, and vocab.json + merges.txt for the
command line) can be given instead.
"""

import os

from weights import demo_pair, download
from weights.checkpoint import CheckpointError
from weights.download import MODEL_NAMES

DEFAULT_MODELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")


LOOKUP_ORDER = ("a model is a name or a directory: a name (gpt2, gpt2-medium, gpt2-large, gpt2-xl, demo-draft, "
                "demo-oracle, demo-draft-4k) is looked up in --models-dir, and downloaded (or, for the demo pair, written) there "
                "if missing; anything else is a checkpoint directory (to use a directory that has a name of these, "
                "write it as a path: ./gpt2)")


def resolve_model_dir(name_or_path, models_dir=None):
    """A checkpoint directory for a model name or path, in LOOKUP_ORDER: a known name is always the
    models directory's (a folder ./gpt2 in the working directory does not stand in for it)."""
    models_dir = models_dir or DEFAULT_MODELS_DIR
    if name_or_path in demo_pair.DEMO_NAMES:
        demo_pair.build_pair(models_dir)  # all the demo models at once, each checked against SHA256SUMS
        return os.path.join(models_dir, name_or_path)
    if name_or_path in MODEL_NAMES:
        return download.download(name_or_path, models_dir)
    if os.path.isdir(name_or_path):
        for f in ("config.json", "model.safetensors"):
            if not os.path.isfile(os.path.join(name_or_path, f)):
                raise CheckpointError(f"{name_or_path} has no {f}: a model directory needs config.json and model.safetensors")
        return name_or_path
    raise CheckpointError(f"unknown model {name_or_path!r}: use one of {', '.join(MODEL_NAMES + demo_pair.DEMO_NAMES)} "
                          "or a directory with config.json and model.safetensors")


def shown_dir(model_dir):
    """A model directory as messages show it: relative to the working directory when inside it."""
    relative = os.path.relpath(os.path.abspath(model_dir))
    return relative if not relative.startswith("..") else os.path.abspath(model_dir)
