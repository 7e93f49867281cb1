"""The page's one figure every method has: the drafts accepted per round, beside what a constant alpha predicts.

Each method's own pictures of a round (a tree, a window, the oracle's blocks) are its family's, in
workbench/methods/."""

from speedup import truncated_geometric


# ---------------------------------------------------------------------------
# Accepted drafts per round: measured, and predicted from alpha
# ---------------------------------------------------------------------------

def draft_length(r, tree=None):
    """The most drafts round r could have kept: k for a line of drafts, the number of levels for a tree."""
    if tree is None:
        return len(r.drafted)
    depth = []
    for parent in tree.parents:  # level order: a parent comes before its children
        depth.append(1 if parent == -1 else depth[parent] + 1)
    return max(depth, default=0)


def acceptance_histogram(trace, tree_of=lambda r: None):
    """(alpha, measured, predicted) over the rounds that drafted something.

    alpha is the chance that a checked draft is kept: accepted / (accepted +
    rejections), since the drafts after a rejection are never checked (the
    acceptance at the top, accepted / drafted, counts them as lost).
    measured[i] counts the rounds that kept i drafts; predicted[i] adds up
    truncated_geometric over the rounds, each with its own draft length k
    (for a tree, whose alpha means less, its depth: tree_of(r) gives its tree).
    """
    rounds = [(draft_length(r, tree_of(r)), r.accepted) for r in trace if r.drafted]
    accepted = sum(n for _, n in rounds)
    rejections = sum(n < k for k, n in rounds)
    alpha = accepted / (accepted + rejections) if accepted + rejections else 0.0
    largest_k = max(k for k, _ in rounds)
    measured, predicted = [0] * (largest_k + 1), [0.0] * (largest_k + 1)
    for k, n in rounds:
        measured[n] += 1
        for i, p in enumerate(truncated_geometric(alpha, k)):
            predicted[i] += p
    return alpha, measured, predicted


def histogram_svg(measured, predicted=None):
    """Bars of the measured counts, each beside an outlined bar of the predicted count."""
    n = len(measured)
    top = max(measured + (predicted or [])) or 1
    slot, plot_h, left, base = 96, 200, 50, 240
    parts = [f'<svg class="histogram" viewBox="0 0 {left + n * slot + 10} 290" width="{left + n * slot + 10}" '
             'role="img" aria-label="accepted drafts per round">',
             f'<line x1="{left}" y1="{base}" x2="{left + n * slot}" y2="{base}" stroke="#000" stroke-width="2"/>']
    for i in range(n):
        x = left + i * slot + 10
        bars = [(measured[i], str(measured[i]), "measured")]
        if predicted is not None:
            bars.append((predicted[i], f"{predicted[i]:.1f}", "predicted"))
        for j, (value, label, cls) in enumerate(bars):
            h = plot_h * value / top
            parts.append(f'<rect class="{cls}" x="{x + j * 38}" y="{base - h:.1f}" width="34" height="{h:.1f}">'
                         f"<title>{cls}: {label}</title></rect>"
                         f'<text x="{x + j * 38 + 17}" y="{base - h - 6:.1f}" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{x + 36}" y="{base + 28}" text-anchor="middle" class="axis">{i}</text>')
    parts.append(f'<text x="{left + n * slot / 2}" y="{base + 48}" text-anchor="middle" class="axis">'
                 "drafts accepted in the round</text>")
    return "".join(parts) + "</svg>"
