"""crossvocab.py: a draft whose tokenizer is not the oracle's.

Greedy (SLEM) gives exactly the oracle's greedy tokens, with drafts accepted; encode_bytes spells any bytes
exactly; align_suffix, the step a student writes, on its edge cases. Sampling (TLI): test_crossvocab_sampling.py.
The models are tiny random GPT-2s and the tokenizers toy byte-level BPEs of different sizes and merges:
conftest's tiny BPE, and two more written here.
"""

import itertools
import json
import os
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import tiktoken

from checks.part7_vocab import crossvocab_prompts as prompts  # the checker's prompts, on any oracle
from crossvocab import (align_suffix, check_crossvocab_args, crossvocab_generate, crossvocab_sample, encode_bytes,
                        shared_tokens, spell, token_id)
from decoding import GenerationError
from fixtures import make_model_dir, write_bpe
from gpt2 import GPT2
from speculative import greedy_generate, speculative_generate
from stats import Stats
from test_greedy import assert_same_greedy
from weights import checkpoint
from weights.tokenizer import ENDOFTEXT, load_tokenizer

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def letter_pairs(rule, taken):
    """Merges "a b" of two letters for which rule(i, j) holds, leaving out tokens already made."""
    return [f"{a} {b}" for i, a in enumerate(LETTERS) for j, b in enumerate(LETTERS)
            if rule(i, j) and a + b not in taken]


# A second BPE, of another size and other merges than conftest's tiny one: "Ġthe" made another way, "é" and
# " é" as tokens, the first two bytes of "—" (a piece of a character), a token across the end of "é" and a
# space (no encoding makes it, a model can write it), and letter pairs the other BPEs lack.
OTHER_MERGES = ["t h", "Ġ th", "Ġth e", "h e", "i n", "Ã ©", "Ġ Ã©", "â Ģ", "© Ġ", "c a", "ca f"]
OTHER_MERGES += letter_pairs(lambda i, j: (i + 2 * j) % 3 == 0, {"th", "he", "in", "ca"})
# A third, for the sampling tests' oracle: mostly letter pairs the second BPE does not have.
THIRD_MERGES = ["h e", "Ġ t", "Ġt he"] + letter_pairs(lambda i, j: (i + 2 * j) % 3 == 1, {"he"})


