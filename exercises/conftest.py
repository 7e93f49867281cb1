"""`pytest exercises/`: the exercise files and the project's modules are importable; --reference checks the project."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]


def pytest_addoption(parser):
    parser.addoption("--reference", action="store_true",
                     help="check the project's own code (the reference solutions) instead of your exercise files")
