import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_addoption(parser):
    parser.addoption("--reference", action="store_true",
                     help="check the project's own code (the reference solutions) instead of your exercise files")
