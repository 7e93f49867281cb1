"""How the methods that draft from the oracle itself show their rounds (workbench/methods/heads.py): the
self-speculative draft is named by its layers, with what its round kept. The algorithms are proven in
tests/test_self_speculative.py, tests/test_early_exit.py, tests/test_eagle.py and tests/test_medusa.py, on the
plain models."""

from beyond.self_speculative import self_speculative_generate
from stats import Stats
from test_greedy import prompt
from traces import show
from workbench.methods.heads import layers_reasons


def test_the_reason_names_the_drafts_layers_and_what_it_kept(oracle):
    for n_layers, name in ((1, "layer 0 of 3"), (2, "layers 0-1 of 3")):
        stats = Stats(trace=[])
        list(self_speculative_generate(oracle, prompt(oracle, 5, 4), 30, n_draft=4, n_layers_draft=n_layers,
                                       stats=stats))
        for r in stats.trace:
            lines = layers_reasons(r, show)
            assert lines[1] == f"draft = {name} + ln_f + LM head; {r.accepted} of {len(r.drafted)} accepted"
            assert len(lines) == 2  # no trained exit: no line for one
