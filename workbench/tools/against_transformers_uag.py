"""transformers' universal assisted generation beside crossvocab.py, on the learned oracle and demo-draft-4k.

    python demo.py                                      # models/demo-oracle and models/demo-draft-4k
    python -m venv venv-uag && venv-uag/bin/pip install torch transformers tiktoken   # torch: a CPU wheel is enough
    venv-uag/bin/python workbench/tools/against_transformers_uag.py [--models-dir models] [-n 64] [--project-python PYTHON]

What it needs: torch, transformers (with its safetensors) and, for the project's side, numpy and tiktoken, in
one environment of its own: the project itself never imports torch, and this script is run by hand, never by
the tests. It reads the two model directories and writes nothing but a temporary folder, removed at the end.

For each held-out prompt of assets/learned-pair/prompts.json:
  transformers  the oracle and the draft loaded by GPT2LMHeadModel.from_pretrained (float32), each with its own
                tokenizer (GPT2Tokenizer from its vocab.json and merges.txt); then
                generate(ids, assistant_model=draft, tokenizer=oracle_tok, assistant_tokenizer=draft_tok,
                do_sample=False, max_new_tokens=n): AssistedCandidateGeneratorDifferentTokenizers, its greedy
                universal assisted generation, at transformers' own settings (up to 20 draft tokens a round,
                fewer where the draft's confidence falls below 0.4) and again at this project's n_draft 4
                (num_assistant_tokens 4, constant, no confidence stop); and generate(ids, do_sample=False)
                alone, greedy decoding, for reference;
  this project  the oracle's greedy text through crossvocab.crossvocab_generate by the command line's own route
                (workbench/runner.py's prepare and generator, n_draft 4), in this process; and `python workbench.py
                PROMPT --draft demo-draft-4k --oracle demo-oracle -n N` run by --project-python, whose printed
                text must be those tokens' text.
Both must give the oracle's greedy tokens. Where two differ, the first differing token is named with the
oracle's gap between its top two logits there (this project's forward pass): a float32 near-tie lets two
implementations of the same model choose differently, and is the only difference expected. A run of
transformers' that raises is reported in a line and left out of the counts (its assistant's input can outgrow
the draft's window of 512 positions: on some prompts the text it feeds the assistant grows by more of the
draft's tokens each round than the agreed text does).
Tokens per second are each side's generation alone (the models loaded and run once before), one run each,
on whatever else the machine is doing: a measurement to repeat on a quiet machine, not a figure to quote.

The shipped safetensors hold no metadata, and transformers asks for the hub's {"format": "pt"}: each model
directory is copied to a temporary folder with that metadata added to its weights (the tensors unchanged).
"""

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
PROMPTS = os.path.join(ROOT, "assets", "learned-pair", "prompts.json")
NEAR_TIE = 1e-5  # a top-2 logit gap below this: two float32 implementations may choose either (workbench/bench/suite.py's)


def with_pt_metadata(model_dir, into):
    """A copy of model_dir in `into` whose model.safetensors carries {"format": "pt"} (the tensors as they are)."""
    from safetensors.numpy import load_file, save_file
    os.makedirs(into)
    for name in ("config.json", "vocab.json", "merges.txt"):
        shutil.copy(os.path.join(model_dir, name), into)
    save_file(load_file(os.path.join(model_dir, "model.safetensors")), os.path.join(into, "model.safetensors"),
              metadata={"format": "pt"})
    return into


def load_hf(model_dir):
    """(GPT2LMHeadModel in float32, its GPT2Tokenizer): transformers' own loading of a hub-layout directory."""
    import torch
    from transformers import GPT2LMHeadModel, GPT2Tokenizer
    model = GPT2LMHeadModel.from_pretrained(model_dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # n tokens, as this project writes them: no stop at <|endoftext|>
    model.generation_config.pad_token_id = model.config.eos_token_id
    tokenizer = GPT2Tokenizer(os.path.join(model_dir, "vocab.json"), os.path.join(model_dir, "merges.txt"))
    return model, tokenizer


def hf_generate(oracle, ids, n_new, **assisted):
    """(new token ids, seconds): transformers' greedy generation, assisted when given a draft and its tokenizers."""
    import torch
    start = time.perf_counter()
    with torch.no_grad():
        out = oracle.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n_new,
                              attention_mask=torch.ones(1, len(ids), dtype=torch.long), **assisted)
    return out[0, len(ids):].tolist(), time.perf_counter() - start


def project_generate(loaded, n_new):
    """(new token ids, seconds): speculative.py's route for --draft demo-draft-4k (runner.generator: crossvocab.py)."""
    from workbench import runner
    from workbench.settings import Settings
    from stats import Stats
    settings = Settings(method="speculative", max_new_tokens=n_new)
    start = time.perf_counter()
    tokens = list(runner.generator(settings, loaded.draft, loaded.oracle, loaded.ids, Stats(), encs=loaded.encs))
    return tokens, time.perf_counter() - start


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


