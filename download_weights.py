"""Download OpenAI's GPT-2 checkpoints from the Hugging Face hub, or a mirror (HF_ENDPOINT).

    python download_weights.py gpt2 gpt2-large [--models-dir models]

Each model is four files in models/NAME/: config.json, model.safetensors,
vocab.json and merges.txt. A download resumes where it stopped, and a file is
kept only once it is what the server announced (its size and SHA-256, or the
shape of its kind). The downloader is weights/download.py; its command line
app/download.py. speculative.py downloads the models it needs by itself.
"""

if __name__ == "__main__":  # Ctrl-C while the program loads is one line, not a traceback (app/interrupt.py)
    from app.interrupt import interrupt_quietly
    interrupt_quietly()
    from app.download import main_entry
    main_entry()
