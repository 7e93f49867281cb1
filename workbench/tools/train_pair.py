"""Train the learned pair: a GPT-2 oracle on the Python documentation, then a small draft that imitates it.

    pip install -r workbench/tools/requirements.txt                # PyTorch (CPU) for training only
    apt-get download python3.11-doc && python workbench/tools/make_corpus.py python3.11-doc_*.deb
    python workbench/tools/train_pair.py                           # under an hour on 2 cores
    python workbench/tools/train_pair.py --export                  # -> assets/learned-pair/ (float16, SHA256SUMS)

Three stages, each saved under workbench/tools/out/ when it ends; a stage whose file is
there is not trained again (delete the file to retrain it), and a stage stopped
midway goes on from its last save (NAME.partial.pt, every 100 steps):
  oracle.pt        the oracle, trained on text (cross-entropy);
  draft-text.pt    the draft trained on text alone, the baseline a distilled draft must beat;
  draft.pt         the draft trained on the oracle's distribution (distillation, Zhou et al.
                   2023, DistillSpec): the loss is the KL divergence from the oracle's next-token
                   distribution to the draft's, plus a little cross-entropy on the text itself.
Then each model's held-out loss and perplexity, and how often the draft's most likely token
is the oracle's (what greedy speculative decoding accepts), go to workbench/tools/out/report.json.

The models are GPT-2 exactly: the same modules, the same parameter names and layouts as
the hub's checkpoints (Conv1D weights stored [n_in, n_out]), tanh GELU, layer norms with
epsilon 1e-5, the LM head tied to wte. --export writes them with the project's own
checkpoint writer, so the project loads them as it loads any GPT-2.

Everything is seeded (torch's generator, the order of the training windows); two
threads, as on the machine it was made for. The same machine, torch version and
command give the same bytes.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA, OUT = os.path.join(HERE, "data"), os.path.join(HERE, "out")
ASSETS = os.path.join(ROOT, "assets", "learned-pair")
VOCAB, WINDOW = 8192, 512
SEED = 1234
SHAPES = {  # the pair's shapes; docs/LEARNED_PAIR.md says why these
    "oracle": {"n_layer": 8, "n_head": 6, "n_embd": 288},
    "draft": {"n_layer": 1, "n_head": 2, "n_embd": 128},
}
STEPS = {"oracle": 1200, "draft-text": 400, "draft": 600}  # 16 windows of 256 tokens each
BATCH, SEQ = 16, 256
LR = {"oracle": 1.5e-3, "draft-text": 3e-3, "draft": 3e-3}
WARMUP = 100
SAVE_EVERY = 100  # steps between saves of a stage in progress
DISTILL_CE = 0.2  # weight of the text's cross-entropy beside the KL to the oracle


# ---------------------------------------------------------------------------
# GPT-2, with the checkpoint's names and layouts
# ---------------------------------------------------------------------------

class Conv1D(nn.Module):
    """GPT-2's linear layer: weight [n_in, n_out], y = x @ weight + bias (the checkpoint's layout)."""

    def __init__(self, n_in, n_out, std=0.02):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) * std)
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, d, n_head, n_layer):
        super().__init__()
        self.n_head = n_head
        self.c_attn = Conv1D(d, 3 * d)
        self.c_proj = Conv1D(d, d, std=0.02 / math.sqrt(2 * n_layer))  # GPT-2's scaled residual init

    def forward(self, x):  # [B, T, d] -> [B, T, d]
        B, T, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(B, T, self.n_head, d // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, d, n_layer):
        super().__init__()
        self.c_fc = Conv1D(d, 4 * d)
        self.c_proj = Conv1D(4 * d, d, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, n_head, n_layer):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d, eps=1e-5), Attention(d, n_head, n_layer)
        self.ln_2, self.mlp = nn.LayerNorm(d, eps=1e-5), MLP(d, n_layer)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, vocab_size=VOCAB):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(WINDOW, n_embd)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        self.h = nn.ModuleList(Block(n_embd, n_head, n_layer) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)

    def forward(self, ids):  # [B, T] -> logits [B, T, vocab_size]
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T  # the LM head is wte, as in GPT-2


def config(shape, vocab_size=VOCAB):
    """config.json for the project's loader: the hub's GPT2Config keys (<|endoftext|> is the last id)."""
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], **shape, "n_positions": WINDOW,
            "n_ctx": WINDOW, "vocab_size": vocab_size, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
            "bos_token_id": vocab_size - 1, "eos_token_id": vocab_size - 1}


# ---------------------------------------------------------------------------
# Data and training
# ---------------------------------------------------------------------------

def load_ids(part):
    path = os.path.join(DATA, f"{part}.ids")
    if not os.path.isfile(path):
        sys.exit(f"error: {path} is missing: run workbench/tools/make_corpus.py first")
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16).astype(np.int64))


def batch(ids, generator):
    """BATCH random windows of SEQ + 1 tokens (inputs and next-token targets)."""
    starts = torch.randint(0, len(ids) - SEQ - 1, (BATCH,), generator=generator)
    return torch.stack([ids[s:s + SEQ + 1] for s in starts.tolist()])


def heldout_windows(ids, n=64):
    """n fixed windows spread over the held-out text: every evaluation sees the same ones."""
    starts = np.linspace(0, len(ids) - SEQ - 2, n).astype(int)
    return torch.stack([ids[s:s + SEQ + 1] for s in starts])


def learning_rate(step, n_steps, peak):
    if step < WARMUP:
        return peak * (step + 1) / WARMUP
    return peak * 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / max(1, n_steps - WARMUP))) * 0.9 + peak * 0.05


def optimizer(model, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95))


def train(name, model, ids, heldout, teacher=None):
    """Train model for STEPS[name] steps; with a teacher, on KL(teacher || model) + DISTILL_CE * text CE.

    Every SAVE_EVERY steps the whole state (model, optimizer, step, the batch generator) goes to
    workbench/tools/out/NAME.partial.pt, and a run that finds it goes on from there: a machine that stops
    mid-stage loses minutes, not the stage. Resumed or not, the same batches come in the same order."""
    generator = torch.Generator().manual_seed(SEED + len(name))
    opt = optimizer(model, LR[name])
    n_steps, first = STEPS[name], resume(name, model, opt, generator)
    bar = tqdm(range(first, n_steps), initial=first, total=n_steps, desc=f"training {name}", unit="step")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, n_steps, LR[name])
        window = batch(ids, generator)
        x, y = window[:, :-1], window[:, 1:]
        logits = model(x)
        ce = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss = ce
        if teacher is not None:
            with torch.no_grad():
                target = F.log_softmax(teacher(x), dim=-1)
            kl = F.kl_div(F.log_softmax(logits, dim=-1), target, log_target=True, reduction="batchmean") / SEQ
            loss = kl + DISTILL_CE * ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        shown = {"loss": f"{ce.item():.3f}"}
        if teacher is not None:
            shown["kl"] = f"{kl.item():.3f}"
        if step % 100 == 99 or step == n_steps - 1:
            shown["heldout"] = f"{evaluate(model, heldout)['loss']:.3f}"
            bar.write(f"{name} step {step + 1}: held-out loss {shown['heldout']}")
        bar.set_postfix(shown, refresh=False)
        if (step + 1) % SAVE_EVERY == 0 and step + 1 < n_steps:
            save_partial(name, model, opt, generator, step + 1)
    return model


def partial_path(name):
    return os.path.join(OUT, f"{name}.partial.pt")


def resume(name, model, opt, generator):
    """The step a stopped run of stage `name` saved, its model, optimizer and batch generator loaded back;
    0 when no run left one (workbench/tools/out/NAME.partial.pt)."""
    partial = partial_path(name)
    if not os.path.isfile(partial):
        return 0
    saved = torch.load(partial)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    generator.set_state(saved["generator"])
    print(f"{name}: going on from step {saved['step']} ({partial})")
    return saved["step"]


def save_partial(name, model, opt, generator, step):
    save({"model": model.state_dict(), "optimizer": opt.state_dict(), "generator": generator.get_state(),
          "step": step}, partial_path(name))


def forget_partial(name):  # once the stage's weights are saved
    if os.path.isfile(partial_path(name)):
        os.remove(partial_path(name))


def save(obj, path):
    """torch.save through a temporary name: a run that stops mid-write leaves nothing a later run trusts."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


