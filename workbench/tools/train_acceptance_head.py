"""Train SpecDec++'s acceptance head for the learned pair's draft (beyond/specdec_pp.py).

    pip install -r workbench/tools/requirements.txt                  # PyTorch (CPU) for training only
    python workbench/tools/make_corpus.py python3.11-doc_*.deb       # workbench/tools/data/, as for the pair
    python workbench/tools/train_acceptance_head.py                  # about half an hour on 2 cores
    python workbench/tools/train_acceptance_head.py --export         # -> assets/learned-pair/heads/accept/ (float16, SHA256SUMS)

SpecDec++ (Huang, Guo, Wang, arXiv 2405.19715; its code, Kaffaljidhmah2/SpecDec_pp) stops drafting when a
small head on the DRAFT's hidden state says the draft so far is likely to be cut. The head here is
theirs: ResBlocks x + SiLU(x W + b) on the draft's last state (after its ln_f, as the hub's last hidden
state is), then a linear map to two logits (rejected, accepted); a_i = softmax(...)[1] is its guess of
the chance that draft i is kept, given that the drafts before it were.

Data (the pair's corpus and training split: the Python 3.11 documentation from Debian's python3.11-doc,
PSF License Version 2; workbench/tools/make_corpus.py). SpecDec++ labels a drafted token x by the chance that
speculative sampling keeps it, min(1, q(x) / p(x)) (q the oracle's, p the draft's: this project's
letters, Chen et al.'s; their code writes target and draft), and feeds the draft the target's own
text with draft tokens mixed in. Here the draft drafts as it will at run time: after a context cut
from a training document (a random length), it samples N_DRAFT tokens in a row from its own p at
temperature 1, and the head reads its state after each of them; one oracle pass gives q at each.
So every example is (the draft's state after drafted token i, min(1, q(x_i) / p(x_i))).

Loss: the binary cross-entropy against that soft label (their loss with weight_mismatch = 1). They
weight the rejected class up (6 in their runs) to catch more rejections; left at 1 the head stays
calibrated, so the stop's 1 - prod(a_i) > gamma reads as a probability.

Seeded, two threads, as train_pair.py; the examples are made once and kept (workbench/tools/out/accept-data.pt),
so a second run trains the head alone.
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
from workbench.tools import train_pair  # noqa: E402  the pair's GPT-2 modules and data

PAIR = os.path.join(ROOT, "assets", "learned-pair")
OUT = os.path.join(HERE, "out")
ASSETS = os.path.join(PAIR, "heads", "accept")
SEED = 5678
N_DRAFT = 8                  # tokens drafted after each context: the head sees drafts 1..8
BATCH = 32                   # contexts drafted from at once
TRAIN_BATCHES, HELDOUT_BATCHES = 300, 16
CONTEXT = (16, 192)          # each batch's context length, drawn in this range
N_LAYERS = 3                 # ResBlocks before the output layer (their resnet_num_layers)
EPOCHS, STEP_BATCH, LR = 3, 512, 2e-3


def load_model(role):
    """The shipped draft or oracle as train_pair.GPT2, float32, frozen."""
    from weights.checkpoint import load  # the project's own reader
    config, tensors = load(os.path.join(PAIR, role))
    model = train_pair.GPT2(config["n_layer"], config["n_head"], config["n_embd"])
    model.load_state_dict({key: torch.from_numpy(np.array(t, dtype=np.float32)) for key, t in tensors.items()})
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, config


def last_states(model, ids):  # [B, T] -> the state after ln_f at every position, [B, T, d]
    x = model.wte(ids) + model.wpe(torch.arange(ids.shape[1]))
    for block in model.h:
        x = block(x)
    return model.ln_f(x)


@torch.no_grad()
def examples(draft, oracle, ids, generator, n_batches):
    """n_batches of BATCH contexts, each followed by N_DRAFT tokens the draft samples: (the draft's states after
    each drafted token [n, d], the labels min(1, q(x) / p(x)) [n], the draft position 1..N_DRAFT of each [n])."""
    states, labels, positions = [], [], []
    for _ in tqdm(range(n_batches), desc="drafting examples", unit="batch"):
        length = int(torch.randint(CONTEXT[0], CONTEXT[1] + 1, (1,), generator=generator))
        starts = torch.randint(0, len(ids) - length - 1, (BATCH,), generator=generator)
        seq = torch.stack([ids[s:s + length] for s in starts.tolist()])
        drafted_p = []
        for i in range(N_DRAFT):
            h = last_states(draft, seq)[:, -1]                                # the state after the newest token
            p = F.softmax(h @ draft.wte.weight.T, dim=-1)                     # the draft's p for the next one
            x = torch.multinomial(p, 1, generator=generator)                  # [B, 1]
            drafted_p.append(p.gather(1, x)[:, 0])
            if i:
                states.append(h)
            seq = torch.cat([seq, x], dim=1)
        states.append(last_states(draft, seq)[:, -1])                         # the state after the last draft
        hidden = last_states(oracle, seq[:, :-1])[:, length - 1:]             # the oracle after the context, drafts 1..N-1
        q = F.softmax(hidden @ oracle.wte.weight.T, dim=-1)                   # [B, N_DRAFT, V]
        x = seq[:, length:]
        q_x = q.gather(2, x[..., None])[..., 0]
        labels.append(torch.clamp(q_x / torch.stack(drafted_p, dim=1), max=1.0).T.reshape(-1))
        positions.append(torch.arange(1, N_DRAFT + 1).repeat_interleave(BATCH))
    return torch.cat(states), torch.cat(labels), torch.cat(positions)


class ResBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.linear = train_pair.Conv1D(d, d)

    def forward(self, x):
        return x + F.silu(self.linear(x))


class AcceptanceHead(nn.Module):
    """SpecDec++'s head: N_LAYERS ResBlocks, then two logits (rejected, accepted)."""

    def __init__(self, d):
        super().__init__()
        self.blocks = nn.ModuleList(ResBlock(d) for _ in range(N_LAYERS))
        self.out = train_pair.Conv1D(d, 2)

    def forward(self, h):  # [n, d] -> [n, 2]
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def soft_bce(logits, label):  # the cross-entropy of the head's two classes against (1 - label, label)
    log_p = F.log_softmax(logits, dim=-1)
    return -(label * log_p[:, 1] + (1 - label) * log_p[:, 0]).mean()


