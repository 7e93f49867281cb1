"""python workbench.py --prompts FILE: every prompt of the file decoded as one batch (batch.py).

    python workbench.py --prompts prompts.txt --draft demo-draft --oracle demo-oracle [--method greedy|sps] [--trace]

One prompt a line. The continuations go to stdout in the file's order, each after a line naming it;
the statistics to stderr; --trace prints each round's rows: what each drafted and kept (sps: each test, as the
single-prompt trace shows it).
"""

import time
from types import SimpleNamespace

import numpy as np

from stats import Stats
from workbench import display, methods, runner
from workbench.methods.sampling import sps_lines


def run(settings, loaded, prompts, view):
    """Decode every prompt as one batch (the method's batched run, from its family's file) and show each
    continuation in order, then the statistics."""
    method = methods.get(settings.method)
    batch_ids = [runner.prompt_ids(loaded.enc, prompt) for prompt in prompts]
    stats = Stats(trace=[] if view.trace else None)
    call = methods.Call(method, loaded.draft, loaded.oracle, [], settings.max_new_tokens,
                        methods.n_draft_of(method, settings), settings, stats, np.random.default_rng(settings.seed))
    start = time.perf_counter()
    new = method.batched(call, batch_ids)  # its checks name a prompt by its line
    elapsed = time.perf_counter() - start
    token_bytes = loaded.enc.decode_single_token_bytes
    for number, (prompt, tokens) in enumerate(zip(prompts, new), 1):
        text = b"".join(token_bytes(t) for t in tokens).decode("utf-8", errors="replace")
        view.text.write(display.listed(number, len(prompts), prompt + text))
    view.text.flush()
    if view.trace:
        print("\n".join(trace_lines(stats.trace, token_bytes)), file=view.info)
    print(f"batch of {len(prompts)} prompts, " + display.summary(settings.method, stats, elapsed), file=view.info,
          flush=True)
    return new, stats, elapsed


def trace_lines(trace, token_bytes):
    """--trace for a batch: per round, k and per row still in the batch its drafts, how many it kept, its new tokens;
    with --method sps, each row's test of each draft as the single-prompt trace shows it (p(x), q(x), min(1, q/p),
    r, the decision, then the residual's draw or the bonus: the sampling family's sps_lines)."""
    def show(tokens):
        return " ".join(display.token_text(token_bytes, t) for t in tokens)

    lines = ["trace: every row drafts the same k; one oracle pass checks every row; each row keeps its own "
             "agreeing drafts (sps: those its tests keep) and one token of the oracle's"]
    for i, r in enumerate(trace, 1):
        d = r.details
        lines.append(f"round {i}: k {d.k}, {len(d.rows)} row{'s' if len(d.rows) != 1 else ''} in the batch; kept per row: "
                     + ", ".join(f"{row['row']}: {row['kept']}/{len(row['drafted'])}" for row in d.rows))
        for row in d.rows:
            lines.append(f"  row {row['row']:<3} drafted {show(row['drafted']) or '(none)'}")
            if row.get("sps") is not None:  # the row's step 3, as one prompt's sps trace shows it
                tested = SimpleNamespace(drafted=row["drafted"], details=row["sps"])
                lines += ["        " + line for line in sps_lines(tested, show)[1:]]
            lines.append(f"          new     {show(row['new'])}")
    return lines
