"""The models the checks run on, made once per run in a temporary directory: two tiny random pairs, a tiny pair of
two vocabularies (exercise 27), and the shipped learned pair (assets/learned-pair: English, the Python
documentation) with its held-out prompts."""

import atexit
import functools
import os
import shutil
import tempfile

import numpy as np

import gpt2
from weights import checkpoint

from .running import ROOT


@functools.lru_cache(maxsize=1)
def models_dir():
    base = tempfile.mkdtemp(prefix="exercises-")
    atexit.register(shutil.rmtree, base, True)
    return base


@functools.lru_cache(maxsize=1)
def tiny_pair():
    """A tiny random oracle and a draft that is a noisy copy of it (so they agree often, not always)."""
    base = models_dir()
    config = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 1024, "vocab_size": 272}
    oracle_dir = checkpoint.random_checkpoint(os.path.join(base, "oracle"), config, seed=2, scale=0.3)
    draft_dir = noisy_copy(oracle_dir, os.path.join(base, "draft"), 0.015, seed=0)
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir)


def noisy_copy(source_dir, draft_dir, noise, seed):
    """A copy of the checkpoint in source_dir with Gaussian noise of scale `noise` added to every weight."""
    tensors = checkpoint.load_safetensors(os.path.join(source_dir, "model.safetensors"))
    rng = np.random.default_rng(seed)
    os.makedirs(draft_dir)
    shutil.copy(os.path.join(source_dir, "config.json"), draft_dir)
    checkpoint.save_safetensors(os.path.join(draft_dir, "model.safetensors"), {k: t.shape for k, t in tensors.items()},
                                lambda k: tensors[k] + np.float32(noise) * rng.standard_normal(tensors[k].shape, dtype=np.float32))
    return draft_dir


@functools.lru_cache(maxsize=1)
def short_pair():
    """A tiny pair whose context window is 24 positions: a run can end exactly at the end of the context."""
    base = models_dir()
    config = {"n_layer": 2, "n_head": 4, "n_embd": 32, "n_positions": 24, "vocab_size": 64}
    oracle_dir = checkpoint.random_checkpoint(os.path.join(base, "short-oracle"), config, seed=5, scale=0.3)
    draft_dir = noisy_copy(oracle_dir, os.path.join(base, "short-draft"), 0.02, seed=3)
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir)


SAMPLING_V = 6  # small enough to enumerate every 3-token continuation (6^3 of them), as tests/test_sps.py does


@functools.lru_cache(maxsize=1)
def sampling_pair():
    """A draft p and a target q over a vocabulary of 6 tokens: the SpS checks enumerate their distributions."""
    config = {"n_head": 2, "n_embd": 16, "n_positions": 16, "vocab_size": SAMPLING_V}
    return tuple(gpt2.GPT2.from_pretrained(checkpoint.random_checkpoint(
        os.path.join(models_dir(), name), {**config, "n_layer": n_layer}, seed=seed, scale=0.5))
        for name, seed, n_layer in (("p", 21, 1), ("q", 22, 2)))


@functools.lru_cache(maxsize=1)
def three_pair():
    """A draft p and a target q over a vocabulary of 3: a round's whole output distribution is enumerable."""
    config = {"n_head": 2, "n_embd": 16, "n_positions": 16, "vocab_size": 3}
    return tuple(gpt2.GPT2.from_pretrained(checkpoint.random_checkpoint(
        os.path.join(models_dir(), name), {**config, "n_layer": n_layer}, seed=seed, scale=0.6))
        for name, seed, n_layer in (("p3", 31, 1), ("q3", 32, 2)))


class TableModel:
    """A model whose next-token distribution is a function of the text, dist(tokens) -> float32 probabilities [V],
    exact zeros and ones included (a GPT-2 has neither). forward() takes a KVCache as gpt2.GPT2.forward does."""

    def __init__(self, vocab_size, dist, name="a table model", n_positions=1024):
        self.vocab_size, self.dist, self.name, self.n_positions = vocab_size, dist, name, n_positions
        self.texts = {}  # id(cache) -> the tokens fed into it, position by position
        self.read = []   # what each forward read, the cache's tokens and those fed (a check's diagnosis looks)

    def forward(self, ids, kvcache=None, n_logits=None, **_):  # -> [n_logits, vocab_size]
        ids = [int(t) for t in np.asarray(ids).reshape(-1)]
        held = [] if kvcache is None else self.texts.get(id(kvcache), [])[:kvcache.n_tokens()]
        context = held + ids
        self.read.append(list(context))
        if kvcache is not None:
            self.texts[id(kvcache)] = context
            kvcache.commit(len(ids))
        rows = [logits_of(self.dist(context[:len(held) + i + 1])) for i in range(len(ids))]
        return np.array(rows[-(n_logits or len(rows)):], np.float32)


def logits_of(probs):
    """Logits whose softmax is probs, a zero probability exactly zero (exp(-1e30 - max) is 0 in float32)."""
    probs = np.asarray(probs, np.float32)
    return np.where(probs > 0, np.log(np.where(probs > 0, probs, 1)), np.float32(-1e30)).astype(np.float32)


def constant_rng(top=False):
    """A NumPy Generator whose every draw is the same: r = 0.0 exactly, or (top) the largest double below 1. Its
    PCG64 sits at a fixed point of its step (state = state * multiplier + increment), so its output never changes;
    an output of 1024, not 0, gives r = 0.0 and keeps rng.integers from rejecting every draw."""
    multiplier, modulus = 0x2360ED051FC65DA44385DF649FCCF645, 2 ** 128
    state = 2 ** 64 - 1 if top else 1024  # PCG64's output is state's two halves xor-ed: the low half here
    bit_generator = np.random.PCG64(0)
    bit_generator.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": state * (1 - multiplier) % modulus},
                           "has_uint32": 0, "uinteger": 0}
    return np.random.Generator(bit_generator)


