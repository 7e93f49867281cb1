"""How a sampled tree's rounds are shown (workbench/methods/trees.py): the trace draws the tree, and each round's
"why" is its one line made from its own record; the methods as the registry declares them. The algorithms are
proven in tests/test_tree_sampling.py and tests/test_tree_without_replacement.py, on the plain models."""

import numpy as np
import pytest

from beyond.tree_sampling import SampledTreeDetails, tree_sample_generate
from beyond.tree_without_replacement import tree_sample_wor_generate
from processors import Processor
from speculative import greedy_generate
from stats import Stats
from traces import trace_and_page, why_lines
from workbench import methods
from workbench.display import cut_short
from workbench.methods.trees import sampled_reason_line
from workbench.settings import Settings

RULES = {"tree-sps": tree_sample_generate, "tree-sps-wor": tree_sample_wor_generate}


def quoted(tokens):  # as the trace shows the tests' tokens, b"<7>" each
    return " ".join(repr(f"<{t}>") for t in tokens)


def test_the_trace_and_the_page_show_the_rounds(related, oracle):
    trace, lines, _ = trace_and_page(tree_sample_generate, "tree-sps", related, oracle, n_draft=2)
    assert any("tree" in line for line in lines)
    assert sampled_reason_line(trace[0].details, show=lambda ts_: " ".join(f"'{t}'" for t in ts_)).startswith(
        "depth 1: child 1 '")


@pytest.mark.parametrize("rule", list(RULES))
def test_each_rounds_why_is_its_line_from_its_own_details(related, oracle, rule):
    trace, lines, _ = trace_and_page(RULES[rule], rule, related, oracle, n_draft=3, width=2)
    whys = why_lines(lines)
    assert len(whys) == len(trace)
    for r, said in zip(trace, whys):
        assert isinstance(r.details, SampledTreeDetails)
        assert said == [sampled_reason_line(r.details, quoted) + cut_short(r.details.n_draft, r.details.k, "level")]


@pytest.mark.parametrize("name", list(RULES))
def test_the_method_is_registered(related, oracle, name):
    m = methods.get(name)
    assert m.samples and m.verifies and m.needs_cache and m.n_draft == 4
    call = methods.Call(m, related, oracle, [1, 2, 3], 10, 3,
                        Settings(method=name, processor=Processor(temperature=0)), Stats(), np.random.default_rng(0))
    assert list(m.run(call)) == list(greedy_generate(oracle, [1, 2, 3], 10))
