"""The workbench: every method, its trace and its page, many prompts at once, a session, the benchmarks.

    python workbench.py "prompt" --method sps --trace     python workbench.py --interactive
    python workbench.py --prompts FILE                      python workbench.py bench suite|cost|plan|...

It imports the reading house (the root's model, cache and decoders, beyond/, weights/); nothing there
imports it. The rooms:

registry.py    what a method is to the workbench: Method (how it runs, its options, how its rounds are shown)
methods/       every method, one file per family, each holding everything about its methods
settings.py    everything that decides a generation but the prompt, and the options every method shares
cli.py         python workbench.py: flags made from the options, one run, --prompts, or a session
runner.py      one path from settings + prompt to text shown + statistics, for the command line and the session
session.py     python workbench.py -i: prompts and /commands made from the options
batch_run.py   --prompts FILE: many prompts as one batch (batch.py)
display.py     the terminal: streamed text, the statistics line, the trace around each method's rounds
page/          --html: one run on one self-contained page
heads.py       the trained heads some methods read, once per model
system.py      what this process may take (memory limits)
program.py     the flags' parser and UsageError
speed/         the fast products and the plan that chooses, per machine, how each forward runs
bench/         python workbench.py bench: the cost of a check and its roofline, the suite, batches, layers, ablations
tools/         training the learned pair and its heads, making the corpus and prompts (PyTorch, not a dependency)
tests/         the programs, the page, the benchmarks, speed and hostile input (the reading house's are tests/)
PERFORMANCE.md what to expect on your machine, and why
"""
