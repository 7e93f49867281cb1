"""The documents send a learner one way, and only to places that exist.

1. Every reference from one document to a section of another names a heading that exists: the links
   with an #anchor (in every markdown file, both editions, and the notebook's markdown), and the
   references in prose, written `READING.md's section "Threshold drafting"` (several:
   `sections "A" and "B"`) or, in Chinese, `READING.md 的 "Threshold drafting" 一节`. A quoted name
   matches a heading, backticks dropped, or the heading's part before its first colon or parenthesis.
2. Every document that gives the reading order gives the same one: the passage between
   `<!-- reading order -->` and `<!-- /reading order -->` (demo.py: its "Next" lines) names the
   steps of ORDER, each first named in that order, and no document offers another (the one that
   discovered part 1 before reading speculative.py is gone from docs/TEACHING.md too).
3. Every document that gives it names one module to read after each part of the exercises, the same
   in all (READ_NEXT): in its reading order, in EXERCISES.md's "Part N done?" lines (both editions),
   and in docs/TEACHING.md's homework.

Each check is a plain function; the last tests feed it a made-up reference or a swapped order and
show it notices.
"""

import json
import os
import re
import urllib.parse

import pytest

import demo
from fixtures import ROOT
from test_translations import HEADING, INLINE_CODE, anchors, links, prose

MARKDOWN = ["README.md", "README.zh-CN.md", "READING.md", "EXERCISES.md", "EXERCISES.zh-CN.md", "workbench/PERFORMANCE.md",
            "SECURITY.md"] + sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                                    if name.endswith(".md"))
NOTEBOOK = "walkthrough.ipynb"
# A document's name in prose -> its files (both editions where there are two).
DOCUMENTS = {"README": ["README.md", "README.zh-CN.md"], "READING": ["READING.md"],
             "EXERCISES": ["EXERCISES.md", "EXERCISES.zh-CN.md"], "TEACHING": ["docs/TEACHING.md"],
             "USAGE": ["docs/USAGE.md"], "PERFORMANCE": ["workbench/PERFORMANCE.md"], "SECURITY": ["SECURITY.md"],
             "LEARNED_PAIR": ["docs/LEARNED_PAIR.md"]}
DOC = "(" + "|".join(DOCUMENTS) + r")(?:\.zh-CN)?(?:\.md)?"
QUOTED = r'"[^"]{1,80}"'
REFERENCE_EN = re.compile(rf"\b{DOC}'s (?:sections? )?((?:{QUOTED}(?:,? and |, )?)+)")
REFERENCE_ZH = re.compile(rf"\b{DOC} ?的 ?((?:{QUOTED}(?: ?和 ?|、)?)+)")

# The one reading order: (step, how a document names it), in order.
ORDER = [("python demo.py", r"python demo\.py"), ("README", r"README"), ("kvcache.py", r"kvcache\.py"),
         ("gpt2.py", r"gpt2\.py"), ("speculative.py", r"(?<![\w/])speculative\.py"), ("READING.md", r"READING\.md"),
         ("EXERCISES", r"EXERCISES"), ("sps.py", r"(?<![\w/])sps\.py"), ("walkthrough.ipynb", r"walkthrough\.ipynb")]
PASSAGE = re.compile(r"<!-- reading order -->(.*?)<!-- /reading order -->", re.S)
ORDERED = ["README.md", "README.zh-CN.md", "READING.md", "EXERCISES.md", "EXERCISES.zh-CN.md", "docs/TEACHING.md",
           NOTEBOOK, "demo.py"]
DISCOVER_FIRST = "then exercises 1-5, then `speculative.py`"


def read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        text = f.read()
    if name.endswith(".ipynb"):  # its markdown cells, one after another
        return "\n\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"]
                           if cell["cell_type"] == "markdown")
    return text


# --- 1. references to sections ----------------------------------------------------------------

def section_names(text):
    """What a reference may call each heading: the heading, its part before a colon, before a parenthesis."""
    names = set()
    for m in HEADING.finditer(prose(text)):
        title = m.group(1).replace("`", "").strip()
        names |= {title, title.split(":")[0].strip(), title.split(" (")[0].strip()}
    return names


