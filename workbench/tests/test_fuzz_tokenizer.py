"""Property-based fuzzing of the tokenizer's files (hypothesis, a test-only dependency): vocab.json and merges.txt
through validate_vocab, validate_merges, load_tokenizer and the downloader's checks (3), and the agreement of the
downloader with the loader: it stores exactly what the loader will read. The property: fuzzing.py's; the
weights' other files: test_fuzz.py."""

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytestmark = pytest.mark.slow  # as test_fuzz.py is (conftest.py's SLOW_FILES)

import json  # noqa: E402
import os  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fixtures import TINY_MERGES  # noqa: E402
from fuzzing import JSON, ODD_NUMBERS, REFUSED, SCALARS, encoded, fuzz, parsed, scratch, write  # noqa: E402,F401
from test_fuzz import ENCODINGS, VALID_CONFIG  # noqa: E402
from weights import checkpoint, download, tokenizer  # noqa: E402
from weights.checkpoint import CheckpointError  # noqa: E402
from weights.download import DownloadError  # noqa: E402
from weights.tokenizer import ENDOFTEXT, TokenizerError, bytes_to_unicode  # noqa: E402


# ---------------------------------------------------------------------------
# 3. vocab.json and merges.txt
# ---------------------------------------------------------------------------

def tiny_vocab():
    """The tests' tiny BPE (conftest.write_tiny_bpe): the bytes, the merges' tokens, <|endoftext|>."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for merge in TINY_MERGES:
        vocab[merge.replace(" ", "")] = len(vocab)
    vocab[ENDOFTEXT] = len(vocab)
    return vocab


TINY_MERGES_TEXT = "#version: 0.2\n" + "\n".join(TINY_MERGES) + "\n"
ALPHABET = "".join(bytes_to_unicode().values())
TOKENS = st.one_of(st.text(alphabet=ALPHABET, min_size=1, max_size=4), st.text(max_size=4),
                   st.sampled_from([ENDOFTEXT, "", "Ġ", "the", "Ġthe", "he", " ", "\x00", "<|endoftext|> ", "\udc80"]))
IDS = st.one_of(st.integers(min_value=-2, max_value=300), st.sampled_from(ODD_NUMBERS), SCALARS)


@st.composite
def mutated_vocabs(draw):
    vocab = tiny_vocab()
    tokens = list(vocab)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        token = draw(st.sampled_from(tokens))
        kind = draw(st.sampled_from(["drop", "id", "add", "rename", "swap ids"]))
        if token not in vocab:
            continue
        if kind == "drop":
            del vocab[token]
        elif kind == "id":
            vocab[token] = draw(IDS)
        elif kind == "add":
            vocab[draw(TOKENS)] = draw(st.one_of(st.just(len(vocab)), IDS))
        elif kind == "rename":
            vocab[draw(TOKENS)] = vocab.pop(token)
        else:
            other = draw(st.sampled_from(tokens))
            if other in vocab:
                vocab[token], vocab[other] = vocab[other], vocab[token]
    return vocab


@st.composite
def mutated_merges(draw):
    lines = ["#version: 0.2", *TINY_MERGES, ""]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "replace", "insert", "separator", "end"]))
        if kind == "drop":
            lines.pop(i)
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif kind == "replace":
            lines[i] = draw(st.one_of(st.text(max_size=12), st.tuples(TOKENS, TOKENS).map(" ".join)))
        elif kind == "insert":
            lines.insert(i, draw(st.one_of(st.text(max_size=12), st.tuples(TOKENS, TOKENS).map(" ".join),
                                           st.sampled_from(["#version: 0.2", "# a comment", "   ", "h e f"]))))
        elif kind == "separator":
            lines[i] = lines[i].replace(" ", draw(st.sampled_from(["  ", "\t", "\u3000", "\x1c", "", " \r"])))
        if not lines:
            lines = [""]
    newline = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    return newline.join(lines)


def assert_usable(enc, vocab):
    """What a loaded tokenizer must do: have the vocabulary's tokens, and give back the text it encoded."""
    assert enc.n_vocab == len(vocab)
    for text in ("the cat sat on the mat", " é 中文\t\n", "\x00\x1b[31m"):
        assert enc.decode(tokenizer.encode(enc, text)) == text


@fuzz()
@given(vocab=st.one_of(JSON, mutated_vocabs()))
def test_3_vocabs(vocab):
    parsed(lambda: tokenizer.validate_vocab("vocab.json", vocab), TokenizerError)


