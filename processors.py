"""Logits processors: how float32 logits [..., V] become the distribution a token is drawn from.

The project documentation (docs/sources.md: the documentation of a project laid out as
romsto/Speculative-Decoding, utils/logits_processor.py) names five samplers,
and so does this module:
  greedy       all the mass on the argmax: temperature 0
  multinomial  softmax(logits / temperature)
  topk k       only the k largest logits survive, then softmax
  nucleus p    softmax, then only the smallest set of most likely tokens whose mass reaches p (top-p)
  topknucleus  top-k first, then nucleus
Each is one Processor (temperature, top_k, top_p), applied in Hugging Face's
order: temperature, then top-k, then top-p. Tied tokens are never told apart
by their ids: a tiny temperature shares the mass among tied largest logits,
and top-k and top-p keep or cut tied tokens together. Only greedy picks one,
the first argmax, as every greedy method here does.

Speculative sampling (sps.py) must process the target and the draft alike: one
Processor object is applied to both, and the output then follows the
*processed* target distribution (Leviathan et al. 2023 note that argmax, top-k,
nucleus and temperature all fit this way: adjust both distributions alike).

Build one from a name and its values, as the command line and an interactive
session both do:  make_processor("topk", 20, temperature=0.8)  or
parse_processor("topknucleus 20 0.9", temperature=0.8).
"""

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from decoding import GenerationError
from gpt2 import softmax

# name -> the values it takes after the name, in order
PROCESSORS = {"greedy": (), "multinomial": (), "topk": ("top_k",), "nucleus": ("top_p",), "topknucleus": ("top_k", "top_p")}
SMALLEST_TEMPERATURE = np.finfo(np.float32).smallest_subnormal  # below it, a float32 temperature would be 0


# ---------------------------------------------------------------------------
# The steps, each logits -> logits or probabilities -> probabilities
# ---------------------------------------------------------------------------

def greedy(logits):  # [..., V] -> [..., V]
    """All the mass on the argmax (the first one on a tie): what temperature 0 means."""
    probs = np.zeros_like(logits)
    np.put_along_axis(probs, np.argmax(logits, axis=-1)[..., None], np.float32(1), axis=-1)
    return probs


def temperature_scaled(logits, temperature):  # [..., V] -> [..., V]
    """(logits - max) / temperature.

    Subtracting the max first is what makes a tiny temperature work: the largest
    logits become 0 and every other one goes towards -inf, whose exp is 0; tied
    largest logits share the mass. Dividing first would send the largest to +inf,
    and softmax of inf is NaN. softmax is unchanged by the shift.
    """
    shifted = logits - logits.max(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):  # a negative logit over a tiny temperature is -inf, on purpose
        return shifted / max(np.float32(temperature), SMALLEST_TEMPERATURE)


def top_k_filtered(logits, k):  # [..., V] -> [..., V]
    """Every logit below the k-th largest becomes -inf. Logits tied with the k-th
    largest all survive (as in Hugging Face's TopKLogitsWarper); k >= V keeps everything."""
    if k >= logits.shape[-1]:
        return logits
    kth_largest = np.partition(logits, -k, axis=-1)[..., [-k]]  # [..., 1]
    return np.where(logits < kth_largest, np.float32(-np.inf), logits)


