"""The programs: the command line, the interactive workbench, the benchmark, the demo, and what they share.

cli.py        python workbench.py "prompt": flags, one run, the text as it comes, statistics
session.py    python workbench.py -i: the workbench, slash commands
methods.py    the registry: every decoding method declared once (name, function, what it needs)
runner.py     one path from settings + prompt to text shown + statistics, for the command line and the session
display.py    the terminal: streamed text, the statistics line, the per-round trace
report.py     --html: one run on one self-contained page
bench.py      python workbench.py bench: the cost curve, the real-text suite (suite.py), the ablations (ablation.py)
demo.py       python demo.py: the learned pair, offline
download.py   python download_weights.py: the downloader's command line
program.py    how every program runs: one-line errors, Ctrl-C, closed pipes
interrupt.py  Ctrl-C while a program loads, set by every entry script before any other import
"""
