"""Every decoding method, declared once: its name, what it is, how it is called, what it needs.

The command line (--method and --help), the session (/method, /help), the
benchmark, the ablations and the report all read this registry. The one name
besides it is the session's "target" (seed 003's /target, docs/sources.md: the oracle
alone, greedy or sampling as the processor says), which the session resolves
to "greedy" or "sample" itself. Adding a method is one new module (its
generator) and one register() call, here or anywhere before the program asks for it:

    def run_mine(call):
        return mine_generate(call.draft, call.oracle, call.ids, call.n_new, n_draft=call.n_draft, stats=call.stats)

    register(Method("mine", "one line saying what it does (mine.py)", run_mine, n_draft=4))

A method's generate(call) gets a Call: the models, the prompt's ids, how many
tokens to make, its draft length, the settings, the Stats to fill in, and the
sampling methods' random generator. It returns the generator of token ids.
Its rounds go to Stats.add_round (decoding.py): --trace and --html draw a round
by its details' `kind` (app/display.py's and app/report.py's tables of
renderers), and a kind they do not know as a line of drafts with its reason=.

A draft with a vocabulary of its own (its vocab.json and merges.txt spell other
tokens than the oracle's: app/runner.py's load_tokenizers) runs through the method's `across`
(generate_of, the one place that chooses): speculative and sps cross the
vocabularies by text (crossvocab.py), draft-alone writes in the draft's own
tokens; a method without one refuses such a draft in one line (runner.prepare).
"""

import os
from dataclasses import dataclass
from typing import Callable

from adaptive import adaptive_generate
from beyond.block_verification import block_sample
from beyond.eagle import EagleHead, eagle_generate, eagle_sample
from beyond.early_exit import ExitAdapter, early_exit_generate
from beyond.medusa import MedusaHeads, medusa_generate
from beyond.lookahead import lookahead_generate
from beyond.self_speculative import self_speculative_generate
from beyond.suffix import suffix_generate
from beyond.tree_without_replacement import tree_sample_wor_generate
from beyond.tree_sampling import tree_sample_generate
from app.system import memory_budget
from beam import beam_search
from crossvocab import crossvocab_generate, crossvocab_sample
from decoding import GenerationError
from gpt2 import nest
from ngram import NGramDrafter, ngram_generate, staged_generate
from sps import autoregressive_sample, speculative_sample
from speculative import greedy_generate, speculative_generate
from threshold import threshold_generate
from tree import tree_generate
from weights import heads as trained_heads


@dataclass(frozen=True)
class Method:
    name: str
    summary: str                  # one line for --help, /help and the benchmark's tables
    generate: Callable            # generate(call: Call) -> the generator of the new token ids
    draft_model: bool = True      # needs a draft model besides the oracle
    n_draft: int = None           # the default draft length (--n-draft, /n_draft); None: the method has none
    samples: bool = False         # draws tokens: the processor (temperature, top-k, top-p) and the seed apply
    verifies: bool = True         # works in draft-and-verify rounds, which --trace and --html show
    exact: bool = None            # its text must equal greedy decoding's (default: verifies and not samples)
    needs_cache: bool = False     # cannot run with /cache off (its drafts or beams share a prefix)
    baseline: str = None          # what --compare and the benchmark run beside it (default: greedy, or sample)
    head: str = None              # drafts with the oracle's trained head of this kind (weights/heads.py), read from its directory
    across: Callable = None       # generate(call) with a draft of another vocabulary (generate_of); None: such a draft is refused
    draft_writes: bool = False    # the draft model writes the text alone: the text is in its tokens (draft-alone)

    def __post_init__(self):  # the defaults that follow from the other fields
        if self.exact is None:
            object.__setattr__(self, "exact", self.verifies and not self.samples)
        if self.baseline is None:
            object.__setattr__(self, "baseline", "sample" if self.samples and self.verifies else "greedy")