def nucleus_filtered(probs, p):  # [..., V] -> [..., V]
    """Top-p: keep the smallest set of most likely tokens whose mass reaches p, renormalised.

    Going down from the most likely, a token is kept while the tokens before it
    hold less than p: the most likely token always stays, so a tiny p keeps
    exactly it. Tokens tied with the last one kept stay too. p = 1 keeps everything.
    """
    if p >= 1:
        return probs
    sorted_probs = np.sort(probs, axis=-1)[..., ::-1]  # most likely first (a sort of values, not of indices: fast)
    mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
    # At least 1: a p too small for float32 (1e-46 rounds to 0, and 0 < 0 keeps nothing) still keeps the most likely.
    n_kept = np.maximum(np.count_nonzero(mass_before < p, axis=-1), 1)[..., None]  # [..., 1]
    smallest_kept = np.take_along_axis(sorted_probs, n_kept - 1, axis=-1)
    kept = np.where(probs >= smallest_kept, probs, np.float32(0))
    return kept / kept.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# The processor: the steps composed, one object for p and q alike
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Processor:
    """logits [..., V] -> probabilities [..., V]: temperature, then top-k, then top-p.

    temperature 0 is greedy; top_k None and top_p None (or 1) cut nothing.
    """
    temperature: float = 1.0
    top_k: int = None
    top_p: float = None

    def __post_init__(self):
        if not (isinstance(self.temperature, Real) and 0 <= self.temperature < float("inf")):
            raise GenerationError(f"temperature must be a number >= 0, got {self.temperature!r}")
        if self.top_k is not None and not (isinstance(self.top_k, Integral) and self.top_k >= 1):
            raise GenerationError(f"top_k must be a whole number >= 1, got {self.top_k!r}")
        if self.top_p is not None and not (isinstance(self.top_p, Real) and 0 < self.top_p <= 1):
            raise GenerationError(f"top_p must be a number in (0, 1], got {self.top_p!r}")

    def __call__(self, logits):  # [..., V] -> [..., V]
        if self.temperature == 0:
            return greedy(logits)
        logits = temperature_scaled(logits, self.temperature)
        if self.top_k is not None:
            logits = top_k_filtered(logits, self.top_k)
        probs = softmax(logits)
        if self.top_p is not None:
            probs = nucleus_filtered(probs, self.top_p)
        return probs

    @property
    def name(self):
        """The project documentation's name for this processor: greedy, multinomial, topk, nucleus or topknucleus."""
        if self.temperature == 0:
            return "greedy"
        return {(False, False): "multinomial", (True, False): "topk", (False, True): "nucleus",
                (True, True): "topknucleus"}[self.top_k is not None, self.top_p is not None]

    def __str__(self):  # "topknucleus 20 0.9, temperature 0.8": what parse_processor reads back, and the temperature
        values = [getattr(self, field) for field in PROCESSORS[self.name]]
        text = " ".join([self.name] + [str(v) for v in values])
        return text if self.name == "greedy" else f"{text}, temperature {self.temperature}"


def make_processor(name, *values, temperature=1.0):
    """The processor called name (see PROCESSORS) with its values, e.g. ("topknucleus", 20, 0.9).

    Values may be numbers or the strings a user typed. greedy ignores temperature.
    """
    if name not in PROCESSORS:
        raise GenerationError(f"unknown processor {name!r}; the processors are: {', '.join(PROCESSORS)}")
    fields = PROCESSORS[name]
    if len(values) != len(fields):
        usage = " ".join([name] + [f"<{f}>" for f in fields])
        raise GenerationError(f"processor {name} takes {len(fields)} value(s) ({usage}), got {len(values)}")
    parsed = {field: parse_value(field, value) for field, value in zip(fields, values)}
    return Processor(temperature=0 if name == "greedy" else parse_value("temperature", temperature), **parsed)


def parse_processor(text, temperature=1.0):
    """A processor from what a user typed: "greedy", "multinomial", "topk 20", "nucleus 0.9", "topknucleus 20 0.9"."""
    name, *values = text.split() or [""]
    return make_processor(name, *values, temperature=temperature)


def parse_value(field, value):
    """A typed string as the number field needs (top_k a whole number, the others any number); numbers pass through."""
    if not isinstance(value, str):
        return value
    try:
        return int(value) if field == "top_k" else float(value)
    except ValueError:
        raise GenerationError(f"{field} must be a {'whole number' if field == 'top_k' else 'number'}, "
                              f"got {value!r}") from None


def as_processor(processor=None, **flags):
    """The processor a sampler uses: the one given, or the one its flags (temperature, top_k, top_p) make."""
    if processor is None:
        return Processor(**flags)
    if flags:
        raise GenerationError(f"give a processor or its settings ({', '.join(flags)}), not both")
    return processor
