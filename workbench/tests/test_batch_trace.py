"""--prompts FILE --method sps --trace: each row's drafts with p(x), q(x), min(1, q/p), r and the decision, then the
residual's draw or the bonus, as the single-prompt trace shows them (the sampling family's sps_lines)."""

import numpy as np

import batch
from stats import Stats
from test_sps import small  # noqa: F401 (a fixture)
from workbench import batch_run


def test_the_batch_sps_trace_names_each_rows_test_as_one_prompts_does(small):
    draft, oracle = small
    rows, traced = [[1, 4], [2], [3, 0, 5]], Stats(trace=[])
    batch.speculative_sample_batch(draft, oracle, rows, 8, n_draft=3, rng=np.random.default_rng(3), stats=traced)
    text = "\n".join(batch_run.trace_lines(traced.trace, lambda t: bytes([65 + t % 26])))
    for said in ("p(x)", "q(x)", "min(1, q/p)", " r ", "-> accept", "-> REJECT", "from (q - p)+ renormalised",
                 "sampled from q"):
        assert said in text, said
