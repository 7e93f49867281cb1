"""Weights on disk: everything that reads or writes a file, and the one place that talks to a server.

checkpoint.py   config.json and model.safetensors: read, checked, written
tokenizer.py    vocab.json + merges.txt -> GPT-2's byte-level BPE (tiktoken), checked
models.py       a model's name or directory -> the checkpoint directory, in a stated lookup order
download.py     OpenAI's GPT-2 checkpoints from the Hugging Face hub (or a mirror), verified
http.py         download.py's talk with the server: the endpoint, redirects, deadlines, clear failures
demo_pair.py    the offline demo pair written into the models directory
files.py        how every file is written: whole or not at all, never through a link at a name of ours
reading.py      how every file from outside is read: a regular file, bounded for what it is
"""
