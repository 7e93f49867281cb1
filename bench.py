"""Benchmarks: what checking k tokens costs, and what speculative decoding gains, on your machine.

    python bench.py            # the cost curve of every GPT-2 size and end-to-end runs
    python bench.py --quick    # gpt2 and gpt2-xl shapes, a smaller sweep
    python bench.py suite      # every method on held-out text of four kinds, on the learned pair
    python bench.py layers     # self-speculative decoding: how deep a draft pays
    python bench.py cost       # what checking k tokens costs, k = 1..32, on the learned pair or named models
    python bench.py batch      # many prompts at once: where batched speculative decoding stops paying
    python bench.py ablation "prompt" ...   # every method on your prompts, against the oracle alone

python bench.py --help says what each part measures. The program is
app/bench.py; the measuring machinery is speed/measure.py.
"""

if __name__ == "__main__":  # Ctrl-C while the program loads is one line, not a traceback (app/interrupt.py)
    from app.interrupt import interrupt_quietly
    interrupt_quietly()
    from app.bench import main_entry
    main_entry()
