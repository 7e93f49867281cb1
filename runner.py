"""What a run needs, whoever starts it (the command line, the interactive session, the ablations):
the models, their shared tokenizer, the prompt's ids, and the generator for a method and its settings."""

import filecmp
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from adaptive import adaptive_generate
from beam import beam_search
from decoding import GenerationError, Stats, check_pair, check_room
from gpt2 import GPT2
from kvcache import Recompute
from models import resolve_model_dir
from ngram import NGramDrafter, ngram_generate, staged_generate
from processors import Processor
from sps import autoregressive_sample, speculative_sample
from speculative import greedy_generate, speculative_generate
from threshold import threshold_generate
from tokenizer import TokenizerError, check_vocabulary, encode, endoftext_id, load_tokenizer
from tree import tree_generate

METHODS = {
    "speculative": "greedy speculative decoding (speculative.py); output = the oracle's greedy output",
    "threshold": "greedy speculative decoding, draft length set by the draft's confidence (threshold.py)",
    "sps": "speculative sampling, Chen et al. 2023 Algorithm 2 (sps.py); output ~ the oracle's distribution",
    "tree": "greedy, tree-shaped drafts checked in one pass with a tree attention mask (tree.py)",
    "ngram": "greedy, drafts from the text itself (NASD): prompt lookup and an n-gram table, no draft model (ngram.py)",
    "staged": "greedy, n-gram -> draft -> oracle: the draft's own drafts come from the n-gram drafter (ngram.py)",
    "adaptive": "greedy, draft length set by the draft's entropy and a moving average (EGAG; adaptive.py)",
    "adaptive-hf": "greedy, draft length by Hugging Face's rule: +2 after a clean round, -1 otherwise (adaptive.py)",
    "greedy": "the oracle alone, greedy (the baseline of all the greedy methods)",
    "sample": "the oracle alone, sampling (Algorithm 1, the baseline of sps)",
    "beam": "the oracle alone, beam search (beam.py); not streamed: the best beam is known at the end",
    "drafter": "the draft model alone, greedy (or sampling with --temperature/--top-k/--top-p)",
}
VERIFYING = ("speculative", "threshold", "sps", "tree", "ngram", "staged", "adaptive", "adaptive-hf")
SAMPLING = ("sps", "sample", "drafter")  # the methods a processor applies to
NO_DRAFT_MODEL = ("greedy", "sample", "beam", "ngram")
DEFAULT_N_DRAFT = {"speculative": 8, "threshold": 16, "sps": 4, "tree": 6, "ngram": 8, "staged": 8,
                   "adaptive": 4, "adaptive-hf": 4}


@dataclass
class Settings:
    """Everything that decides a generation but the prompt (the session's /settings)."""
    method: str = "speculative"
    max_new_tokens: int = 64                      # /length
    n_draft: int = None                           # /gamma; None: the method's default (DEFAULT_N_DRAFT)
    processor: Processor = field(default_factory=Processor)  # sps, sample, drafter: temperature 1, no cut
    seed: int = None
    gamma_min: int = 1                            # adaptive (EGAG): the draft length's bounds ...
    gamma_max: int = 16
    ema: float = 0.7                              # ... and its moving average's weight on the past
    ngram_n: int = 4                              # NASD: the n-gram order,
    storage: str = "basic"                        # "basic" (back-off) or "onelevel",
    top_k_filler: int = 1                         # the oracle's top-k counted into the table (1: off),
    reset_in_between: bool = True                 # a fresh table for every generation
    n_beams: int = 4
    cache: bool = True                            # False: every forward recomputes the whole prefix

    @property
    def k(self):
        return self.n_draft or DEFAULT_N_DRAFT.get(self.method, 4)


def needs_draft_model(method):
    return method not in NO_DRAFT_MODEL


def load_model(name_or_path, models_dir, log=sys.stderr):
    """(model, its directory); a forward pages the mapped weights in, so later timings measure decoding."""
    model_dir = resolve_model_dir(name_or_path, models_dir)
    start = time.perf_counter()
    model = GPT2.from_pretrained(model_dir)
    model.forward([0])
    print(f"loaded {name_or_path} ({model.n_layer} layers of width {model.n_embd}) in {time.perf_counter() - start:.1f} s",
          file=log)
    return model, os.path.abspath(model_dir)


def load_shared_tokenizer(draft_dir, oracle_dir, draft=None, oracle=None):
    """The tokenizer of the draft (else the oracle); both must have the same one, with the models' vocabulary."""
    dirs = [d for d in (draft_dir, oracle_dir) if d and os.path.isfile(os.path.join(d, "vocab.json"))]
    if not dirs:
        raise TokenizerError("neither model directory has vocab.json and merges.txt")
    if len(dirs) == 2 and not all(filecmp.cmp(os.path.join(draft_dir, f), os.path.join(oracle_dir, f), shallow=False)
                                  for f in ("vocab.json", "merges.txt")):
        raise GenerationError(f"the draft ({draft_dir}) and the oracle ({oracle_dir}) have different tokenizers; "
                              "they must share a vocabulary")
    enc = load_tokenizer(dirs[0])
    for model, model_dir in ((draft, draft_dir), (oracle, oracle_dir)):
        if model is not None:
            check_vocabulary(enc, model.vocab_size, model_dir)
    return enc


