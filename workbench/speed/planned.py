"""The workbench's model: gpt2.GPT2 as it is, each forward run the way the machine's plan chose for its rows.

    model = load_planned("gpt2")      # the plan read from beside the model, or measured once (plan.py)

It holds the plain model (NumPy's own products, the reading house's gpt2.GPT2) and, where the plan uses
it for some row count, the fast one (accelerate.FastGPT2), mapped at its first forward. forward,
hidden_states, blocks and logits go to the way the plan gives their rows, in its thread setting,
watched (plan.Watch); everything else (the weights a drafter reads, the shapes) is the plain model's. Both give the same tokens (a float32
near-tie aside): the KV cache holds the same keys and values whichever way filled it.
"""

import sys
import time

from errors import printable
from gpt2 import GPT2
from workbench.speed import plan as planning
from workbench.speed import threads


class PlannedGPT2:
    """A model whose forwards run by its plan (plan.Plan); its attributes are the plain model's."""

    def __init__(self, plain, plan, fast_loader=None):
        self.plain, self.plan = plain, plan
        self.fast, self.fast_loader = None, fast_loader  # the fast model, mapped by fast_loader() at its first use
        self.watch = planning.Watch(plan, uses_threads=lambda way: way == "numpy" and threads.N_THREADS > 1)

    def __getattr__(self, name):  # name, directory, n_layer, ..., params: the plain model's
        return getattr(self.plain, name)

    def fast_model(self):
        """The fast model (or None where the plan never uses it), mapped at the first forward the plan gives it: a
        run that never needs it (a draft whose checks never reach its row counts) does not pay for mapping and
        checking its converted copy. A benchmark calls it before it times anything."""
        if self.fast is None and self.fast_loader is not None:
            loader, self.fast_loader = self.fast_loader, None  # tried once: an error ends the run, in one line
            self.fast = loader()
        return self.fast

    def model_for(self, way):
        """The model that runs a way's forwards, the BLAS's threads set for it."""
        if way == "fast" and self.fast_model() is not None:
            return self.fast  # its products set their own threads (threads.threads_for)
        threads.use_blas_threads(threads.N_THREADS if way == "numpy" else 1)
        return self.plain

    def _run(self, n_rows, step, *args, **kwargs):
        way, slow = self.watch.start(n_rows)
        model = self.model_for(way)
        if slow is None:  # not watched: one thread, the fast layout's own threads, or no figure to judge it by
            return getattr(model, step)(*args, **kwargs)
        start = time.perf_counter()
        out = getattr(model, step)(*args, **kwargs)
        self.watch.took(time.perf_counter() - start, slow)
        return out

    def forward(self, ids, *args, **kwargs):
        return self._run(len(ids), "forward", ids, *args, **kwargs)

    def hidden_states(self, ids, *args, **kwargs):
        return self._run(len(ids), "hidden_states", ids, *args, **kwargs)

    def blocks(self, x, *args, **kwargs):
        return self._run(len(x), "blocks", x, *args, **kwargs)

    def logits(self, x):
        return self._run(len(x), "logits", x)


def numpy_way(n_threads):
    """The prepare() of a plain forward on n_threads of the BLAS's threads."""
    return lambda: threads.use_blas_threads(n_threads)


def plan_for(plain, fast_in_memory, progress=True, busy_before=0):
    """A plan for the plain model, measured here: numpy-1, numpy (where there are cores to share) and the fast
    layout (converted in memory for the measuring: a converted copy is written only where the plan uses it)."""
    runners = {"numpy-1": (plain, numpy_way(1))}
    if threads.N_THREADS > 1:
        runners["numpy"] = (plain, numpy_way(threads.N_THREADS))
    runners["fast"] = (fast_in_memory, lambda: None)
    return planning.make_plan(runners, progress=progress, name=plain.name, busy_before=busy_before)


def load_fast(model_dir):
    """The fast model of a checkpoint directory (accelerate.load_fast). accelerate.py and what it imports (the
    layouts, the second core's helper) are imported here, when a plan is made or uses the fast layout: a run whose
    plan is NumPy's product everywhere does not pay for importing them."""
    from workbench.speed.accelerate import load_fast as load
    return load(model_dir)


def load_planned(name_or_path, models_dir=None, progress=True, again=False):
    """The workbench's model of a named model or a checkpoint directory: the plain model, the plan read from beside
    it or measured now (again=True: measured now, whatever is kept), and the fast model where the plan uses it."""
    plain = GPT2.from_pretrained(name_or_path, models_dir)
    plan, busy_before = None if again else planning.read(plain.directory), 0
    if plan is not None and planning.measure_again(plan, plain.directory):
        print(printable(f"note: how to run {plain.name} here was measured while other programs were running; none is "
                        f"running now: measuring it again (a few seconds)", newlines=False), file=sys.stderr)
        plan, busy_before = None, plan.busy
    if plan is None:
        from workbench.speed.accelerate import accelerate  # see load_fast
        plan = plan_for(plain, accelerate(plain), progress=progress and sys.stderr.isatty(), busy_before=busy_before)
        planning.write(plain.directory, plan)
    uses_fast = "fast" in plan.ways.values()
    return PlannedGPT2(plain, plan, fast_loader=(lambda: load_fast(plain.directory)) if uses_fast else None)
