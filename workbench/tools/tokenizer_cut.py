"""GPT-2's byte-level BPE cut to its first merges: the learned pair's tokenizer.

In GPT-2's vocab.json a token's id is its merge rank: ids 0-255 are the 256
bytes, and id 256 + r is the token that merge r (line r of merges.txt, after
the #version line) makes. So the first N_TOKENS ids with the first
N_TOKENS - 256 merges are a complete, smaller BPE whose ids are GPT-2's own,
and <|endoftext|> takes the next id. Text that GPT-2 writes with a token past
the cut comes out here as the smaller tokens it is merged from.
"""

import json
import os


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT2_DIR = os.path.join(ROOT, "assets", "gpt2-tokenizer")
N_TOKENS = 8191  # + <|endoftext|> = a vocabulary of 8,192
ENDOFTEXT = "<|endoftext|>"


def cut_files(n_tokens=N_TOKENS, gpt2_dir=GPT2_DIR):
    """(vocab.json text, merges.txt text) of GPT-2's BPE cut to its first n_tokens tokens."""
    with open(os.path.join(gpt2_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(gpt2_dir, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    header, merges = lines[0], [line for line in lines[1:] if line.strip()]
    kept = {token: i for token, i in vocab.items() if i < n_tokens}
    kept[ENDOFTEXT] = n_tokens
    return json.dumps(kept, ensure_ascii=False), "\n".join([header] + merges[:n_tokens - 256]) + "\n"


def write_cut(directory, n_tokens=N_TOKENS):
    """Write vocab.json and merges.txt of the cut BPE into directory, as a model directory holds them."""
    vocab_text, merges_text = cut_files(n_tokens)
    os.makedirs(directory, exist_ok=True)
    for name, text in (("vocab.json", vocab_text), ("merges.txt", merges_text)):
        with open(os.path.join(directory, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def cut_tokenizer_encoding(n_tokens=N_TOKENS):
    """The cut BPE as the project reads it: its files written to a temporary directory, loaded by its own loader."""
    import sys
    import tempfile
    sys.path.insert(0, ROOT)
    from weights.tokenizer import load_tokenizer  # noqa: E402
    with tempfile.TemporaryDirectory() as directory:
        write_cut(directory, n_tokens)
        return load_tokenizer(directory)
