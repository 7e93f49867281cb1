"""Speed, applied from outside the model: gpt2.py computes `x @ w + b` with NumPy, and this package makes it fast.

accelerate.py   accelerate(model) and load_fast(directory): a GPT2 whose weights are in the blocked layout (a small one's in panels)
blocked.py      the blocked layout and its product: why `x @ W` for a few rows is slow, and what is done instead
panels.py       a small model's layout: W in contiguous panels of columns, so that k rows cost about what one costs
second_core.py  a small model's products of several rows, half of them on a helper process: the second core
threads.py      who runs the products: the BLAS's threads for one row, this package's for several
measure.py      the benchmark's machinery: memory bandwidth, the cost of a forward of k tokens, a synthetic draft,
                the seconds a run should take from those costs
"""
