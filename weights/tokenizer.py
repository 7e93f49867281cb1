"""GPT-2's byte-level BPE through tiktoken, built offline from a model's own files.

tiktoken.get_encoding("gpt2") downloads its tables on first use. Every GPT-2
checkpoint directory already has them as vocab.json + merges.txt, so we build
the same Encoding from those: no network at run time.

In GPT-2's vocab.json each token is written with a printable stand-in for every
byte (bytes_to_unicode below), and a token's id is its BPE merge rank, which is
exactly what tiktoken calls mergeable_ranks once the stand-ins are undone. Both
files are checked before tiktoken sees them (validate_vocab, validate_merges):
a bad one is a TokenizerError naming the file, the token or line, and the problem.
"""

import json
import os

import tiktoken

from errors import UserError
from weights import reading

# GPT-2's pre-tokenizer: contractions, letters, numbers, other symbols, spaces.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ENDOFTEXT = "<|endoftext|>"
NAME_PREFIX = "gpt2-bpe:"  # an Encoding's name is this and its model directory


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
    vocab_file, merges_file = os.path.join(model_dir, "vocab.json"), os.path.join(model_dir, "merges.txt")
    try:
        vocab = json.loads(read_text(vocab_file, model_dir))
    except (ValueError, RecursionError) as e:
        raise TokenizerError(f"{vocab_file}: not valid JSON ({e})") from None
    validate_vocab(vocab_file, vocab)
    validate_merges(merges_file, read_text(merges_file, model_dir), vocab)
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    ranks = {bytes(byte_of[c] for c in tok): i for tok, i in vocab.items() if tok != ENDOFTEXT}
    special = {ENDOFTEXT: vocab[ENDOFTEXT]} if ENDOFTEXT in vocab else {}
    return tiktoken.Encoding(name=NAME_PREFIX + os.path.abspath(model_dir), pat_str=GPT2_PATTERN,
                             mergeable_ranks=ranks, special_tokens=special)


def read_text(path, model_dir):  # bounded, a regular file only (weights/reading.py)
    try:
        return reading.read_text(path, os.path.basename(path))
    except reading.ReadError as e:
        raise TokenizerError(str(e)) from None
    except (OSError, ValueError) as e:  # ValueError: not UTF-8
        raise TokenizerError(f"cannot read the tokenizer files in {model_dir} ({path}: {getattr(e, 'strerror', None) or e})") from None


def validate_vocab(path, vocab):
    """Check vocab.json's {token: id}: the ids are the integers 0..n-1, each once, and
    every token, <|endoftext|> aside, is written in GPT-2's byte alphabet, every byte
    having its own token (tiktoken needs them all)."""
    if not isinstance(vocab, dict):
        raise TokenizerError(f"{path}: not an object of token: id")
    owner = {}  # id -> token
    for token, i in vocab.items():
        if type(i) is not int or not 0 <= i < len(vocab):  # type(): JSON's true is a bool, an int to isinstance
            raise TokenizerError(f"{path}: token {token!r} has id {json.dumps(i)[:40]}; the ids must be 0..{len(vocab) - 1}")
        if i in owner:
            raise TokenizerError(f"{path}: tokens {owner[i]!r} and {token!r} both have id {i}")
        owner[i] = token
    # n different ids in 0..n-1: each is used exactly once.
    alphabet = set(bytes_to_unicode().values())
    for token in vocab:
        if token != ENDOFTEXT and not (token and set(token) <= alphabet):
            raise TokenizerError(f"{path}: token {token!r} is not written in GPT-2's byte alphabet")
    missing = sorted(alphabet - vocab.keys())
    if missing:
        raise TokenizerError(f"{path}: no token for the byte written {missing[0]!r} (every byte needs one)")


def validate_merges(path, text, vocab):
    """Check merges.txt against vocab.json: after an optional #version line, line r
    merges two tokens of smaller ids into the token whose id is 255 + r (ids are
    merge ranks), and every token that is not a byte or <|endoftext|> is made so.
    And every merged token's text comes back as that one token under GPT-2's own
    pair-merge BPE (first_disagreement), so that tiktoken, which merges by the ranks
    of vocab.json, and GPT-2's encoder.py, which merges the pairs of merges.txt,
    split every text alike."""
    lines = text.split("\n")
    first = 1 if lines[0].startswith("#version") else 0
    rank = 256
    merges = []  # (line number, left part, right part), in rank order from 256
    for number, line in enumerate(lines[first:], start=first + 1):
        if not line.strip():
            continue
        pair = line.split()
        if len(pair) != 2:
            raise TokenizerError(f"{path}: line {number} is not two tokens separated by a space: {line[:40]!r}")
        merged = vocab.get(pair[0] + pair[1])
        if merged != rank or not (vocab.get(pair[0], rank) < rank and vocab.get(pair[1], rank) < rank):
            problem = (f"vocab.json has no token {pair[0] + pair[1]!r}" if merged is None else
                       f"vocab.json gives {pair[0] + pair[1]!r} id {merged}, not the merge's rank {rank}" if merged != rank else
                       "a part is not a token made before it")
            raise TokenizerError(f"{path}: line {number} ({line.strip()}) does not match vocab.json: {problem}")
        merges.append((number, vocab[pair[0]], vocab[pair[1]]))
        rank += 1
    expected = rank + (ENDOFTEXT in vocab)  # the bytes, one token per merge, <|endoftext|>
    if len(vocab) != expected:
        raise TokenizerError(f"{path}: has {rank - 256} merges, so vocab.json should have {expected} tokens, not {len(vocab)}")
    bad = first_disagreement([(left, right) for _, left, right in merges], len(vocab))
    if bad is not None:
        number, left, right = merges[bad]
        token = {i: t for t, i in vocab.items()}
        text = token[left] + token[right]
        ranks = {(token[a], token[b]): r for r, (_, a, b) in enumerate(merges[:bad + 1])}
        split = " + ".join(repr(piece) for piece in pair_merge_bpe(text, ranks))
        raise TokenizerError(f"{path}: line {number} ({token[left]} {token[right]}) makes {text!r}, which GPT-2's "
                             f"pair-merge BPE splits as {split}: tiktoken and GPT-2's encoder would split such text "
                             "differently")