@torch.no_grad()
def evaluate(model, windows, teacher=None):
    """Held-out loss (nats per token) and perplexity; with a teacher, how often both argmaxes agree."""
    model.eval()
    losses, agree = [], []
    for chunk in windows.split(16):
        logits = model(chunk[:, :-1])
        losses.append(F.cross_entropy(logits.reshape(-1, VOCAB), chunk[:, 1:].reshape(-1), reduction="none"))
        if teacher is not None:
            agree.append((logits.argmax(-1) == teacher(chunk[:, :-1]).argmax(-1)).float().reshape(-1))
    model.train()
    loss = torch.cat(losses).mean().item()
    result = {"loss": round(loss, 4), "perplexity": round(math.exp(loss), 2)}
    if teacher is not None:
        result["top1_agreement_with_oracle"] = round(torch.cat(agree).mean().item(), 4)
    return result


def stage(name, shape, ids, heldout, teacher=None):
    """The model of a stage: loaded from workbench/tools/out/NAME.pt if that stage ran before, else trained and saved."""
    path = os.path.join(OUT, f"{name}.pt")
    torch.manual_seed(SEED + len(name))
    model = GPT2(**shape)
    if os.path.isfile(path):
        model.load_state_dict(torch.load(path))
        print(f"{name}: loaded {path} (delete it to train again)")
        return model, 0.0
    start = time.time()
    train(name, model, ids, heldout, teacher)
    seconds = time.time() - start
    save(model.state_dict(), path)
    forget_partial(name)
    return model, seconds


