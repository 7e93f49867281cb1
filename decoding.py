"""What every decoder here shares: statistics, the round record, the cache discipline, argument checks.

Nothing in this file is an algorithm. The decoders (speculative.py,
threshold.py, sps.py, tree.py, ngram.py, adaptive.py, beam.py) import it;
it imports none of them.
"""

import time
from dataclasses import dataclass, field

from errors import UserError


class GenerationError(UserError):
    """Arguments that cannot give a valid generation (no room left, vocabularies differ)."""


@dataclass
class Round:
    """One draft-and-verify round, as --trace, --html and the tests see it."""
    context: int        # tokens in the text before the round
    drafted: list       # the draft's proposals (a tree: every node, level by level)
    accepted: int       # how many drafts were kept
    new: list           # what the round added: the accepted drafts, then one token of the oracle's
    oracle: list = None  # greedy verification: the oracle's choice after each draft prefix (k + 1 of them)
    cached: dict = None  # positions each KV cache holds after the rollback, {"draft": n, "oracle": n}
    details: dict = field(default_factory=dict)  # what only one method has: threshold, gamma, tree, SpS steps


@dataclass
class Stats:
    """What a generator did, filled in as it runs; the tokens themselves are its output."""
    rounds: int = 0          # oracle passes
    drafted: int = 0         # tokens the draft proposed
    accepted: int = 0        # drafted tokens the oracle kept
    rejections: int = 0      # rounds that ended at a draft the oracle did not keep
    draft_time: float = 0.0  # seconds drafting: the draft model's forward passes (or an n-gram table's lookups)
    oracle_time: float = 0.0
    draft_passes: int = 0    # forward passes of the draft model
    oracle_passes: int = 0   # forward passes of the oracle: its verifications, and a prompt's pass where it has one
    from_draft: list = field(default_factory=list)  # one bool per new token: an accepted draft?
    trace: list = None       # set to [] to keep a Round per round

    @property
    def n_tokens(self):
        return len(self.from_draft)

    @property
    def acceptance_rate(self):
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_round(self):
        return self.n_tokens / self.rounds if self.rounds else 0.0

    def add_round(self, new_tokens, drafted=(), n_accepted=0, **record):
        """Count one oracle pass that added new_tokens, of which the first n_accepted were drafts.

        With tracing on (trace is a list), also keep the round as a Round; record
        holds its other fields (context, oracle, cached, details).
        """
        self.rounds += 1
        self.drafted += len(drafted)
        self.accepted += n_accepted
        self.rejections += n_accepted < len(drafted)
        self.from_draft += [True] * n_accepted + [False] * (len(new_tokens) - n_accepted)
        if self.trace is not None and record:
            if record.get("details") is None:
                record.pop("details", None)
            self.trace.append(Round(drafted=list(drafted), accepted=n_accepted, new=list(new_tokens), **record))

    def add_time(self, role, seconds):
        if role == "draft":
            self.draft_time += seconds
        else:
            self.oracle_time += seconds

    def add_pass(self, role, seconds):
        """One forward pass of the draft model or the oracle, and its time."""
        if role == "draft":
            self.draft_passes += 1
        else:
            self.oracle_passes += 1
        self.add_time(role, seconds)


def feed(model, cache, tokens, stats, role, n_logits=1):  # -> [n_logits, vocab_size]
    """Run the model on the tokens its cache does not hold yet; logits of the last n_logits.

    Feeding exactly tokens[cache.n_tokens():] is the whole cache discipline: the
    prompt on the first call, then whatever was appended since. It can neither
    skip a token nor feed the cached prefix again. The time goes into stats.
    """
    start = time.perf_counter()
    logits = model.forward(tokens[cache.n_tokens():], cache, n_logits=n_logits)
    stats.add_pass(role, time.perf_counter() - start)
    return logits


def cache_lengths(draft_cache, oracle_cache):
    """For a Round: how many positions each cache holds (the draft's is None without a draft model)."""
    return {"draft": None if draft_cache is None else draft_cache.n_tokens(), "oracle": oracle_cache.n_tokens()}


# ---------------------------------------------------------------------------
# Argument checks, made before any work
# ---------------------------------------------------------------------------

def check_room(ids, n_new, *models):
    """The prompt must be non-empty and prompt + n_new tokens must fit every model's window."""
    window = min(m.n_positions for m in models)
    if len(ids) == 0:
        raise GenerationError("the prompt has no tokens (start from <|endoftext|> for an unconditional sample)")
    if n_new < 0:
        raise GenerationError(f"cannot generate {n_new} tokens")
    if len(ids) + n_new > window:
        prompt, new = (f"{n} token" + ("s" if n != 1 else "") for n in (len(ids), n_new))
        raise GenerationError(f"a prompt of {prompt} plus {new} new does not fit "
                              f"the context window of {window} tokens")


def check_pair(draft, oracle):
    """Draft tokens are checked by id, so both models must use the same vocabulary."""
    if draft.vocab_size != oracle.vocab_size:
        raise GenerationError(f"the draft's vocabulary ({draft.vocab_size} tokens) differs from "
                              f"the oracle's ({oracle.vocab_size}); they must share a tokenizer")


def check_lengths(**draft_lengths):
    """Each named draft length must be at least 1."""
    for name, value in draft_lengths.items():
        if value < 1:
            raise GenerationError(f"{name} must be at least 1, got {value}")


def check_args(ids, n_new, draft, oracle, **draft_lengths):
    """The checks every draft-and-verify generator makes before any work: a shared
    vocabulary, room in the window, and each named draft length at least 1."""
    check_pair(draft, oracle)
    check_room(ids, n_new, draft, oracle)
    check_lengths(**draft_lengths)
