"""Does a speed setting ever lose? One command timed end to end with and without it, beside 0, 1 and 2 busy loops.

    python workbench/tools/under_load.py --setting SPECULATIVE_GPT2_SECOND_CORE=1 -- \
        python workbench.py "If the file does not exist, the function" --draft demo-draft --oracle demo-oracle -n 128

A user runs this project beside a browser, a video call or a second run: a setting that is faster
only on a quiet machine may be slower in the common case. Here the command runs as a user runs
it, a fresh process each time, once with the setting in its environment and once without, in
pairs (the order alternating from pair to pair), while 0, 1 and then 2 processes that do nothing
but spin (`python -c "while True: pass"`) share the cores. Each row: the median wall time of each
side over --pairs pairs, their min-max, and the median of the pairs' own ratios, each way.
"""

import argparse
import os
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
        sys.exit(f"error: {' '.join(command)} failed: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return seconds


def pairs(command, setting, n_pairs):
    """(seconds with the setting, seconds without) for each of n_pairs pairs, the order alternating."""
    name, _, value = setting.partition("=")
    without = {k: v for k, v in os.environ.items() if k != name}
    with_it = {**without, name: value}
    out = []
    for i in range(n_pairs):
        if i % 2 == 0:
            a, b = timed(command, with_it), timed(command, without)
        else:
            b, a = timed(command, without), timed(command, with_it)
        out.append((a, b))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", required=True, help="NAME=VALUE: the environment setting to time with and without")
    parser.add_argument("--pairs", type=int, default=3, help="pairs per row (default: 3)")
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2], help="busy loops beside (default: 0 1 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if "=" not in args.setting or not command:
        parser.error("give --setting NAME=VALUE and, after --, the command")
    timed(command, dict(os.environ))  # a warm-up: the models' files in the page cache
    print(f"| beside the run | with {args.setting} | without | with / without | without / with |")
    print("|---|---|---|---|---|")
    for n_busy in args.loads:
        loops = [subprocess.Popen(BUSY) for _ in range(n_busy)]
        try:
            time.sleep(0.5 if loops else 0)
            got = pairs(command, args.setting, args.pairs)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
        a, b = [s for s, _ in got], [s for _, s in got]
        ratio = statistics.median(x / y for x, y in got)  # the median of the pairs' own ratios, each way
        inverse = statistics.median(y / x for x, y in got)
        beside = "nothing" if n_busy == 0 else f"{n_busy} busy loop{'s' if n_busy > 1 else ''}"
        print(f"| {beside} | {statistics.median(a):.2f} s ({min(a):.2f}-{max(a):.2f}) | "
              f"{statistics.median(b):.2f} s ({min(b):.2f}-{max(b):.2f}) | {ratio:.2f} | {inverse:.2f} |", flush=True)


if __name__ == "__main__":
    main()
