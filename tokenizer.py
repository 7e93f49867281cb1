"""GPT-2's byte-level BPE through tiktoken, built offline from a model's own files.

tiktoken.get_encoding("gpt2") downloads its tables on first use. Every GPT-2
checkpoint directory already has them as vocab.json + merges.txt, so we build
the same Encoding from those: no network at run time.

In GPT-2's vocab.json each token is written with a printable stand-in for every
byte (bytes_to_unicode below), and a token's id is its BPE merge rank, which is
exactly what tiktoken calls mergeable_ranks once the stand-ins are undone.
"""

import json
import os

import tiktoken

from errors import UserError

# GPT-2's pre-tokenizer: contractions, letters, numbers, other symbols, spaces.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ENDOFTEXT = "<|endoftext|>"


class TokenizerError(UserError):
    """vocab.json / merges.txt missing or inconsistent."""


def bytes_to_unicode():
    """GPT-2's map from each byte to a printable character (vocab.json's alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:  # control characters and spaces get a stand-in from 256 upwards
            chars[b] = chr(256 + n)
            n += 1
    return chars


def load_tokenizer(model_dir):
    """A tiktoken Encoding from model_dir/vocab.json and model_dir/merges.txt."""
    vocab_path, merges_path = os.path.join(model_dir, "vocab.json"), os.path.join(model_dir, "merges.txt")
    try:
        with open(vocab_path, encoding="utf-8") as f:
            vocab = json.load(f)
        with open(merges_path, encoding="utf-8") as f:
            merges = [line.split() for line in f.read().split("\n")[1:] if line.strip()]  # line 0 is a version comment
    except (OSError, ValueError) as e:
        raise TokenizerError(f"cannot read the tokenizer files in {model_dir} ({e})") from None

    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    special = {tok: i for tok, i in vocab.items() if tok == ENDOFTEXT}
    try:
        ranks = {bytes(byte_of[c] for c in tok): i for tok, i in vocab.items() if tok not in special}
    except KeyError:
        raise TokenizerError(f"{vocab_path}: not a GPT-2 byte-level vocabulary") from None

    # The ids must be the merge ranks: the 256 single bytes first, then one
    # token per line of merges.txt, in order. Check it rather than assume it.
    for rank, pair in enumerate(merges, start=256):
        if len(pair) != 2 or vocab.get(pair[0] + pair[1]) != rank:
            raise TokenizerError(f"{merges_path}: merge {rank - 255} ({' '.join(pair)}) does not match vocab.json")
    return tiktoken.Encoding(name=f"gpt2-bpe:{os.path.abspath(model_dir)}", pat_str=GPT2_PATTERN,
                             mergeable_ranks=ranks, special_tokens=special)


def encode(enc, text):
    """Token ids of text; "<|endoftext|>" in it is the special token, as GPT-2 was trained."""
    return enc.encode(text, allowed_special=set(enc.special_tokens_set))
