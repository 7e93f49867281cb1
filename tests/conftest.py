"""The reading house's tests run on the plain model, gpt2.GPT2 as from_pretrained gives it (NumPy's own
products), on the tiny checkpoints the root conftest.py writes."""

import pytest

from gpt2 import GPT2


@pytest.fixture(scope="session")
def draft(tiny_dirs):
    return GPT2.from_pretrained(tiny_dirs["draft"])


@pytest.fixture(scope="session")
def related(tiny_dirs):
    return GPT2.from_pretrained(tiny_dirs["related"])


@pytest.fixture(scope="session")
def oracle(tiny_dirs):
    return GPT2.from_pretrained(tiny_dirs["oracle"])
