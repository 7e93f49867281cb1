"""The checker for the hands-on exercises: `pytest exercises/` (or `pytest exercises/ -k ex3`).

Each test runs a check from checks.py on your file. An untouched stub fails with
"exercise N is not solved yet"; a wrong answer fails with what went wrong.
"""

import checks
import ex1_accepted_prefix
import ex2_rollback
import ex3_residual
import ex4_threshold
import ex5_cache_bug


def test_ex1_accepted_prefix_length():
    checks.check_accepted_prefix_length(ex1_accepted_prefix.accepted_prefix_length)


def test_ex2_rollback():
    checks.check_rollback(ex2_rollback.rollback)


def test_ex3_residual():
    checks.check_residual(ex3_residual.residual)


def test_ex4_next_threshold():
    checks.check_next_threshold(ex4_threshold.next_threshold)


def test_ex5_cache_bug():
    checks.check_speculative_generate(ex5_cache_bug.speculative_generate)
