"""The offline demo pair: a small GPT-2 that writes English and a smaller one that guesses it, shipped here.

build_pair() writes models/demo-draft and models/demo-oracle from
assets/learned-pair/ (no network): two GPT-2 checkpoints in float16 trained on
the Python 3.11 documentation (tools/train_pair.py says how, and reproduces
them), and their tokenizer, GPT-2's own BPE cut to its first 8,191 tokens.
Every shipped file is checked against assets/learned-pair/SHA256SUMS before it
is written, and a model directory is rewritten whenever it is not exactly the
shipped pair (an older demo pair, a half-written one, an edited file).
After that, --draft demo-draft --oracle demo-oracle works with every command.
"""

import hashlib
import os
import shutil

from errors import printable
from weights import files
from weights.checkpoint import CheckpointError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "assets", "learned-pair")
DEMO_NAMES = ("demo-draft", "demo-oracle")
ROLES = {"demo-draft": "draft", "demo-oracle": "oracle"}
MODEL_FILES = ("config.json", "model.safetensors")  # each role's, in assets/learned-pair/ROLE/
TOKENIZER_FILES = ("vocab.json", "merges.txt")       # shared, in assets/learned-pair/, copied into each model directory


def shipped_sums():
    """{path under assets/learned-pair: sha256} from SHA256SUMS."""
    path = os.path.join(ASSETS, "SHA256SUMS")
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.split() for line in f if line.strip()]
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read it ({e.strerror or e}): the demo pair ships with the repository, "
                              "restore it with git checkout") from None
    return {name: digest for digest, name in lines}


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sources(name):
    """{file name in the model directory: its source under assets/learned-pair} for demo-draft or demo-oracle."""
    role = ROLES[name]
    return {**{f: os.path.join(role, f) for f in MODEL_FILES}, **{f: f for f in TOKENIZER_FILES}}


def check_assets(sums):
    """Raise CheckpointError unless every shipped file is the one SHA256SUMS names."""
    for name in {source for demo in DEMO_NAMES for source in sources(demo).values()}:
        path = os.path.join(ASSETS, name)
        if name not in sums:
            raise CheckpointError(f"{os.path.join(ASSETS, 'SHA256SUMS')} lists no {name}")
        if not os.path.isfile(path) or sha256(path) != sums[name]:
            raise CheckpointError(f"{printable(path)} is not the file shipped with the repository (its SHA-256 differs): "
                                  "restore it with git checkout")


def is_current(model_dir, name, sums):
    """True when model_dir holds exactly the shipped files of the demo model `name`."""
    return all(os.path.isfile(os.path.join(model_dir, f)) and sha256(os.path.join(model_dir, f)) == sums[source]
               for f, source in sources(name).items())


def build_pair(models_dir):
    """Write models_dir/demo-draft and models_dir/demo-oracle unless they are the shipped pair; return their paths."""
    sums = shipped_sums()
    dirs = tuple(os.path.join(models_dir, name) for name in DEMO_NAMES)
    if all(os.path.isdir(d) and is_current(d, name, sums) for d, name in zip(dirs, DEMO_NAMES)):
        return dirs
    check_assets(sums)
    os.makedirs(models_dir, exist_ok=True)
    for model_dir, name in zip(dirs, DEMO_NAMES):
        if not (os.path.isdir(model_dir) and is_current(model_dir, name, sums)):
            write_model(model_dir, name)
    return dirs


def write_model(model_dir, name):
    """The demo model `name` written whole into model_dir: in a directory of this writer's own, then renamed
    into place; what was there before (an older demo pair) is removed once the new one is in place."""
    parent = os.path.dirname(os.path.abspath(model_dir))
    tmp = files.temp_dir(parent)
    try:
        for f, source in sources(name).items():
            shutil.copyfile(os.path.join(ASSETS, source), os.path.join(tmp, f))
        old = None
        if os.path.lexists(model_dir):
            old = tmp + ".old"
            os.rename(model_dir, old)
        os.rename(tmp, model_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