def prompt_ids(enc, prompt):
    """The prompt's tokens; an empty prompt starts from <|endoftext|>, as GPT-2's unconditional samples do."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode arrive as lone surrogates
        raise GenerationError("the prompt is not valid UTF-8 text (is the terminal's locale UTF-8? try LANG=C.UTF-8)") from None
    return encode(enc, prompt) if prompt else [endoftext_id(enc)]


@dataclass
class Loaded:
    """Everything a generation needs besides its settings: the models, the tokenizer, the prompt's ids."""
    draft: object       # None for the methods without a draft model
    oracle: object
    enc: object
    ids: list


def prepare(load, method, prompt, n_new):
    """Load what `method` needs (load(role) -> (model, directory)), check that the pair and the prompt fit."""
    oracle, oracle_dir = load("oracle")
    draft = draft_dir = None
    if needs_draft_model(method):
        draft, draft_dir = load("draft")
        check_pair(draft, oracle)
    enc = load_shared_tokenizer(draft_dir, oracle_dir, draft, oracle)
    ids = prompt_ids(enc, prompt)
    check_room(ids, n_new, *[m for m in (draft, oracle) if m is not None])
    return Loaded(draft, oracle, enc, ids)


def describe_settings(settings):
    """The settings a page shows for a method."""
    shown = {"n_draft": settings.k}
    if settings.method in SAMPLING:
        shown.update(processor=str(settings.processor), seed=settings.seed)
    return shown


def describe_models(names, loaded):
    """{"draft": "NAME (L layers of width D)", "oracle": ...} for the models a run used."""
    return {role: f"{names[role]} ({model.n_layer} layers of width {model.n_embd})"
            for role, model in (("draft", loaded.draft), ("oracle", loaded.oracle)) if model is not None}


def compare(settings, loaded, generated, elapsed):
    """Run the oracle alone (its greedy or sampling baseline) on the same prompt; the line that reports it."""
    baseline = baseline_method(settings.method)
    start = time.perf_counter()
    alone = list(generator(Settings(**{**vars(settings), "method": baseline}), None, loaded.oracle, loaded.ids, Stats()))
    alone_time = time.perf_counter() - start
    line = (f"oracle alone ({baseline}): {len(alone)} tokens in {alone_time:.2f} s, "
            f"{len(alone) / max(alone_time, 1e-9):.1f} tokens/s; speedup {alone_time / max(elapsed, 1e-9):.2f}x")
    if baseline == "greedy" and settings.method in VERIFYING + ("greedy",):
        line += "; identical output" if alone == generated else "; OUTPUT DIFFERS (see README: near-ties)"
    return line


def generator(settings, draft, oracle, ids, stats, rng=None, drafter=None):
    """The token generator of settings.method: yields settings.max_new_tokens token ids.

    rng: the sampling methods' generator (default: one seeded with settings.seed); drafter: the
    n-gram drafter to reuse across generations (default: a new one from the settings).
    """
    s, n_new, k = settings, settings.max_new_tokens, settings.k
    if not s.cache:  # to feel what the KV cache saves: the same algorithm, recomputing every prefix
        if s.method in ("tree", "beam"):
            raise GenerationError(f"--method {s.method} needs the KV cache (its drafts or beams share prefixes)")
        draft, oracle = (Recompute(m) if m is not None else None for m in (draft, oracle))
    rng = np.random.default_rng(s.seed) if rng is None else rng
    if drafter is None:
        drafter = NGramDrafter(n=s.ngram_n, storage=s.storage, top_k_filler=s.top_k_filler,
                               reset_in_between=s.reset_in_between)
    if s.method == "speculative":
        return speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=stats)
    if s.method == "threshold":
        return threshold_generate(draft, oracle, ids, n_new, max_draft=k, stats=stats)
    if s.method == "sps":
        return speculative_sample(draft, oracle, ids, n_new, K=k, rng=rng, processor=s.processor, stats=stats)
    if s.method == "tree":
        return tree_generate(draft, oracle, ids, n_new, max_depth=k, stats=stats)
    if s.method == "ngram":
        return ngram_generate(oracle, ids, n_new, n_draft=k, drafter=drafter, stats=stats)
    if s.method == "staged":
        return staged_generate(draft, oracle, ids, n_new, n_draft=k, drafter=drafter, stats=stats)
    if s.method in ("adaptive", "adaptive-hf"):
        rule = "heuristic" if s.method == "adaptive-hf" else "entropy"
        return adaptive_generate(draft, oracle, ids, n_new, rule=rule, gamma=min(max(k, s.gamma_min), s.gamma_max),
                                 gamma_min=s.gamma_min, gamma_max=s.gamma_max, ema=s.ema, stats=stats)
    if s.method == "greedy":
        return greedy_generate(oracle, ids, n_new, stats=stats)
    if s.method == "sample":
        return autoregressive_sample(oracle, ids, n_new, rng=rng, processor=s.processor, stats=stats)
    if s.method == "beam":
        return beam_search(oracle, ids, n_new, n_beams=s.n_beams, stats=stats)
    if s.method == "drafter":
        if s.processor.temperature == 0:
            return greedy_generate(draft, ids, n_new, stats=stats)
        return autoregressive_sample(draft, ids, n_new, rng=rng, processor=s.processor, stats=stats)
    raise GenerationError(f"unknown method {s.method!r}; the methods are: {', '.join(METHODS)}")


def baseline_method(method):
    """What a method is compared with: the oracle alone, sampling for the sampling methods."""
    return "sample" if method in ("sps", "sample") else "greedy"
