"""The workbench's tests: its programs, page, benchmarks, speed and hostile input. The model fixtures are the
programs' own, the fast models (workbench/speed/accelerate.py), on the tiny checkpoints the root conftest.py writes."""

import pytest

from workbench.speed.accelerate import load_fast


@pytest.fixture(scope="session")
def draft(tiny_dirs):
    return load_fast(tiny_dirs["draft"])


@pytest.fixture(scope="session")
def related(tiny_dirs):
    return load_fast(tiny_dirs["related"])


@pytest.fixture(scope="session")
def oracle(tiny_dirs):
    return load_fast(tiny_dirs["oracle"])
