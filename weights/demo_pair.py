"""The offline demo pair: a small GPT-2 that writes English and a smaller one that guesses it, shipped here.

build_pair() writes models/demo-draft and models/demo-oracle from
assets/learned-pair/ (no network): two GPT-2 checkpoints in float16 trained on
the Python 3.11 documentation (workbench/tools/train_pair.py says how, and reproduces
them), and their tokenizer, GPT-2's own BPE cut to its first 8,191 tokens;
beside the oracle, the drafting heads trained on its own states
(workbench/tools/train_heads.py: demo-oracle/heads/eagle, medusa and exit, weights/heads.py), and beside the
draft, SpecDec++'s acceptance head on its states (workbench/tools/train_acceptance_head.py: demo-draft/heads/accept);
and models/demo-draft-4k, a second draft with a tokenizer of its own, 4,096 tokens
(workbench/tools/train_other_vocab_draft.py; speculative decoding across vocabularies: crossvocab.py).
Every shipped file is checked against assets/learned-pair/SHA256SUMS before it
is written, and a model directory is rewritten whenever it is not exactly the
shipped pair (an older demo pair, a half-written one, an edited file).
After that, --draft demo-draft --oracle demo-oracle works with every command.
"""

import contextlib
import hashlib
import os
import re
import shutil
import stat

from errors import printable
from weights import files, reading
from weights.checkpoint import CheckpointError
from weights.heads import DRAFT_HEADS, HEADS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "assets", "learned-pair")
DEMO_NAMES = ("demo-draft", "demo-oracle", "demo-draft-4k")
ROLES = {"demo-draft": "draft", "demo-oracle": "oracle", "demo-draft-4k": "draft-4k"}
MODEL_FILES = ("config.json", "model.safetensors")  # each role's, in assets/learned-pair/ROLE/
TOKENIZER_FILES = ("vocab.json", "merges.txt")       # shared, in assets/learned-pair/, copied into each model directory
OWN_TOKENIZER = {"demo-draft-4k"}                    # ... but these models' own, in assets/learned-pair/ROLE/
# The oracle's heads (weights/heads.HEADS) are in assets/learned-pair/heads/HEAD/, copied to demo-oracle/heads/HEAD/;
# the draft's (weights/heads.DRAFT_HEADS: SpecDec++'s acceptance head) there too, copied to demo-draft/heads/HEAD/.
# What the project writes in a demo model's directory: its files and workbench/speed/accelerate.py's converted copy, its
# record and the key that signs it (weights/derived.py), and the plan of how the machine runs it (its record too);
# in demo-oracle, the heads/ directory and one directory a head in it, each holding MODEL_FILES.
OWN_FILES = {*MODEL_FILES, *TOKENIZER_FILES, "model.blocked.safetensors", "model.blocked.json", "derived.key",
             "model.plan.json", "model.plan.record.json"}


def shipped_sums():
    """{path under assets/learned-pair: sha256} from SHA256SUMS: lines of a digest and a name, one for
    every file the pair is made of (CheckpointError otherwise, before any is used)."""
    path = os.path.join(ASSETS, "SHA256SUMS")
    restore = "the demo pair ships with the repository, restore it with git checkout"
    try:
        text = reading.read_text(path, "SHA256SUMS")
    except (OSError, ValueError, reading.ReadError) as e:  # missing, not UTF-8; a FIFO or a device, too big
        raise CheckpointError(f"{printable(path)}: cannot read it ({getattr(e, 'strerror', None) or e}): {restore}") from None
    sums = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or not re.fullmatch("[0-9a-f]{64}", fields[0]) or fields[1] in sums:
            raise CheckpointError(f"{printable(path)}: line {number} is not a SHA-256 and a file name of its own: {restore}")
        sums[fields[1]] = fields[0]
    for name in sorted({source for demo in DEMO_NAMES for source in sources(demo).values()}):
        if name not in sums:
            raise CheckpointError(f"{printable(path)} lists no {name}: {restore}")
    return sums


def sha256(path):
    """The SHA-256 of the regular file at path; ReadError for anything else (a FIFO is never waited on)."""
    digest = hashlib.sha256()
    with reading.open_regular(path) as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def same_file(path, digest):
    """True when path is a regular file whose SHA-256 is digest."""
    try:
        return sha256(path) == digest
    except (OSError, reading.ReadError):
        return False


def sources(name):
    """{file name in the model directory: its source under assets/learned-pair} for a name of DEMO_NAMES."""
    role = ROLES[name]
    own_heads = {"oracle": HEADS, "draft": DRAFT_HEADS}.get(role, ())
    heads = {f"heads/{head}/{f}": f"heads/{head}/{f}" for head in own_heads for f in MODEL_FILES}
    tokenizer = {f: os.path.join(role, f) if name in OWN_TOKENIZER else f for f in TOKENIZER_FILES}
    return {**{f: os.path.join(role, f) for f in MODEL_FILES}, **tokenizer, **heads}


def check_assets(sums):
    """Raise CheckpointError unless every shipped file is the one SHA256SUMS names."""
    for name in {source for demo in DEMO_NAMES for source in sources(demo).values()}:  # each listed: shipped_sums
        path = os.path.join(ASSETS, name)
        if not same_file(path, sums[name]):
            raise CheckpointError(f"{printable(path)} is not the file shipped with the repository (its SHA-256 differs): "
                                  "restore it with git checkout")