def make_translated_copy(src, dest, merges, noise, seed=0, n_positions=None, endoftext=True, paired=False):
    """A draft in another vocabulary made from the oracle in src: the oracle's weights plus noise, each draft
    token's embedding row the oracle's row of the token with the same bytes. A token the oracle does not have
    gets the row of the oracle's token for its longest first bytes ("ab" is read, and predicted, as "a"), or
    with paired, of one of the oracle's own tokens (the n-th of each side's own tokens paired): then the draft
    puts its mass outside the intersection where the oracle does. It agrees with the oracle in part and
    drafts tokens the oracle splits: rounds end at every point."""
    write_bpe(dest, merges, endoftext)
    draft_enc, oracle_enc = load_tokenizer(dest), load_tokenizer(src)
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(vocab_size=draft_enc.n_vocab, n_positions=n_positions or config["n_positions"])
    rng = np.random.default_rng(seed)
    tensors = dict(checkpoint.load_safetensors(os.path.join(src, "model.safetensors")))
    to_oracle, to_draft = shared_tokens(draft_enc, oracle_enc)
    oracle_own = np.flatnonzero(to_draft < 0)
    rows = []
    for d in range(draft_enc.n_vocab):
        token = draft_enc.decode_single_token_bytes(d)
        if to_oracle[d] < 0 and paired:
            rows.append(oracle_own[(to_oracle[:d] < 0).sum() % len(oracle_own)])
        else:
            rows.append(next(o for n in range(len(token), 0, -1) if (o := token_id(oracle_enc, token[:n])) is not None))
    wte = tensors["wte.weight"][rows]
    tensors.update({"wte.weight": wte, "wpe.weight": tensors["wpe.weight"][:config["n_positions"]]})
    tensors = {k: t + np.float32(noise) * rng.standard_normal(t.shape, dtype=np.float32) for k, t in tensors.items()}
    with open(os.path.join(dest, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    checkpoint.save_safetensors(os.path.join(dest, "model.safetensors"), {k: t.shape for k, t in tensors.items()},
                                tensors.__getitem__)
    return str(dest)


def make_random_model(path, merges, seed, **config):
    """A tiny random GPT-2 of its own byte-level BPE (these merges)."""
    vocab_size = 256 + len(merges) + 1
    make_model_dir(path, seed=seed, tokenizer=False, vocab_size=vocab_size, **config)
    return str(write_bpe(path, merges))


def loaded(model_dir):
    """(the model, its tokenizer) of a checkpoint directory: the plain model, faster than the accelerated one
    at these sizes."""
    return GPT2.from_pretrained(model_dir), load_tokenizer(model_dir)


@pytest.fixture(scope="module")
def pair(tiny_dirs, tmp_path_factory):
    """The oracle (conftest's, of its tiny BPE) and drafts in other vocabularies: {name: (model, tokenizer)}."""
    base = tmp_path_factory.mktemp("crossvocab")
    oracle_dir = tiny_dirs["oracle"]
    dirs = {
        "oracle": oracle_dir,
        "random": make_random_model(base / "random", OTHER_MERGES, seed=5, n_layer=1),  # agrees by chance only
        "translated": make_translated_copy(oracle_dir, base / "translated", OTHER_MERGES, noise=0.01, seed=6),
        "bytes": make_translated_copy(oracle_dir, base / "bytes", [], noise=0.01, seed=7),  # one token per byte
        "no-endoftext": make_translated_copy(oracle_dir, base / "no-eot", OTHER_MERGES, noise=0.01, endoftext=False),
    }
    return {name: loaded(d) for name, d in dirs.items()}


def traced(generate, *args, **kw):
    stats = Stats(trace=[])
    return list(generate(*args, stats=stats, **kw)), stats


# ---------------------------------------------------------------------------
# Greedy: string-level exact match
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def expected(pair):
    oracle, oracle_enc = pair["oracle"]
    return {name: list(greedy_generate(oracle, ids, 30)) for name, ids in prompts(oracle_enc).items()}


@pytest.mark.parametrize("kind, n_draft", [(kind, n) for kind in ("translated", "bytes") for n in range(1, 9)] +
                         [("random", 2), ("random", 5), ("no-endoftext", 3)])
def test_greedy_is_the_oracles_greedy_text(pair, expected, kind, n_draft):
    (draft, draft_enc), (oracle, oracle_enc) = pair[kind], pair["oracle"]
    for name, ids in prompts(oracle_enc).items():
        got, stats = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, 30, n_draft=n_draft)
        assert_same_greedy(expected[name], got, oracle, ids)
        assert stats.n_generated == 30 and stats.accepted <= stats.drafted and stats.oracle_passes == stats.rounds
        for r in stats.trace:
            d = r.details
            assert r.drafted == d.candidates and r.accepted == d.kept and r.new == d.new and len(d.draft_ids) <= n_draft
            # after the round the draft's token list spells the text again: kept drafts + the re-encoded rest
            assert spell(draft_enc, d.draft_ids[:d.draft_kept] + d.reencoded) == spell(oracle_enc, r.new)
            assert r.cached["oracle"] == r.context_length + len(r.new) - 1


def test_drafts_are_accepted_and_rounds_end_everywhere(pair, expected):
    # The translated drafts agree in part: rounds keep every candidate, none, or some; agreement ends inside a
    # draft token; texts end inside a character. The equality test above means most when all of this happens.
    (oracle, oracle_enc), seen = pair["oracle"], Counter()
    kinds = ("translated", "bytes", "spelling")
    for kind, (name, ids), n_draft in itertools.product(kinds, prompts(oracle_enc).items(), (2, 4, 6)):
        draft, draft_enc = pair["bytes" if kind == "spelling" else kind]
        if kind == "spelling":
            draft = SpellingDraft(draft_enc, spell(oracle_enc, ids + expected[name]), every=5)
        got, stats = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, 30, n_draft=n_draft)
        assert_same_greedy(expected[name], got, oracle, ids)
        assert stats.accepted > 0
        for r in stats.trace:
            d = r.details
            seen["all kept"] += 0 < d.kept == len(d.candidates)
            seen["none kept"] += 0 == d.kept < len(d.candidates)
            seen["some kept"] += 0 < d.kept < len(d.candidates)
            seen["more candidates than drafts"] += len(d.candidates) > len(d.draft_ids)
            seen["fewer candidates than drafts"] += 0 < len(d.candidates) < len(d.draft_ids)
            rest = spell(draft_enc, d.reencoded)
            unkept = d.draft_ids[d.draft_kept:]
            seen["agreement inside a draft token"] += bool(
                unkept and rest and draft_enc.decode_single_token_bytes(unkept[0])[:1] == rest[:1])
            seen["a draft token past the agreement"] += bool(unkept)
            seen["text ends inside a character"] += not is_whole_characters(spell(oracle_enc, r.new))
    assert all(seen[what] > 0 for what in ("all kept", "none kept", "some kept", "more candidates than drafts",
                                           "fewer candidates than drafts", "agreement inside a draft token",
                                           "a draft token past the agreement", "text ends inside a character")), seen


