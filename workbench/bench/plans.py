"""python workbench.py bench plan: how the machine runs each model's forwards, and the figures behind each choice.

    python workbench.py bench plan [MODEL ...]     the plan kept beside each model (made now if there is none)
    python workbench.py bench plan --again         measured anew, replacing the one kept

A plan (workbench/speed/plan.py) is made at a model's first use on a machine: each way of running a forward
timed at the row counts the methods use, the ways taking turns, and per row count the fastest chosen if it
beats NumPy's own product on one thread by more than its spread. This prints, per row count, each way's
median milliseconds and its time over numpy-1's (the median of the pairs' ratios, with their quartiles).
"""

import sys

from errors import printable, quoted
from workbench import program
from workbench.bench import tables
from workbench.speed import plan as planning


def main(argv):
    parser = program.Parser(prog="workbench.py bench plan", description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    parser.add_argument("models", nargs="*", default=["demo-oracle", "demo-draft"],
                        help="models: names or directories (default: the learned pair, demo-oracle demo-draft)")
    parser.add_argument("--again", action="store_true", help="measure the plan anew and keep the new one")
    parser.add_argument("--models-dir", default=None, help="where named models live (default: models/)")
    args = parser.parse_args(argv)
    from workbench.bench.measure import blas_description
    from workbench.runner import resolve_model_dir
    from workbench.speed.planned import load_planned
    blas = blas_description()  # a look at every loaded library: once, not once a model
    for name in args.models:
        model_dir = resolve_model_dir(name, args.models_dir)
        model = load_planned(model_dir, again=args.again)
        print(printable(f"{name}: " + machine_line(model.plan.key or planning.machine_key())
                        + f"; this run's BLAS {blas}"))
        busy = model.plan.busy
        if busy:
            print("measured while other programs were running" + (f", {busy} measurings in a row" if busy > 1 else "")
                  + (": kept (busy at every try)" if busy >= planning.BUSY_PLAN_TRIES else
                     ": measured again at the first start that finds none running"))
        print(tables.text(plan_rows(model.plan), ["rows", "way", *[f"{w}_ms" for w in model.plan.seconds],
                                                  *[f"{w}/numpy-1" for w in model.plan.ratios if w != "numpy-1"]]))
        print()
    print("a way is chosen over numpy-1 only when even its slow quartile is faster; while a run lasts, a way on "
          "more than one thread gives way to numpy-1 where another program is running (looked at first, and again "
          f"when a forward takes {planning.FALLBACK}x numpy-1's figure): for {planning.BUSY_SECONDS:.0f} s, twice that "
          "if still taken, and so on", file=sys.stderr)


def machine_line(key):
    """The machine a plan was measured for, in one line."""
    return (f"measured for {key.get('cpu')}, {key.get('cores')} cores ({' '.join(key.get('vector', [])) or 'no AVX'}); "
            f"NumPy {key.get('numpy')} built with {' '.join(key.get('blas', [])) or 'a BLAS it does not name'}"
            + "".join(f"; {k}={quoted(v)}" for k, v in key.get("forced", {}).items()))  # a setting: cut


def plan_rows(plan):
    """One row per row count measured: the way chosen, each way's milliseconds, each way's ratio to numpy-1."""
    rows = []
    for r in sorted(plan.ways):
        row = {"rows": r, "way": plan.ways[r]}
        row.update({f"{w}_ms": round(f[r] * 1e3, 3) for w, f in plan.seconds.items() if r in f})
        row.update({f"{w}/numpy-1": "{:.2f} ({:.2f}-{:.2f})".format(*q[r]) for w, q in plan.ratios.items()
                    if w != "numpy-1" and r in q})
        rows.append(row)
    return rows
