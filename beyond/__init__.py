"""Beyond the reference implementations: methods the classic teaching code does not have, each beside its paper.

block_verification.py: speculative sampling that judges the draft as a whole block (Sun et al. 2025);
tree_sampling.py: speculative sampling over a tree of drafts (SpecInfer-style multi-round rejection);
tree_without_replacement.py: the same with siblings drawn without replacement (Sequoia's rule);
traversal.py: a sampled tree verified from the leaves to the root (traversal verification, Weng et al. 2025);
sequoia.py: the tree's shape chosen by dynamic programming for the machine it runs on (Sequoia);
self_speculative.py: the oracle's own first layers draft for it (Draft & Verify, LayerSkip);
early_exit.py: self-speculation through a trained early exit, Kangaroo's adapter;
suffix.py: a suffix automaton over the text proposes the continuation of its longest match (SuffixDecoding);
lookahead.py: the oracle guesses n-grams by Jacobi iteration and checks them in the same pass (Fu et al. 2024);
recycling.py: drafts from a table of the oracle's own past top-k successors (Token Recycling);
eagle.py: a one-layer head trained on the oracle's own hidden states drafts for it (EAGLE);
eagle2.py: EAGLE-2's dynamic tree, grown where the head is confident and reranked;
medusa.py: heads on the oracle's last hidden state guess several tokens ahead, checked as a tree (Medusa);
ddtree.py: the best-first tree of the Medusa heads' per-position marginals (DDTree);
specdec_pp.py: a head on the draft's states stops drafting where a rejection grows likely (SpecDec++).
Each runs like the decoders at the root and records its rounds through stats.Stats.add_round, with details of
its own; the workbench shows them (workbench/methods/, one file per family).
"""
