"""Train drafters that read the learned oracle's own hidden states: an EAGLE-style head, Medusa heads,
and a trained early exit (Kangaroo's adapter).

    pip install -r workbench/tools/requirements.txt                # PyTorch (CPU) for training only
    python workbench/tools/make_corpus.py python3.11-doc_*.deb     # workbench/tools/data/, as for the pair
    python workbench/tools/train_heads.py                          # under an hour on 2 cores
    python workbench/tools/train_heads.py --export                 # -> assets/learned-pair/heads/ (float16, SHA256SUMS)

The oracle is the shipped one (assets/learned-pair/oracle, float16 widened to float32) and stays
frozen: every head learns from what it computes on the training split, one oracle pass per batch
serving all three. Their parameters are disjoint and AdamW updates each parameter on its own
gradient, so training them in one loop is the same as training each alone on the same batches.

  eagle   Li et al. 2024, EAGLE (arXiv 2401.15077): at position t the head reads the oracle's top
          hidden state f_t (before ln_f) and the embedding of the next token x_(t+1), concatenated and
          mapped back to the width by fc, then one GPT-2 block; its output is its guess of f_(t+1),
          which the oracle's own ln_f and LM head turn into a draft of x_(t+2). Loss: smooth L1 between
          the guessed and the true feature, plus 0.1 times the cross-entropy of the draft's distribution
          against the oracle's (the paper's weights). The inputs get uniform noise (the paper's
          U(-0.1, 0.1), scaled by the features' spread here), since at draft time the head reads its own
          guesses, not the oracle's features.
  medusa  Cai et al. 2024, Medusa (arXiv 2401.10774): head k (k = 1..3) maps the oracle's last hidden
          state h_t (after ln_f) through one residual block, h + SiLU(W_k h + b_k), into the oracle's
          LM head, and guesses x_(t+1+k): the token k places after the oracle's own next one. Loss: the
          cross-entropy against the oracle's distribution at that place (Medusa-2's self-distillation).
  exit    Kangaroo (Liu et al. 2024, arXiv 2404.18911): an adapter, one attention layer with its layer
          norm and a residual, maps the oracle's state after its first EXIT_LAYER blocks to what its
          ln_f and LM head expect. Loss: the cross-entropy against the oracle's distribution at t.
          Initialised so that it starts as the untrained exit (attention's output projection zero).

Weights are written in GPT-2's layouts (Conv1D weights [n_in, n_out], the block's checkpoint names)
so beyond/ runs them with gpt2.py's own functions. Seeded, two threads, as train_pair.py.
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
from torch import nn
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from workbench.tools import train_pair  # noqa: E402  the pair's GPT-2 modules, data and schedule
from workbench.tools.train_pair import Attention, Block, batch, heldout_windows, learning_rate, load_ids  # noqa: E402

ORACLE = os.path.join(ROOT, "assets", "learned-pair", "oracle")
OUT = os.path.join(HERE, "out")
ASSETS = os.path.join(ROOT, "assets", "learned-pair", "heads")
SEED = 4321
STEPS, LR, BATCH = 1500, 2e-3, 16  # batches of 16 windows of 256 tokens, as the pair's
N_MEDUSA = 3          # Medusa heads: guesses 2, 3 and 4 tokens ahead of the oracle's next
EXIT_LAYER = 4        # the exit adapter reads the state after this many of the oracle's 8 blocks
EAGLE_CE = 0.1        # EAGLE's weight of the token loss beside the feature regression
NOISE = 0.1           # EAGLE's uniform input noise, times the features' standard deviation
SAMPLED = 64          # positions of each 256-token window whose token losses count


def load_oracle():
    """The shipped oracle as train_pair.GPT2, float32, frozen."""
    from weights.checkpoint import load  # the project's own reader
    config, tensors = load(ORACLE)
    model = train_pair.GPT2(config["n_layer"], config["n_head"], config["n_embd"])
    state = {key: torch.from_numpy(np.array(t, dtype=np.float32)) for key, t in tensors.items()}
    model.load_state_dict(state, strict=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, config


@torch.no_grad()
def oracle_states(oracle, x):  # [B, T] -> (the state after EXIT_LAYER blocks, the top state f before ln_f), [B, T, d]
    h = oracle.wte(x) + oracle.wpe(torch.arange(x.shape[1]))
    for i, block in enumerate(oracle.h):
        h = block(h)
        if i + 1 == EXIT_LAYER:
            early = h
    return early, h


def lm_logits(oracle, f):  # [..., d] -> [..., VOCAB]: the oracle's own ln_f and LM head
    return oracle.ln_f(f) @ oracle.wte.weight.T


def soft_ce(logits, target_logits):  # cross-entropy of softmax(logits) against the target's distribution
    return -(F.softmax(target_logits, -1) * F.log_softmax(logits, -1)).sum(-1).mean()


class EagleHead(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.fc = train_pair.Conv1D(2 * d, d)
        self.h = nn.ModuleList([Block(d, n_head, 1)])

    def forward(self, embedding, feature):  # [B, T, d] x 2 -> the next feature [B, T, d]
        return self.h[0](self.fc(torch.cat([embedding, feature], dim=-1)))


class MedusaHeads(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.heads = nn.ModuleList(train_pair.Conv1D(d, d) for _ in range(n_heads))
        for head in self.heads:  # start as the identity: every head first guesses the oracle's next token
            nn.init.zeros_(head.weight)

    def forward(self, h):  # [B, T, d] -> [n_heads, B, T, d]
        return torch.stack([h + F.silu(head(h)) for head in self.heads])


class ExitAdapter(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d, eps=1e-5), Attention(d, n_head, 1)
        nn.init.zeros_(self.attn.c_proj.weight)  # starts as the untrained exit: adds nothing

    def forward(self, x):  # [B, T, d] -> [B, T, d], then the oracle's ln_f and LM head
        return x + self.attn(self.ln_1(x))


def losses(heads, oracle, window, generator):
    """Each head's loss on a batch of windows [B, T + 1], with EAGLE's input noise.

    The token losses are taken at SAMPLED random positions of each window, not all of them: the LM head's
    product over 8,192 tokens is most of a step's cost, and the heads' own layers still see every position."""
    eagle, medusa, exit_adapter = heads
    x = window[:, :-1]
    early, f = oracle_states(oracle, x)
    t = torch.randperm(x.shape[1] - 1 - N_MEDUSA, generator=generator)[:SAMPLED]  # positions whose losses count
    with torch.no_grad():
        target = {k: lm_logits(oracle, f[:, t + k]) for k in range(N_MEDUSA + 1)}  # the oracle's logits at t + k
    # EAGLE: (f_t, x_(t+1)) -> f_(t+1), drafting x_(t+2) against the oracle's logits at t + 1.
    f_in = f[:, :-1]
    f_in = f_in + (torch.rand(f_in.shape, generator=generator) * 2 - 1) * NOISE * f_in.std()
    guess = eagle(oracle.wte(x[:, 1:]), f_in)
    eagle_loss = F.smooth_l1_loss(guess, f[:, 1:]) + EAGLE_CE * soft_ce(lm_logits(oracle, guess[:, t]), target[1])
    # Medusa: head k at t guesses the token after position t + k, the oracle's logits there.
    out = medusa(oracle.ln_f(f[:, t]))
    medusa_loss = sum(soft_ce(out[k] @ oracle.wte.weight.T, target[k + 1]) for k in range(N_MEDUSA)) / N_MEDUSA
    # The exit: after EXIT_LAYER blocks, through the adapter, the oracle's own answer at t.
    exit_loss = soft_ce(lm_logits(oracle, exit_adapter(early)[:, t]), target[0])
    return {"eagle": eagle_loss, "medusa": medusa_loss, "exit": exit_loss}


@torch.no_grad()
def evaluate(heads, oracle, windows):
    """Held-out top-1 agreement with the oracle: the quantity greedy verification accepts, one step ahead."""
    eagle, medusa, exit_adapter = heads
    agree = {"eagle": [], "exit": [], "untrained exit": [], **{f"medusa {k + 1}": [] for k in range(N_MEDUSA)}}
    lm_head = oracle.wte.weight.T
    for chunk in windows.split(16):
        x = chunk[:, :-1]
        early, f = oracle_states(oracle, x)
        choice = lm_logits(oracle, f).argmax(-1)  # the oracle's token after each position
        guess = eagle(oracle.wte(x[:, 1:]), f[:, :-1])
        agree["eagle"].append(lm_logits(oracle, guess).argmax(-1) == choice[:, 1:])
        agree["exit"].append(lm_logits(oracle, exit_adapter(early)).argmax(-1) == choice)
        agree["untrained exit"].append(lm_logits(oracle, early).argmax(-1) == choice)
        T = x.shape[1]
        out = medusa(oracle.ln_f(f)[:, :T - N_MEDUSA])
        for k in range(N_MEDUSA):
            agree[f"medusa {k + 1}"].append((out[k] @ lm_head).argmax(-1) == choice[:, k + 1:T - N_MEDUSA + k + 1])
    return {name: round(torch.cat([a.reshape(-1) for a in parts]).float().mean().item(), 4) for name, parts in agree.items()}


def train(heads, oracle, ids, heldout):
    generator = torch.Generator().manual_seed(SEED)
    params = [p for head in heads for p in head.parameters()]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.01},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr=LR, betas=(0.9, 0.95))
    bar = tqdm(range(STEPS), desc="training the heads", unit="step")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, STEPS, LR)
        parts = losses(heads, oracle, batch(ids, generator), generator)
        opt.zero_grad(set_to_none=True)
        sum(parts.values()).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        bar.set_postfix({k: f"{v.item():.3f}" for k, v in parts.items()}, refresh=False)
        if step % 100 == 99 or step == STEPS - 1:
            bar.write(f"step {step + 1}: held-out top-1 agreement {evaluate(heads, oracle, heldout)}")


def state_dicts(heads):
    """Each head's tensors under the names beyond/ reads: GPT-2's block names, Conv1D layouts."""
    eagle, medusa, exit_adapter = heads
    return {
        "eagle": {key: t for key, t in eagle.state_dict().items()},
        "medusa": {f"medusa.{k}.{name}": t for k, head in enumerate(medusa.heads) for name, t in head.state_dict().items()},
        "exit": {f"adapter.{key}": t for key, t in exit_adapter.state_dict().items()},
    }


def export(config):
    from weights.checkpoint import save_safetensors  # the project's writer
    # weights_only: tensors and plain values only, nothing a pickle could run; the report's version string
    # was saved as torch's own TorchVersion by earlier runs, which that mode allows when asked.
    with torch.serialization.safe_globals([torch.torch_version.TorchVersion]):
        saved = torch.load(os.path.join(OUT, "heads.pt"), weights_only=True)
    sums = []
    for head, state in saved["state"].items():
        folder = os.path.join(ASSETS, head)
        os.makedirs(folder, exist_ok=True)
        tensors = {key: t.numpy() for key, t in state.items()}
        save_safetensors(os.path.join(folder, "model.safetensors"), {key: t.shape for key, t in tensors.items()},
                         tensors.__getitem__, dtype="F16")
        head_config = {"head": head, "n_embd": config["n_embd"], "n_head": config["n_head"],
                       "layer_norm_epsilon": config["layer_norm_epsilon"], "oracle_sha256": oracle_sha256()}
        if head == "medusa":
            head_config["n_heads"] = N_MEDUSA
        if head == "exit":
            head_config["exit_layer"] = EXIT_LAYER
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(head_config, f, indent=2)
            f.write("\n")
        for name in ("config.json", "model.safetensors"):
            with open(os.path.join(folder, name), "rb") as f:
                sums.append(f"{hashlib.sha256(f.read()).hexdigest()}  heads/{head}/{name}")
    sums_path = os.path.join(os.path.dirname(ASSETS), "SHA256SUMS")
    with open(sums_path) as f:
        kept = [line for line in f.read().splitlines() if line and not line.split()[-1].startswith("heads/")]
    with open(sums_path + ".tmp", "w") as f:
        f.write("\n".join(kept + sums) + "\n")
    os.replace(sums_path + ".tmp", sums_path)  # the pair's lines kept, the heads' replaced
    print("\n".join(sums))
    print(f"written to {os.path.relpath(sums_path, ROOT)}, which demo.py checks before copying the heads")


def oracle_sha256():
    """The heads read this oracle's features: a head trained on another oracle is refused at load."""
    with open(os.path.join(ORACLE, "model.safetensors"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", action="store_true",
                        help="write assets/learned-pair/heads/ from workbench/tools/out/heads.pt, and their lines of SHA256SUMS")
    parser.add_argument("--steps", type=int, default=None, help=f"training steps (default {STEPS})")
    parser.add_argument("--out", default=OUT, help="where heads.pt and heads-report.json go, or --export reads "
                                                   "(default workbench/tools/out/)")
    args = parser.parse_args(argv)
    if args.steps is not None:
        globals()["STEPS"] = args.steps
    globals()["OUT"] = args.out
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)
    torch.manual_seed(SEED)
    train_pair.BATCH = BATCH  # train_pair.batch() draws that many windows
    oracle, config = load_oracle()
    if args.export:
        return export(config)
    d, n_head = config["n_embd"], config["n_head"]
    heads = (EagleHead(d, n_head), MedusaHeads(d, N_MEDUSA), ExitAdapter(d, n_head))
    ids, heldout = load_ids("train"), heldout_windows(load_ids("heldout"))
    print(f"before training: held-out top-1 agreement {evaluate(heads, oracle, heldout)}")
    start = time.time()
    train(heads, oracle, ids, heldout)
    seconds = time.time() - start
    report = {"steps": STEPS, "seconds": round(seconds), "torch": str(torch.__version__),
              "heldout_top1_agreement": evaluate(heads, oracle, heldout)}
    os.makedirs(OUT, exist_ok=True)
    torch.save({"state": state_dicts(heads), "report": report}, os.path.join(OUT, "heads.pt.tmp"))
    os.replace(os.path.join(OUT, "heads.pt.tmp"), os.path.join(OUT, "heads.pt"))
    with open(os.path.join(OUT, "heads-report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
