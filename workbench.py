"""The workbench: every method, its trace and its page, many prompts at once, a session, the benchmarks.

    python workbench.py "The meaning of life is" --method sps --trace   # one prompt, any method (--help lists them)
    python workbench.py --prompts prompts.txt                           # many prompts, one batch
    python workbench.py --interactive                                   # a session: prompts and /commands
    python workbench.py bench suite|cost|rounds|batch|layers|ablation   # the benchmarks (bench --help)

The reading path is python speculative.py "prompt": the plain models and speculative_generate, none
of this. The workbench's code is the folder workbench/ (its __init__.py maps it).
"""

if __name__ == "__main__":  # first: Ctrl-C while the workbench loads is one line, not a traceback
    import errors
    errors.interrupt_quietly()
    import sys
    if "--plain" not in sys.argv[1:]:  # --plain: NumPy and its BLAS exactly as they start, nothing of speed/
        from workbench.speed.cores import start_blas_threads
        start_blas_threads()  # before NumPy loads: OpenBLAS's threads spin at its start, beside a busy program too
    from workbench.cli import main_entry
    main_entry()
