"""Speed, applied from outside the model: gpt2.py computes `x @ w + b` with NumPy, and this package makes it fast.

accelerate.py   accelerate(model) and load_fast(directory): a GPT2 whose weights are in the blocked layout (a small one's in panels)
blocked.py      the blocked layout and its product: why `x @ W` for a few rows is slow, and what is done instead
panels.py       a small model's layout: W in contiguous panels of columns, so that k rows cost about what one costs
second_core.py  a small model's products of several rows, half of them on a helper process: the second core
threads.py      who runs the products: the BLAS's threads for one row, this package's for several
plan.py         how the machine it runs on should run a model's forwards: measured there, kept beside the model
planned.py      the workbench's model: each forward run the way its plan chose for its rows
cores.py        whether other programs are running on the cores now (read before NumPy loads, too)
"""
