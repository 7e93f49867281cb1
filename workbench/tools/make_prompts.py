"""The real-text benchmark's prompts: cut from the held-out documents, four of each kind.

    python workbench/tools/make_prompts.py      # after workbench/tools/make_corpus.py; -> assets/learned-pair/prompts.json

The documents are the ones workbench/tools/make_corpus.py held out of training
(workbench/tools/corpus_split.json), so the pair never saw them. Four kinds, in the
spirit of Spec-Bench (Xia et al. 2024), whose tasks differ in how much of the
answer the prompt already holds:
  prose    the first sentences of a paragraph: continue it;
  code     the first lines of an example (a >>> session, a code block): continue it;
  lists    a list's or a table's first items or rows: more of them;
  repeat   a paragraph or an example, then its first words again: text that
           repeats its prompt, as editing or quoting does.
The choice is deterministic: the documents in their split order, the first
paragraphs of each kind that are long enough, one document at a time.
"""

import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PER_KIND = 4
ITEM = re.compile(r"^([*+-]|\d+\.)\s")


def file_type(paragraph):
    if paragraph.startswith("    "):
        return "code"
    lines = paragraph.split("\n")
    table = all(" | " in line for line in lines) and " | | " not in paragraph and not paragraph.startswith("|")
    if len(lines) >= 3 and (table or all(ITEM.match(line) for line in lines)):  # (not a table of split cells)
        return "lists"
    if "\n" not in paragraph and len(paragraph) >= 250:
        return "prose"
    return None


def first_sentences(text, at_least=120, at_most=260):
    """The first sentences of text, at least `at_least` characters, cut at a sentence's end where one comes."""
    ends = [m.end() for m in re.finditer(r"[.!?:] ", text) if at_least <= m.end() <= at_most]
    return text[:ends[0]].rstrip() if ends else text[:at_most].rsplit(" ", 1)[0]


def prompts_of(doc_name, paragraphs):
    """(kind, prompt) candidates from one document's paragraphs, in order; a paragraph that gave a
    prose prompt is not repeated (the two kinds get different text)."""
    prose_seen = False
    for i, paragraph in enumerate(paragraphs):
        kind = file_type(paragraph)
        before = paragraphs[i - 1] if i and file_type(paragraphs[i - 1]) is None and len(paragraphs[i - 1]) < 300 else ""
        intro = before + "\n\n" if before else ""
        lines = paragraph.split("\n")
        if kind == "prose":
            if not prose_seen:
                yield "prose", first_sentences(paragraph)
            elif len(paragraph) < 600:
                yield "repeat", paragraph + "\n\n" + " ".join(paragraph.split()[:8])
            prose_seen = True
        elif kind == "code" and len(lines) >= 4:
            yield "code", intro + "\n".join(lines[:max(2, len(lines) // 2)])
            if len(paragraph) < 600:
                yield "repeat", intro + paragraph + "\n\nThe same example again:\n\n" + lines[0]
        elif kind == "lists":
            yield "lists", intro + "\n".join(lines[:2]) + "\n"


def main():
    with open(os.path.join(HERE, "corpus_split.json")) as f:
        names = json.load(f)["heldout"]
    with open(os.path.join(HERE, "data", "heldout.txt"), encoding="utf-8") as f:
        docs = f.read().split("\n<|endoftext|>\n")
    candidates = {name: list(prompts_of(name, doc.split("\n\n"))) for name, doc in zip(names, docs)}
    chosen = []
    for kind in ("prose", "code", "lists", "repeat"):
        picked, round_ = [], 0
        while len(picked) < PER_KIND and any(len([c for c in cs if c[0] == kind]) > round_ for cs in candidates.values()):
            for name, cs in candidates.items():  # one document at a time: as many documents as can be
                of_kind = [prompt for k, prompt in cs if k == kind]
                if len(of_kind) > round_ and len(picked) < PER_KIND:
                    picked.append({"kind": kind, "source": name, "prompt": of_kind[round_]})
            round_ += 1
        chosen += picked
    path = os.path.join(ROOT, "assets", "learned-pair", "prompts.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(chosen, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for p in chosen:
        print(f"{p['kind']:7} {p['source']:36} {p['prompt'][:70]!r}")


if __name__ == "__main__":
    main()
