"""What every decoder here shares: statistics, the round record, the cache discipline, argument checks,
what a round should gain (Leviathan et al.'s formula), and the memory a decoder may take.

Nothing in this file is an algorithm. The decoders (speculative.py,
threshold.py, sps.py, tree.py, ngram.py, adaptive.py, beam.py, batch.py) import it;
it imports none of them.

The code's names, and the papers' letters for them (only this table uses the letters):

| the code | what it is | Chen et al. 2023 (SpS) | Leviathan et al. 2023 | Hugging Face transformers |
|---|---|---|---|---|
| n_draft | the setting: the most tokens a round drafts | K | gamma | num_assistant_tokens |
| k | what this round drafts: n_draft, or fewer where the tokens left cut it short | | | |
| q | the target's (the oracle's) distribution | q | p | p |
| p | the draft's distribution | p | q | q |
| alpha(q, p) | sum_x min(p(x), q(x)): the chance a draft x ~ p is kept (sps.alpha) | | alpha (beta per token) | |
| Stats.kept_fraction | a run's drafts kept over drafts made | | | |
| Stats.alpha_estimate | a run's estimate of alpha: kept / (kept + rejections) | | | |
| c | T_draft(1) / T_oracle(1) | c | c | |

Medusa, Lookahead and most later papers write k for n_draft (and Lookahead's n-gram size is
N = n_draft + 1). The signatures take the target first: (q, p), as sps.py's functions do.
"""

import os
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from errors import UserError


class GenerationError(UserError):
    """Arguments that cannot give a valid generation (no room left, vocabularies differ)."""


@dataclass
class Round:
    """One draft-and-verify round, as --trace, --html and the tests see it."""
    context_length: int  # tokens in the text before the round
    drafted: list       # the draft's proposals (a tree: every node, level by level)
    accepted: int       # how many drafts were kept
    new: list           # what the round added: the accepted drafts, then one token of the oracle's
    oracle: list = None  # greedy verification: the oracle's choice after each draft prefix (k + 1 of them)
    cached: dict = None  # positions each KV cache holds after the rollback, {"draft": n, "oracle": n}
    details: object = None  # the method's own record, a dataclass with a `kind` (Line, sps.SpsDetails, ...)
    reason: str = ""    # one line of why, from a method whose details have no renderer of their own

    @property
    def kind(self):
        """Which renderer draws the round (app/display.py, app/page/): its details' kind, "line" without one."""
        return getattr(self.details, "kind", "line")


@dataclass
class Line:
    """The details of a round of a line of drafts at a fixed draft length (speculative.py, beyond/eagle.py)."""
    kind: ClassVar[str] = "line"
    n_draft: int  # the draft length asked for
    k: int        # drafted this round: n_draft, or fewer where fewer tokens were left to make


@dataclass
class Stats:
    """What a generator did, filled in as it runs; the tokens themselves are its output."""
    # rounds: add_round's calls, one per step of the method: a draft-and-verify round (one
    # verification each), a token of a one-model baseline, a step of all beams in beam search.
    # Not always oracle passes: a prompt's own pass (tree.py) is a pass but no round.
    rounds: int = 0
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
    def n_generated(self):  # tokens made so far (KVCache.n_tokens() is what a cache holds)
        return len(self.from_draft)

    @property
    def kept_fraction(self):
        """The drafts kept over the drafts made (a draft after a rejection is made but never checked)."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def alpha_estimate(self):
        """This run's estimate of alpha, the chance that a checked draft is kept: kept / (kept + rejections).
        Each rejection ends a round, so the drafts after it were never checked and count for nothing."""
        return self.accepted / (self.accepted + self.rejections) if self.accepted + self.rejections else 0.0

    @property
    def tokens_per_round(self):
        return self.n_generated / self.rounds if self.rounds else 0.0

    def add_round(self, new_tokens, drafted=(), n_accepted=0, rejections=None, **record):
        """Count one round that added new_tokens, of which the first n_accepted were drafts.

        rejections: how many of its lines of drafts ended at a draft the oracle did not keep (a batch's
        round has a line per row); default: one line, so 1 if a draft was not kept, else 0.
        With tracing on (trace is a list), also keep the round as a Round; record
        holds its other fields (context, oracle, cached, details, reason).
        """
        self.rounds += 1
        self.drafted += len(drafted)
        self.accepted += n_accepted
        self.rejections += int(n_accepted < len(drafted)) if rejections is None else rejections
        self.from_draft += [True] * n_accepted + [False] * (len(new_tokens) - n_accepted)
        if self.trace is not None and record:
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
    return timed_forward(model, cache, tokens[cache.n_tokens():], stats, role, n_logits=n_logits)


def timed_forward(model, cache, ids, stats, role, n_logits=1, **tree):  # -> [n_logits, vocab_size]
    """One forward pass of the model over ids after what its cache holds, counted and timed in stats.

    The one place a decoder's forward is timed: feed() for a line of tokens, and
    directly for a draft tree's nodes (tree.py), whose tree gives the forward
    its positions= and mask=.
    """
    start = time.perf_counter()
    logits = model.forward(ids, cache, n_logits=n_logits, **tree)
    stats.add_pass(role, time.perf_counter() - start)
    return finite(logits, model) if role == "oracle" else logits


def timed_states(model, cache, ids, stats, role, n_logits=None, **tree):  # -> ([n, n_embd], [n_logits, vocab_size])
    """timed_forward for a drafter that reads the model's last hidden states too (beyond/eagle.py's features,
    beyond/medusa.py's heads): the states of every row of ids, and the logits of the last n_logits (default all)."""
    start = time.perf_counter()
    with model.rows(len(ids)):  # forward() sets the model's threads itself; outside it, rows() does
        states = model.hidden_states(ids, cache, **tree)
        logits = model.logits(states[-(n_logits or len(states)):])
    stats.add_pass(role, time.perf_counter() - start)
    return states, finite(logits, model) if role == "oracle" else logits