@fuzz()
@given(text=st.one_of(mutated_merges(), st.text(max_size=80)), vocab=st.one_of(st.just(tiny_vocab()), mutated_vocabs()))
def test_3_merges_against_a_valid_vocabulary(text, vocab):
    if parsed(lambda: tokenizer.validate_vocab("vocab.json", vocab), TokenizerError) is not REFUSED:  # as the loader does
        parsed(lambda: tokenizer.validate_merges("merges.txt", text, vocab), TokenizerError)


def dumped(vocab):
    return json.dumps(vocab, ensure_ascii=False).encode("utf-8", "surrogatepass")


@fuzz()
@given(vocab=st.one_of(mutated_vocabs().map(dumped), JSON.map(dumped), st.binary(max_size=100),
                       st.sampled_from([b"", b"\xef\xbb\xbf" + dumped(tiny_vocab()), b"\xff" + dumped(tiny_vocab())])),
       merges=st.one_of(mutated_merges().map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=100)))
def test_3_tokenizer_files_through_the_loader_and_the_downloader(scratch, vocab, merges):
    model_dir = os.path.join(scratch, "tokenizer")
    os.makedirs(model_dir, exist_ok=True)
    write(os.path.join(model_dir, "vocab.json"), vocab)
    write(os.path.join(model_dir, "merges.txt"), merges)
    enc = parsed(lambda: tokenizer.load_tokenizer(model_dir), TokenizerError)
    if enc is not REFUSED:
        assert_usable(enc, json.loads(vocab))
    # The downloader checks vocab.json as it arrives, and merges.txt against a valid vocab.json beside it.
    partial = write(os.path.join(model_dir, "vocab.json.incomplete"), vocab)
    parsed(lambda: download.verify(partial, "vocab.json", None, None), DownloadError)
    write(os.path.join(model_dir, "vocab.json"), dumped(tiny_vocab()))
    partial = write(os.path.join(model_dir, "merges.txt.incomplete"), merges)
    parsed(lambda: download.verify(partial, "merges.txt", None, None), DownloadError)


@fuzz()
@given(vocab=st.one_of(mutated_vocabs().map(dumped), JSON.map(dumped), st.binary(max_size=100)),
       merges=st.one_of(st.just(TINY_MERGES_TEXT.encode()), mutated_merges().map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_3_the_downloaders_merges_check_against_any_vocab_json_beside_it(scratch, vocab, merges):
    """download() fetches only the files missing: the vocab.json merges.txt is checked against may be one
    already in the model's directory, never checked by this download (a corrupt or hostile one)."""
    model_dir = os.path.join(scratch, "merges-check")
    os.makedirs(model_dir, exist_ok=True)
    write(os.path.join(model_dir, "vocab.json"), vocab)
    partial = write(os.path.join(model_dir, "merges.txt.incomplete"), merges)
    parsed(lambda: download.verify(partial, "merges.txt", None, None), DownloadError)


# ---------------------------------------------------------------------------
# Agreement: the downloader stores exactly what the loader will read
# ---------------------------------------------------------------------------

@fuzz()
@given(name=st.sampled_from(["config.json", "vocab.json"]), encoding=st.sampled_from(ENCODINGS),
       ensure_ascii=st.booleans(), surrogate=st.booleans())
def test_2_3_the_downloader_accepts_what_the_loader_reads(scratch, name, encoding, ensure_ascii, surrogate):
    """A small file the downloader checks and stores must be one the loader then reads: else it is kept,
    never downloaded again, and every load fails (weights/download.py: 'checked as the loader checks it')."""
    model_dir = os.path.join(scratch, "agreement")
    os.makedirs(model_dir, exist_ok=True)
    value = VALID_CONFIG if name == "config.json" else tiny_vocab()
    if surrogate and name == "vocab.json":  # a lone surrogate, which strict UTF-8 refuses
        value = {**value, "\ud800": len(value)}
    content = encoded(json.dumps(value, ensure_ascii=ensure_ascii), encoding)
    write(os.path.join(model_dir, name), content)
    if name == "vocab.json":
        write(os.path.join(model_dir, "merges.txt"), TINY_MERGES_TEXT)
        loads = parsed(lambda: tokenizer.load_tokenizer(model_dir), TokenizerError)
    else:
        loads = parsed(lambda: checkpoint.load_config(model_dir), CheckpointError)
    partial = write(os.path.join(model_dir, name + ".incomplete"), content)
    stored = parsed(lambda: download.verify(partial, name, len(content), None), DownloadError)
    assert (stored is not REFUSED) == (loads is not REFUSED), \
        f"{name} in {encoding}: the downloader {'stores' if stored is not REFUSED else 'refuses'} it, " \
        f"the loader {'reads' if loads is not REFUSED else 'refuses'} it"