# ---------------------------------------------------------------------------
# Export: the project's own checkpoint writer, float16
# ---------------------------------------------------------------------------

def export():
    """assets/learned-pair/: {oracle,draft}/config.json and model.safetensors (float16, written by the
    project's own checkpoint writer), the cut tokenizer's vocab.json and merges.txt, and SHA256SUMS."""
    sys.path.insert(0, ROOT)
    from workbench.tools.tokenizer_cut import write_cut  # noqa: E402
    from weights.checkpoint import save_safetensors  # noqa: E402  the project's writer
    os.makedirs(ASSETS, exist_ok=True)
    for role in ("oracle", "draft"):
        state = torch.load(os.path.join(OUT, f"{role}.pt"))
        tensors = {key: value.numpy() for key, value in state.items()}
        folder = os.path.join(ASSETS, role)
        os.makedirs(folder, exist_ok=True)
        save_safetensors(os.path.join(folder, "model.safetensors"), {key: t.shape for key, t in tensors.items()},
                         tensors.__getitem__, dtype="F16")
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config(SHAPES[role]), f, indent=2)
            f.write("\n")
    write_cut(ASSETS)
    names = ["vocab.json", "merges.txt"] + [f"{role}/{name}" for role in ("oracle", "draft")
                                              for name in ("config.json", "model.safetensors")]
    sums = []
    for name in names:
        with open(os.path.join(ASSETS, name), "rb") as f:
            sums.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}")
    with open(os.path.join(ASSETS, "SHA256SUMS"), "w") as f:
        f.write("\n".join(sums) + "\n")
    print("\n".join(sums))


def set_places(out, assets):
    """Where the stages are saved and where --export writes: another place reproduces without overwriting."""
    global OUT, ASSETS
    OUT, ASSETS = os.path.abspath(out), os.path.abspath(assets)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", action="store_true", help="write assets/learned-pair/ from workbench/tools/out/ (no training)")
    parser.add_argument("--out", default=OUT, help="where the stages are saved (default: workbench/tools/out/)")
    parser.add_argument("--assets", default=ASSETS, help="where --export writes (default: assets/learned-pair/)")
    args = parser.parse_args(argv)
    set_places(args.out, args.assets)
    if args.export:
        return export()
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)  # tiny gradients as denormals make CPU arithmetic many times slower
    train_ids, heldout = load_ids("train"), heldout_windows(load_ids("heldout"))
    print(f"corpus: {len(train_ids):,} training tokens; held out: {heldout.numel():,} tokens in {len(heldout)} windows")
    times, report = {}, {}
    oracle, times["oracle"] = stage("oracle", SHAPES["oracle"], train_ids, heldout)
    oracle.eval()
    for p in oracle.parameters():
        p.requires_grad_(False)
    draft_text, times["draft-text"] = stage("draft-text", SHAPES["draft"], train_ids, heldout)
    draft, times["draft"] = stage("draft", SHAPES["draft"], train_ids, heldout, teacher=oracle)
    report["oracle"] = {**SHAPES["oracle"], **evaluate(oracle, heldout)}
    report["draft-text"] = {**SHAPES["draft"], **evaluate(draft_text, heldout, teacher=oracle)}
    report["draft"] = {**SHAPES["draft"], **evaluate(draft, heldout, teacher=oracle)}
    report["training_seconds"] = {k: round(v) for k, v in times.items()}
    report["torch"] = torch.__version__
    with open(os.path.join(OUT, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
