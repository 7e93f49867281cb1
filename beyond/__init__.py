"""Beyond the reference implementations: methods the classic teaching code does not have.

block_verification.py: speculative sampling that judges the draft as a whole block (Sun et al. 2025);
tree_sampling.py: speculative sampling over a tree of drafts (SpecInfer-style multi-round rejection);
tree_without_replacement.py: the same with siblings drawn without replacement (Sequoia);
self_speculative.py: the oracle's own first layers draft for it (Draft & Verify, LayerSkip);
early_exit.py: self-speculation through a trained early exit, Kangaroo's adapter;
suffix.py: a suffix automaton over the text proposes the continuation of its longest match (SuffixDecoding);
lookahead.py: the oracle guesses n-grams by Jacobi iteration and checks them in the same pass (Fu et al. 2024);
eagle.py: a one-layer head trained on the oracle's own hidden states drafts for it (EAGLE);
medusa.py: heads on the oracle's last hidden state guess several tokens ahead, checked as a tree (Medusa).
Those registered in app/methods.py run like the decoders at the root; each records its rounds through
decoding.Stats.add_round, with details of its own kind or a Round.reason.
"""
