"""What a decoder records as it runs: Stats (counts and times) and, with tracing on, a Round per round.

Every decoder here takes a `stats=` and fills it in; the tokens themselves are its output. A round is one
draft-and-verify step: the drafts proposed, how many the oracle kept, what the round added. The baselines
(the oracle alone, beam search) make tokens without rounds: they count tokens and passes only.

Acceptance per draft position (vLLM's "acceptance rate per position", Spec-Bench's "mean accepted tokens"):
position i of a round is its i-th draft along the line, or depth i of a tree. made_at[i - 1] counts the rounds
that drafted a position i, kept_at[i - 1] those whose kept drafts reached it. So kept_at[0] / made_at[0] is
how often a first draft is kept, and tokens_per_round is 1 + the kept drafts per round.
"""

from dataclasses import dataclass, field


@dataclass
class Round:
    """One draft-and-verify round, as --trace, --html and the tests see it."""
    context_length: int  # tokens in the text before the round
    drafted: list       # the tokens the oracle checked, in its vocabulary (a tree: every node, level by level)
    accepted: int       # how many of them were kept
    new: list           # what the round added: the accepted drafts, then one token of the oracle's
    oracle: list = None  # greedy verification: the oracle's choice after each draft prefix (k + 1 of them)
    cached: dict = None  # positions each KV cache holds after the rollback, {"draft": n, "oracle": n}
    details: object = None  # the method's own record of the round (Line, sps.SpsDetails, tree.TreeDetails, ...)


@dataclass
class Line:
    """The details of a round of a line of drafts at a fixed draft length (speculative.py, beyond/eagle.py)."""
    n_draft: int  # the draft length asked for
    k: int        # drafted this round: n_draft, or fewer where fewer tokens were left to make


@dataclass
class Stats:
    """What a generator did, filled in as it runs; the tokens themselves are its output."""
    rounds: int = 0          # draft-and-verify rounds: one verification each
    drafted: int = 0         # tokens the draft proposed
    accepted: int = 0        # drafted tokens the oracle kept
    rejections: int = 0      # rounds that ended at a draft the oracle did not keep
    draft_time: float = 0.0  # seconds drafting: the draft model's forward passes (or an n-gram table's lookups)
    oracle_time: float = 0.0
    draft_passes: int = 0    # forward passes of the draft model
    oracle_passes: int = 0   # forward passes of the oracle: its verifications, and a prompt's pass where it has one
    from_draft: list = field(default_factory=list)  # one bool per new token: an accepted draft?
    made_at: list = field(default_factory=list)     # [i]: rounds that drafted a position i + 1 (module docstring)
    kept_at: list = field(default_factory=list)     # [i]: rounds whose kept drafts reached position i + 1
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
        """The kept drafts and the oracle's own token, per round: vLLM's "mean acceptance length", Spec-Bench's
        "mean accepted tokens" (tau)."""
        return self.n_generated / self.rounds if self.rounds else 0.0

    def acceptance_at(self):
        """[kept_at[i] / made_at[i]]: how often a round that drafted position i + 1 kept its draft there."""
        return [kept / made if made else 0.0 for made, kept in zip(self.made_at, self.kept_at)]

    def add_tokens(self, new_tokens, n_from_draft=0):
        """Count tokens made, the first n_from_draft of them accepted drafts (a baseline's tokens: none)."""
        self.from_draft += [True] * n_from_draft + [False] * (len(new_tokens) - n_from_draft)

    def add_round(self, new_tokens, drafted=(), n_accepted=0, rejections=None, positions=None, **record):
        """Count one round that added new_tokens, of which the first n_accepted were drafts.

        rejections: how many of its lines of drafts ended at a draft the oracle did not keep (a batch's
        round has a line per row); default: one line, so 1 if a draft was not kept, else 0.
        positions: how many draft positions the round reached (a tree: its depth); default len(drafted).
        With tracing on (trace is a list), also keep the round as a Round; record
        holds its other fields (context_length, oracle, cached, details).
        """
        self.rounds += 1
        self.drafted += len(drafted)
        self.accepted += n_accepted
        self.rejections += int(n_accepted < len(drafted)) if rejections is None else rejections
        self.add_tokens(new_tokens, n_accepted)
        self.count_positions(len(drafted) if positions is None else positions, n_accepted)
        if self.trace is not None and record:
            self.trace.append(Round(drafted=list(drafted), accepted=n_accepted, new=list(new_tokens), **record))

    def count_positions(self, n_made, n_kept):
        """One round's line of positions: drafts at positions 1..n_made, of which 1..n_kept were kept."""
        while len(self.made_at) < n_made:
            self.made_at.append(0)
            self.kept_at.append(0)
        for i in range(n_made):
            self.made_at[i] += 1
            self.kept_at[i] += i < n_kept

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
