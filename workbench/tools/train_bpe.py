"""A byte-level BPE of its own, trained on the learned pair's training documents: the other draft's tokenizer.

    python workbench/tools/make_corpus.py python3.11-doc_*.deb     # -> workbench/tools/data/train.txt (the training documents)
    python workbench/tools/train_bpe.py                            # -> workbench/tools/out/bpe-4k/vocab.json and merges.txt

GPT-2's tokenizer is a byte-level BPE (Sennrich et al. 2016, on bytes as Radford et
al. 2019 apply it); this trains one the same way, on other text and to another size,
so that its tokens and merges differ from the learned pair's (GPT-2's own, cut to
8,192 tokens: workbench/tools/tokenizer_cut.py). In order:
  1. pre-tokenize each training document with GPT-2's regex (weights/tokenizer.py's
     GPT2_PATTERN): a token never crosses the pieces it cuts (a word with its leading
     space, a number, a run of punctuation, a run of spaces);
  2. count the pieces ("words"), each a sequence of bytes, at first one token a byte;
  3. repeat until the vocabulary is full: count every adjacent pair of tokens in every
     word, weighted by the word's count; the most frequent pair becomes a new token
     whose id is the next one (its merge rank). Ties go to the pair whose left token's
     bytes come first in byte order, then its right token's, so a run on any machine
     makes the same files. Every word holding the pair is then rewritten as tiktoken
     will read the vocabulary (merge_word): any two adjacent tokens that spell the new
     token merge, so the words the counts come from are always exactly what the
     project's tokenizer makes of them;
  4. write vocab.json (token: id, each byte written in GPT-2's printable stand-in, ids
     0-255 the 256 bytes in GPT-2's own order) and merges.txt (a #version line, then one
     merge a line, line r making id 256 + r), and <|endoftext|> takes the last id.
These are GPT-2's file formats: weights/tokenizer.py loads them unchanged through tiktoken.
Pure Python and regex (which tiktoken installs): no PyTorch.
"""

import argparse
import heapq
import json
import os
import sys
from collections import Counter

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from weights.tokenizer import ENDOFTEXT, GPT2_PATTERN, bytes_to_unicode  # noqa: E402

N_TOKENS = 4096  # 256 bytes + 3,839 merges + <|endoftext|>
DOCUMENT_END = "\n<|endoftext|>\n"  # how workbench/tools/make_corpus.py joins the documents of train.txt
VERSION_LINE = "#version: 0.2"  # merges.txt's first line, as in GPT-2's


def count_words(documents):
    """Counter {word bytes: count} of the GPT-2 pre-tokenizer's pieces of every document (steps 1 and 2)."""
    pattern = regex.compile(GPT2_PATTERN)
    words = Counter()
    for document in documents:
        words.update(piece.encode("utf-8") for piece in pattern.findall(document))
    return words


def merge_word(parts, ranks):
    """parts rewritten as tiktoken encodes: while two adjacent tokens spell a token of ranks, merge the
    pair whose token has the lowest rank (the leftmost of equals)."""
    parts = list(parts)
    while len(parts) > 1:
        best, at = None, None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if at is None:
            return parts
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