class SpellingDraft:
    """A stand-in draft model that spells a known text (the oracle's greedy text) in its own tokens, the
    longest token that fits first, and writes a wrong byte at every `every`-th position. In the vocabulary of
    one token per byte it drafts an oracle token of several bytes as several tokens."""

    def __init__(self, enc, text, every, n_positions=128):
        self.enc, self.text, self.every = enc, text, every
        self.vocab_size, self.n_positions = enc.n_vocab, n_positions
        self.longest = max(len(enc.decode_single_token_bytes(t)) for t in range(enc.n_vocab))

    def forward(self, ids, kvcache, n_logits=1):
        if not len(ids):
            raise ValueError("forward needs at least one token")  # as gpt2.GPT2's: the next token's logits need one
        history = getattr(kvcache, "history", [])[:kvcache.length] + list(ids)  # the cache holds the ids it read
        kvcache.history, kvcache.length = history, len(history)
        logits = np.zeros((n_logits, self.vocab_size), dtype=np.float32)
        for row, n in enumerate(range(len(history) - n_logits + 1, len(history) + 1)):
            logits[row, self.next_token(spell(self.enc, history[:n]), n)] = 1
        return logits

    def next_token(self, spelled, position):
        rest = self.text[len(spelled):] if self.text.startswith(spelled) else b""
        if not rest:
            return self.enc.encode_single_token(b"?")
        if position % self.every == 0:
            return self.enc.encode_single_token(bytes([rest[0] ^ 1]))
        return next(self.enc.encode_single_token(rest[:n]) for n in range(min(self.longest, len(rest)), 0, -1)
                    if token_id(self.enc, rest[:n]) is not None)


class ScriptedOracle:
    """A stand-in oracle whose greedy text is a given list of its tokens (then token 0 forever): one-hot logits."""

    def __init__(self, enc, script, n_positions=128):
        self.script, self.vocab_size, self.n_positions = script, enc.n_vocab, n_positions

    def forward(self, ids, kvcache, n_logits=1):
        if not len(ids):
            raise ValueError("forward needs at least one token")
        history = getattr(kvcache, "history", [])[:kvcache.length] + list(ids)
        kvcache.history, kvcache.length = history, len(history)
        logits = np.zeros((n_logits, self.vocab_size), dtype=np.float32)
        for row, n in enumerate(range(len(history) - n_logits + 1, len(history) + 1)):
            logits[row, self.script[n] if n < len(self.script) else 0] = 1
        return logits


def test_agreement_that_ends_where_a_kept_draft_ends(pair):
    # The oracle writes " t" "he" where its tokenizer makes " the": the draft (one byte a token, spelling the
    # oracle's own text) drafts " the", the candidate " the" is rejected, and the oracle's " t" ends exactly
    # where the draft's second token ends. Nothing is left to re-encode, and the draft's cache must still leave
    # its newest token for the next round to feed (a forward of no tokens has no logits).
    (_, oracle_enc), (_, bytes_enc) = pair["oracle"], pair["bytes"]
    ids = encode_bytes(oracle_enc, b"a cat")
    pieces = [b" t", b"he", b" a", b"t", b" t", b"he", b" and", b" the", b" of"] * 3
    script = ids + [oracle_enc.encode_single_token(piece) for piece in pieces]
    oracle = ScriptedOracle(oracle_enc, script)
    draft = SpellingDraft(bytes_enc, spell(oracle_enc, script), every=10 ** 9)
    for n_draft in (4, 6):
        got, stats = traced(crossvocab_generate, draft, oracle, bytes_enc, oracle_enc, ids, 20, n_draft=n_draft)
        assert got == script[len(ids):len(ids) + 20]
        assert any(0 < r.details.draft_kept < len(r.details.draft_ids) and not r.details.reencoded
                   for r in stats.trace)  # the case happened


def is_whole_characters(text):
    try:
        text.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_the_same_tokenizer_on_both_sides_is_speculative_decoding(tiny_dirs, related, oracle):
    # A sanity case: one vocabulary (conftest's noisy copy of the oracle as the draft), the text of speculative.py.
    enc = load_tokenizer(tiny_dirs["oracle"])
    for ids in prompts(enc).values():
        got, stats = traced(crossvocab_generate, related, oracle, enc, enc, ids, 30, n_draft=4)
        assert_same_greedy(list(speculative_generate(related, oracle, ids, 30, n_draft=4)), got, oracle, ids)
        assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)
        assert stats.accepted > 0