def first_disagreement(merges, n_tokens):
    """The index of the first merge (left id, right id), in rank order, whose token does not come back as itself
    under GPT-2's pair-merge BPE (pair_merge_bpe); None when every one does.

    Run on the token's text, pair-merge BPE makes the token (a, b) exactly when it reaches the pair [a, b],
    that is when no merge of a piece of a with a piece of b comes first. The pieces that can stand at the
    seam are a's right edge (a, then a's right part, its right part, ... down to a byte) and b's left edge,
    each there from the rank that made it to the rank that merged it into the next: a merge (x, y) of two
    of them happens when its rank falls while both are there (at y's own last rank too: the pass of that
    rank goes left to right, and takes x y before y z). Checked in rank order, the tokens before are known
    sound, so each merge walks the two edges once: a few steps, where running the algorithm on every
    token's text would cost seconds for GPT-2's 50,000 merges."""
    made, left, right = [-1] * n_tokens, [-1] * n_tokens, [-1] * n_tokens  # rank that made a token (-1: a byte), its parts
    rank_of = {}  # x * n_tokens + y -> the rank of the merge (x, y)
    for r, (a, b) in enumerate(merges, start=256):
        x, y, until_x, until_y = a, b, r, r  # the pieces at the seam, and the rank until which each stays
        while True:
            since_x, since_y = made[x], made[y]
            q = rank_of.get(x * n_tokens + y)
            if q is not None and since_x < q < until_x and since_y < q <= until_y:
                return r - 256
            if since_x > since_y:  # the piece made later gives way first to the one it was made from
                until_x, x = since_x, right[x]
            elif since_y > since_x:
                until_y, y = since_y, left[y]
            elif since_x < 0:  # two bytes: the seam's first pair
                break
            else:  # the same token on both sides
                until_x, x, until_y, y = since_x, right[x], since_y, left[y]
        rank_of[a * n_tokens + b] = r
        made[r], left[r], right[r] = r, a, b  # a merge's token id is its rank
    return None


def pair_merge_bpe(word, ranks):
    """GPT-2's BPE as its encoder.py runs it: merge, everywhere and left to right, the adjacent pair ranked
    first in merges.txt (ranks: {(left, right): rank}), until no pair of the word is listed. For messages; the
    loader checks with first_disagreement."""
    word = list(word)
    while len(word) > 1:
        pairs = [pair for pair in zip(word, word[1:]) if pair in ranks]
        if not pairs:
            break
        first = min(pairs, key=ranks.get)
        merged, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == first:
                merged.append(word[i] + word[i + 1])
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return word


def vocab_path(enc):  # the vocab.json an Encoding of load_tokenizer was made from
    return os.path.join(enc.name.removeprefix(NAME_PREFIX), "vocab.json")


def encode(enc, text):
    """Token ids of text; "<|endoftext|>" in it is the special token, as GPT-2 was trained."""
    return enc.encode(text, allowed_special=set(enc.special_tokens_set))


def endoftext_id(enc):
    """The id of <|endoftext|>, where GPT-2 starts from an empty prompt; a
    TokenizerError when the vocabulary has none."""
    if ENDOFTEXT not in enc.special_tokens_set:
        raise TokenizerError(f"{vocab_path(enc)} has no {ENDOFTEXT} token to start from: give a prompt")
    return enc.encode_single_token(ENDOFTEXT)


def check_vocabulary(enc, vocab_size, model_dir):
    """Raise TokenizerError unless the tokenizer has exactly the vocab_size tokens of
    the model in model_dir: with more, it gives the model ids it has no embedding
    for; with fewer, the model can predict ids it cannot write."""
    if enc.n_vocab != vocab_size:
        raise TokenizerError(f"{vocab_path(enc)} has {enc.n_vocab} tokens but {os.path.join(model_dir, 'config.json')} "
                             f"says vocab_size {vocab_size}: the tokenizer is not this model's")


def prompt_ids(enc, prompt):
    """The prompt's tokens; an empty prompt starts from <|endoftext|>, as GPT-2's unconditional samples do."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode arrive as lone surrogates
        raise TokenizerError("the prompt is not valid UTF-8 text (is the terminal's locale UTF-8? try LANG=C.UTF-8)") from None
    return encode(enc, prompt) if prompt else [endoftext_id(enc)]
