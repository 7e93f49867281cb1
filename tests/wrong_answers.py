"""The negative controls of the exercises' checkers: fails() runs a check on a wrong answer and holds it to the
message written for it, not merely to a failure (tests/test_exercises_*.py)."""

import re

import pytest

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)


def fails(number, answer, *patterns, unsolved=False):
    """Run exercise number's check on a wrong answer; its message must match every pattern."""
    with pytest.raises(AssertionError) as failure:
        checks.check(number, answer)
    message = str(failure.value)
    assert isinstance(failure.value, checks.NotSolved) == unsolved, message
    assert "\n  where to look: " in message, message
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in:\n{message}"
    return message


def fails_in_runs(check, answer, *patterns):
    """Stage two alone (the function inside the project's decoder), on an answer the hand-made cases would stop."""
    with pytest.raises(AssertionError) as failure:
        check(answer)
    message = str(failure.value)
    assert "\n  where to look: " in message, message
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in:\n{message}"