@pytest.mark.parametrize("n_new", range(0, 12))
def test_exactly_n_new_tokens(pair, n_new):
    # The candidates can be more than the drafts (the bytes draft's are fewer): a round never overshoots.
    (oracle, oracle_enc) = pair["oracle"]
    ids = prompts(oracle_enc)["characters"]
    for kind in ("translated", "bytes"):
        draft, draft_enc = pair[kind]
        for n_draft in (1, 4, 8):
            assert len(list(crossvocab_generate(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft))) == n_new
            assert len(list(crossvocab_sample(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft,
                                              rng=np.random.default_rng(n_new)))) == n_new


@pytest.fixture(scope="module")
def small_windows(tiny_dirs, tmp_path_factory):
    """An oracle with a window of 40 and drafts of it in other vocabularies with windows of 40 and 24 (one token
    per byte: its text fills its window first)."""
    base = tmp_path_factory.mktemp("windows")
    oracle_dir = make_model_dir(base / "oracle", seed=12, n_layer=2, n_positions=40)
    drafts = {"40": make_translated_copy(oracle_dir, base / "d40", OTHER_MERGES, noise=0.01, n_positions=40),
              "24": make_translated_copy(oracle_dir, base / "d24", [], noise=0.01, n_positions=24)}
    return loaded(oracle_dir), {window: loaded(d) for window, d in drafts.items()}


@pytest.mark.parametrize("n_draft", [1, 3, 8])
def test_runs_that_reach_the_context_limit(small_windows, n_draft):
    (oracle, oracle_enc), drafts = small_windows
    ids = encode_bytes(oracle_enc, "the café at the end".encode())
    expected = list(greedy_generate(oracle, ids, 40 - len(ids)))
    traces = {}
    for window, (draft, draft_enc) in drafts.items():
        got, stats = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, 40 - len(ids), n_draft)
        assert_same_greedy(expected, got, oracle, ids)
        assert stats.accepted > 0 or window == "24"
        traces[window] = stats.trace
        assert len(list(crossvocab_sample(draft, oracle, draft_enc, oracle_enc, ids, 40 - len(ids), n_draft,
                                          rng=np.random.default_rng(0)))) == 40 - len(ids)
        with pytest.raises(GenerationError, match="context window of 40"):
            list(crossvocab_generate(draft, oracle, draft_enc, oracle_enc, ids, 41 - len(ids), n_draft))
    # The draft of one token per byte ran out of window first: from then on it drafted nothing, the oracle went on.
    trace = traces["24"]
    first = next(i for i, r in enumerate(trace) if r.details.stopped == "the draft's window is full")
    assert all(r.details.draft_ids == [] and r.details.stopped == "the draft's window is full" for r in trace[first:-1])
    assert any(r.details.stopped.startswith("the draft's window had room for") for r in trace[:first]) or n_draft == 1


def test_a_prompt_longer_than_the_drafts_window_is_one_line(small_windows):
    (oracle, oracle_enc), drafts = small_windows
    (draft, draft_enc) = drafts["24"]
    ids = encode_bytes(oracle_enc, b"x" * 30)  # 30 tokens of the bytes draft, more than its 24
    with pytest.raises(GenerationError, match="the prompt takes 30 of the draft's tokens, more than its window of 24"):
        list(crossvocab_generate(draft, oracle, draft_enc, oracle_enc, ids, 2))