def is_current(model_dir, name, sums):
    """True when model_dir holds exactly the shipped files of the demo model `name`."""
    return all(same_file(os.path.join(model_dir, f), sums[source]) for f, source in sources(name).items())


def build_pair(models_dir):
    """Write models_dir/demo-draft, demo-oracle and demo-draft-4k unless they are the shipped ones; return the
    pair's paths, (demo-draft, demo-oracle)."""
    sums = shipped_sums()
    dirs = tuple(os.path.join(models_dir, name) for name in DEMO_NAMES)
    if all(os.path.isdir(d) and is_current(d, name, sums) for d, name in zip(dirs, DEMO_NAMES)):
        return dirs[:2]
    check_assets(sums)
    os.makedirs(models_dir, exist_ok=True)
    for model_dir, name in zip(dirs, DEMO_NAMES):
        if not (os.path.isdir(model_dir) and is_current(model_dir, name, sums)):
            write_model(model_dir, name)
    return dirs[:2]


def write_model(model_dir, name):
    """The demo model `name` written whole into model_dir: in a directory of this writer's own, then renamed
    into place; what was there before (an older demo pair) is moved aside and its files removed by name once
    the new one is in place, and only if it is a demo model this project wrote (why_not_ours): a user's file,
    link or FIFO there is refused."""
    problem = why_not_ours(model_dir)
    if problem:
        raise files.WriteError(problem)
    parent = os.path.dirname(os.path.abspath(model_dir))
    tmp = files.temp_dir(parent)
    try:
        for f, source in sources(name).items():
            try:
                os.makedirs(os.path.dirname(os.path.join(tmp, f)), exist_ok=True)  # heads/HEAD/: inside our own new directory
                with reading.open_regular(os.path.join(ASSETS, source)) as src, files.open_new(os.path.join(tmp, f)) as dest:
                    shutil.copyfileobj(src, dest)
            except OSError as e:  # a full disk: the file that failed is the destination, named as the user knows it
                raise OSError(e.errno, files.words_of(e), os.path.join(model_dir, f)) from None
        old = None
        if os.path.lexists(model_dir):
            old = files.temp_name(parent)
            os.rename(model_dir, old)
        os.rename(tmp, model_dir)
        tmp = None
        if old is not None:
            remove_model(old, name)
    finally:
        if tmp is not None:
            remove_model(tmp, name)


def remove_model(directory, name):
    """Remove a demo model's directory of this writer's own (one moved aside, or one never renamed into place)
    by the names of its files (OWN_FILES, the heads'), and the temporary files of killed writers in it;
    then its directories, those left empty. Nothing else is removed: what is left stays, in a directory of
    TEMP's name that the next writer in its parent removes once this process is gone (files.remove_stale)."""
    heads = [os.path.join("heads", head) for head in HEADS + DRAFT_HEADS]
    for folder, names in [(os.path.join(directory, d), MODEL_FILES) for d in heads] + [(directory, OWN_FILES)]:
        for f in names:
            with contextlib.suppress(OSError):  # not there; or planted, not a file: left where it is
                os.remove(os.path.join(folder, f))
        files.remove_stale(folder)
    for folder in [*heads, "heads", ""]:
        with contextlib.suppress(OSError):  # not there, or not empty
            os.rmdir(os.path.join(directory, folder))


def why_not_ours(model_dir):
    """Why what is at model_dir may not be replaced: anything but a directory (a link, a file, a FIFO),
    or a directory holding anything but a demo model's own regular files; or None (nothing there, or ours)."""
    shown = printable(model_dir, newlines=False)
    refuse = "move it away or choose another --models-dir"
    try:
        mode = os.lstat(model_dir).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(mode):
        return f"{shown} is {reading.file_type(mode)}, not a demo model this program wrote: {refuse}"
    problem = stranger_in(model_dir, OWN_FILES, refuse, dirs=("heads",))
    heads = os.path.join(model_dir, "heads")
    if problem is None and os.path.isdir(heads):  # a real directory: stranger_in refused a link there
        problem = stranger_in(heads, (), refuse, dirs=HEADS + DRAFT_HEADS)
        for head in HEADS + DRAFT_HEADS:
            if problem is None and os.path.isdir(os.path.join(heads, head)):
                problem = stranger_in(os.path.join(heads, head), MODEL_FILES, refuse)
    return problem


def stranger_in(directory, own_files, refuse, dirs=()):
    """Why `directory` holds what this program did not write, or None: every entry must be a regular file
    named in own_files or a temporary file of this program's writers (files.TEMP), or a real directory
    named in dirs."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name in dirs and entry.is_dir(follow_symlinks=False):
                continue
            if entry.name not in own_files and not files.is_temporary(entry.name):
                return (f"{printable(directory, newlines=False)} holds {printable(entry.name, newlines=False)}, "
                        f"which this program did not write: {refuse}")
            if not entry.is_file(follow_symlinks=False):
                return f"{printable(entry.path, newlines=False)} is not a file this program wrote: {refuse}"
    return None