def prose_references(text):
    """Each reference in prose to another document's section, as (line, document, section name)."""
    outside_code = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), prose(text))
    found = []
    for pattern in (REFERENCE_EN, REFERENCE_ZH):
        for m in pattern.finditer(outside_code):
            for name in re.findall(r'"([^"]+)"', m.group(2)):
                found.append((outside_code.count("\n", 0, m.start()) + 1, m.group(1), " ".join(name.split())))
    return sorted(found)


def check_references(text, name, read=read):
    """Every section reference and every anchor link of the document `name`, one line per one that misses."""
    problems = []
    for line, document, section in prose_references(text):
        if not any(section in section_names(read(target)) for target in DOCUMENTS[document]):
            problems.append(f"{name}, line {line}: {document}'s section {section!r} is no heading of "
                            f"{' or '.join(DOCUMENTS[document])}")
    for line, target in links(text):
        path, _, anchor = urllib.parse.unquote(target).partition("#")
        if not anchor or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            continue
        target_name = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
        if not target_name.endswith(".md") or not os.path.exists(os.path.join(ROOT, target_name)):
            problems.append(f"{name}, line {line}: link {target!r}: {target_name} is no markdown file here")
        elif anchor not in anchors(read(target_name)):
            problems.append(f"{name}, line {line}: link {target!r}: {target_name} has no heading #{anchor}")
    return problems


@pytest.mark.parametrize("name", MARKDOWN + [NOTEBOOK])
def test_every_reference_to_a_section_names_a_heading_that_exists(name):
    problems = check_references(read(name), name)
    assert not problems, "\n".join(problems)


def test_the_demo_names_a_section_of_reading_md_that_exists():
    for section in re.findall(r'section\s+"([^"]+)"', demo.NEXT):
        assert " ".join(section.split()) in section_names(read("READING.md")), section


def test_the_documents_do_refer_to_sections():
    # The check has something to check: the exercises name READING.md's sections, in both editions.
    for name in ("EXERCISES.md", "EXERCISES.zh-CN.md"):
        named = {section for _, document, section in prose_references(read(name)) if document == "READING"}
        assert {"Threshold drafting", "Speculative sampling", "Tree drafts"} <= named, (name, named)


# --- 2. one reading order -----------------------------------------------------------------------

def passage(name):
    """The document's statement of the reading order (demo.py: its Next lines), or None."""
    if name == "demo.py":
        return demo.NEXT
    found = PASSAGE.findall(read(name))
    return found[0] if len(found) == 1 else None


def check_order(text, name, steps=ORDER):
    """The steps, each first named in their order; one line per problem."""
    if text is None:
        return [f"{name} has no single <!-- reading order --> passage"]
    where = {step: re.search(pattern, text) for step, pattern in steps}
    missing = [step for step, m in where.items() if m is None]
    if missing:
        return [f"{name}'s reading order does not name {', '.join(missing)}"]
    named = sorted(where, key=lambda step: where[step].start())
    if named != [step for step, _ in steps]:
        return [f"{name}'s reading order is {' -> '.join(named)}, not {' -> '.join(step for step, _ in steps)}"]
    return []


@pytest.mark.parametrize("name", ORDERED)
def test_every_document_gives_the_same_reading_order(name):
    steps = ORDER[1:] if name == "demo.py" else ORDER  # demo.py's Next: the demo has just run
    problems = check_order(passage(name), name, steps)
    assert not problems, "\n".join(problems)


def test_no_document_offers_a_second_order():
    giving = [name for name in MARKDOWN + [NOTEBOOK] if DISCOVER_FIRST in " ".join(read(name).split())]
    assert giving == [], giving
    for name in MARKDOWN + [NOTEBOOK]:
        assert "closed until exercise 5" not in " ".join(read(name).split()), f"{name} keeps speculative.py closed"


def test_the_readme_stays_short():
    assert os.path.getsize(os.path.join(ROOT, "README.md")) < 12 * 1024


# --- 3. one module to read after each part ---------------------------------------------------------------

READ_NEXT = {"1": ["speculative.py"], "2": ["threshold.py"], "3": ["sps.py"], "4": ["ngram.py", "tree.py"],
             "5": ["workbench/PERFORMANCE.md"], "6": ["workbench/bench/suite.py"], "7": ["batch.py", "crossvocab.py"]}