@dataclass
class Call:
    """What a method's generate() is given."""
    draft: object          # the draft model, None for a method without one
    oracle: object
    ids: list              # the prompt's token ids
    n_new: int             # tokens to generate
    n_draft: int           # the draft length (decoding.py): the setting, else the method's default
    settings: object       # app.runner.Settings: the method-specific settings (n_draft bounds, n-gram options, beams)
    stats: object          # decoding.Stats, filled in as the generator runs
    rng: object = None     # numpy Generator of the sampling methods
    drafter: object = None  # an NGramDrafter kept between generations (the session), else a new one
    encs: tuple = None     # (the draft's tokenizer, the oracle's) when the draft's vocabulary is not the oracle's, else None


METHODS = {}


def register(method):
    """Add a method (or replace the one of the same name)."""
    METHODS[method.name] = method
    return method


def get(name):
    if name not in METHODS:
        raise GenerationError(f"unknown method {name!r}; the methods are: {', '.join(METHODS)}")
    return METHODS[name]


def generate_of(method, other_vocabulary):
    """How `method` runs: its generate(), or with a draft whose vocabulary is not the oracle's, its across()
    (None: it has no way to run with such a draft). The one place a draft of another vocabulary is routed."""
    return method.across if other_vocabulary else method.generate


def across_vocabularies():
    """The names of the methods that verify a draft of another vocabulary (for the line that refuses one)."""
    return [m.name for m in METHODS.values() if m.across is not None and m.verifies]


def drafter_of(call):
    """The call's n-gram drafter, or a new one from its settings."""
    s = call.settings
    return call.drafter or NGramDrafter(n=s.ngram_n, storage=s.storage, top_k_filler=s.top_k_filler,
                                        reset_in_between=s.reset_in_between)


HEAD_CLASSES = {"eagle": EagleHead, "medusa": MedusaHeads, "exit": ExitAdapter}  # weights/heads.HEADS, each its module's
_read_heads = {}  # (kind, the oracle's directory) -> (the oracle, its head): each head read once per oracle


def head_of(oracle, kind):
    """The oracle's trained head of `kind`, read from the oracle's directory (ORACLE/heads/KIND) once."""
    key = (kind, oracle.directory)
    if key not in _read_heads or _read_heads[key][0] is not oracle:
        if oracle.directory is None:
            raise GenerationError(f"{oracle.name} was not read from a directory: no trained {kind} head to draft with")
        config, tensors = trained_heads.load(oracle.directory, kind, oracle)
        _read_heads[key] = (oracle, HEAD_CLASSES[kind](nest(tensors), config, oracle))
    return _read_heads[key][1]


def missing_head(method, oracle):
    """Why `method` cannot run on `oracle` (a head it drafts with is not beside it), or None."""
    if method.head is None:
        return None
    directory = getattr(oracle, "directory", None)
    if directory is None or not os.path.isdir(trained_heads.head_dir(directory, method.head)):
        return f"{oracle.name} has no trained {method.head} head (heads/{method.head} beside it)"
    return None


MEDUSA_WIDTHS = (2, 1, 1, 1, 1, 1, 1, 1)  # head k's candidates under every node of level k - 1: two branches (PERFORMANCE.md)


# ---------------------------------------------------------------------------
# Each method's call: from the Call to its decoder's arguments, one named function each
# ---------------------------------------------------------------------------

def run_speculative(c):
    return speculative_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_threshold(c):
    return threshold_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_sps(c):
    return speculative_sample(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                              processor=c.settings.processor, stats=c.stats)


def run_crossvocab(c):  # speculative with a draft of another vocabulary: string-level exact match
    draft_enc, oracle_enc = c.encs
    return crossvocab_generate(c.draft, c.oracle, draft_enc, oracle_enc, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_crossvocab_sps(c):  # sps with a draft of another vocabulary: token-level intersection
    draft_enc, oracle_enc = c.encs
    return crossvocab_sample(c.draft, c.oracle, draft_enc, oracle_enc, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                             processor=c.settings.processor, stats=c.stats)


def run_tree(c):
    return tree_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_ngram(c):
    return ngram_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, drafter=drafter_of(c), stats=c.stats)


def run_staged(c):
    return staged_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, drafter=drafter_of(c), stats=c.stats)


