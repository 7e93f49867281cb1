"""A line of drafts from a draft model: speculative decoding, its threshold and its adaptive draft lengths.

    speculative   speculative.py: k greedy drafts, the agreeing prefix kept
    threshold     threshold.py: drafts while the draft is confident, a threshold that moves
    adaptive      adaptive.py: the draft length from the draft's entropy and a moving average (EGAG)
    adaptive-hf   adaptive.py: Hugging Face's rule, +2 after a clean round, -1 otherwise

Each is greedy: its text is exactly the oracle's greedy text. Their rounds are a line of drafts beside the
oracle's choice after each prefix (display.line_lines, page/report.greedy_table); what differs is why the
round drafted what it did, said here.
"""

from adaptive import adaptive_generate
from batch import speculative_generate_batch
from speculative import speculative_generate
from stats import Line
from threshold import threshold_generate
from workbench import system
from workbench.display import cut_short, length_reason
from workbench.methods.vocabularies import SPECULATIVE as SPECULATIVE_ACROSS
from workbench.registry import Method, Option, Shown, register


def line_reasons(r, show):
    """A round of a fixed draft length: n_draft, or fewer drafted where the tokens left cut it short."""
    return [length_reason(r.details.n_draft, r.details.k)] if isinstance(r.details, Line) else []


def threshold_reasons(r, show):
    """How the drafts were cut (the cumulative probability against the threshold) and the next threshold set."""
    d, n_accepted = r.details, r.accepted
    t, c = d.threshold, d.cumulative
    probs = ", ".join(f"{p:.3g}" for p in c)
    stop = (f"{c[-1]:.3g} is below it: stopped" if c and c[-1] < t else
            f"stopped at the most drafts, {d.k}" if c else "nothing left to draft") + cut_short(d.n_draft, d.k)
    lines = [f"drafted while the draft's probability of its whole guess stayed at or above the threshold {t:.3g}: "
             f"{probs or '(none)'}; {stop}"]
    if c:
        after = d.next_threshold
        if n_accepted == len(c):
            rule = f"every draft kept: {t:.3g} - {d.boost:g} (guess further) = {t - d.boost:.3g}"
            raw = t - d.boost
        else:
            last = c[n_accepted - 1] if n_accepted else 1.0
            raw = (t + last) / 2
            rule = (f"draft {n_accepted + 1} rejected: halfway to {last:.3g}, the probability at the last kept draft"
                    f"{' (none kept: 1)' if not n_accepted else ''}: ({t:.3g} + {last:.3g}) / 2 = {raw:.3g}")
        clamp = f", kept within [0.05, 0.95]: {after:.3g}" if abs(raw - after) > 1e-9 else ""
        lines.append(f"next threshold {after:.3g}: {rule}{clamp}")
    return lines


def threshold_setting(d):
    return f", threshold {d.threshold:.3g}"


def adaptive_reasons(r, show):
    """What stopped the drafts (egag: an unsure draft's entropy) and how the next n_draft was set."""
    d, n_accepted, n_drafted = r.details, r.accepted, len(r.drafted)
    g, entropies = d.n_draft, d.entropies
    shown = ", ".join(f"{e:.2f}" for e in entropies)
    if d.rule == "egag":
        bound = d.entropy_bound
        stop = (f"{entropies[-1]:.2f} is above {bound:g}: stopped" if entropies and entropies[-1] > bound else
                f"stopped at n_draft {g}" if n_drafted == g else f"stopped at {n_drafted}")
        lines = [f"rule egag: drafted up to n_draft {g}, stopping after a draft whose entropy is above {bound:g} "
                 f"nats: {shown}; {stop}{cut_short(g, d.k)}"]
    else:
        lines = [f"rule heuristic: drafted n_draft {g}{cut_short(g, d.k)}"]
    if not n_drafted:
        return lines
    low, high = d.bounds
    if d.rule == "egag":
        raw = round(d.average_after) + 1
        rule = (f"moving average of the drafts kept: {d.ema:g} x {d.average_before:.2f} + {1 - d.ema:.2g} x "
                f"{n_accepted} = {d.average_after:.2f}; round({d.average_after:.2f}) + 1 = {raw}")
    else:
        raw = g + 2 if n_accepted == n_drafted else g - 1
        rule = f"every draft kept: {g} + 2 = {raw}" if n_accepted == n_drafted else f"a draft rejected: {g} - 1 = {raw}"
    clamp = f", kept within [{low}, {high}]" if raw != d.next_n_draft else ""
    return lines + [f"next n_draft {d.next_n_draft}: {rule}{clamp}"]


def run_speculative(c):
    return speculative_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_speculative_batch(c, batch_ids):
    return speculative_generate_batch(c.draft, c.oracle, batch_ids, c.n_new, n_draft=c.n_draft, stats=c.stats,
                                      budget=system.memory_budget())


def run_threshold(c):
    return threshold_generate(c.draft, c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_adaptive(c, rule="egag"):
    low, high = c.option("n_draft_min"), c.option("n_draft_max")
    return adaptive_generate(c.draft, c.oracle, c.ids, c.n_new, rule=rule, n_draft=min(max(c.n_draft, low), high),
                             n_draft_min=low, n_draft_max=high, ema=c.option("ema"), stats=c.stats)


def run_adaptive_hf(c):
    return run_adaptive(c, rule="heuristic")


# The adaptive draft's bounds and the weight of its moving average (the session's source document calls
# them /egag_gamma_min, /egag_gamma_max and /egag_ema: docs/USAGE.md).
N_DRAFT_MIN = Option("n_draft_min", int, 1, "adaptive: the shortest draft", 1, 128)
N_DRAFT_MAX = Option("n_draft_max", int, 16, "adaptive: the longest draft", 1, 128)
EMA = Option("ema", float, 0.7, "adaptive (egag): the moving average's weight on the past", 0.0, 1.0)
ADAPTIVE = (N_DRAFT_MIN, N_DRAFT_MAX, EMA)

register(
    Method("speculative", "greedy speculative decoding (speculative.py); output = the oracle's greedy output; a "
                          "draft of another vocabulary: crossvocab.py", run_speculative, n_draft=4,
           shown=Shown(reasons=line_reasons), across=SPECULATIVE_ACROSS, batched=run_speculative_batch),
    Method("threshold", "greedy speculative decoding, draft length set by the draft's confidence (threshold.py)",
           run_threshold, n_draft=16, shown=Shown(reasons=threshold_reasons, setting=threshold_setting)),
    Method("adaptive", "greedy, draft length set by the draft's entropy and a moving average (rule egag, the EGAG of "
                       "the workbench documentation in docs/sources.md; adaptive.py)", run_adaptive, n_draft=4,
           options=ADAPTIVE, shown=Shown(reasons=adaptive_reasons, setting=lambda d: f", n_draft {d.n_draft}")),
    Method("adaptive-hf", "greedy, draft length by Hugging Face's rule heuristic: +2 after a clean round, -1 otherwise "
                          "(adaptive.py)", run_adaptive_hf, n_draft=4, options=ADAPTIVE,
           shown=Shown(reasons=adaptive_reasons, setting=lambda d: f", n_draft {d.n_draft}")),
)
