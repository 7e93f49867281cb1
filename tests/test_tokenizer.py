"""The offline tokenizer: tiktoken's BPE built from a model's vocab.json + merges.txt."""

import os

import pytest

from conftest import TINY_VOCAB_SIZE, write_tiny_bpe
from tokenizer import TokenizerError, encode, load_tokenizer

TEXTS = ["the cat and the hat", "", " leading and trailing  ", "naïve café", "中文字符", "emoji 🙂👍🏽",
         "tabs\tand\nnewlines\r\n", "it's they're we'll", "12345 + 67 = 12412", "<|endoftext|>next"]


@pytest.fixture(scope="module")
def enc(tmp_path_factory):
    return load_tokenizer(write_tiny_bpe(str(tmp_path_factory.mktemp("bpe"))))


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(enc, text):
    assert enc.decode(encode(enc, text)) == text


def test_merges_are_applied_and_the_vocab_is_complete(enc):
    assert len(encode(enc, " the")) == 1
    assert len(encode(enc, " and")) == 1
    assert enc.n_vocab == TINY_VOCAB_SIZE


def test_endoftext_is_the_special_token(enc):
    assert encode(enc, "<|endoftext|>") == [TINY_VOCAB_SIZE - 1]


def test_merges_that_disagree_with_the_vocab_are_an_error(tmp_path):
    write_tiny_bpe(str(tmp_path))
    with open(tmp_path / "merges.txt", "a") as f:
        f.write("x y\n")
    with pytest.raises(TokenizerError, match="does not match vocab.json"):
        load_tokenizer(str(tmp_path))


def test_missing_files_are_an_error(tmp_path):
    with pytest.raises(TokenizerError, match="cannot read the tokenizer files"):
        load_tokenizer(str(tmp_path))


REAL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "gpt2")


@pytest.mark.skipif(not os.path.isfile(os.path.join(REAL, "vocab.json")), reason="real gpt2 tokenizer files not downloaded (models/gpt2)")
def test_real_gpt2_vocabulary_round_trip():
    enc = load_tokenizer(REAL)
    assert enc.n_vocab == 50257
    assert encode(enc, "Hello world") == [15496, 995]  # GPT-2's well-known ids
    for text in TEXTS:
        assert enc.decode(encode(enc, text)) == text
