"""The offline demo: a draft and an oracle written into models/, then speculative decoding on them.

    python demo.py ["prompt"] [--models-dir DIR]

No network: the pair ships in this repository (weights/demo_pair.py writes it).
Afterwards every command of speculative.py works with
--draft demo-draft --oracle demo-oracle. The program is app/demo.py.
"""

if __name__ == "__main__":  # Ctrl-C while the program loads is one line, not a traceback (app/interrupt.py)
    import errors
    errors.interrupt_quietly()
    from workbench.demo import main_entry
    main_entry()
