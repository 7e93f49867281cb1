"""Every method, by family: each file holds everything about running and showing its methods (registry.py says what).

    lines.py         a line of drafts from a draft model: speculative, threshold, adaptive, adaptive-hf
    sampling.py      speculative sampling: sps, sps-block
    trees.py         trees of drafts in one pass: tree, tree-sps, tree-sps-wor
    text.py          drafts from the text itself: ngram, staged, suffix, suffix-tree, lookahead
    heads.py         drafts from the oracle itself: self-speculative, early-exit, eagle, eagle-sps, medusa
    vocabularies.py  a draft with a vocabulary of its own: speculative and sps through the text
    baselines.py     the oracle alone (greedy, sample, beam) and the draft alone

Importing this package imports every file of it, in that order and then any other: each registers its own
methods, so a new family is a new file here and nothing else. The programs read METHODS (and get, variant,
...) from here.
"""

import importlib
import os
import pkgutil

from workbench.registry import (METHODS, Call, Method, across_vocabularies, get, methods_taking, n_draft_of, options,
                                register, variant)

ORDER = ("lines", "sampling", "trees", "text", "heads", "vocabularies", "baselines")  # the order of --help and the tables
FAMILIES = [importlib.import_module(f"{__name__}.{name}") for name in
            sorted((m.name for m in pkgutil.iter_modules([os.path.dirname(__file__)])),
                   key=lambda name: (ORDER.index(name) if name in ORDER else len(ORDER), name))]

from workbench.heads import head_of, missing_head  # noqa: E402  (imported after: the families come first)

__all__ = ["FAMILIES", "METHODS", "Call", "Method", "across_vocabularies", "get", "head_of", "methods_taking",
           "missing_head", "n_draft_of", "options", "register", "variant"]
