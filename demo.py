"""The offline demo: the learned pair written into models/, then speculative decoding on it.

    python demo.py ["prompt"] [--models-dir DIR]

No network: the pair ships in this repository (assets/learned-pair/, written by weights/demo_pair.py):
a small GPT-2 trained on the Python 3.11 documentation and a draft distilled from it. The demo runs
speculative_generate on them (the plain models, as speculative.py does), the oracle alone beside it,
checks that the two texts are the same, and sets the speedup Leviathan et al.'s formula predicts
(speedup.py) beside the measured one, from the cost of a check measured where it runs (roofline.py).
Afterwards every command works with --draft demo-draft --oracle demo-oracle.
"""

if __name__ == "__main__":  # first: Ctrl-C while the demo loads is one line, not a traceback
    import errors
    errors.interrupt_quietly()

import sys
import time

import numpy as np

from errors import Parser, printable, run
from gpt2 import GPT2
from kvcache import KVCache
from roofline import (flops_per_token, forward_run, median, memory_bandwidth, product_rate, ridge, roofline, turns,
                      weight_bytes)
from speculative import Text, greedy_generate, one_blas_thread, speculative_generate, summary
from speedup import predicted_speedup
from stats import Stats
from weights import files
from weights.demo_pair import build_pair
from weights.models import DEFAULT_MODELS_DIR, shown_dir
from weights.tokenizer import load_tokenizer, prompt_ids

PROMPT = "If the file does not exist, the function"  # PROMPT and N_NEW: the README's demo session shows this run
N_NEW, N_DRAFT = 48, 4
REPEATS = 9   # each cost is the median of REPEATS forwards, the forwards taking turns (roofline.turns)
FAR = 0.25    # a measured speedup this far from the prediction (or under 1) gets a line of why
BUSY = 0.5    # the same forward's slowest repeat this much over its fastest: the machine is busy
# A check of k + 1 tokens costs at least one token's pass and, on any machine this runs on, less than
# four (workbench/PERFORMANCE.md has T(k)/T(1) of every model here): a ratio outside is the timing's, not the check's.
SOUND_CHECK = (0.9, 4.0)
SPREAD = 1.5  # the pairs' middle half of T(k + 1)/T(1) wider than this factor: too noisy to predict from
NAMED = 0.1   # a cost the formula leaves out is named when it is at least this share
NAMES = {"draft": "demo-draft", "oracle": "demo-oracle"}
# The reading order: the same steps, in the same order, as every document's (tests/test_documents.py).
NEXT = """
Next:
  1. read README.md, then the code in this order: kvcache.py, gpt2.py, speculative.py,
     with READING.md open (each step of the pseudocode beside its line; its section
     "Stepping through the code" follows one round in a debugger);
  2. do EXERCISES.md's exercises in order, the first to write: exercises/ex03_accepted_prefix.py,
     then  pytest exercises/ -k ex03 ; after each part, read its module (sps.py after part 3);
  3. then run walkthrough.ipynb: one round cell by cell, and what speculation costs on your machine.
Or watch every round:  python speculative.py "{prompt}" --draft demo-draft --oracle demo-oracle --trace"""


