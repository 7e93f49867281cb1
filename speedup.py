"""What a round should gain: Leviathan et al. 2023's formula.

Their model: each draft is kept with probability alpha, independently, until the first rejection. A round
of n_draft drafts costs n_draft draft passes and one oracle pass over n_draft + 1 tokens; in oracle
single-token passes, n_draft * c + T(n_draft + 1) / T(1), c = T_draft(1) / T_oracle(1). The paper assumes
a check costs one pass, T(k) = T(1); check_ratio below is what it costs where this runs. Their letters are
in decoding.py's table (their gamma is n_draft here).
"""


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
