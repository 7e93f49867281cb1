"""Is a change as fast as the code before it? T(1) and T(8) of two checkouts, paired, on one machine.

    git worktree add /tmp/before <commit>
    python workbench.py bench --quick --models-dir /tmp/bm        # once: random gpt2 and gpt2-xl of the real shapes
    python workbench/tools/before_after.py /tmp/before . --models-dir /tmp/bm

A single `workbench.py bench --quick`'s T(8)/T(1) moves by 10-20% with a busy neighbour, more than
the differences a refactoring must rule out. Here each round runs the two checkouts one
after the other (ABBA order, so neither always goes first), each in a fresh process that
imports only its own code, and times forwards of 1 and 8 tokens after 128 cached, taking
turns (as the benchmark's cost curve does). The figures are medians over the rounds, beside
their spread and the median of the rounds' after/before ratios.

Other models and k: --models takes a model directory too (the learned oracle, say), and
--ks the forwards to time (default 1 8; each k over 1 gives T(k)/T(1) and ms per token):

    python workbench/tools/before_after.py /tmp/before . --models-dir /tmp/bm --models models/demo-oracle --ks 1 5 17

The two sides may also be one checkout under two Pythons (and so two NumPys and BLASes):

    python workbench/tools/before_after.py . . --models-dir /tmp/bm \
        --python-before /tmp/venv-3.11/bin/python --python-after /tmp/venv-3.13/bin/python
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONTEXT = 128
KS = (1, 8)
REPEATS = {"gpt2": 41, "gpt2-xl": 9}  # timings per k in each process: a gpt2-xl forward takes 0.3 s
REPEATS_OTHER = 41  # a model given by its directory


def model_dir(models_dir, name):
    """A size's random checkpoint in models_dir (random-gpt2, as the benchmark makes them), or a model's own directory."""
    return name if os.path.isdir(name) else os.path.join(models_dir, "random-" + name)


def label(name):
    return os.path.basename(os.path.normpath(name)) if os.path.isdir(name) else name


def measure(checkout, models_dir, names, ks=KS):
    """In a fresh process: {name: {k: median ms}} with `checkout`'s own model code."""
    sys.path.insert(0, checkout)
    import numpy as np
    from kvcache import KVCache
    try:
        from workbench.speed.accelerate import load_fast as load
    except ImportError:  # before the move (f43c335): gpt2.py made the blocked layout itself
        import gpt2
        load = gpt2.GPT2.from_pretrained
    result = {}
    for name in names:
        model, cache = load(model_dir(models_dir, name)), KVCache()
        context = min(CONTEXT, model.n_positions - max(ks))  # a tiny test model's window may be shorter
        model.forward(np.arange(context) % model.vocab_size, cache, n_logits=1)

        def seconds(k):
            start = time.perf_counter()
            model.forward(np.arange(k) % model.vocab_size, cache)
            cache.truncate(context)
            return time.perf_counter() - start

        for k in ks:  # warm-up: page the weights in
            seconds(k)
        times = {k: [] for k in ks}
        for _ in range(REPEATS.get(name, REPEATS_OTHER)):
            for k in ks:
                times[k].append(seconds(k))
        result[label(name)] = {str(k): statistics.median(t) * 1e3 for k, t in times.items()}
    return result


def figures(ms):
    """The issue's figures from one process's medians."""
    out = {}
    for name, t in ms.items():
        out[f"{name} T(1) ms"] = t["1"]
        for k in (int(k) for k in t if k != "1"):
            out[f"{name} T({k})/T(1)"] = t[str(k)] / t["1"]
            out[f"{name} ms per token at {k}"] = t[str(k)] / k
    return out


def version(python):
    """'Python 3.13.0, NumPy 2.5.5, OpenBLAS 0.3.34 SkylakeX' for an interpreter."""
    code = ("import sys, numpy, threadpoolctl; b = [i for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas']; "
            "print(f'Python {sys.version.split()[0]}, NumPy {numpy.__version__}, ' + ', '.join("
            "f\"{i['internal_api']} {i['version']} {i.get('architecture') or ''}\".strip() for i in b))")
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip() or "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="a checkout of the code before the change")
    parser.add_argument("after", help="a checkout of the code after it")
    parser.add_argument("--models-dir", required=True, help="bench.py's --models-dir, holding random-gpt2 and random-gpt2-xl")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--models", nargs="+", default=["gpt2", "gpt2-xl"],
                        help="gpt2, gpt2-xl (random-NAME in --models-dir) or model directories (default: gpt2 gpt2-xl)")
    parser.add_argument("--ks", nargs="+", type=int, default=list(KS), help="forwards of k new tokens to time, "
                                                                              "1 among them (default: 1 8)")
    for side in ("before", "after"):
        parser.add_argument(f"--python-{side}", default=sys.executable,
                            help=f"the Python that runs the {side} side (default: this one)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in args.models:
        if name not in REPEATS and not os.path.isdir(name):
            parser.error(f"--models: {name!r} is neither gpt2, gpt2-xl nor a model directory")
    if 1 not in args.ks or not all(1 <= k <= 64 for k in args.ks):
        parser.error("--ks must include 1 and be from 1 to 64")
    args.models = [os.path.abspath(name) if os.path.isdir(name) else name for name in args.models]
    if args.child:
        print(json.dumps(measure(os.path.abspath(args.before), args.models_dir, args.models, sorted(set(args.ks)))))
        return
    runs = {"before": [], "after": []}
    for round_ in range(args.rounds):
        order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
        for side in order:
            checkout = os.path.abspath(getattr(args, side))
            python = getattr(args, f"python_{side}")
            r = subprocess.run([python, os.path.abspath(__file__), checkout, checkout, "--child",
                                "--models-dir", args.models_dir, "--models", *args.models,
                                "--ks", *map(str, args.ks)],
                               cwd=checkout, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"error: the {side} checkout failed: {r.stderr.strip().splitlines()[-1:]}")
            runs[side].append(figures(json.loads(r.stdout)))
        print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    for side in ("before", "after"):
        print(f"{side}: {getattr(args, side)} under {version(getattr(args, f'python_{side}'))}")
    width = max(28, *(len(key) for key in runs["before"][0]))
    print(f"{'figure':{width}s} {'before':>8s} {'after':>8s} {'change':>7s}  after/before (median of rounds)  spread before | after")
    for key in runs["before"][0]:
        b, a = ([r[key] for r in runs[side]] for side in ("before", "after"))
        paired = statistics.median(y / x for x, y in zip(b, a))
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{key:{width}s} {mb:8.2f} {ma:8.2f} {100 * (ma / mb - 1):+6.1f}%  {paired:.3f}"
              f"  {min(b):.2f}-{max(b):.2f} | {min(a):.2f}-{max(a):.2f}")


if __name__ == "__main__":
    main()
