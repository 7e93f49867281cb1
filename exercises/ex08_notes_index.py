"""Exercise 8 (core): spot the bug in the threshold notes' threshold update.   EXERCISES.md, exercise 8

The threshold notes (quoted in docs/sources.md), where threshold drafting
comes from, updates the threshold after each round with the lines of
update_threshold below, copied as they are. Its variables: drafted_probs[i] is
the cumulative probability of the first i + 1 drafts, n_draft how many drafts
there were, and n_accepted is computed by

    n_accepted = next(
        idx + 1
        for idx, (checked, draft) in enumerate(
            zip(checked, draft[len(tokens) :] + [None])
        )
        if checked != draft
    )

where checked holds the oracle's n_draft + 1 choices (exercise 3's
oracle_choice). Work out what n_accepted counts, then which draft
drafted_probs[n_accepted - 1] belongs to. Does the code do what its comment
says? Make it do what the comment says (threshold.py's choice), keeping the
notes' n_accepted and this function's arguments.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a Python float (the threshold)
  arguments  drafted_probs comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries no draft accepted (n_accepted = 1); every draft accepted
             (n_accepted = n_draft + 1); n_draft = 1

Check: pytest exercises/ -k ex08
"""


def update_threshold(threshold, drafted_probs, n_accepted, n_draft, boost):
    if n_accepted <= n_draft:
        # adjust threshold towards prob of last accepted token, if we
        # ignored any draft tokens
        threshold = (threshold + drafted_probs[n_accepted - 1]) / 2
    else:
        # otherwise, lower the threshold slightly, we're probably being
        # too conservative
        threshold -= boost
    # clamp to avoid pathological thresholds
    threshold = min(max(threshold, 0.05), 0.95)
    return threshold
