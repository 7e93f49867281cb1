"""Chinese text (and emoji) end to end: GPT-2's real tokenizer, every method, the trace and the page.

GPT-2's byte-level BPE splits most Chinese characters and every emoji over two
or three tokens. Nothing here may show half a character, print bytes where a
character belongs, or treat the text differently from GPT-2's own tokenizer.
"""

import hashlib
import io
import json
import os
import sys

import pytest
import regex

from workbench import cli, display, methods
from workbench.page import report
from fixtures import ROOT, gpt2_pair_bpe
from stats import Round, Stats
from weights.tokenizer import GPT2_PATTERN, bytes_to_unicode, encode, load_tokenizer

ASSETS = os.path.join(ROOT, "assets", "gpt2-tokenizer")
TEXTS = ["中文", "投机解码（speculative decoding）用草稿模型加速。", "验证、拒绝采样、接受率、KV 缓存",
         "表情 🙂👍🏽 和 emoji", "混合 mixed 文本 with 数字 12345", "「引号」和《书名号》……", "😀" * 5, "你好，世界！"]


def test_the_shipped_tokenizer_files_are_gpt2s():
    digests = {name: hashlib.sha256(open(os.path.join(ASSETS, name), "rb").read()).hexdigest()
               for name in ("vocab.json", "merges.txt")}
    assert digests == {"vocab.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
                       "merges.txt": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"}


def reference_encode(text):
    """GPT-2's tokenizer as OpenAI's encoder.py wrote it: pre-tokenise, map bytes to characters, merge by rank."""
    with open(os.path.join(ASSETS, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(ASSETS, "merges.txt"), encoding="utf-8") as f:
        ranks = {tuple(line.split()): i for i, line in enumerate(f.read().split("\n")[1:]) if line.strip()}
    byte_char = bytes_to_unicode()
    ids = []
    for piece in regex.findall(GPT2_PATTERN, text):
        word = [byte_char[b] for b in piece.encode("utf-8")]
        ids += [vocab[token] for token in gpt2_pair_bpe(word, ranks)]
    return ids


@pytest.mark.parametrize("text", TEXTS)
def test_tokenises_like_gpt2s_reference_tokenizer(text):
    enc = load_tokenizer(ASSETS)
    assert encode(enc, text) == reference_encode(text)
    assert enc.decode(encode(enc, text)) == text


def generate(argv):
    """cli.main in this process, its stdout captured as bytes (as a pipe would get them)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # a locale that cannot write Chinese: the CLI switches to UTF-8
    err = io.StringIO()
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        cli.main(argv)
        out.flush()
        return out.buffer.getvalue(), err.getvalue()
    finally:
        sys.stdout, sys.stderr = real


@pytest.mark.parametrize("method", list(methods.METHODS))
def test_a_chinese_prompt_through_every_method(demo_dirs, method, tmp_path):
    prompt = "投机解码：草稿模型先猜，大模型验证 🙂"
    verifying = methods.METHODS[method].verifies
    page = tmp_path / "run.html"
    args = [prompt, "--draft", demo_dirs["draft"], "--oracle", demo_dirs["oracle"], "--method", method, "-n", "8",
            *(["--trace", "--html", str(page)] if verifying else [])]
    stdout, stderr = generate(args)
    text = stdout.decode("utf-8")  # valid UTF-8, or this raises
    assert text.startswith(prompt) and "\ufffd" not in text[:len(prompt)]
    assert f"{method}: 8 new tokens" in stderr
    if verifying:
        assert "round 1:" in stderr and "  text     " in stderr
        html = page.read_text(encoding="utf-8")
        assert prompt in html  # the characters themselves, not their bytes


def test_a_character_split_over_two_rounds_shows_whole_in_the_trace():
    enc = load_tokenizer(ASSETS)
    ids = encode(enc, "文")  # two tokens: the first is not a whole character
    assert len(ids) == 2 and display.token_text(enc.decode_single_token_bytes, ids[0]).startswith("b'")
    rounds = [Round(context_length=1, drafted=[], accepted=0, new=[ids[0]], oracle=[ids[0]], cached={"oracle": 1}),
              Round(context_length=2, drafted=[ids[1]], accepted=0, new=[ids[1]], oracle=[ids[1]], cached={"oracle": 2})]
    lines = display.format_trace(methods.get("speculative").shown, rounds, enc.decode_single_token_bytes, 1)
    texts = [line for line in lines if line.startswith("  text")]
    assert texts == ["  text     ''", "  text     '文'"]  # held back, then whole: never b'\\xe6' or a replacement


def test_whole_characters_in_the_trace_are_characters():
    enc = load_tokenizer(ASSETS)
    whole = encode(enc, "中")
    assert len(whole) == 1 and display.token_text(enc.decode_single_token_bytes, whole[0]) == "'中'"


def test_the_page_shows_the_text_whole(tmp_path):
    enc = load_tokenizer(ASSETS)
    ids = encode(enc, "验证 🙂")
    stats = Stats(trace=[])
    stats.add_round(ids, ids[:-1], len(ids) - 1, context_length=1, oracle=ids, cached={"draft": 1, "oracle": 1})
    page = report.page(report.Run(prompt="接受率", prompt_ids=encode(enc, "接受率"), tokens=ids, stats=stats,
                                  method=methods.get("speculative"), settings={"n_draft": len(ids) - 1}, models={"oracle": "demo"},
                                  elapsed=1.0, token_bytes=enc.decode_single_token_bytes))
    assert "接受率" in page and all(c in page for c in "验证🙂")  # each token its own span: characters, not bytes
    running_text = page.split('<div class="text">')[1].split("</div>")[0]
    assert "\\x" not in running_text and "\ufffd" not in running_text  # no byte escapes, no replacement characters
