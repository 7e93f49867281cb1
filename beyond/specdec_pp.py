"""SpecDec++: speculative sampling that stops drafting when the draft so far is likely to be cut (Huang, Guo,
Wang, arXiv 2405.19715; its code: Kaffaljidhmah2/SpecDec_pp, specdec_pp/hf_generation.py and wrap_model.py).

sps.py drafts a fixed K tokens a round. Too few wastes a round the draft would have got right; too many
wastes draft passes on tokens after the first rejection, which are thrown away. SpecDec++ trains a small
head on the DRAFT's hidden state to guess, for each draft, the chance a_i that speculative sampling keeps
it given that the drafts before it were kept, and stops as soon as the chance that some draft so far is
rejected passes a threshold:
    stop after draft i when  1 - Π_{j<=i} a_j > γ
(the paper's Section 3: drafting as a Markov decision process, the optimal policy a threshold on that
chance). The head: residual blocks x + SiLU(x W + b) on the draft's last state (after its ln_f), then two
logits (rejected, accepted); a_i = softmax(...)[1]. tools/train_acceptance_head.py trains it on the learned
pair (docs/LEARNED_PAIR.md says on what, and how well it learned).

One round (specdec_sample: sps.speculative_sample with draft_until_unsure as its step 1):
  1  for i = 1 .. K (the most drafts a round, the paper's K; n_draft here):
       the draft reads its newest token: p_i for the next draw, and its state after the draft x_(i-1)
       i > 1: a_(i-1) = head(that state); if 1 - Π_{j<i} a_j > γ: stop (x_(i-1) is the last draft)
       x_i ~ p_i
  2-4  sps.py's: one oracle pass, each draft kept with chance min(1, q/p), the residual or the bonus.
Why the output is still exactly the oracle's: whether to draft x_i is decided from the context and x_1 ..
x_(i-1) only, before x_i is drawn (the head reads the draft's states of those tokens). Given the tokens
before it, the next token is then either a draft x_i ~ p checked by sps.py's rule, or the token drawn after
the last draft from q or the residual; each emits q exactly (sps.py's proof, token by token). A stop that
looked at x_i before deciding to keep it in the draft would filter the draws, and x_i would no longer be a
draw from p: tests/test_specdec_pp.py has that mistake as its negative control. (The stop may read anything
the round knows before the draw, the oracle included; the draft's states are what the head can read cheaply.)

Letters: Chen et al.'s (sps.py): q the oracle, p the draft. The paper writes the stop's threshold h (on "the
probability that at least one token is rejected"); here it is γ, max_risk in the code (decoding.py keeps gamma
for Leviathan et al.'s draft length).
Its K is n_draft. The drafts after a stop cost one draft pass less than sps.py's K: the pass that read
x_(i-1) for the head also made p_i, which a stop throws away (SpecDec++ pays the same).
"""

import math
from dataclasses import dataclass

import numpy as np

from decoding import GenerationError, check_lengths, timed_states
from stats import Stats
from gpt2 import layer_norm
from sps import SpsDetails, sample, speculative_sample, token_verification


class AcceptanceHead:
    """SpecDec++'s head, the weights tools/train_acceptance_head.py exports ("accept.h.{i}.*", "accept.out.*");
    weights/heads.py reads them from DRAFT/heads/accept (params: gpt2.nest of its tensors)."""

    def __init__(self, params, config, draft):
        if config.get("head") != "accept" or config.get("n_embd") != draft.n_embd:
            raise GenerationError(f"this head is not an acceptance head for a draft of width {draft.n_embd}")
        self.blocks, self.out, self.draft = params["accept"]["h"], params["accept"]["out"], draft

    def accept_chance(self, states):  # the draft's last states before ln_f [n, n_embd] -> a [n]
        """a: the head's chance that speculative sampling keeps each draft, from the draft's state after reading it."""
        ln_f = self.draft.params["ln_f"]
        h = layer_norm(states, ln_f["weight"], ln_f["bias"], self.draft.eps)
        for block in self.blocks:
            z = h @ block["weight"] + block["bias"]
            h = h + z / (1 + np.exp(-z))  # SiLU(z) = z sigmoid(z)
        logits = h @ self.out["weight"] + self.out["bias"]  # [n, 2]: rejected, accepted
        return 1 / (1 + np.exp(logits[:, 0] - logits[:, 1]))