def run_adaptive(c, rule="egag"):
    s = c.settings
    return adaptive_generate(c.draft, c.oracle, c.ids, c.n_new, rule=rule,
                             n_draft=min(max(c.n_draft, s.n_draft_min), s.n_draft_max),
                             n_draft_min=s.n_draft_min, n_draft_max=s.n_draft_max, ema=s.ema, stats=c.stats)


def run_adaptive_hf(c):
    return run_adaptive(c, rule="heuristic")


def run_suffix(c):
    return suffix_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_suffix_tree(c):
    return suffix_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=3, stats=c.stats)


def run_tree_sps(c):
    return tree_sample_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=2, rng=c.rng,
                                processor=c.settings.processor, stats=c.stats)


def run_self_speculative(c):
    return self_speculative_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, n_layers_draft=c.settings.draft_layers,
                                     stats=c.stats)


def run_greedy(c):
    return greedy_generate(c.oracle, c.ids, c.n_new, stats=c.stats)


def run_sample(c):
    return autoregressive_sample(c.oracle, c.ids, c.n_new, rng=c.rng, processor=c.settings.processor, stats=c.stats)


def run_beam(c):
    return beam_search(c.oracle, c.ids, c.n_new, n_beams=c.settings.n_beams, stats=c.stats, budget=memory_budget())


def run_draft_alone(c):  # the draft model alone: greedy at temperature 0, else sampling
    if c.settings.processor.temperature == 0:
        return greedy_generate(c.draft, c.ids, c.n_new, stats=c.stats)
    return autoregressive_sample(c.draft, c.ids, c.n_new, rng=c.rng, processor=c.settings.processor, stats=c.stats)


def run_lookahead(c):
    return lookahead_generate(c.oracle, c.ids, c.n_new, N=c.n_draft + 1, stats=c.stats)


def run_sps_block(c):
    return block_sample(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng, processor=c.settings.processor,
                        stats=c.stats)


def run_tree_sps_wor(c):
    return tree_sample_wor_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, width=2, rng=c.rng,
                                    processor=c.settings.processor, stats=c.stats)


