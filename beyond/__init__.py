"""Beyond the reference implementations: methods the classic teaching code does not have.

tree_sampling.py: speculative sampling over a tree of drafts (SpecInfer-style multi-round rejection);
tree_without_replacement.py: the same with siblings drawn without replacement (Sequoia);
block_verification.py: speculative sampling that judges the draft as a whole block;
self_speculative.py: the oracle's own first layers draft for it (Draft & Verify, LayerSkip);
suffix.py: a suffix automaton over the text proposes the continuation of its longest match;
lookahead.py: the oracle guesses n-grams by Jacobi iteration and checks them in the same pass;
eagle.py and medusa.py: heads trained on the oracle's last hidden state draft for it (EAGLE, Medusa).
Those registered in app/methods.py run like the decoders at the root; each records its rounds through
decoding.Stats.add_round, with details of its own kind or a Round.reason.
"""
