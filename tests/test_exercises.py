"""`pytest exercises/ --reference` passes (the checks hold for the project's own code) and
plain `pytest exercises/` fails clearly on the untouched stubs, so EXERCISES.md cannot
drift from the code."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "exercises"))
import checks  # noqa: E402


def run_checker(*args):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_reference_solutions_pass_the_checker():
    r = run_checker("--reference")
    assert r.returncode == 0, r.stdout
    assert "5 passed" in r.stdout


def test_untouched_stubs_fail_with_a_clear_message():
    r = run_checker()
    assert r.returncode == 1
    for n in (1, 2, 3, 4):
        assert f"exercise ex{n} is not solved yet" in r.stdout
    assert "5 failed" in r.stdout


def test_the_buggy_generator_fails_its_check():
    import ex5_cache_bug
    with pytest.raises(AssertionError, match="differs from greedy decoding"):
        checks.check_speculative_generate(ex5_cache_bug.speculative_generate)