@torch.no_grad()
def evaluate(head, states, labels, positions):
    """Held-out: the loss beside a constant guess of the mean label's, the accuracy of a >= 0.5 against the
    label >= 0.5 beside always guessing the commoner side, the mean guess beside the mean label, per position."""
    a = F.softmax(head(states), dim=-1)[:, 1]
    mean = labels.mean()
    constant = soft_bce(torch.stack([torch.log1p(-mean), torch.log(mean)]).expand(len(labels), 2), labels)
    hard = labels >= 0.5
    report = {"loss": round(soft_bce(head(states), labels).item(), 4), "constant_loss": round(constant.item(), 4),
              "accuracy": round(((a >= 0.5) == hard).float().mean().item(), 4),
              "majority_accuracy": round(max(hard.float().mean().item(), 1 - hard.float().mean().item()), 4),
              "mean_guess": round(a.mean().item(), 4), "mean_label": round(mean.item(), 4)}
    low, high = torch.quantile(a, torch.tensor([0.25, 0.75]))
    report["kept_where_a_is_lowest_quarter"] = round(labels[a <= low].mean().item(), 4)  # does it sort the drafts?
    report["kept_where_a_is_highest_quarter"] = round(labels[a >= high].mean().item(), 4)
    report["by_position"] = {int(i): {"mean_label": round(labels[positions == i].mean().item(), 4),
                                      "mean_guess": round(a[positions == i].mean().item(), 4)}
                             for i in range(1, N_DRAFT + 1)}
    return report


