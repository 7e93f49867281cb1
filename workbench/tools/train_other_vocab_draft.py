"""Train draft-4k: a one-layer GPT-2 with a tokenizer of its own, to draft for the learned oracle across vocabularies.

    python workbench/tools/make_corpus.py python3.11-doc_*.deb     # the pair's corpus and split (workbench/tools/corpus_split.json)
    python workbench/tools/train_bpe.py                            # its tokenizer -> workbench/tools/out/bpe-4k/
    python workbench/tools/train_other_vocab_draft.py              # the stages below (the first two may run at once:
                                                         # --only oracle-greedy and --only text, --threads 1 each)
    python workbench/tools/train_other_vocab_draft.py --export     # -> assets/learned-pair/draft-4k/ and its lines of SHA256SUMS

The pair's draft was distilled from the oracle's next-token distributions (KL on its
logits), which needs the two to share a vocabulary. Across vocabularies what the two can
share is text, and greedy speculative decoding keeps exactly the drafted text that agrees
with the oracle's greedy text; so this draft learns from that text (sequence-level
distillation, Kim and Rush 2016). Stages, each saved under workbench/tools/out/ when it ends (a
stage whose file is there is not run again; one stopped midway goes on from its last save):
  oracle-greedy.json   the shipped oracle's greedy continuations (GEN_TOKENS of its tokens) of
                       GEN_PROMPTS prompts cut from the training documents (GEN_PROMPT_TOKENS
                       of its tokens), as text: prompt and continuation;
  draft-4k-text.pt     the draft trained on the training documents alone, in its own tokens:
                       the baseline the distilled stage has to beat;
  draft-4k.pt          the text stage trained on: half of every batch from the oracle's greedy
                       text, half from the training documents. It is what ships.
The held-out loss per byte (the held-out documents' cross-entropy in nats, over their UTF-8
bytes: comparable across tokenizers) of each, beside the shipped oracle's and the shipped
draft's, goes to workbench/tools/out/report-4k.json. workbench/tools/agreement.py measures how often the shipped
drafts' greedy text agrees with the oracle's on held-out text (no PyTorch).

The model is train_pair.py's GPT-2, of the pair's draft's shape, with a vocabulary of 4,096:
the hub's names and layouts, the LM head tied to wte. Seeded as train_pair.py is.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from workbench.tools import train_pair as pair  # noqa: E402  the pair's GPT-2, schedule, optimizer and batches
from weights.checkpoint import load_safetensors, save_safetensors  # noqa: E402
from weights.tokenizer import encode, load_tokenizer  # noqa: E402

NAME = "draft-4k"
BPE = os.path.join(pair.OUT, "bpe-4k")  # workbench/tools/train_bpe.py's output
VOCAB = 4096
GEN_PROMPTS, GEN_PROMPT_TOKENS, GEN_TOKENS, GEN_BATCH = 1024, (32, 64, 128), 128, 64
STEPS = {"text": 400, "distilled": 800}  # batches of pair.BATCH windows of pair.SEQ tokens
LR = 3e-3
EVAL_EVERY = 100


# ---------------------------------------------------------------------------
# Models: the shipped oracle and draft in torch, greedy decoding with a cache
# ---------------------------------------------------------------------------

def shipped(role):
    """assets/learned-pair/ROLE/ as a torch GPT-2 (float16 on disk, float32 here, as the project widens it)."""
    folder = os.path.join(pair.ASSETS, role)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    model = pair.GPT2(config["n_layer"], config["n_head"], config["n_embd"], config["vocab_size"])
    tensors = load_safetensors(os.path.join(folder, "model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in tensors.items()})
    return model.eval()


@torch.no_grad()
def greedy(model, ids, n_new):
    """[B, T] prompts of one length -> [B, n_new] greedy continuations, keys and values cached."""
    past, out, x_ids = [None] * len(model.h), [], ids
    for _ in range(n_new):
        start = 0 if past[0] is None else past[0][0].shape[2]
        x = model.wte(x_ids) + model.wpe(torch.arange(start, start + x_ids.shape[1]))
        for i, block in enumerate(model.h):
            B, T, d = x.shape
            h = block.attn.c_attn(block.ln_1(x))  # [B, T, d] -> [B, T, 3d]
            q, k, v = (t.view(B, T, block.attn.n_head, -1).transpose(1, 2) for t in h.split(d, dim=2))
            if past[i] is not None:
                k, v = torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2)
            past[i] = (k, v)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=start == 0)  # one new row sees every key
            x = x + block.attn.c_proj(y.transpose(1, 2).reshape(B, T, d))
            x = x + block.mlp(block.ln_2(x))
        x_ids = (model.ln_f(x[:, -1]) @ model.wte.weight.T).argmax(-1, keepdim=True)  # [B, 1]
        out.append(x_ids)
    return torch.cat(out, dim=1)


# ---------------------------------------------------------------------------
# Stage 1: the oracle's greedy text from training prompts
# ---------------------------------------------------------------------------

def oracle_greedy_text():
    """[text]: prompt and the oracle's greedy continuation, GEN_PROMPTS of them (workbench/tools/out/oracle-greedy.json)."""
    path = os.path.join(pair.OUT, "oracle-greedy.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    partial = path.replace(".json", ".partial.json")
    texts = []
    if os.path.isfile(partial):
        with open(partial, encoding="utf-8") as f:
            texts = json.load(f)
    oracle, enc = shipped("oracle"), load_tokenizer(pair.ASSETS)
    ids = pair.load_ids("train")  # the training documents in the oracle's tokens
    generator = torch.Generator().manual_seed(pair.SEED)
    starts = torch.randint(0, len(ids) - max(GEN_PROMPT_TOKENS) - 1, (GEN_PROMPTS,), generator=generator)
    bar = tqdm(initial=len(texts), total=GEN_PROMPTS, unit="prompt", desc="the oracle's greedy text")
    for first in range(len(texts), GEN_PROMPTS, GEN_BATCH):
        n_prompt = GEN_PROMPT_TOKENS[first // GEN_BATCH % len(GEN_PROMPT_TOKENS)]  # one length a batch
        prompts = torch.stack([ids[s:s + n_prompt] for s in starts[first:first + GEN_BATCH].tolist()])
        continuations = greedy(oracle, prompts, GEN_TOKENS)
        texts += [enc.decode(p.tolist() + c.tolist()) for p, c in zip(prompts, continuations)]
        bar.update(len(prompts))
        write_json(texts, partial)
    write_json(texts, path)
    os.remove(partial)
    return texts


def write_json(obj, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------------------
# Stages 2 and 3: the draft in its own tokens
# ---------------------------------------------------------------------------

def documents(part):
    """The documents of workbench/tools/data/PART.txt (workbench/tools/make_corpus.py joins them with <|endoftext|>)."""
    path = os.path.join(pair.DATA, f"{part}.txt")
    if not os.path.isfile(path):
        sys.exit(f"error: {path} is missing: run workbench/tools/make_corpus.py first")
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n<|endoftext|>\n")


def stream(enc, texts):
    """One tensor of ids: each text in enc's tokens, ended by <|endoftext|>."""
    eot = enc.eot_token
    ids = []
    for text in texts:
        ids += encode(enc, text) + [eot]
    return torch.tensor(ids, dtype=torch.int64)


def windows(ids, n, generator):
    """n random windows of pair.SEQ + 1 tokens (inputs and next-token targets)."""
    starts = torch.randint(0, len(ids) - pair.SEQ - 1, (n,), generator=generator)
    return torch.stack([ids[s:s + pair.SEQ + 1] for s in starts.tolist()])


def heldout_windows(enc, texts):
    """(windows [n, SEQ + 1], the UTF-8 bytes of each target token [n, SEQ]): the held-out documents
    cut into consecutive windows that overlap by one token, so every token but the first is a target once;
    <|endoftext|> counts no byte and no loss."""
    ids = stream(enc, texts)
    n = (len(ids) - 1) // pair.SEQ
    starts = torch.arange(n) * pair.SEQ
    win = torch.stack([ids[s:s + pair.SEQ + 1] for s in starts.tolist()])
    length = torch.tensor([0 if i == enc.eot_token else len(enc.decode_single_token_bytes(i))
                           for i in range(enc.n_vocab)])
    return win, length[win[:, 1:]]


@torch.no_grad()
def loss_per_byte(model, heldout):
    """Held-out cross-entropy in nats per UTF-8 byte (targets <|endoftext|> aside), and per token."""
    win, n_bytes = heldout
    model.eval()
    total, tokens = 0.0, 0
    for chunk, chunk_bytes in zip(win.split(16), n_bytes.split(16)):
        logits = model(chunk[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1), reduction="none")
        counted = chunk_bytes.reshape(-1) > 0
        total += ce[counted].sum().item()
        tokens += counted.sum().item()
    model.train()
    n = n_bytes.sum().item()
    return {"loss_per_byte": round(total / n, 4), "loss_per_token": round(total / tokens, 4),
            "bytes_per_token": round(n / tokens, 3)}


def train(name, model, sources, n_steps, heldout):
    """Train model for n_steps on batches drawn from sources [(ids, windows a batch)]: cross-entropy on
    the text. Resumable from workbench/tools/out/NAME.partial.pt (every pair.SAVE_EVERY steps), as train_pair.py is."""
    generator = torch.Generator().manual_seed(pair.SEED + len(name))
    opt = pair.optimizer(model, LR)
    first = pair.resume(name, model, opt, generator)
    bar = tqdm(range(first, n_steps), initial=first, total=n_steps, desc=f"training {name}", unit="step")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = pair.learning_rate(step, n_steps, LR)
        window = torch.cat([windows(ids, n, generator) for ids, n in sources])
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), window[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        bar.set_postfix({"loss": f"{loss.item():.3f}"}, refresh=False)
        if (step + 1) % EVAL_EVERY == 0 or step + 1 == n_steps:
            bar.write(f"{name} step {step + 1}: held-out {loss_per_byte(model, heldout)}")
        if (step + 1) % pair.SAVE_EVERY == 0 and step + 1 < n_steps:
            pair.save_partial(name, model, opt, generator, step + 1)
    return model


def stage(name, sources, n_steps, heldout, start_from=None):
    """The draft of a stage: loaded from workbench/tools/out/NAME.pt if it ran before, else trained (from start_from's
    weights, or from a seeded initialisation) and saved. -> (model, seconds)."""
    path = os.path.join(pair.OUT, f"{name}.pt")
    torch.manual_seed(pair.SEED + len(name))
    model = pair.GPT2(**pair.SHAPES["draft"], vocab_size=VOCAB)
    if os.path.isfile(path):
        model.load_state_dict(torch.load(path))
        print(f"{name}: loaded {path} (delete it to train again)")
        return model, 0.0
    if start_from is not None:
        model.load_state_dict(start_from.state_dict())
    began = time.time()
    train(name, model, sources, n_steps, heldout)
    seconds = time.time() - began
    pair.save(model.state_dict(), path)
    pair.forget_partial(name)
    return model, seconds


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

def export(stage=NAME, folder=None):
    """A stage's draft as a model directory: config.json, model.safetensors (float16, the project's writer), the
    tokenizer's vocab.json and merges.txt. By default draft-4k into assets/learned-pair/draft-4k/, whose files'
    SHA-256 then replace or join their lines in SHA256SUMS."""
    shipping = folder is None
    folder = folder or os.path.join(pair.ASSETS, NAME)
    os.makedirs(folder, exist_ok=True)
    state = torch.load(os.path.join(pair.OUT, f"{stage}.pt"))
    tensors = {key: value.numpy() for key, value in state.items()}
    save_safetensors(os.path.join(folder, "model.safetensors"), {k: t.shape for k, t in tensors.items()},
                     tensors.__getitem__, dtype="F16")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(pair.config(pair.SHAPES["draft"], VOCAB), f, indent=2)
        f.write("\n")
    for name in ("vocab.json", "merges.txt"):
        with open(os.path.join(BPE, name), "rb") as src, open(os.path.join(folder, name), "wb") as dest:
            dest.write(src.read())
    if not shipping:
        return print(f"{stage} -> {folder}")
    names = [f"{NAME}/{f}" for f in ("config.json", "model.safetensors", "vocab.json", "merges.txt")]
    sums_path = os.path.join(pair.ASSETS, "SHA256SUMS")
    with open(sums_path) as f:
        lines = [line for line in f.read().splitlines() if line and line.split()[-1] not in names]
    for name in names:
        with open(os.path.join(pair.ASSETS, name), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}")
    with open(sums_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(names):]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", action="store_true", help="write assets/learned-pair/draft-4k/ from workbench/tools/out/")
    parser.add_argument("--export-text", metavar="DIR", help="write the text stage's draft (the baseline) to DIR, "
                        "a model directory for workbench/tools/agreement.py")
    parser.add_argument("--only", choices=("oracle-greedy", "text"), help="run this stage alone (the two do not "
                        "depend on each other, so they may run at once, each with --threads 1)")
    parser.add_argument("--threads", type=int, default=2, help="torch's threads (default 2)")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(BPE, "vocab.json")):
        sys.exit(f"error: {BPE}/vocab.json is missing: run workbench/tools/train_bpe.py first")
    if args.export:
        return export()
    if args.export_text:
        return export(f"{NAME}-text", args.export_text)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    enc, oracle_enc = load_tokenizer(BPE), load_tokenizer(pair.ASSETS)
    assert enc.n_vocab == VOCAB, enc.n_vocab
    times, report = {}, {}
    if args.only != "text":
        began = time.time()
        generated = oracle_greedy_text()
        times["oracle-greedy"] = time.time() - began
        if args.only:
            return print(f"oracle-greedy: {times['oracle-greedy']:.0f} s")
    train_text, heldout_text = documents("train"), documents("heldout")
    corpus = stream(enc, train_text)
    heldout = heldout_windows(enc, heldout_text)
    print(f"training documents: {len(corpus):,} tokens; held out: {heldout[1].sum().item():,} bytes")
    text, times["text"] = stage(f"{NAME}-text", [(corpus, pair.BATCH)], STEPS["text"], heldout)
    if args.only:
        return print(f"text: {times['text']:.0f} s")
    distilled = stream(enc, generated)
    print(f"the oracle's greedy text: {len(distilled):,} tokens ({len(generated)} texts)")
    draft, times["distilled"] = stage(NAME, [(distilled, pair.BATCH // 2), (corpus, pair.BATCH // 2)],
                                      STEPS["distilled"], heldout, start_from=text)
    report[f"{NAME}-text"] = {"steps": STEPS["text"], **loss_per_byte(text, heldout)}
    report[NAME] = {"steps": STEPS["text"] + STEPS["distilled"], **loss_per_byte(draft, heldout)}
    oracle_heldout = heldout_windows(oracle_enc, heldout_text)
    for role in ("draft", "oracle"):
        report[f"shipped {role}"] = loss_per_byte(shipped(role), oracle_heldout)
    report["seconds"] = {k: round(v) for k, v in times.items()}
    report["torch"] = torch.__version__
    write_json(report, os.path.join(pair.OUT, "report-4k.json"))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