def finite(logits, model):
    """The oracle's logits, when every one is a finite number; else GenerationError. Finite weights (every loader
    checks them) can still overflow float32 in their products, and the oracle's argmax or draw from NaN would be a
    wrong token. A draft's may be anything: its drafts are checked (and sps.acceptance_probability keeps none then)."""
    if not np.isfinite(logits).all():
        raise GenerationError(f"{model.name}'s logits are not finite numbers: its weights overflow float32 on this text")
    return logits


def cache_lengths(draft_cache, oracle_cache):
    """For a Round: how many positions each cache holds (the draft's is None without a draft model)."""
    return {"draft": None if draft_cache is None else draft_cache.n_tokens(), "oracle": oracle_cache.n_tokens()}


def decisive_digits(*compared, least=2):
    """How many significant digits a trace or a page prints numbers with where a rule compared them: the
    fewest, at least `least`, at which every pair (a, b) in `compared` that differs prints differently
    (r beside min(1, q/p) or h, q/p beside 1). Rounding to a number of significant digits keeps order, so the
    printed pair then reads the way the rule decided: a q/p of 1.046 shows as 1.05 beside 1, never as 1."""
    for digits in range(least, 18):  # 17 digits tell any two float64 apart
        if all(a == b or f"{a:.{digits}g}" != f"{b:.{digits}g}" for a, b in compared):
            return digits
    return 17


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


# ---------------------------------------------------------------------------
# What a round should gain: Leviathan et al. 2023's formula
# ---------------------------------------------------------------------------
# Their model: each draft is kept with probability alpha, independently, until the first
# rejection. A round of n_draft drafts costs n_draft draft passes and one oracle pass over
# n_draft + 1 tokens; in oracle single-token passes, n_draft * c + T(n_draft + 1) / T(1),
# c = T_draft(1) / T_oracle(1). The paper assumes a check costs one pass (T(k) = T(1)).

def truncated_geometric(alpha, n_draft):  # -> [n_draft + 1]
    """P(i drafts kept), i = 0..n_draft, when each is kept with probability alpha until the first rejection:
    alpha^i (1 - alpha) for i < n_draft, alpha^n_draft for i = n_draft."""
    return [alpha ** i * (1 - alpha) for i in range(n_draft)] + [alpha ** n_draft]


def expected_tokens_per_round(alpha, n_draft):
    """(1 - alpha^(n_draft + 1)) / (1 - alpha): the mean of the drafts kept plus the oracle's own token."""
    return n_draft + 1.0 if alpha == 1 else (1 - alpha ** (n_draft + 1)) / (1 - alpha)


def predicted_speedup(alpha, n_draft, c, check_ratio=1.0):
    """Leviathan et al. 2023: expected tokens per round over the cost of a round, in oracle passes.

    check_ratio = T_oracle(n_draft + 1) / T_oracle(1), what checking costs; the paper assumes 1.
    """
    return expected_tokens_per_round(alpha, n_draft) / (n_draft * c + check_ratio)


# ---------------------------------------------------------------------------
# The memory a decoder may take (beam.py's beams, batch.py's rows): the limit that applies to this process
# ---------------------------------------------------------------------------

CGROUP_ROOT = "/sys/fs/cgroup"
UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as a number near 2**63


def memory_budget():
    """Half of the least memory limit that applies to this process: the machine's physical memory,
    its cgroup's (a container's: v2 memory.max, v1 memory.limit_in_bytes) and RLIMIT_AS (ulimit -v),
    each where the system has one; 8 GB where it says none (Windows)."""
    limits = [limit for limit in (physical_memory(), cgroup_memory_limit(), address_space_limit()) if limit]
    return min(limits) // 2 if limits else 8 << 30


def physical_memory():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return None


def address_space_limit():
    try:
        import resource  # POSIX only
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def cgroup_memory_limit(root=CGROUP_ROOT, membership="/proc/self/cgroup"):
    """The least memory limit of this process's cgroup and its parents (Linux); None where none is set."""
    try:
        with open(membership, encoding="utf-8") as f:
            lines = f.read(1 << 16).splitlines()
    except (OSError, ValueError):  # ValueError: not UTF-8, which no kernel writes: as unreadable
        return None
    found = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2: one hierarchy, memory.max; "max" is no limit
            found += cgroup_values(root, path, "memory.max")
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            found += cgroup_values(os.path.join(root, "memory"), path, "memory.limit_in_bytes")
    limits = [n for n in found if n < UNLIMITED]
    return min(limits) if limits else None


def cgroup_values(root, path, name):
    """The numbers in `name` from the cgroup at path up to the root (in a container the path may not
    be visible, and its own cgroup is the root), wherever the file exists."""
    values, parts = [], [p for p in path.strip("/").split("/") if p]
    for depth in range(len(parts), -1, -1):
        try:
            with open(os.path.join(root, *parts[:depth], name), encoding="utf-8") as f:
                text = f.read(64).strip()
        except (OSError, ValueError):  # ValueError: not UTF-8, which no kernel writes: as unreadable
            continue
        if text.isascii() and text.isdigit():  # not "²", which isdigit() takes and int() refuses
            values.append(int(text))
    return values
