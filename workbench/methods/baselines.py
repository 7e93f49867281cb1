"""The baselines: the oracle alone (greedy, sampling, beam search) and the draft model alone.

No rounds to show: each makes its tokens one forward pass at a time (beam search: one per beam). --compare
and the benchmarks run a method's baseline beside it: greedy decoding for a greedy method, sampling for a
sampling one (registry.Method.baseline).
"""

from dataclasses import replace

from batch import greedy_generate_batch
from beam import beam_search
from sps import autoregressive_sample
from speculative import greedy_generate
from workbench import system
from workbench.registry import Method, Option, register


def run_greedy(c):
    return greedy_generate(c.oracle, c.ids, c.n_new, stats=c.stats)


def run_greedy_batch(c, batch_ids):
    return greedy_generate_batch(c.oracle, batch_ids, c.n_new, stats=c.stats, budget=system.memory_budget())


def run_sample(c):
    return autoregressive_sample(c.oracle, c.ids, c.n_new, rng=c.rng, processor=c.settings.processor, stats=c.stats)


def run_beam(c):
    return beam_search(c.oracle, c.ids, c.n_new, n_beams=c.option("n_beams"), stats=c.stats, budget=system.memory_budget())


def run_draft_alone(c):  # the draft model alone: greedy at temperature 0, else sampling
    if c.settings.processor.temperature == 0:
        return greedy_generate(c.draft, c.ids, c.n_new, stats=c.stats)
    return autoregressive_sample(c.draft, c.ids, c.n_new, rng=c.rng, processor=c.settings.processor, stats=c.stats)


N_BEAMS = Option("n_beams", int, 4, "beams (1 is greedy decoding, but for float32 near-ties)", 1, 256)
DRAFT_ALONE = Method("draft-alone", "the draft model alone, greedy (or sampling with --temperature/--top-k/--top-p); "
                                    "its text is the draft's, not the oracle's", run_draft_alone, samples=True,
                     verifies=False, draft_writes=True)

register(
    Method("greedy", "the oracle alone, greedy (the baseline of all the greedy methods)", run_greedy, draft_model=False,
           verifies=False, exact=True, batched=run_greedy_batch),
    Method("sample", "the oracle alone, sampling (Algorithm 1, the baseline of sps)", run_sample, draft_model=False,
           samples=True, verifies=False, baseline="sample"),
    Method("beam", "the oracle alone, beam search (beam.py); not streamed: the best beam is known at the end",
           run_beam, draft_model=False, verifies=False, needs_cache=True, options=(N_BEAMS,)),
    replace(DRAFT_ALONE, across=DRAFT_ALONE),  # with a draft of another vocabulary: the same, in its own tokens
)
