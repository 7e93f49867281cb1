"""workbench/tools/train_bpe.py, the byte-level BPE trainer of the draft with a tokenizer of its own (draft-4k): its merges
are the most frequent pairs with the stated tie-break, its files are GPT-2's and load through the project's
tokenizer, which splits every training word as the trainer did; and the shipped draft-4k tokenizer."""

import json
import os
import random
from collections import Counter

import pytest
import regex

from fixtures import ROOT, gpt2_pair_bpe
from workbench.tools import train_bpe
from weights.tokenizer import ENDOFTEXT, bytes_to_unicode, load_tokenizer

SHIPPED = os.path.join(ROOT, "assets", "learned-pair", "draft-4k")


def reference_merges(words, n_merges, tie=min):
    """The algorithm as the docstring states it, slowly: recount every pair of every word at each merge, take
    the most frequent (ties: `tie` of the pairs, byte order), rewrite every word as tiktoken reads the vocabulary."""
    parts = {w: [bytes([b]) for b in w] for w in words}
    ranks, merges = {}, []
    for _ in range(n_merges):
        counts = Counter()
        for w, p in parts.items():
            for pair in zip(p, p[1:]):
                counts[pair] += words[w]
        if not counts:
            break
        top = max(counts.values())
        pair = tie(p for p, c in counts.items() if c == top)
        ranks[pair[0] + pair[1]] = 256 + len(merges)
        merges.append(pair)
        parts = {w: train_bpe.merge_word(p, ranks) for w, p in parts.items()}
    return merges


def toy_words(seed=0, n=300):
    rng = random.Random(seed)
    text = " ".join(rng.choice(["the", "then", "there", "he", "she", "hen", "ten", "net", "nest", "test", "set",
                                "  ", "(x)", "1984", "éte"]) for _ in range(n))
    return train_bpe.count_words([text, text[::-1]])


def test_the_merges_of_a_known_example():
    """Hugging Face's course example: hug 10, pug 5, pun 12, bun 4, hugs 5 (counted by hand: u+g 20, u+n 16, h+ug 15)."""
    words = Counter({b"hug": 10, b"pug": 5, b"pun": 12, b"bun": 4, b"hugs": 5})
    assert train_bpe.train(words, 3) == [(b"u", b"g"), (b"u", b"n"), (b"h", b"ug")]


def test_ties_go_to_the_pair_first_in_byte_order_whatever_the_order_of_the_words():
    words = Counter({b"cd": 3, b"ab": 3, b"ba": 1})
    assert train_bpe.train(words, 2) == [(b"a", b"b"), (b"c", b"d")]
    backwards = Counter(dict(reversed(list(words.items()))))
    assert train_bpe.train(backwards, 2) == [(b"a", b"b"), (b"c", b"d")]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_incremental_counts_make_the_merges_of_recounting_from_scratch(seed):
    words = toy_words(seed)
    assert train_bpe.train(words, 60) == reference_merges(words, 60)


def test_negative_control_the_other_tie_break_is_told_apart():
    words = toy_words(0)
    assert train_bpe.train(words, 60) != reference_merges(words, 60, tie=max)


def test_the_files_are_gpt2s_and_the_project_splits_every_training_word_as_the_trainer_did(tmp_path):
    words = toy_words(3)
    merges = train_bpe.train(words, 40)
    vocab_text, merges_text = train_bpe.gpt2_files(merges)
    (tmp_path / "vocab.json").write_text(vocab_text, encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges_text, encoding="utf-8")
    enc = load_tokenizer(str(tmp_path))  # its checks: ids are merge ranks, every merge makes its token
    assert enc.n_vocab == 256 + 40 + 1 and enc.eot_token == 296
    vocab = json.loads(vocab_text)
    gpt2_bytes = json.loads(open(os.path.join(ROOT, "assets", "gpt2-tokenizer", "vocab.json"), encoding="utf-8").read())
    assert all(vocab[c] == gpt2_bytes[c] for c in bytes_to_unicode().values())  # ids 0-255 as in GPT-2
    ranks = {bytes([b]): b for b in range(256)}
    for left, right in merges:
        ranks[left + right] = len(ranks)
    for word in words:
        expected = train_bpe.merge_word([bytes([b]) for b in word], ranks)
        assert [enc.decode_single_token_bytes(t) for t in enc.encode_ordinary(word.decode())] == expected


def test_the_shipped_tokenizer_is_its_own_and_reads_the_same_through_merges_as_through_ranks():
    enc = load_tokenizer(SHIPPED)
    with open(os.path.join(SHIPPED, "config.json")) as f:
        assert enc.n_vocab == json.load(f)["vocab_size"] == 4096
    with open(os.path.join(SHIPPED, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(ROOT, "assets", "learned-pair", "vocab.json"), encoding="utf-8") as f:
        oracle_vocab = json.load(f)
    assert vocab[ENDOFTEXT] == 4095
    assert set(vocab) != set(oracle_vocab) and set(vocab) - set(oracle_vocab)  # tokens the oracle's has not
    with open(os.path.join(SHIPPED, "merges.txt"), encoding="utf-8") as f:
        bpe_ranks = {tuple(line.split()): r for r, line in enumerate(f.read().split("\n")[1:]) if line}
    alphabet = bytes_to_unicode()
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        texts = [entry["prompt"] for entry in json.load(f)]
    for text in texts:
        ids = enc.encode_ordinary(text)
        assert enc.decode(ids) == text
        pieces = regex.findall(train_bpe.GPT2_PATTERN, text)
        by_merges = [t for p in pieces for t in gpt2_pair_bpe("".join(alphabet[b] for b in p.encode()), bpe_ranks)]
        assert by_merges == ["".join(alphabet[b] for b in enc.decode_single_token_bytes(i)) for i in ids]


def test_the_shipped_draft_4k_is_the_summed_files_a_gpt2_of_its_own_vocabulary():
    from gpt2 import GPT2
    from weights import demo_pair
    from weights.checkpoint import open_safetensors
    from weights.tokenizer import check_vocabulary
    sums = demo_pair.shipped_sums()
    for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt"):
        assert demo_pair.same_file(os.path.join(SHIPPED, name), sums[f"draft-4k/{name}"]), name
    entries, metadata, _ = open_safetensors(os.path.join(SHIPPED, "model.safetensors"))
    assert metadata == {"format": "pt"} and "lm_head.weight" not in entries  # the hub's format, the LM head tied to wte
    model = GPT2.from_pretrained(SHIPPED)
    assert (model.n_layer, model.n_head, model.n_embd, model.n_positions) == (1, 2, 128, 512)
    check_vocabulary(load_tokenizer(SHIPPED), model.vocab_size, SHIPPED)