def gap_at(oracle, ids, tokens, i):
    """The oracle's top-2 logit gap before token i of its continuation (this project's forward pass)."""
    import numpy as np
    logits = np.sort(oracle.forward(list(ids) + list(tokens[:i]), n_logits=1)[-1])
    return float(logits[-1] - logits[-2])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", default=os.path.join(ROOT, "models"), help="where python demo.py wrote the models")
    parser.add_argument("-n", "--new-tokens", type=int, default=64)
    parser.add_argument("--project-python", default=None,
                        help="the Python that runs speculative.py for the check of its printed text (default: skip it)")
    args = parser.parse_args()
    import torch
    import transformers
    from workbench import runner
    transformers.logging.set_verbosity_error()  # its notes on deprecated arguments and tokenizer cleanup: not ours
    from speculative import greedy_generate
    oracle_dir, draft_dir = (os.path.join(args.models_dir, name) for name in ("demo-oracle", "demo-draft-4k"))
    with open(PROMPTS, encoding="utf-8") as f:
        prompts = json.load(f)
    names = {"draft": draft_dir, "oracle": oracle_dir}
    loaded_models = {role: runner.load_model(names[role], log=io.StringIO()) for role in names}
    print(f"transformers {transformers.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads); "
          f"{len(prompts)} prompts, {args.new_tokens} new tokens each")
    with tempfile.TemporaryDirectory() as tmp:
        hf_oracle, oracle_tok = load_hf(with_pt_metadata(oracle_dir, os.path.join(tmp, "oracle")))
        hf_draft, draft_tok = load_hf(with_pt_metadata(draft_dir, os.path.join(tmp, "draft")))
        assisted = {"assistant_model": hf_draft, "tokenizer": oracle_tok, "assistant_tokenizer": draft_tok}
        names_run = ("transformers UAG", "transformers UAG, n_draft 4", "transformers greedy", "crossvocab.py")
        totals = {name: [0, 0.0] for name in names_run}
        identical = 0
        for number, entry in enumerate(prompts, 1):
            loaded = runner.prepare(loaded_models.get, "speculative", entry["prompt"], args.new_tokens, names)
            ids = loaded.ids
            assert oracle_tok.encode(entry["prompt"]) == ids, "the two tokenizers of the oracle split the prompt apart"
            if number == 1:  # each side run once before the clock: first-call costs are nobody's speed
                hf_generate(hf_oracle, ids, 4, **assisted)
                project_generate(loaded, 4)
            runs, said = {}, []
            for name, n_draft in (("transformers UAG", None), ("transformers UAG, n_draft 4", 4)):
                settings = hf_draft.generation_config  # None: transformers' defaults
                settings.num_assistant_tokens, settings.num_assistant_tokens_schedule = n_draft, n_draft and "constant"
                settings.assistant_confidence_threshold = n_draft and 0.0
                try:
                    runs[name] = hf_generate(hf_oracle, ids, args.new_tokens, **assisted)
                except Exception as e:  # transformers' own failure, reported as it is: the comparison goes on
                    said.append(f"{name} failed: {type(e).__name__}: {e}")
            runs["transformers greedy"] = hf_generate(hf_oracle, ids, args.new_tokens)
            runs["crossvocab.py"] = ours, _ = project_generate(loaded, args.new_tokens)
            greedy = list(greedy_generate(loaded.oracle, ids, args.new_tokens))
            for name, (tokens, seconds) in runs.items():
                totals[name][0] += len(tokens)
                totals[name][1] += seconds
            for name, (tokens, _) in runs.items():
                i = first_difference(tokens, greedy)
                if i is not None:
                    gap = gap_at(loaded.oracle, ids, greedy, i)
                    said.append(f"{name} differs from the oracle's greedy tokens at token {i} (top-2 gap there "
                                f"{gap:.2e}{', a near-tie' if gap < NEAR_TIE else ''})")
            if args.project_python:
                r = subprocess.run([args.project_python, os.path.join(ROOT, "speculative.py"), entry["prompt"], "--draft",
                                    "demo-draft-4k", "--oracle", "demo-oracle", "--models-dir", args.models_dir, "-n",
                                    str(args.new_tokens)], capture_output=True, text=True, cwd=ROOT, timeout=600)
                text = entry["prompt"] + loaded.enc.decode(ours)
                if r.returncode != 0 or r.stdout != text + "\n":
                    said.append(f"speculative.py printed another text (exit {r.returncode}): {r.stderr.strip()[-200:]}")
            same = all(tokens == greedy for tokens, _ in runs.values())
            whole = len(runs) == len(names_run)
            identical += same and whole
            shown = "DIFFERENT" if not same else "identical" if whole else "identical where it ran"
            print(f"{number:2d} {entry['kind']:6s} {shown}" + "".join(f"; {s}" for s in said))
        print(f"every run made and gave the oracle's greedy tokens on {identical} of {len(prompts)} prompts")
        for name, (n, seconds) in totals.items():  # a run that failed is in neither count
            print(f"{name}: {n} tokens in {seconds:.2f} s, {n / max(seconds, 1e-9):.1f} tokens/s")


if __name__ == "__main__":
    main()
