"""The checker for the hands-on exercises: `pytest exercises/`, or one of them: `pytest exercises/ -k ex11`.

Each test runs the check of one exercise (checks/) on the function in your
file. An untouched exercise fails with "exercise NN is not solved yet"; a wrong
answer fails with what went wrong, then where to look.
`pytest exercises/ --reference` runs the same checks on the project's own code.
"""

import importlib

import pytest

import checks


@pytest.mark.parametrize("number", list(checks.EXERCISES), ids=[e.module for e in checks.EXERCISES.values()])
def test_exercise(number, request):
    exercise = checks.EXERCISES[number]
    if request.config.getoption("--reference"):
        f = exercise.reference()
    else:
        f = getattr(importlib.import_module(exercise.module), exercise.function)
    try:
        checks.check(number, f)
        failure = None
    except AssertionError as e:
        failure = str(e)
    if failure:  # the message alone: what went wrong, then where to look
        pytest.fail(failure, pytrace=False)
