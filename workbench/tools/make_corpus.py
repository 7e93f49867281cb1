"""The learned pair's corpus: the Python 3.11 documentation, as Debian ships it, in plain text.

    apt-get download python3.11-doc                      # any Debian or Ubuntu machine, no root needed
    python workbench/tools/make_corpus.py python3.11-doc_*.deb     # -> workbench/tools/data/{train,heldout}.txt and .ids

Source and licence: Debian's package python3.11-doc holds the documentation's
reStructuredText sources (usr/share/doc/python3.11/html/_sources/**/*.rst.txt).
The Python documentation is distributed under the PSF License Version 2 (its
code examples also under the Zero-Clause BSD licence), which allows copying,
modifying and redistributing it and works derived from it; see
usr/share/doc/python3.11-doc/copyright in the package and docs/LEARNED_PAIR.md.

What this script does, in order:
  1. reads every *.rst.txt from the package (a .deb is an ar archive holding data.tar.xz);
  2. turns the markup into plain text a reader would write: roles such as
     :func:`map` become map, ``code`` becomes code, directives become their
     text ("New in version 3.2."), section underlines and table borders go;
     prose is unwrapped, one paragraph a line (the documentation wraps it at
     80 columns and indents it under each directive: whitespace a small model
     would learn instead of words); a table's columns are set apart by |;
     code blocks and >>> sessions keep their lines, indented by four spaces;
  3. splits by document: a document goes to the held-out part when the first
     byte of sha256(its path) is below HELDOUT_BYTE (about 5%), so the split
     never depends on the order of files; workbench/tools/data/split.json records it;
  4. tokenizes both parts with the learned pair's tokenizer (GPT-2's BPE cut
     to its first 8,191 tokens, workbench/tools/tokenizer_cut.py), each document ended by
     <|endoftext|>, into uint16 arrays for training.
"""

import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from workbench.tools.tokenizer_cut import cut_tokenizer_encoding  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = "./usr/share/doc/python3.11/html/_sources/"
HELDOUT_BYTE = 13  # sha256(path)[0] < 13: 13/256 = 5.1% of the documents
SKIPPED = ("license.rst.txt", "copyright.rst.txt", "contents.rst.txt", "bugs.rst.txt", "about.rst.txt")