def train(words, n_merges):
    """[(left, right)] of n_merges merges, in rank order, learned from words {bytes: count} (step 3).

    The pair counts are kept up to date word by word, not recounted: pair_count {pair: count},
    pair_words {pair: ids of the words holding it}, spellings {token bytes: pairs that spell it};
    the most frequent pair comes off a heap of (-count, left, right), whose stale entries (a
    count that has changed since it was pushed) are skipped."""
    parts = [[bytes([b]) for b in word] for word in words]
    counts = list(words.values())
    ranks = {bytes([b]): b for b in range(256)}  # only the keys matter to merge_word until a merge is made
    pair_count, pair_words, spellings = Counter(), {}, {}

    def add(w, sign):  # word w's pairs into (sign 1) or out of (sign -1) the counts
        for pair in zip(parts[w], parts[w][1:]):
            pair_count[pair] += sign * counts[w]
            if sign > 0:
                pair_words.setdefault(pair, set()).add(w)
                spellings.setdefault(pair[0] + pair[1], set()).add(pair)
            changed.add(pair)

    changed = set()
    for w in range(len(parts)):
        add(w, 1)
    heap = [(-c, left, right) for (left, right), c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges:
        while heap and (heap[0][0] != -pair_count.get(heap[0][1:], 0) or heap[0][0] == 0):
            heapq.heappop(heap)  # stale: the pair's count changed after this entry was pushed
        if not heap:
            break  # every word is one token: no pair is left to merge
        _, left, right = heapq.heappop(heap)
        token = left + right
        ranks[token] = 256 + len(merges)
        merges.append((left, right))
        changed = set()
        holders = set()
        for pair in spellings.pop(token, ()):
            holders |= pair_words.pop(pair, set())
        for w in sorted(holders):
            new = merge_word(parts[w], ranks)
            if new != parts[w]:
                add(w, -1)
                for pair in zip(parts[w], parts[w][1:]):
                    pair_words.get(pair, set()).discard(w)
                parts[w] = new
                add(w, 1)
        for pair in changed:
            if pair_count[pair] > 0:
                heapq.heappush(heap, (-pair_count[pair], *pair))
            else:
                del pair_count[pair]
                pair_words.pop(pair, None)
                spellings.get(pair[0] + pair[1], set()).discard(pair)
    return merges


def gpt2_files(merges):
    """(vocab.json text, merges.txt text) in GPT-2's formats (step 4)."""
    alphabet = bytes_to_unicode()
    by_character = sorted(range(256), key=lambda b: alphabet[b])  # GPT-2's ids 0-255: the stand-ins in order

    def written(token):  # bytes -> GPT-2's printable spelling
        return "".join(alphabet[b] for b in token)

    vocab = {alphabet[b]: i for i, b in enumerate(by_character)}
    for left, right in merges:
        vocab[written(left + right)] = len(vocab)
    vocab[ENDOFTEXT] = len(vocab)
    lines = [VERSION_LINE] + [f"{written(left)} {written(right)}" for left, right in merges]
    return json.dumps(vocab, ensure_ascii=False), "\n".join(lines) + "\n"


def training_documents(path):
    """The training documents of workbench/tools/make_corpus.py's train.txt."""
    if not os.path.isfile(path):
        sys.exit(f"error: {path} is missing: run workbench/tools/make_corpus.py first")
    with open(path, encoding="utf-8") as f:
        return f.read().split(DOCUMENT_END)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=N_TOKENS, help=f"vocabulary size, <|endoftext|> included "
                                                                     f"(default {N_TOKENS:,})")
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "train.txt"), help="default: workbench/tools/data/train.txt")
    parser.add_argument("--out", default=None, help="where to write (default: workbench/tools/out/bpe-<tokens/1024>k)")
    args = parser.parse_args(argv)
    if args.tokens < 257:
        sys.exit("error: --tokens must be at least 257 (the 256 bytes and <|endoftext|>)")
    out = args.out or os.path.join(HERE, "out", f"bpe-{args.tokens // 1024}k")
    documents = training_documents(args.corpus)
    words = count_words(documents)
    print(f"{len(documents)} documents, {sum(words.values()):,} pieces, {len(words):,} different ones")
    merges = train(words, args.tokens - 257)
    if len(merges) < args.tokens - 257:
        sys.exit(f"error: the corpus has only {len(merges)} merges to make, not {args.tokens - 257}")
    vocab_text, merges_text = gpt2_files(merges)
    os.makedirs(out, exist_ok=True)
    for name, text in (("vocab.json", vocab_text), ("merges.txt", merges_text)):
        with open(os.path.join(out, name) + ".tmp", "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(os.path.join(out, name) + ".tmp", os.path.join(out, name))
    print(f"{len(merges):,} merges -> {out}/vocab.json, merges.txt ({args.tokens:,} tokens)")


if __name__ == "__main__":
    main()
