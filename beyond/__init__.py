"""Beyond the reference implementations: methods the classic teaching code does not have.

tree_sampling.py: speculative sampling over a tree of drafts (SpecInfer-style multi-round rejection);
self_speculative.py: the oracle's own first layers draft for it (Draft & Verify, LayerSkip);
suffix.py: a suffix automaton over the text proposes the continuation of its longest match.
Each is registered in app/methods.py like the decoders at the root.
"""