def test_checks_before_any_work(pair):
    (draft, draft_enc), (oracle, oracle_enc) = pair["translated"], pair["oracle"]
    with pytest.raises(GenerationError, match="the draft's tokenizer has 272 tokens but the draft has a vocabulary"):
        list(crossvocab_generate(draft, oracle, oracle_enc, oracle_enc, [1], 3))
    ranks = {bytes([b]): b for b in range(256) if b != 0x41}  # no token for "A"
    ranks[b"AB"] = 0x41
    no_byte = tiktoken.Encoding(name="no-A", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    with pytest.raises(GenerationError, match="the oracle's tokenizer has no token for the byte 0x41"):
        list(crossvocab_generate(draft, make_model(no_byte.n_vocab), draft_enc, no_byte, [1], 3))
    for bad, message in (({"ids": []}, "no tokens"), ({"n_draft": 0}, "n_draft must be at least 1"),
                         ({"ids": [1, oracle.vocab_size]}, "the prompt's token 272 is not in the oracle's")):
        args = {"ids": [1, 2], "n_draft": 4, **bad}
        for generate in (crossvocab_generate, crossvocab_sample):
            with pytest.raises(GenerationError, match=message):
                list(generate(draft, oracle, draft_enc, oracle_enc, args["ids"], 3, n_draft=args["n_draft"]))


def make_model(vocab_size):
    """A stand-in with a vocabulary size and a window: the checks run before any forward pass."""
    return SimpleNamespace(vocab_size=vocab_size, n_positions=128)


def test_endoftext_is_each_sides_own_token(pair):
    # The oracle's <|endoftext|> is the draft's own special token, never the 13 bytes in pieces, and the draft's is
    # the oracle's; a draft without one can only read the 13 bytes.
    (oracle, oracle_enc) = pair["oracle"]
    ids = prompts(oracle_enc)["endoftext"]
    assert ids[0] == oracle_enc.encode_single_token(ENDOFTEXT)
    draft, draft_enc = pair["translated"]
    special = draft_enc.encode_single_token(ENDOFTEXT)
    assert check_crossvocab_args(draft, oracle, draft_enc, oracle_enc, ids, 3, 4) == [special] + draft_enc.encode("the")
    assert encode_bytes(oracle_enc, spell(draft_enc, [special])) == [ids[0]]
    draft, draft_enc = pair["no-endoftext"]
    assert not draft_enc.special_tokens_set
    assert check_crossvocab_args(draft, oracle, draft_enc, oracle_enc, ids, 3, 4) == \
        draft_enc.encode_ordinary("<|endoftext|>the")


# ---------------------------------------------------------------------------
# Bytes: encode_bytes spells anything exactly; align_suffix (the exercise's function)
# ---------------------------------------------------------------------------

def random_texts(rng, n):
    """Bytes of every kind: characters of one to four bytes, stray continuation bytes, cut characters."""
    pieces = [b"a", b" the", b"\xc3\xa9", b"\xe2\x80\x94", b"\xf0\x9f\x98\x80", b"\x80", b"\xc3", b"\xe2\x80",
              b"\xff", b"<|endoftext|>", b"\n", b" ", b"\x00"]
    for _ in range(n):
        yield b"".join(pieces[i] for i in rng.integers(0, len(pieces), rng.integers(0, 12)))
    for _ in range(n):
        yield rng.integers(0, 256, rng.integers(0, 20)).astype(np.uint8).tobytes()


def test_encode_bytes_spells_any_bytes_exactly(pair):
    rng = np.random.default_rng(0)
    for kind in ("oracle", "translated", "bytes", "no-endoftext"):
        enc = pair[kind][1]
        for text in random_texts(rng, 300):
            assert spell(enc, encode_bytes(enc, text)) == text


def test_encode_bytes_is_the_tokenizers_encoding_on_whole_characters(pair):
    enc = pair["translated"][1]
    text = "the café — <|endoftext|> naïve"
    assert encode_bytes(enc, text.encode()) == enc.encode(text, allowed_special={ENDOFTEXT})
    assert enc.encode_single_token(ENDOFTEXT) in encode_bytes(enc, text.encode())  # the special token, not 13 bytes
    # a cut character: the whole ones through the tokenizer, each stray byte its own token
    assert encode_bytes(enc, b"caf\xc3") == enc.encode("caf") + [enc.encode_single_token(b"\xc3")]
    assert encode_bytes(enc, b"\xa9 the") == [enc.encode_single_token(b"\xa9")] + enc.encode(" the")


@pytest.mark.parametrize("drafted, text, kept, rest", [
    ([b"the", b" cat"], b"the cat", 2, b""),                  # everything agreed, nothing past it
    ([b"the", b" cat"], b"the cat sat", 2, b" sat"),          # everything agreed, and the oracle's own token
    ([b"the", b" cat"], b"the ca", 1, b" ca"),                # agreement ends inside a draft token
    ([b"the", b" cat"], b"the cow", 1, b" cow"),              # disagreement inside a draft token
    ([b"the", b" cat"], b"a dog", 0, b"a dog"),               # nothing agreed
    ([b"th", b"e", b" cat"], b"the", 2, b""),                 # a split the draft would not make: kept
    ([b"caf", b"\xc3\xa9"], b"caf\xc3", 1, b"\xc3"),          # agreement ends inside a UTF-8 character
    ([b"caf", b"\xc3\xa9"], b"caf\xc3\xa8s", 1, b"\xc3\xa8s"),  # the character's second byte differs
    ([b"\xe2\x80", b"\x94"], b"\xe2\x80\x94", 2, b""),        # draft tokens that are pieces of a character
    ([], b"the", 0, b"the"),                                  # the draft drafted nothing (its window was full)
    ([b"the"], b"th", 0, b"th"),                              # the text is shorter than the first draft
])
def test_align_suffix(drafted, text, kept, rest):
    assert align_suffix(drafted, text) == (kept, rest)
