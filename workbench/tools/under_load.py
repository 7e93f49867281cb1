"""Does the default ever lose? One command timed end to end, several ways, beside 0, 1 and 2 busy loops.

    python workbench/tools/under_load.py --pairs 5 \
        --way "plain=--plain" --way "plain-1=OPENBLAS_NUM_THREADS=1 --plain" -- \
        python workbench.py "If the file does not exist, the function" --draft demo-draft --oracle demo-oracle -n 128

A user runs this project beside a browser, a video call or a second run: a choice that is faster only
on a quiet machine may be slower in the common case. Here the command runs as a user runs it, a fresh
process each time: as given (the default), and once for each --way, with that way's environment
settings (NAME=VALUE) and extra arguments. Each round runs every way once, in an order rotated from
round to round, while 0, 1 and then 2 processes that do nothing but spin (`python -c "while True:
pass"`) share the cores. Each row: each way's median wall time over the rounds with its min-max, and
the median of the rounds' own ratios of the default to the best other way (the one whose median is lowest),
with their quartiles.
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

BUSY = [sys.executable, "-c", "while True: pass"]


def timed(command, env):
    """Wall seconds of one run of command (its output thrown away); a failed run ends the measurement."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: {shlex.join(command)} failed: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return seconds


def parse_way(text):
    """'label=NAME=VALUE ... --flag ...' -> (label, {NAME: VALUE}, [extra arguments])."""
    label, _, rest = text.partition("=")
    env, extra = {}, []
    for word in shlex.split(rest):
        name, eq, value = word.partition("=")
        if eq and not extra and name.isidentifier() and name.isupper():
            env[name] = value
        else:
            extra.append(word)
    return label, env, extra


def rounds(command, ways, n_rounds):
    """{label: [seconds of each round]}: every way once a round, the order rotated from round to round."""
    seconds = {label: [] for label, _, _ in ways}
    for i in range(n_rounds):
        for label, env, extra in ways[i % len(ways):] + ways[:i % len(ways)]:
            seconds[label].append(timed(command + extra, {**os.environ, **env}))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--way", action="append", default=[], help="LABEL=[NAME=VALUE ...] [extra arguments]: a way "
                        "to compare the default with (repeat the flag for more)")
    parser.add_argument("--pairs", type=int, default=3, help="rounds per row (default: 3)")
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2], help="busy loops beside (default: 0 1 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.way or not command or any("=" not in w for w in args.way):
        parser.error("give at least one --way LABEL=... and, after --, the command")
    ways = [("default", {}, [])] + [parse_way(w) for w in args.way]
    timed(command, dict(os.environ))  # a warm-up: the models' files in the page cache, the plans made
    labels = [label for label, _, _ in ways]
    print(f"| beside the run | {' | '.join(labels)} | default / best other |")
    print("|---" * (len(labels) + 2) + "|")
    for n_busy in args.loads:
        loops = [subprocess.Popen(BUSY) for _ in range(n_busy)]
        try:
            time.sleep(0.5 if loops else 0)
            got = rounds(command, ways, args.pairs)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
        # The best other way is the one with the lowest median; the ratio is the median of the default's paired
        # ratios to it. (The best of the others round by round would favour them: the least of two noisy times.)
        best = min(labels[1:], key=lambda label: statistics.median(got[label]))
        ratios = [d / o for d, o in zip(got["default"], got[best])]
        low, _, high = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
        beside = "nothing" if n_busy == 0 else f"{n_busy} busy loop{'s' if n_busy > 1 else ''}"
        cells = [f"{statistics.median(s):.2f} s ({min(s):.2f}-{max(s):.2f})" for s in got.values()]
        print(f"| {beside} | {' | '.join(cells)} | {statistics.median(ratios):.2f} ({low:.2f}-{high:.2f}; {best}) |",
              flush=True)


if __name__ == "__main__":
    main()