@dataclass
class SpecDecDetails(SpsDetails):
    """A round's record: sps.py's (steps, resampled or bonus) and the stop: the head's a_i after each draft it read,
    and why drafting ended."""
    max_risk: float = None
    chances: list = None  # a_1 .. a_j, one per draft the head read (all drafts but the last, when K ended it)
    stop: str = ""        # "head" (1 - Π a > γ), "n_draft" (K drafts), "room" (the tokens left)


def stops(chances, max_risk):
    """The stop: 1 - Π a_i > γ, the chance that some draft so far is rejected passes the threshold."""
    return 1.0 - math.prod(chances) > max_risk


def draft_line(step, k, max_risk, draw):
    """Step 1 as a pure function: step(drafted) -> (p, the draft's distribution of the next token; a, the head's
    chance for drafted[-1], None when nothing is drafted yet); draw(p) -> a token drawn from it. Returns (the
    drafts, their p, the head's a for each draft it read, why drafting ended: "head" or "end")."""
    drafted, p, chances = [], [], []
    for _ in range(k):
        p_next, a = step(drafted)
        if drafted:  # the newest draft's a, and the stop, before the next draw
            chances.append(a)
            if stops(chances, max_risk):
                return drafted, p, chances, "head"
        p.append(p_next)
        drafted.append(draw(p_next))
    return drafted, p, chances, "end"


def draft_until_unsure(head, max_risk, record):
    """Step 1 for sps.speculative_sample (draft_samples' signature): draft_line on the draft model, one draft pass a
    step, the head reading the state of the newest token. record(chances, why, n_drafted) keeps the round's stop."""
    def drafter(draft, cache, tokens, k, processor, rng, stats):
        def step(drafted):
            states, logits = timed_states(draft, cache, (tokens + drafted)[cache.n_tokens():], stats, "draft", n_logits=1)
            if not drafted:
                return processor(logits[-1]), None
            return processor(logits[-1]), float(head.accept_chance(states[-1:])[0])

        drafted, p, chances, why = draft_line(step, k, max_risk, lambda dist: sample(dist, rng))
        record(chances, why, len(drafted))
        return drafted, p
    return drafter


def specdec_sample(draft, oracle, ids, n_new, head, n_draft=8, max_risk=0.5, rng=None, processor=None, stats=None,
                   **flags):
    """Speculative sampling whose drafting stops when SpecDec++'s head says so (at most n_draft drafts a round):
    yields n_new ids distributed exactly as sps.autoregressive_sample(oracle, ...). head: an AcceptanceHead for
    this draft; max_risk: the stop's threshold on the chance that some draft so far is rejected (0 <= max_risk <= 1;
    max_risk = 1 never stops early: sps.py's fixed K)."""
    if head.draft is not draft:
        raise GenerationError("the acceptance head was loaded for another draft")
    if not 0.0 <= max_risk <= 1.0:
        raise GenerationError(f"max_risk is a probability, from 0 to 1, got {max_risk}")
    check_lengths(n_draft=n_draft)
    stats = Stats() if stats is None else stats
    last = {}

    def record(chances, why, n_drafted):  # "end": all k drafted, n_draft of them, or fewer where fewer were left
        last.update(chances=chances, stop=why if why == "head" else "n_draft" if n_drafted == n_draft else "room")

    def rule(q, p, drafted, rng, n_draft, explain):  # sps.py's steps 3 and 4, the stop added to the record
        new_tokens, n_accepted, details = token_verification(q, p, drafted, rng, n_draft, explain)
        if details is not None:
            details = SpecDecDetails(**vars(details), max_risk=max_risk, chances=last["chances"], stop=last["stop"])
        return new_tokens, n_accepted, details

    return speculative_sample(draft, oracle, ids, n_new, n_draft, rng, processor, stats, rule=rule,
                              drafter=draft_until_unsure(head, max_risk, record), **flags)