@functools.lru_cache(maxsize=1)
def close_draft():
    """A draft close to sampling_pair's target q (a noisy copy of it): a round of it keeps all its drafts often,
    so the bonus token comes often."""
    sampling_pair()
    return gpt2.GPT2.from_pretrained(noisy_copy(os.path.join(models_dir(), "q"), os.path.join(models_dir(), "p-close"),
                                                0.02, seed=1))


@functools.lru_cache(maxsize=1)
def learned_pair():
    """(draft, oracle, encode): the shipped learned pair, written from assets/ into this run's directory."""
    from weights.demo_pair import build_pair
    from weights.tokenizer import encode, load_tokenizer
    draft_dir, oracle_dir = build_pair(models_dir())
    enc = load_tokenizer(oracle_dir)
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir), lambda text: encode(enc, text)


@functools.lru_cache(maxsize=1)
def held_out_prompts():
    """((kind, prompt ids), ...): the first held-out prompt of each kind, cut to 24 tokens (a quick check)."""
    import json
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    encode, kinds = learned_pair()[2], {}
    for entry in prompts:
        kinds.setdefault(entry["kind"], tuple(encode(entry["prompt"])[:24]))
    return tuple(kinds.items())



# --- two vocabularies (exercise 27): a toy oracle and a draft of another byte-level BPE ---------------------------
# As tests/test_crossvocab.py builds them: the oracle's BPE is tests/conftest.py's tiny one; the draft's has other
# merges (" the" made another way, "é" and " é", the first two bytes of "—", a token across the end of "é" and a
# space, letter pairs the oracle lacks), so the two split text differently and agree only in part.

ORACLE_MERGES = ["h e", "Ġ t", "Ġt he", "i n", "Ġ a", "e r", "Ġ s", "o n", "Ġa n", "Ġan d", "r e", "Ġ o",
                 "Ġo f", "a t", "e n"]
DRAFT_MERGES = ["t h", "Ġ th", "Ġth e", "h e", "i n", "Ã ©", "Ġ Ã©", "â Ģ", "© Ġ", "c a", "ca f"]
DRAFT_MERGES += [f"{a} {b}" for i, a in enumerate("abcdefghijklmnopqrstuvwxyz")
                 for j, b in enumerate("abcdefghijklmnopqrstuvwxyz")
                 if (i + 2 * j) % 3 == 0 and a + b not in {"th", "he", "in", "ca"}]


def write_bpe(model_dir, merges):
    """vocab.json + merges.txt of a byte-level BPE of these merges (GPT-2's notation), <|endoftext|> the last id."""
    import json
    from weights import files
    from weights.tokenizer import ENDOFTEXT, bytes_to_unicode
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for merge in merges:
        vocab[merge.replace(" ", "")] = len(vocab)
    vocab[ENDOFTEXT] = len(vocab)
    os.makedirs(model_dir, exist_ok=True)
    files.write_text(os.path.join(model_dir, "vocab.json"), json.dumps(vocab, ensure_ascii=False))
    files.write_text(os.path.join(model_dir, "merges.txt"), "#version: 0.2\n" + "\n".join(merges) + "\n")
    return model_dir


def translated_copy(oracle_dir, draft_dir, merges, noise, seed):
    """A draft of another vocabulary made from the oracle: its weights plus noise, each draft token's embedding
    row the oracle's row of the token with the same bytes, or of the oracle's token for its longest first bytes."""
    import json
    from crossvocab import token_id
    from weights import files
    from weights.tokenizer import load_tokenizer
    write_bpe(draft_dir, merges)
    draft_enc, oracle_enc = load_tokenizer(draft_dir), load_tokenizer(oracle_dir)
    with open(os.path.join(oracle_dir, "config.json"), encoding="utf-8") as f:
        config = {**json.load(f), "vocab_size": draft_enc.n_vocab}
    tensors = dict(checkpoint.load_safetensors(os.path.join(oracle_dir, "model.safetensors")))
    rows = []
    for d in range(draft_enc.n_vocab):
        token = draft_enc.decode_single_token_bytes(d)
        rows.append(next(o for n in range(len(token), 0, -1) if (o := token_id(oracle_enc, token[:n])) is not None))
    tensors["wte.weight"] = tensors["wte.weight"][rows]
    rng = np.random.default_rng(seed)
    files.write_text(os.path.join(draft_dir, "config.json"), json.dumps(config))
    noisy = {k: t + np.float32(noise) * rng.standard_normal(t.shape, dtype=np.float32) for k, t in tensors.items()}
    checkpoint.save_safetensors(os.path.join(draft_dir, "model.safetensors"), {k: t.shape for k, t in noisy.items()},
                                noisy.__getitem__)
    return draft_dir


@functools.lru_cache(maxsize=1)
def crossvocab_pair():
    """(draft, oracle, draft_enc, oracle_enc): a tiny random oracle of a tiny BPE, and a draft in a BPE of other
    merges and another size, close to the oracle where the two vocabularies share tokens."""
    from weights.tokenizer import load_tokenizer
    base = models_dir()
    config = {"n_layer": 3, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": 256 + len(ORACLE_MERGES) + 1}
    oracle_dir = write_bpe(checkpoint.random_checkpoint(os.path.join(base, "cv-oracle"), config, seed=2, scale=0.3),
                           ORACLE_MERGES)
    draft_dir = translated_copy(oracle_dir, os.path.join(base, "cv-draft"), DRAFT_MERGES, noise=0.01, seed=6)
    return (gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir),
            load_tokenizer(draft_dir), load_tokenizer(oracle_dir))
