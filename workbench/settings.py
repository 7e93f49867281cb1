"""Everything that decides a generation but the prompt: Settings, and the options every method shares.

The settings every method reads (how many tokens, the draft length, the sampling processor and seed, the
KV cache) are fields of Settings; an option only some methods take (beam search's n_beams, the adaptive
draft's bounds) is declared by those methods (registry.Option, in their family's file) and kept in
Settings.options, by name. Each option's bounds are checked alike by the command line and the session:
wide enough for any real use, each keeps a typo from hanging the program (an n-gram order of a billion
walks a billion contexts).
"""

import argparse
from dataclasses import dataclass, field

from processors import Processor
from workbench.program import UsageError
from workbench.registry import Option

MAX_NEW_TOKENS = Option("max_new_tokens", int, 64, "tokens to generate (the prompt and these must fit the models' "
                        "context window)", 0, 100_000, command="length")
N_DRAFT = Option("n_draft", int, None, "draft tokens per round: the most for threshold, the starting value for "
                 "adaptive, the tree's depth for the trees", 1, 128)
TEMPERATURE = Option("temperature", float, 1.0, "the sampling temperature (0 is greedy, and a tiny temperature "
                     "approaches greedy)", 0.0, 1000.0)
TOP_K = Option("top_k", int, None, "sample only among the k most likely tokens", 1, 1_000_000)
TOP_P = Option("top_p", float, None, "sample only from the smallest set of most likely tokens with this much mass (a p "
               "too small to matter keeps the most likely token)", 0.0, 1.0, low_open=True)
SEED = Option("seed", int, None, "the random seed of the sampling methods: the same seed gives the same text", 0,
              2 ** 63 - 1)
COMMON = (MAX_NEW_TOKENS, N_DRAFT, TEMPERATURE, TOP_K, TOP_P, SEED)  # every method's (sampling: those that sample)


@dataclass
class Settings:
    """Everything that decides a generation but the prompt (the session's /settings)."""
    method: str = "speculative"
    max_new_tokens: int = 64
    n_draft: int = None                 # None: the method's default (registry.Method.n_draft)
    processor: Processor = field(default_factory=Processor)  # the sampling methods: temperature 1, no cut
    seed: int = None
    cache: bool = True                  # False: every forward recomputes the whole prefix (the session's /cache)
    options: dict = field(default_factory=dict)  # the methods' own options, by name: the values given

    def but(self, **changes):
        """A copy with these fields changed (the session's method resolved, --compare's baseline)."""
        return Settings(**{**vars(self), "options": dict(self.options), **changes})


def argparse_type(option):
    """The argparse type of an option's flag: its bounds, the session's too, and argparse names the flag."""
    def parse(text):
        try:
            return option.parse(text)
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e).split(" must be ", 1)[1]) from None
    parse.__name__ = option.name  # argparse's message: "invalid n_draft value" is not shown, ours is
    return parse
