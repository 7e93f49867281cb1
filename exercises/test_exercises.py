"""The checker for the hands-on exercises: `pytest exercises/` (or `pytest exercises/ -k ex3`).

Each test runs a check from checks.py on your file. An untouched stub fails with
"exercise exN is not solved yet"; a wrong answer fails with what went wrong.
`pytest exercises/ --reference` runs the same checks on the project's own code.
"""

import types

import pytest

import checks


@pytest.fixture
def solution(request):
    if request.config.getoption("--reference"):
        import sps
        import speculative
        import threshold
        return types.SimpleNamespace(
            accepted_prefix_length=speculative.accepted_prefix_length, rollback=speculative.rollback,
            residual=sps.residual, next_threshold=threshold.next_threshold,
            speculative_generate=lambda d, o, ids, n, k: speculative.speculative_generate(d, o, ids, n, n_draft=k))
    import ex1_accepted_prefix
    import ex2_rollback
    import ex3_residual
    import ex4_threshold
    import ex5_cache_bug
    return types.SimpleNamespace(
        accepted_prefix_length=ex1_accepted_prefix.accepted_prefix_length, rollback=ex2_rollback.rollback,
        residual=ex3_residual.residual, next_threshold=ex4_threshold.next_threshold,
        speculative_generate=ex5_cache_bug.speculative_generate)


def test_ex1_accepted_prefix_length(solution):
    checks.check_accepted_prefix_length(solution.accepted_prefix_length)


def test_ex2_rollback(solution):
    checks.check_rollback(solution.rollback)


def test_ex3_residual(solution):
    checks.check_residual(solution.residual)


def test_ex4_next_threshold(solution):
    checks.check_next_threshold(solution.next_threshold)


def test_ex5_cache_bug(solution):
    checks.check_speculative_generate(solution.speculative_generate)