def deb_members(path):
    """{name: bytes} of the files in a .deb's data archive (ar: a global header, then 60-byte member headers)."""
    with open(path, "rb") as f:
        blob = f.read()
    if not blob.startswith(b"!<arch>\n"):
        sys.exit(f"error: {path} is not a Debian package (.deb)")
    pos = 8
    while pos + 60 <= len(blob):
        name, size = blob[pos:pos + 16].decode().strip().rstrip("/"), int(blob[pos + 48:pos + 58])
        data = blob[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    sys.exit(f"error: {path} has no data archive")


ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(?:[^`<]*<)?~?!?([^`>]*?)>?`")  # :func:`map`, :ref:`text <target>`
LITERAL = re.compile(r"``(.+?)``")
EMPHASIS = re.compile(r"(?<![\w*])\*\*?([^*\s][^*]*?)\*\*?(?![\w*])")
LINK = re.compile(r"`([^`<]+?)\s*<[^`>]+>`_+")
UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.]{3,})\s*$")
VERSION = {"versionadded": "New in version {}.", "versionchanged": "Changed in version {}.",
           "deprecated": "Deprecated since version {}."}
SIGNATURES = ("function", "method", "class", "attribute", "data", "exception", "decorator", "classmethod",
              "staticmethod", "member", "macro", "type", "var", "coroutinefunction", "coroutinemethod",
              "abstractmethod", "describe", "object", "pdbcommand", "opcode", "decoratormethod")


def plain_text(rst):
    """reStructuredText -> the text a reader sees (see the module docstring, step 2)."""
    return "\n\n".join(render(block) for block in blocks(markup_removed(rst)))


BLANK = (0, "", "prose")
SIMPLE_TABLE_BORDER = re.compile(r"=+( +=+)+")


def markup_removed(rst):
    """[(indent, text, kind)] of the lines a reader sees: directives and comments dropped or turned
    into their text, roles and literals into plain words; kind "code" (after "::", in code-block),
    "table" (a simple table's rows) or "prose"."""
    out, skipping = [], None  # skipping: the indentation of a dropped directive's body
    options = False  # right after a directive: its :option: lines
    code_above = None  # the indentation of the paragraph whose "::" opens a literal block
    borders = 0  # the borders of a simple table seen so far (0: not in a table)
    for line in rst.split("\n"):
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if options and stripped.startswith(":") and re.match(r":[\w -]+:", stripped):
            continue
        options = False
        if skipping is not None:
            if not stripped:
                out.append(BLANK)
                continue
            if indent > skipping:
                continue
            skipping = None
        if code_above is not None:
            if not stripped or indent > code_above:
                out.append((indent, line.rstrip(), "code") if stripped else BLANK)
                continue
            code_above = None
        if SIMPLE_TABLE_BORDER.fullmatch(stripped):
            borders += 1
            continue
        if borders and not stripped:
            borders = 0 if borders >= 2 else borders
            out.append(BLANK)
            continue
        directive = re.match(r"\.\.\s+([\w:|-]+)::\s*(.*)", stripped)
        if directive:
            name, arg = directive.groups()
            options = True
            if name in VERSION:
                out += [BLANK, (indent, VERSION[name].format(arg.split()[0] if arg else ""), "prose"), BLANK]
                skipping = indent
            elif name in ("code-block", "sourcecode", "code", "doctest", "testcode", "testoutput"):
                code_above = indent
            elif name in ("note", "warning", "important", "tip", "caution", "attention", "hint"):
                out.append((indent, name.capitalize() + ": " + arg, "prose"))
            elif name.split(":")[-1] in SIGNATURES:
                out += [BLANK, (indent, arg, "prose"), BLANK]  # a signature is a paragraph of its own
            else:  # anything else (index, module, toctree, ...) is markup without prose: drop it and its body
                skipping = indent
            continue
        if stripped.startswith(".. "):  # a comment or a link target: its body goes too
            skipping = indent
            continue
        if UNDERLINE.match(line) or re.fullmatch(r"[+\-=| ]{3,}", stripped):
            out.append(BLANK)  # a heading's underline, a grid table's border: the line above stands alone
            continue
        text = LINK.sub(r"\1", line)
        text = ROLE.sub(lambda m: m.group(1).split(".")[-1] if m.group(0).count("~") else m.group(1), text)
        text = LITERAL.sub(r"\1", text)
        text = EMPHASIS.sub(r"\1", text).replace("\\*", "*")
        if text.rstrip().endswith("::"):  # a literal block follows
            code_above = indent
            text = text.rstrip()[:-2].rstrip()
            text = text + ":" if text else ""
        kind = "table" if borders or stripped.startswith("|") else "prose"
        out.append((indent, text.strip().strip("|").strip() if kind == "table" else text.strip(), kind)
                   if text.strip() else BLANK)
    return out


def blocks(lines):
    """Paragraphs: runs of non-empty lines of the same kind."""
    block = []
    for indent, text, kind in lines:
        if not text or (block and block[-1][2] != kind):
            if block:
                yield block
            block = [] if not text else [(indent, text, kind)]
            continue
        block.append((indent, text, kind))
    if block:
        yield block


ITEM = re.compile(r"^([*+-]|#\.|\d+\.|\(\w\))\s")  # a list item's start


def render(block):
    """One paragraph as plain text: code dedented to four spaces; a table's rows with | between
    columns; a list's items one a line; prose unwrapped into one line."""
    kind, texts = block[0][2], [text for _, text, _ in block]
    if kind == "code":
        base = min(indent for indent, _, _ in block)
        return "\n".join("    " + " " * (indent - base) + text.strip() for indent, text, _ in block)
    if texts[0].startswith(">>>"):
        return "\n".join("    " + t for t in texts)
    if kind == "table":  # columns set apart by runs of spaces (a simple table) or by | (a grid table)
        return "\n".join(" | ".join(c.strip() for c in re.split(r"\s{2,}|\s\|\s", t) if c.strip()) for t in texts)
    lines = []
    for t in texts:
        if ITEM.match(t) or not lines:
            lines.append(t)
        else:
            lines[-1] += " " + t
    return "\n".join(re.sub(r" {2,}", " ", line) for line in lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("deb", help="python3.11-doc_*.deb (apt-get download python3.11-doc)")
    parser.add_argument("--out", default=os.path.join(HERE, "data"), help="where to write (default: workbench/tools/data)")
    args = parser.parse_args(argv)
    files = {name.removeprefix(SOURCES): data for name, data in deb_members(args.deb).items()
             if name.startswith(SOURCES) and name.endswith(".rst.txt") and not name.endswith(SKIPPED)}
    enc = cut_tokenizer_encoding()
    eot = enc.eot_token
    split = {"train": [], "heldout": []}
    texts = {"train": [], "heldout": []}
    for name in sorted(files):
        part = "heldout" if hashlib.sha256(name.encode()).digest()[0] < HELDOUT_BYTE else "train"
        text = plain_text(files[name].decode("utf-8"))
        if len(text) < 200:
            continue
        split[part].append(name)
        texts[part].append(text)
    os.makedirs(args.out, exist_ok=True)
    for part in ("train", "heldout"):
        with open(os.path.join(args.out, f"{part}.txt"), "w", encoding="utf-8") as f:
            f.write("\n<|endoftext|>\n".join(texts[part]))
        ids = []
        for text in texts[part]:
            ids += enc.encode_ordinary(text) + [eot]
        np.asarray(ids, dtype=np.uint16).tofile(os.path.join(args.out, f"{part}.ids"))
        print(f"{part}: {len(texts[part])} documents, {sum(map(len, texts[part])):,} characters, {len(ids):,} tokens")
    with open(os.path.join(HERE, "corpus_split.json"), "w") as f:
        json.dump({"source": os.path.basename(args.deb), "rule": f"sha256(path)[0] < {HELDOUT_BYTE}: held out", **split},
                  f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
