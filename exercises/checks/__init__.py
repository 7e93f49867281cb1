"""The checks behind `pytest exercises/`: each takes an implementation and fails with a staged hint.

A failure says first what went wrong, on a concrete input (what your function
gave, what it should give), then, on a line of its own, where to look. The
hint never gives the answer away; EXERCISES.md has the answers, folded.

One module per part of EXERCISES.md, each with its exercises' checks and
references, and the registry of those exercises at its end:

    running.py            a check's failures: not solved yet, wrong (what, then where to look), a crash
    contract.py           the one contract every exercise is held to, before its own cases: what it returns,
                          the arguments it leaves as they came, its randomness, its passes, its boundaries
    promises.py           each exercise's terms of that contract (its file's docstring says them: "Held to")
    models.py             the tiny random pairs, the learned pair and the table models the checks run on
    part1_greedy.py       exercises 3, 4, 5
    part2_threshold.py    exercises 6, 7, 8
    part3_sampling.py     exercises 9, 11, 12, 13
    part3_sps_round.py    exercise 15
    part4_lookup_tree.py  exercises 16, 18
    part6_real_text.py    exercises 22, 23
    part6_tree_lookup.py  exercises 24, 25
    part7_batch.py        exercise 26
    part7_vocab.py        exercise 27
    part8_traversal.py    exercise 28
    part8_sequoia.py      exercise 29

EXERCISES maps each hands-on exercise's number to its file, the function you
write there, its check, and its reference: the project's own function (or a
thin adapter over it), which `pytest exercises/ --reference` checks instead of
your file. The project's test suite runs that too, so an exercise cannot drift
away from the code it teaches.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the project

from . import (part1_greedy, part2_threshold, part3_sampling, part3_sps_round, part4_lookup_tree,  # noqa: E402
               part6_real_text, part6_tree_lookup, part7_batch, part7_vocab, part8_sequoia, part8_traversal)
from . import contract, promises  # noqa: E402
from .models import learned_pair, tiny_pair  # noqa: E402,F401  (for EXERCISES.md's snippets and ex05's script)
from .part2_threshold import notes_threshold  # noqa: E402,F401
from .running import NotSolved, StillBuggy, Wrong  # noqa: E402,F401

PARTS = (part1_greedy, part2_threshold, part3_sampling, part3_sps_round, part4_lookup_tree, part6_real_text,
         part6_tree_lookup, part7_batch, part7_vocab, part8_traversal, part8_sequoia)
EXERCISES = {e.number: e for part in PARTS for e in part.EXERCISES}


def check(number, f):
    """Run exercise `number`'s check on f; AssertionError (NotSolved for an untouched exercise) if it fails.
    First the file as shipped (a bug hunt's bug still there is "not solved yet"), then the contract's stages
    (promises.py: randomness, boundaries), then the exercise's own cases; f is held to the contract at every call."""
    exercise, terms = EXERCISES[number], promises.CONTRACTS[number]
    contract.RAN[number].clear()
    held = contract.Held(number, terms, f, exercise.function)
    try:
        if exercise.shipped is not None:
            exercise.shipped(held)
        contract.hold(number, terms, held, exercise.reference())
        exercise.check(held)
    except NotImplementedError:
        raise NotSolved(not_solved(exercise)) from None
    except StillBuggy as e:
        raise NotSolved(f"{not_solved(exercise)}\n{e}") from None
    except Wrong as e:
        if held.grew:  # a cache kept between calls: the answer then depends on what was asked before
            names = ", ".join(sorted(held.grew))
            raise Wrong(f"{e}; and your module's {names} grew from call to call: a result kept there and looked up "
                        "again (a cache whose key leaves out an argument) answers one call with another's result: "
                        "compute from the arguments alone, or key the cache on all of them") from None
        raise


def not_solved(exercise):
    return f"exercise {exercise.number} is not solved yet: see EXERCISES.md, then edit exercises/{exercise.module}.py"
