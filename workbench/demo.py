"""python demo.py: the learned pair written into the models directory, one speculative run on it, the speedup
Leviathan et al.'s formula predicts for that run beside the one measured, and what to do next."""

import sys
import time

import numpy as np

import errors

from workbench import cli, display, program, runner
from errors import printable
from kvcache import KVCache
from speedup import predicted_speedup
from workbench.bench import measure
from weights import files
from weights.demo_pair import build_pair
from weights.models import DEFAULT_MODELS_DIR

PROMPT = "If the file does not exist, the function"  # PROMPT and N_NEW: the README's demo session shows this run
N_NEW, N_DRAFT = 48, 4
REPEATS = 9   # each cost is the median of REPEATS forwards, the forwards taking turns (speed/measure.py)
FAR = 0.25    # a measured speedup this far from the prediction (or under 1) gets a line of why
BUSY = 0.5    # the same forward's slowest repeat this much over its fastest: the machine is busy
# A check of k + 1 tokens costs at least one token's pass and, on any machine this runs on, less than
# four (PERFORMANCE.md has T(k)/T(1) of every model here): a ratio outside is the timing's, not the check's.
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
Or watch every round:  python workbench.py "{prompt}" --draft demo-draft --oracle demo-oracle --trace"""


def parse_args(argv):
    parser = program.Parser(prog="demo.py", description="Write the offline demo pair (demo-draft, demo-oracle: a small "
                                                        "GPT-2 trained on the Python documentation and its draft), "
                                                        "run speculative decoding on it, with no network, and compare "
                                                        "its speedup with Leviathan et al.'s prediction.",
                            epilog="Then try: python workbench.py \"...\" --draft demo-draft --oracle demo-oracle "
                                   "[--method sps] [--trace] [--html run.html]")
    parser.add_argument("prompt", nargs="?", default=PROMPT, help=f"the text to continue (default: {PROMPT!r})")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where to write the pair (default: models/)")
    args = parser.parse_args(argv)
    problem = files.why_not_a_folder_to_write(args.models_dir)
    if problem:
        parser.error(f"--models-dir {problem}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    build_pair(args.models_dir)
    run_args = cli.parse_args([args.prompt, "--draft", NAMES["draft"], "--oracle", NAMES["oracle"],
                               "--models-dir", args.models_dir, "-n", str(N_NEW), "--n-draft", str(N_DRAFT)])
    settings = cli.settings_from(run_args)
    display.as_utf8(sys.stdout, errors="replace")
    loaded = runner.prepare(lambda role: runner.load_model(NAMES[role], args.models_dir), settings.method,
                            args.prompt, N_NEW, NAMES)
    view = runner.View(sys.stdout, sys.stderr, color=display.use_color(run_args.color, sys.stdout))
    result = runner.run(settings, loaded, args.prompt, view)
    start = time.perf_counter()
    compared = runner.compare(settings, loaded, result.tokens, result.elapsed)
    alone_seconds = time.perf_counter() - start  # the oracle alone's run, as the line reports it to a few microseconds
    print(compared, file=sys.stderr, flush=True)
    seconds = costs(loaded.draft, loaded.oracle, loaded.ids, N_DRAFT)
    for line in prediction(result, alone_seconds, seconds, N_DRAFT):
        print(line, file=sys.stderr)
    print(printable(NEXT.format(prompt=args.prompt.replace('"', '\\"'))), file=sys.stderr)


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
            runs[role, n] = measure.forward_run(model, cache, context, n)
    runs["oracle", "prompt"] = lambda: oracle.forward(list(ids) + [0] * n_draft, KVCache(), n_logits=n_draft + 1)
    runs["draft", "prompt"] = lambda: draft.forward(list(ids), KVCache(), n_logits=1)
    return measure.turns(runs, REPEATS)


def prediction(result, alone_seconds, seconds, n_draft):
    """The predicted speedup beside the measured one, and a line of why when they are far apart (or it is under 1);
    no prediction, but a line saying why, when the check's timing is not one a machine can give."""
    stats, elapsed = result.stats, result.elapsed
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


def median(values):
    return sorted(values)[len(values) // 2]


def main_entry():
    errors.run(main)