def run_eagle(c):
    return eagle_generate(head_of(c.oracle, "eagle"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_eagle_sps(c):
    return eagle_sample(head_of(c.oracle, "eagle"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                        processor=c.settings.processor, stats=c.stats)


def run_medusa(c):
    heads = head_of(c.oracle, "medusa")
    if not 1 <= c.n_draft <= len(heads.heads):
        raise GenerationError(f"medusa's draft length is its tree's depth: from 1 to {len(heads.heads)} "
                              f"(the oracle's heads), got {c.n_draft}")
    return medusa_generate(heads, c.oracle, c.ids, c.n_new, widths=MEDUSA_WIDTHS[:c.n_draft], stats=c.stats)


def run_early_exit(c):
    return early_exit_generate(head_of(c.oracle, "exit"), c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------

for method in [
    Method("speculative", "greedy speculative decoding (speculative.py); output = the oracle's greedy output; a "
                          "draft of another vocabulary: crossvocab.py", run_speculative, n_draft=4, across=run_crossvocab),
    Method("threshold", "greedy speculative decoding, draft length set by the draft's confidence (threshold.py)",
           run_threshold, n_draft=16),
    Method("sps", "speculative sampling, Chen et al. 2023 Algorithm 2 (sps.py); output ~ the oracle's distribution; a "
                  "draft of another vocabulary: crossvocab.py", run_sps, n_draft=4, samples=True,
           across=run_crossvocab_sps),
    Method("tree", "greedy, tree-shaped drafts checked in one pass with a tree attention mask (tree.py)",
           run_tree, n_draft=6, needs_cache=True),
    Method("ngram", "greedy, drafts from the text itself (NASD): prompt lookup and an n-gram table, no draft model "
                    "(ngram.py)", run_ngram, draft_model=False, n_draft=8),
    Method("staged", "greedy, n-gram -> draft -> oracle: the draft's own drafts come from the n-gram drafter (ngram.py)",
           run_staged, n_draft=4),
    Method("adaptive", "greedy, draft length set by the draft's entropy and a moving average (rule egag, the "
                       "EGAG of seed 003 in docs/sources.md; adaptive.py)", run_adaptive, n_draft=4),
    Method("adaptive-hf", "greedy, draft length by Hugging Face's rule heuristic: +2 after a clean round, -1 "
                          "otherwise (adaptive.py)", run_adaptive_hf, n_draft=4),
    Method("suffix", "greedy, drafts what followed the longest earlier match in the text, found by a suffix "
                     "automaton; no draft model (SuffixDecoding; beyond/suffix.py)", run_suffix, draft_model=False,
           n_draft=8),
    Method("suffix-tree", "greedy, a tree of the most frequent continuations of the longest earlier match, checked "
                          "in one pass; no draft model (SuffixDecoding; beyond/suffix.py)", run_suffix_tree,
           draft_model=False, n_draft=6, needs_cache=True),
    Method("tree-sps", "speculative sampling over a tree of sampled drafts, SpecInfer's multi-round rejection "
                       "(beyond/tree_sampling.py); output ~ the oracle's distribution", run_tree_sps, n_draft=4,
           samples=True, needs_cache=True),
    Method("self-speculative", "greedy, the oracle's own first layers draft for it, no second model (Draft & Verify, "
                               "LayerSkip; beyond/self_speculative.py)", run_self_speculative, draft_model=False,
           n_draft=4, needs_cache=True),
    Method("greedy", "the oracle alone, greedy (the baseline of all the greedy methods)", run_greedy, draft_model=False,
           verifies=False, exact=True),
    Method("sample", "the oracle alone, sampling (Algorithm 1, the baseline of sps)", run_sample, draft_model=False,
           samples=True, verifies=False, baseline="sample"),
    Method("beam", "the oracle alone, beam search (beam.py); not streamed: the best beam is known at the end",
           run_beam, draft_model=False, verifies=False, needs_cache=True),
    Method("draft-alone", "the draft model alone, greedy (or sampling with --temperature/--top-k/--top-p)", run_draft_alone,
           samples=True, verifies=False, across=run_draft_alone, draft_writes=True),
    Method("lookahead", "greedy, n-grams guessed by Jacobi iteration over a window of future positions and checked in "
                        "the same pass; no draft model (beyond/lookahead.py); --n-draft is N - 1", run_lookahead,
           draft_model=False, n_draft=3, needs_cache=True),
    Method("sps-block", "speculative sampling with block verification: the whole draft judged at once, never fewer "
                        "kept than sps (Sun et al. 2025; beyond/block_verification.py); output ~ the oracle's "
                        "distribution", run_sps_block, n_draft=4, samples=True),
    Method("tree-sps-wor", "tree-sps with each node's children drawn without replacement (distinct siblings) and the "
                           "draft updated after each rejection (Sequoia; beyond/tree_without_replacement.py); output ~ "
                           "the oracle's distribution", run_tree_sps_wor, n_draft=4, samples=True, needs_cache=True),
    Method("eagle", "greedy, drafts from a one-layer head trained on the oracle's own features, read by its LM head "
                    "(EAGLE, Li et al. 2024; beyond/eagle.py); no draft model", run_eagle, draft_model=False, n_draft=4,
           needs_cache=True, head="eagle"),
    Method("eagle-sps", "speculative sampling with the EAGLE head's drafts (beyond/eagle.py); output ~ the oracle's "
                        "distribution", run_eagle_sps, draft_model=False, n_draft=4, samples=True, needs_cache=True,
           head="eagle"),
    Method("medusa", "greedy, heads on the oracle's last state guess 2, 3, 4 tokens ahead; a tree of their top "
                     "candidates checked in one pass (Medusa, Cai et al. 2024; beyond/medusa.py); --n-draft is the "
                     "depth", run_medusa, draft_model=False, n_draft=3, needs_cache=True, head="medusa"),
    Method("early-exit", "greedy, the oracle's first layers draft through a trained adapter (Kangaroo, Liu et al. "
                         "2024; beyond/early_exit.py); self-speculative's exit, trained", run_early_exit,
           draft_model=False, n_draft=4, needs_cache=True, head="exit"),
]:
    register(method)
