"""Where the models live: a name or a directory -> a checkpoint directory.

OpenAI's four GPT-2 sizes are downloaded into models/NAME on first use
(download_weights.py); the offline demo pair, demo-draft and demo-oracle, is
written there on first use (demo.py); any directory in the Hugging Face layout
(config.json + model.safetensors, and vocab.json + merges.txt for the CLI)
can be given instead.
"""

import os

import demo
import download_weights
from checkpoint import CheckpointError
from download_weights import DEFAULT_MODELS_DIR, MODEL_NAMES


def resolve_model_dir(name_or_path, models_dir=None):
    """A checkpoint directory for a model name or path, downloading a named model if needed."""
    if os.path.isdir(name_or_path):
        for f in ("config.json", "model.safetensors"):
            if not os.path.isfile(os.path.join(name_or_path, f)):
                raise CheckpointError(f"{name_or_path} has no {f}: a model directory needs config.json and model.safetensors")
        return name_or_path
    models_dir = models_dir or DEFAULT_MODELS_DIR
    if name_or_path in demo.DEMO_NAMES:
        return demo.build_pair(models_dir)[demo.DEMO_NAMES.index(name_or_path)]
    if name_or_path not in MODEL_NAMES:
        raise CheckpointError(f"unknown model {name_or_path!r}: use one of {', '.join(MODEL_NAMES + demo.DEMO_NAMES)} "
                              "or a directory with config.json and model.safetensors")
    return download_weights.download(name_or_path, models_dir)
