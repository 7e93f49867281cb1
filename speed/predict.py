"""What speculative decoding should gain: Leviathan et al. 2023's model, and the same with measured costs.

Their model: each draft is accepted with probability alpha, independently,
until the first rejection. A round of gamma drafts then keeps i of them with
probability truncated_geometric(alpha, gamma)[i], and yields on average
expected_tokens_per_round(alpha, gamma) tokens (the kept drafts plus the
oracle's own). A round costs gamma draft passes and one oracle pass over
gamma + 1 tokens; in oracle single-token passes, gamma * c + T(gamma + 1) / T(1),
c = T_draft(1) / T_oracle(1). The paper assumes checking is free (T(k) = T(1)).
"""


def truncated_geometric(alpha, k):  # -> [k + 1]
    """P(i drafts accepted), i = 0..k, when each is kept with probability alpha until the first rejection:
    alpha^i (1 - alpha) for i < k, alpha^k for i = k."""
    return [alpha ** i * (1 - alpha) for i in range(k)] + [alpha ** k]


def expected_tokens_per_round(alpha, k):
    """(1 - alpha^(k+1)) / (1 - alpha): the mean of accepted + 1 under truncated_geometric."""
    return k + 1.0 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def predicted_speedup(alpha, gamma, c, verify_ratio=1.0):
    """Leviathan et al. 2023: expected tokens per round over the cost of a round, in oracle passes.

    verify_ratio = T_oracle(gamma + 1) / T_oracle(1); the paper assumes 1.
    """
    return expected_tokens_per_round(alpha, gamma) / (gamma * c + verify_ratio)


def predicted_seconds(alpha, gamma, n_new, draft, oracle, rounds=None):
    """(oracle alone, speculative) seconds for n_new tokens after a prompt, from measured costs.

    draft and oracle: {n_tokens: seconds of a forward}, the cost curve (k new
    tokens on a warm cache) plus "prompt", the first forward over the prompt,
    and for the oracle ("prompt", gamma), the prompt with the first drafts.
    The oracle alone: the prompt pass gives the first token, then one pass per
    token. Speculative: n_new / expected_tokens_per_round rounds, each gamma draft passes
    (the first of them over 2 tokens after a round that accepted everything,
    which happens with probability alpha^gamma) and one oracle pass of gamma + 1;
    the first round's passes include the prompt instead. rounds, when given,
    is speed.measure.round_costs(): an oracle-alone step (key 0) and a round (key gamma)
    timed as decoding runs them, in the same turns, replacing the cost
    curves' passes on both sides.
    """
    step = oracle[1] if rounds is None else rounds[0]
    alone = oracle["prompt"] + (n_new - 1) * step
    drafting = (gamma - 1) * draft[1] + alpha ** gamma * draft[2] + (1 - alpha ** gamma) * draft[1]
    a_round = drafting + oracle[gamma + 1] if rounds is None else rounds[gamma] + alpha ** gamma * (draft[2] - draft[1])
    n_rounds = n_new / expected_tokens_per_round(alpha, gamma)
    first = draft["prompt"] + (gamma - 1) * draft[1] + oracle["prompt", gamma]
    return alone, first + (n_rounds - 1) * a_round