def parse_args(argv):
    parser = Parser(prog="demo.py", description="Write the offline demo pair (demo-draft, demo-oracle: a small GPT-2 "
                                                "trained on the Python documentation and its draft), run speculative "
                                                "decoding on it, with no network, and compare its speedup with "
                                                "Leviathan et al.'s prediction.",
                    epilog="Then try: python speculative.py \"...\" --draft demo-draft --oracle demo-oracle [--trace]; "
                           "every other method: python workbench.py \"...\" --draft demo-draft --oracle demo-oracle "
                           "--method sps [--html run.html]")
    parser.add_argument("prompt", nargs="?", default=PROMPT, help=f"the text to continue (default: {PROMPT!r})")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where to write the pair (default: models/)")
    args = parser.parse_args(argv)
    problem = files.why_not_a_folder_to_write(args.models_dir)
    if problem:
        parser.error(f"--models-dir {problem}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    one_blas_thread()  # as speculative.py runs: the figures below are what its runs see
    draft_dir, oracle_dir = build_pair(args.models_dir)
    draft, oracle = (load(name, directory) for name, directory in zip(NAMES.values(), (draft_dir, oracle_dir)))
    enc = load_tokenizer(oracle_dir)
    ids, stats, text = prompt_ids(enc, args.prompt), Stats(), Text(sys.stdout)
    text.write_prompt(args.prompt)
    start = time.perf_counter()
    tokens = []
    for token in speculative_generate(draft, oracle, ids, N_NEW, N_DRAFT, stats):
        tokens.append(token)
        text.write(enc.decode_single_token_bytes(token), kept=stats.from_draft[-1])
    elapsed = time.perf_counter() - start
    text.end()
    print(summary(stats, elapsed), file=sys.stderr, flush=True)
    start = time.perf_counter()
    alone = list(greedy_generate(oracle, ids, N_NEW))
    alone_seconds = time.perf_counter() - start
    print(f"oracle alone (greedy): {len(alone)} tokens in {alone_seconds:.2f} s, {len(alone) / alone_seconds:.1f} "
          f"tokens/s; speedup {alone_seconds / elapsed:.2f}x; "
          + ("identical output" if alone == tokens else "OUTPUT DIFFERS (see README: near-ties)"), file=sys.stderr)
    seconds = costs(draft, oracle, ids, N_DRAFT)
    for line in prediction(stats, elapsed, alone_seconds, seconds, N_DRAFT):
        print(line, file=sys.stderr)
    print(roofline_line(oracle, seconds, N_DRAFT, len(ids) + N_NEW // 2), file=sys.stderr)
    print(printable(NEXT.format(prompt=args.prompt.replace('"', '\\"'))), file=sys.stderr)


def load(name, directory):
    """A model of the pair, plain (gpt2.GPT2), its first forward made: the weights paged in before the clock."""
    start = time.perf_counter()
    model = GPT2.from_pretrained(directory)
    model.forward([0])
    layers = f"{model.n_layer} layer{'s' if model.n_layer != 1 else ''}"
    print(f"loaded {name} from {printable(shown_dir(directory))} ({layers} of width {model.n_embd}) in "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    return model


def costs(draft, oracle, ids, n_draft):
    """{(role, what): seconds of each repeat, in the order they ran}: a forward of 1 and of n_draft + 1 tokens
    after the run's middle context, and the first passes of a run, over the prompt (the oracle's with n_draft
    drafts). The forwards take turns, so the oracle's i-th forwards of 1 and of n_draft + 1 tokens make a pair."""
    context = len(ids) + N_NEW // 2
    runs = {}
    for role, model, sizes in (("oracle", oracle, (1, n_draft + 1)), ("draft", draft, (1,))):
        cache = KVCache()
        model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)
        for n in sizes:
            runs[role, n] = forward_run(model, cache, context, n)
    runs["oracle", "prompt"] = lambda: oracle.forward(list(ids) + [0] * n_draft, KVCache(), n_logits=n_draft + 1)
    runs["draft", "prompt"] = lambda: draft.forward(list(ids), KVCache(), n_logits=1)
    return turns(runs, REPEATS)


def roofline_line(oracle, seconds, n_draft, context):
    """The oracle's T(1) and T(n_draft + 1) beside the roofline of one core where it runs, and the ridge: the k up
    to which a check of k tokens can cost about one token there (roofline.py)."""
    n_bytes, flops = weight_bytes(oracle), flops_per_token(oracle, context)
    bandwidth, rate = memory_bandwidth(n_threads=1), product_rate()  # one core's: the one the run's products use
    k = n_draft + 1
    t1, tk = median(seconds["oracle", 1]), median(seconds["oracle", k])
    return (f"one core of this machine: the oracle's T(1) {1000 * t1:.2f} ms and T({k}) {1000 * tk:.2f} ms; its roofline "
            f"max({n_bytes / 1e6:.0f} MB / {bandwidth / 1e9:.0f} GB/s, k x {flops / 1e6:.0f} MFLOP / {rate / 1e9:.0f} "
            f"GFLOP/s) is {1000 * roofline(1, n_bytes, flops, bandwidth, rate):.2f} ms up to the ridge at "
            f"k = {ridge(n_bytes, flops, bandwidth, rate):.0f}: a check of fewer tokens streams the weights once")


def prediction(stats, elapsed, alone_seconds, seconds, n_draft):
    """The predicted speedup beside the measured one, and a line of why when they are far apart (or it is under 1);
    no prediction, but a line saying why, when the check's timing is not one a machine can give."""
    alpha = stats.alpha_estimate
    ones, checks = seconds["oracle", 1], seconds["oracle", n_draft + 1]
    ratios = sorted(check / one for one, check in zip(ones, checks))  # each pair timed one right after the other
    ratio, low, high = median(ratios), ratios[len(ratios) // 4], ratios[-1 - len(ratios) // 4]
    timed = f"the median of {len(ratios)} pairs timed after the run"
    if not SOUND_CHECK[0] <= ratio <= SOUND_CHECK[1] or high / low > SPREAD:
        why = (f"below {SOUND_CHECK[0]}: a check cannot cost less than one pass" if ratio < SOUND_CHECK[0] else
               f"above {SOUND_CHECK[1]:.0f}: more than this machine's checks cost" if ratio > SOUND_CHECK[1] else
               "too far apart to predict from")
        return [f"no prediction: the oracle's check of {n_draft + 1} tokens timed at {ratio:.2f} one-token passes ({timed}; "
                f"their middle half {low:.2f} to {high:.2f}), {why}; other programs were using the cores: run it again "
                "when the machine is quieter"]
    t1 = median(ones)
    c = median(seconds["draft", 1]) / t1
    predicted = predicted_speedup(alpha, n_draft, c, ratio)
    measured = alone_seconds / elapsed
    lines = [f"predicted {predicted:.2f}x (Leviathan et al.) from this run's alpha {alpha:.2f} ({stats.accepted} "
             f"kept, {stats.rejections} rejected), n_draft {n_draft}, c {c:.2f} and T({n_draft + 1})/T(1) {ratio:.2f} ({timed})"]
    if measured >= 1 and abs(measured / predicted - 1) <= FAR:
        return lines
    fastest, slowest = min(ones), max(ones)
    if slowest / fastest - 1 > BUSY:
        return lines + [f"why {measured:.2f}x: the machine is busy: the oracle's one-token forward took "
                        f"{1000 * fastest:.1f} to {1000 * slowest:.1f} ms in the {len(ones)} timings after the run "
                        f"({slowest / fastest - 1:.0%} apart)"]
    if measured > predicted:
        causes = {"the oracle alone took {:.0%} more per token than T(1) timed after the run": alone_seconds / N_NEW / t1 - 1}
    else:
        passes = max(stats.oracle_passes - 1, 1)
        check = ratio * t1
        causes = {"the prompt passes took {:.0%} of the run's time":
                  (min(seconds["oracle", "prompt"]) + min(seconds["draft", "prompt"])) / elapsed,
                  "{:.0%} of it went between the forward passes (Python, argmax, the caches)":
                  1 - (stats.draft_time + stats.oracle_time) / elapsed,
                  f"its oracle passes took {{:.0%}} more than T({n_draft + 1}) timed after the run":
                  (stats.oracle_time - min(seconds["oracle", "prompt"])) / passes / check - 1}
    named = [text.format(share) for text, share in sorted(causes.items(), key=lambda item: -item[1]) if share >= NAMED]
    if not named:
        return lines + [f"why {measured:.2f}x: nothing the formula leaves out is large in this run: the machine's "
                        "speed moved between the run and the timing; run it again"]
    return lines + [f"why {measured:.2f}x: the formula counts only each round's passes, and " + "; ".join(named)]


if __name__ == "__main__":
    run(main)
