"""The offline tokenizer: tiktoken's BPE built from a model's vocab.json + merges.txt."""

import json
import os
import random
import tempfile

import pytest

from fixtures import TINY_VOCAB_SIZE, write_tiny_bpe
from weights.tokenizer import ENDOFTEXT, TokenizerError, check_vocabulary, encode, endoftext_id, load_tokenizer

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


# ---------------------------------------------------------------------------
# Every file checked before tiktoken sees it: a TokenizerError naming file, token or line, and problem
# ---------------------------------------------------------------------------

def tiny_vocab():
    """conftest's tiny vocab.json, as a dict."""
    with tempfile.TemporaryDirectory() as model_dir:
        with open(os.path.join(write_tiny_bpe(model_dir), "vocab.json"), encoding="utf-8") as f:
            return json.load(f)


def with_vocab(tmp_path, vocab):
    """A tiny BPE directory whose vocab.json is `vocab` (any JSON value, or text)."""
    write_tiny_bpe(str(tmp_path))
    with open(tmp_path / "vocab.json", "w", encoding="utf-8") as f:
        f.write(vocab if isinstance(vocab, str) else json.dumps(vocab, ensure_ascii=False))
    return str(tmp_path)


def changed(**changes):
    def change(vocab):
        vocab.update(changes)
        return vocab
    return change


BAD_VOCABS = {
    "a list": (lambda v: list(v), "not an object of token: id"),
    "null": (lambda v: None, "not an object of token: id"),
    "an id a float": (changed(he=256.0), "token 'he' has id 256.0; the ids must be 0..271"),
    "an id negative": (changed(he=-1), "token 'he' has id -1"),
    "an id huge": (changed(he=10 ** 12), "token 'he' has id 1000000000000"),
    "an id a string": (changed(he="256"), "token 'he' has id \"256\""),
    "an id a boolean": (changed(he=True), "token 'he' has id true"),
    "an id twice": (changed(he=0), "tokens 'Ā' and 'he' both have id 0"),
    "ids not 0..n-1": (lambda v: {**v, "zz": len(v) + 5}, "token 'zz' has id 277; the ids must be 0..272"),
    "a token outside the byte alphabet": (lambda v: {**{k: i for k, i in v.items() if k != "en"}, "e n": v["en"]},
                                          "token 'e n' is not written in GPT-2's byte alphabet"),
    "a byte without a token": (lambda v: {("xx" if k == "!" else k): i for k, i in v.items()}, "no token for the byte written '!'"),
    "an extra token no merge makes": (lambda v: {**{k: i for k, i in v.items() if k != "<|endoftext|>"}, "xyz": 271, "<|endoftext|>": 272},
                                      "has 15 merges, so vocab.json should have 272 tokens, not 273"),
}


@pytest.mark.parametrize("case", BAD_VOCABS)
def test_a_bad_vocab_json_is_a_tokenizer_error_naming_file_token_and_problem(tmp_path, case):
    change, message = BAD_VOCABS[case]
    model_dir = with_vocab(tmp_path, change(tiny_vocab()))
    with pytest.raises(TokenizerError) as e:
        load_tokenizer(model_dir)
    assert str(e.value).startswith(str(tmp_path)) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("text", ["{", '{"a": ' * 100_000, "[" * 100_000], ids=["unclosed", "objects 100000 deep", "lists 100000 deep"])
def test_a_vocab_json_that_is_not_json_is_a_tokenizer_error(tmp_path, text):
    with pytest.raises(TokenizerError, match="vocab.json: not valid JSON|not an object"):
        load_tokenizer(with_vocab(tmp_path, text))


def test_a_vocab_json_that_is_not_utf8_is_a_tokenizer_error(tmp_path):
    write_tiny_bpe(str(tmp_path))
    with open(tmp_path / "vocab.json", "wb") as f:
        f.write(b'{"\xff": 0}')
    with pytest.raises(TokenizerError, match="cannot read the tokenizer files"):
        load_tokenizer(str(tmp_path))


BAD_MERGES = {
    "three tokens on a line": ("Ġt he x", "line 4 is not two tokens separated by a space: 'Ġt he x'"),
    "one token on a line": ("Ġthe", "line 4 is not two tokens separated by a space"),
    "a merge vocab.json lacks": ("Ġt hx", "line 4 (Ġt hx) does not match vocab.json: vocab.json has no token 'Ġthx'"),
    "merges out of order": ("i n", "line 4 (i n) does not match vocab.json: vocab.json gives 'in' id 259, not the merge's rank 258"),
}


