"""Every method, by family: each file holds everything about running and showing its methods (registry.py says what).

    lines.py         a line of drafts from a draft model: speculative, threshold, adaptive, adaptive-hf
    sampling.py      speculative sampling: sps, sps-block
    trees.py         trees of drafts in one pass: tree, tree-sps, tree-sps-wor
    text.py          drafts from the text itself: ngram, staged, suffix, suffix-tree, lookahead
    heads.py         drafts from the oracle itself: self-speculative, early-exit, eagle, eagle-sps, medusa
    vocabularies.py  a draft with a vocabulary of its own: speculative and sps through the text
    baselines.py     the oracle alone (greedy, sample, beam) and the draft alone

Importing this package registers them all: the programs read METHODS (and get, variant, ...) from here.
"""

from workbench.methods import lines, sampling, trees, text, heads, baselines  # each registers its own
from workbench.methods.heads import head_of, missing_head
from workbench.registry import (METHODS, Call, Method, across_vocabularies, get, methods_taking, n_draft_of, options,
                                register, variant)

FAMILIES = (lines, sampling, trees, text, heads, baselines)
__all__ = ["FAMILIES", "METHODS", "Call", "Method", "across_vocabularies", "get", "head_of", "methods_taking",
           "missing_head", "n_draft_of", "options", "register", "variant"]