PART = re.compile(r"\bpart (\d)\b|第 (\d) 部分")
FILE = re.compile(r"[\w/-]+\.(py|md)")


def read_next(text, ends=r"[;；)]|\.\s"):
    """{part: the file names in backticks after each "part N" (第 N 部分) of text, up to the next part or the end
    of its clause}."""
    marks = list(PART.finditer(text))
    found = {}
    for m, after in zip(marks, marks[1:] + [None]):
        segment = text[m.end():after.start() if after else len(text)]
        segment = segment[:next((e.start() for e in re.finditer(ends, segment)), len(segment))]
        found[m.group(1) or m.group(2)] = [c for c in INLINE_CODE.findall(segment) if FILE.fullmatch(c)]
    return found


@pytest.mark.parametrize("name", ["README.md", "README.zh-CN.md", "READING.md", "EXERCISES.md", "EXERCISES.zh-CN.md",
                                  "docs/TEACHING.md"])
def test_every_document_names_one_module_to_read_after_each_part(name):
    assert read_next(passage(name)) == READ_NEXT


@pytest.mark.parametrize("name", ["EXERCISES.md", "EXERCISES.zh-CN.md"])
def test_each_parts_last_line_names_the_same_module(name):
    done = re.findall(r"^\*\*(?:Part (\d) done\?|第 (\d) 部分做完了？)\*\*(.*?)(?:\n\n|\Z)", read(name), re.M | re.S)
    named = {a or b: [c for c in INLINE_CODE.findall(text) if FILE.fullmatch(c)] for a, b, text in done}
    assert sorted(named) == sorted(READ_NEXT)
    for part, files in READ_NEXT.items():
        assert named[part][:len(files)] == files, (part, named[part])


def test_the_teachers_homework_runs_through_part_7():
    homework = re.search(r"^Homework, in the path's order:(.*?)\n\n", read("docs/TEACHING.md"), re.M | re.S).group(1)
    assert read_next(homework, ends=";") == {part: files for part, files in READ_NEXT.items() if part >= "4"}


# --- each check bites ---------------------------------------------------------------------------

def test_a_made_up_section_or_anchor_is_caught():
    text = ('See READING.md\'s section "Stepping through nothing", and the README\'s "Beyond the classic three";\n'
            '见 READING.md 的 "Threshold drafting" 和 "没有这一节" 两节；[x](READING.md#no-such-heading)\n')
    problems = check_references(text, "X.md")
    assert len(problems) == 4, problems
    assert "'Stepping through nothing' is no heading of READING.md" in problems[0]
    assert "'Beyond the classic three' is no heading of README.md or README.zh-CN.md" in problems[1]
    assert "'没有这一节'" in problems[2] and "READING.md has no heading #no-such-heading" in problems[3]
    assert check_references('READING.md\'s sections "Threshold drafting" and\n"Tree drafts"', "X.md") == []


def test_a_swapped_or_missing_step_is_caught():
    good = passage("README.md")
    swapped = good.replace("`kvcache.py`, `gpt2.py`", "`gpt2.py`, `kvcache.py`", 1)
    assert swapped != good
    assert check_order(swapped, "X.md") == ["X.md's reading order is python demo.py -> README -> gpt2.py -> "
                                            "kvcache.py -> speculative.py -> READING.md -> EXERCISES -> sps.py -> "
                                            "walkthrough.ipynb, not python demo.py -> README -> kvcache.py -> gpt2.py "
                                            "-> speculative.py -> READING.md -> EXERCISES -> sps.py -> walkthrough.ipynb"]
    assert check_order(good.replace("walkthrough.ipynb", "the notebook"), "X.md") == \
        ["X.md's reading order does not name walkthrough.ipynb"]
    assert check_order(None, "X.md") == ["X.md has no single <!-- reading order --> passage"]


def test_a_part_without_its_module_is_caught():
    good = passage("EXERCISES.md")
    assert read_next(good) == READ_NEXT
    assert read_next(good.replace("after part 6\n`workbench/bench/suite.py`", "after part 6 nothing"))["6"] == []