@pytest.mark.parametrize("case", BAD_MERGES)
def test_a_bad_merges_txt_is_a_tokenizer_error_naming_file_line_and_problem(tmp_path, case):
    line, message = BAD_MERGES[case]
    write_tiny_bpe(str(tmp_path))
    with open(tmp_path / "merges.txt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    lines[3] = line  # line 4: the third merge, "Ġt he"
    with open(tmp_path / "merges.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    with pytest.raises(TokenizerError) as e:
        load_tokenizer(str(tmp_path))
    assert str(e.value).startswith(str(tmp_path / "merges.txt")) and message in str(e.value), str(e.value)


def test_a_merge_of_a_token_made_later_is_refused(tmp_path):
    # "Ġ an" as the 5th merge would be fine; made from "Ġan" (the 9th) it cannot be.
    write_tiny_bpe(str(tmp_path))
    vocab = tiny_vocab()
    vocab["ĠanĠa"] = vocab.pop("Ġa")
    vocab = {k: i for k, i in sorted(vocab.items(), key=lambda item: item[1])}
    with open(tmp_path / "vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(tmp_path / "merges.txt", encoding="utf-8") as f:
        text = f.read().replace("Ġ a\n", "Ġan Ġa\n", 1)
    with open(tmp_path / "merges.txt", "w", encoding="utf-8") as f:
        f.write(text)
    with pytest.raises(TokenizerError, match="a part is not a token made before it"):
        load_tokenizer(str(tmp_path))


def test_merges_txt_without_a_version_line_keeps_its_first_merge(tmp_path):
    write_tiny_bpe(str(tmp_path))
    with open(tmp_path / "merges.txt", encoding="utf-8") as f:
        text = f.read()
    with open(tmp_path / "merges.txt", "w", encoding="utf-8") as f:
        f.write(text.split("\n", 1)[1])
    assert len(encode(load_tokenizer(str(tmp_path)), "he")) == 1


def test_without_endoftext_encoding_works_and_an_empty_prompt_is_a_clear_error(tmp_path):
    model_dir = with_vocab(tmp_path, {k: i for k, i in tiny_vocab().items() if k != ENDOFTEXT})
    enc = load_tokenizer(model_dir)
    assert enc.decode(encode(enc, "the cat")) == "the cat"
    with pytest.raises(TokenizerError, match=r"vocab.json has no <\|endoftext\|> token to start from: give a prompt"):
        endoftext_id(enc)


def test_endoftext_id(enc):
    assert endoftext_id(enc) == TINY_VOCAB_SIZE - 1


@pytest.mark.parametrize("vocab_size", [TINY_VOCAB_SIZE - 1, TINY_VOCAB_SIZE + 1, 1000, 50257])
def test_a_tokenizer_and_a_model_of_other_vocabularies_are_a_tokenizer_error(enc, vocab_size):
    # More tokens than the model: ids it has no embedding for ("token ids must be in [0, n)").
    # Fewer: the model predicts ids the tokenizer cannot write (a KeyError mid-output).
    with pytest.raises(TokenizerError, match=f"has {TINY_VOCAB_SIZE} tokens but .*config.json says vocab_size {vocab_size}"):
        check_vocabulary(enc, vocab_size, "some/model")


def test_a_tokenizer_and_a_model_of_one_vocabulary_pass(enc):
    check_vocabulary(enc, TINY_VOCAB_SIZE, "some/model")


def test_mutated_vocabularies_give_a_tokenizer_error_or_a_working_tokenizer(tmp_path):
    rng = random.Random(0)
    vocab = tiny_vocab()
    tokens = list(vocab)
    for case in range(200):
        mutated = dict(vocab)
        token = rng.choice(tokens)
        kind = rng.randrange(4)
        if kind == 0:
            mutated[token] = rng.choice([-1, 0, 1, 255, 256, 271, 272, 273, 2.0, 1e30, None, "1", [], {}, True, 2 ** 64])
        elif kind == 1:
            del mutated[token]
        elif kind == 2:
            mutated[token + rng.choice(["a", "Ġ", "é", " ", ""])] = mutated.pop(token)
        else:
            other = rng.choice(tokens)
            mutated[token], mutated[other] = mutated[other], mutated[token]
        model_dir = with_vocab(tmp_path / str(case), mutated)
        try:
            enc = load_tokenizer(model_dir)
        except TokenizerError as e:
            assert str(e).startswith(model_dir), (case, str(e))
            continue
        for text in TEXTS:  # whatever loads must work on every text
            assert enc.decode(encode(enc, text)) == text, case
