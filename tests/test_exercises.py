"""The exercises' checks pass on the reference solutions (the project's own code) and
fail clearly on the untouched stubs, so EXERCISES.md cannot drift from the code."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "exercises"))
import checks  # noqa: E402
import sps  # noqa: E402
import speculative  # noqa: E402
import threshold  # noqa: E402


@pytest.mark.parametrize("check, reference", [
    (checks.check_accepted_prefix_length, speculative.accepted_prefix_length),
    (checks.check_rollback, speculative.rollback),
    (checks.check_residual, sps.residual),
    (checks.check_next_threshold, threshold.next_threshold),
    (checks.check_speculative_generate, lambda d, o, ids, n, k: speculative.speculative_generate(d, o, ids, n, n_draft=k)),
])
def test_reference_solutions_pass_the_checks(check, reference):
    check(reference)


def test_the_buggy_generator_fails_its_check():
    import ex5_cache_bug
    with pytest.raises(AssertionError, match="differs from greedy decoding"):
        checks.check_speculative_generate(ex5_cache_bug.speculative_generate)


def test_untouched_stubs_fail_with_a_clear_message():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(ROOT, "exercises")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1
    for n in (1, 2, 3, 4):
        assert f"exercise ex{n} is not solved yet" in r.stdout
    assert "5 failed" in r.stdout