def train(head, data, heldout):
    states, labels, _ = data
    generator = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(head.parameters(), lr=LR, weight_decay=0.01)
    steps = EPOCHS * (len(labels) // STEP_BATCH)
    bar = tqdm(range(steps), desc="training the head", unit="step")
    order = torch.randperm(len(labels), generator=generator)
    for step in bar:
        at = (step * STEP_BATCH) % (len(labels) - STEP_BATCH)
        if at < STEP_BATCH:
            order = torch.randperm(len(labels), generator=generator)
        rows = order[at:at + STEP_BATCH]
        for group in opt.param_groups:
            group["lr"] = train_pair.learning_rate(step, steps, LR)
        loss = soft_bce(head(states[rows]), labels[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 500 == 499 or step == steps - 1:
            bar.write(f"step {step + 1}: held-out {evaluate(head, *heldout)['loss']}")


def save(obj, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def export(draft_config):
    """assets/learned-pair/heads/accept/: config.json and model.safetensors (float16, the project's writer), and
    their lines of SHA256SUMS (the others kept)."""
    from weights.checkpoint import save_safetensors
    saved = torch.load(os.path.join(OUT, "accept.pt"), weights_only=True)
    tensors = {key: t.numpy() for key, t in saved["state"].items()}
    os.makedirs(ASSETS, exist_ok=True)
    save_safetensors(os.path.join(ASSETS, "model.safetensors"), {key: t.shape for key, t in tensors.items()},
                     tensors.__getitem__, dtype="F16")
    config = {"head": "accept", "n_embd": draft_config["n_embd"], "n_head": draft_config["n_head"],
              "layer_norm_epsilon": draft_config["layer_norm_epsilon"], "n_layers": N_LAYERS,
              "draft_sha256": sha256(os.path.join(PAIR, "draft", "model.safetensors"))}
    with open(os.path.join(ASSETS, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    sums = [f"{sha256(os.path.join(ASSETS, name))}  heads/accept/{name}" for name in ("config.json", "model.safetensors")]
    sums_path = os.path.join(PAIR, "SHA256SUMS")
    with open(sums_path) as f:
        kept = [line for line in f.read().splitlines() if line and not line.split()[-1].startswith("heads/accept/")]
    with open(sums_path + ".tmp", "w") as f:
        f.write("\n".join(kept + sums) + "\n")
    os.replace(sums_path + ".tmp", sums_path)
    print("\n".join(sums))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def state_dict(head):
    """The head's tensors under the names weights/heads.py checks: accept.h.{i}.weight/bias, accept.out.weight/bias."""
    state = {f"accept.h.{i}.{leaf}": t for i, block in enumerate(head.blocks)
             for leaf, t in block.linear.state_dict().items()}
    state.update({f"accept.out.{leaf}": t for leaf, t in head.out.state_dict().items()})
    return state


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", action="store_true",
                        help="write assets/learned-pair/heads/accept/ from workbench/tools/out/accept.pt, and its lines of SHA256SUMS")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)
    torch.manual_seed(SEED)
    draft, draft_config = load_model("draft")
    if args.export:
        return export(draft_config)
    data_path = os.path.join(OUT, "accept-data.pt")
    if os.path.isfile(data_path):  # made by an earlier run: the head alone is trained again
        saved = torch.load(data_path)
        data, heldout, made = saved["data"], saved["heldout"], saved["seconds"]
    else:
        start = time.time()
        oracle, _ = load_model("oracle")
        generator = torch.Generator().manual_seed(SEED)
        data = examples(draft, oracle, train_pair.load_ids("train"), generator, TRAIN_BATCHES)
        heldout = examples(draft, oracle, train_pair.load_ids("heldout"), generator, HELDOUT_BATCHES)
        made = time.time() - start
        save({"data": data, "heldout": heldout, "seconds": made}, data_path)
    start = time.time()
    torch.manual_seed(SEED)  # the head's initial weights: the same whether the examples were made now or before
    head = AcceptanceHead(draft_config["n_embd"])
    print(f"{len(data[1]):,} examples, {len(heldout[1]):,} held out; before training: {evaluate(head, *heldout)}")
    train(head, data, heldout)
    report = {"examples": len(data[1]), "heldout_examples": len(heldout[1]), "seconds_drafting": round(made),
              "seconds_training": round(time.time() - start), "torch": str(torch.__version__),
              "heldout": evaluate(head, *heldout)}
    save({"state": state_dict(head), "report": report}, os.path.join(OUT, "accept.pt"))
    with open(os.path.join(OUT, "accept-report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
