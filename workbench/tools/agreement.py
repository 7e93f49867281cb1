"""How far a draft's greedy text agrees with the oracle's, read as text: a figure that holds across vocabularies.

    python workbench/tools/agreement.py models/demo-oracle models/demo-draft DRAFT_DIR ...   # -> a table on stdout

Greedy speculative decoding keeps what the draft wrote as long as it is the oracle's
greedy text; when the two read different tokenizers, that comparison can only be made
on the text. For each held-out prompt (the 16 of assets/learned-pair/prompts.json, and
HELDOUT_PROMPTS more cut from the held-out documents, workbench/tools/data/heldout.txt, when
workbench/tools/make_corpus.py has written it) the oracle writes N_ORACLE tokens greedily, and for
each draft, from the same text read in the draft's own tokens:
  shared   the bytes the draft's greedy continuation has in common with the oracle's,
           from the start to the first difference, and the oracle's tokens wholly inside them;
  rounds   string-level greedy speculative decoding simulated along the oracle's text: each
           round the draft reads the text so far in its own tokens, writes N_DRAFT of its own
           tokens greedily, and the round keeps the oracle's tokens that lie wholly inside the
           part of that text the oracle's own agrees with, plus the oracle's next token. The
           figure is the oracle's tokens kept from drafts per round (the draft's acceptance).
The text so far ends at one of the oracle's token boundaries, which can cut a word the
draft's tokenizer would have spelled in one token; the draft reads it as it is (the
boundary problem a decoder across vocabularies has to handle; here it is only measured).
No PyTorch: the project's own models (gpt2.py) and tokenizer (weights/tokenizer.py).
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from gpt2 import GPT2  # noqa: E402
from speculative import greedy_generate  # noqa: E402
from weights.tokenizer import encode, load_tokenizer  # noqa: E402

N_ORACLE = 64          # the oracle's greedy tokens after each prompt
N_DRAFT = 4            # the draft's own tokens a round
HELDOUT_PROMPTS = 32   # prompts cut from the held-out documents, beside prompts.json's
PROMPT_CHARS = 300     # their length, about


def held_out_prompts(path=os.path.join(HERE, "data", "heldout.txt")):
    """[(kind, text)]: prompts.json's, then HELDOUT_PROMPTS cut at evenly spaced places of the held-out
    documents: PROMPT_CHARS characters of one document, from a word's start to a word's end."""
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = [(entry["kind"], entry["prompt"]) for entry in json.load(f)]
    if not os.path.isfile(path):
        return prompts
    with open(path, encoding="utf-8") as f:
        documents = [d for d in f.read().split("\n<|endoftext|>\n") if len(d) > 2 * PROMPT_CHARS]
    text = "\0".join(documents)  # \0: no prompt crosses from one document into the next
    for end in np.linspace(2 * PROMPT_CHARS, len(text) - 1, HELDOUT_PROMPTS).astype(int):
        while end < len(text) and not text[end].isspace():
            end += 1  # the prompt ends where a word ends
        start = end - PROMPT_CHARS
        while not text[start - 1].isspace():
            start += 1  # and starts where one starts
        prompt = text[start:end].split("\0")[-1].strip()
        if len(prompt) > PROMPT_CHARS // 3:
            prompts.append(("held-out", prompt))
    return prompts


def common_prefix(a, b):
    """The number of leading bytes a and b share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.frombuffer(a[:n], np.uint8) != np.frombuffer(b[:n], np.uint8))
    return int(differ[0]) if len(differ) else n


def tokens_inside(ends, n_bytes):
    """How many of the tokens ending at byte offsets `ends` (increasing) lie wholly in the first n_bytes."""
    return int(np.searchsorted(ends, n_bytes, side="right"))


def greedy_text(model, enc, text, n_new, until_bytes=None):
    """The model's greedy continuation of text (read in its own tokens) as bytes: n_new tokens, or fewer
    once until_bytes are written."""
    out = b""
    for token in greedy_generate(model, encode(enc, text), n_new):
        out += enc.decode_single_token_bytes(token)
        if until_bytes is not None and len(out) >= until_bytes:
            break
    return out


def measure(draft, draft_enc, prompt, oracle_tokens, oracle_enc):
    """(shared bytes, shared oracle tokens, [oracle tokens kept from drafts, each round]) for one prompt."""
    pieces = [oracle_enc.decode_single_token_bytes(t) for t in oracle_tokens]
    ends = np.cumsum([len(p) for p in pieces])
    oracle_text = b"".join(pieces)
    written = greedy_text(draft, draft_enc, prompt, min(2 * N_ORACLE, draft.n_positions - len(encode(draft_enc, prompt))),
                          until_bytes=len(oracle_text))
    shared = common_prefix(written, oracle_text)
    kept, j = [], 0
    while j < len(oracle_tokens):
        done = int(ends[j - 1]) if j else 0
        context = prompt + oracle_text[:done].decode("utf-8", errors="replace")
        drafted = greedy_text(draft, draft_enc, context, N_DRAFT)
        agreed = common_prefix(drafted, oracle_text[done:])
        k = tokens_inside(ends[j:] - done, agreed)
        kept.append(k)
        j += k + 1  # the oracle's own next token ends every round
    return shared, tokens_inside(ends, shared), kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("oracle", help="the oracle's directory (config.json, model.safetensors, vocab.json, merges.txt)")
    parser.add_argument("drafts", nargs="+", help="each draft's directory, its tokenizer files in it")
    args = parser.parse_args(argv)
    oracle, oracle_enc = GPT2.from_pretrained(args.oracle), load_tokenizer(args.oracle)
    drafts = [(d, GPT2.from_pretrained(d), load_tokenizer(d)) for d in args.drafts]
    prompts = held_out_prompts()
    results = {d: [] for d in args.drafts}
    for kind, prompt in prompts:
        oracle_tokens = list(greedy_generate(oracle, encode(oracle_enc, prompt), N_ORACLE))
        for name, draft, enc in drafts:
            results[name].append((kind, *measure(draft, enc, prompt, oracle_tokens, oracle_enc)))
    print(f"{len(prompts)} prompts ({sum(k != 'held-out' for k, _ in prompts)} of prompts.json); the oracle writes "
          f"{N_ORACLE} tokens greedily; rounds of {N_DRAFT} draft tokens")
    print(f"{'draft':<28} {'kinds':<10} {'shared bytes':>12} {'shared oracle tokens':>21} {'kept a round':>13} {'rounds':>7}")
    for name in args.drafts:
        for label, rows in (("all", results[name]), ("prompts.json", [r for r in results[name] if r[0] != "held-out"])):
            kept = [k for r in rows for k in r[3]]
            print(f"{os.path.basename(os.path.normpath(name)):<28} {label:<10} {np.mean([r[1] for r in rows]):>12.1f} "
                  f"{np.mean([r[2] for r in rows]):>21.2f} {np.mean(kept):>13.3f} {len(kept):>7}")


if __name__ == "__main__":
    main()
