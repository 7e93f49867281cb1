"""Every X.zh-CN.md in the repository root says what its English twin X.md says wherever a
reader copies or follows something: the same fenced code blocks in the same order, the same
inline commands, the same numbers in the same table cells, the same file:line citations and
file names in backticks; links that resolve, in both files; and a link to the twin near the top.
The prose is free to be good Chinese; code, commands and figures are not free to drift.

The checks are plain functions (check_pair and what it calls); the tests below run them on
every pair, then change one thing in the Chinese text in memory and show each check notices.
"""

import collections
import os
import re
import urllib.parse

import pytest

from fixtures import ROOT

ZH = ".zh-CN.md"
TWIN_WITHIN_LINES = 5        # "near the top": the twin's link is in a file's first lines
FENCE = re.compile(r"^ {0,3}(`{3,})[^`\n]*\n.*?^ {0,3}\1`*[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`([^`]+)`")
COMMAND_STARTS = ("python ", "pip ", "pytest ", "export ", "$env:", "set ")
CITATION = re.compile(r"[\w./-]+\.py:\d+")
FILE_NAME = re.compile(r"[\w.*-]+(/[\w.*-]+)+/?|[\w.*/-]+\.(py|md|txt|json|csv|safetensors|ipynb|ini|toml|cfg|"
                       r"ya?ml|sh|ps1|bat|html|png|svg|lock|log)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", re.M)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$", re.M)
TABLE_SEPARATOR = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*")
NUM = r"[-+−~≈]?\d+(?:[.,]\d+)*"
NUMBER_CELL = re.compile(rf"{NUM}(?:\s*[-–]\s*{NUM})?\s*(?:x|×|%|ms|µs|us|s|min|h|GB/s|MB/s|GB|MB|KB|tokens/s|tok/s)?")


# --- reading a markdown text ------------------------------------------------------------

def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def code_blocks(text):
    """Each fenced block, fences and language tag included, as (line, block)."""
    return [(line_of(text, m.start()), m.group(0)) for m in FENCE.finditer(text)]


def prose(text):
    """The text with every fenced block blanked out, so offsets and line numbers still hold."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def inline_code(text):
    """Each inline code span outside the fenced blocks, as (start, end, content)."""
    return [(m.start(), m.end(), m.group(1).replace("\n", " ")) for m in INLINE_CODE.finditer(prose(text))]


def inline_commands(text):
    return [code for _, _, code in inline_code(text) if code.startswith(COMMAND_STARTS)]


def file_names(text):
    return [code for _, _, code in inline_code(text) if FILE_NAME.fullmatch(code)]


def citations(text):
    return CITATION.findall(prose(text))


def links(text):
    """Each link target outside code (inline links, images, reference definitions), as (line, target)."""
    outside_code = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), prose(text))
    found = [(m.start(), m.group(1)) for m in LINK.finditer(outside_code)]
    found += [(m.start(), m.group(1)) for m in LINK_DEFINITION.finditer(outside_code)]
    return sorted((line_of(text, start), target) for start, target in found)


def anchors(text):
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces to hyphens."""
    seen = collections.Counter()
    result = set()
    for m in HEADING.finditer(prose(text)):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        result.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return result


def split_row(line):
    """A table row's parts between unescaped pipes; the cells are parts[1:-1] when the row has outer pipes."""
    return re.split(r"(?<!\\)\|", line)


def cells(line):
    parts = [part.strip() for part in split_row(line.strip())]
    return parts[1:-1] if line.strip().startswith("|") else parts


def tables(text):
    """Each table outside the fenced blocks, as (line, [(line index, cells) per row])."""
    lines = prose(text).split("\n")
    found, i = [], 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and TABLE_SEPARATOR.fullmatch(lines[i + 1]):
            rows = [(i, cells(lines[i]))]
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append((i, cells(lines[i])))
                i += 1
            found.append((rows[0][0] + 1, rows))
        else:
            i += 1
    return found


def is_number(cell):
    return bool(NUMBER_CELL.fullmatch(cell.strip("*` ")))


# --- the checks ----------------------------------------------------------------------------

def compare_lengths(kind, en_items, zh_items, en_name, zh_name):
    if len(en_items) != len(zh_items):
        return [f"{zh_name} has {len(zh_items)} {kind}, {en_name} has {len(en_items)}"]
    return []


def compare_code_blocks(en, zh, en_name, zh_name):
    en_blocks, zh_blocks = code_blocks(en), code_blocks(zh)
    problems = compare_lengths("code blocks", en_blocks, zh_blocks, en_name, zh_name)
    for i, ((en_line, en_block), (zh_line, zh_block)) in enumerate(zip(en_blocks, zh_blocks), 1):
        if en_block != zh_block:
            en_lines, zh_lines = en_block.split("\n"), zh_block.split("\n")
            k = next((k for k, (a, b) in enumerate(zip(en_lines, zh_lines)) if a != b), min(len(en_lines), len(zh_lines)))
            problems.append(f"{zh_name}: code block {i} (line {zh_line}) differs from {en_name}'s (line {en_line}) "
                            f"at its line {k + 1}: {zh_lines[k] if k < len(zh_lines) else '(ends)'!r} "
                            f"instead of {en_lines[k] if k < len(en_lines) else '(ends)'!r}")
    return problems


def compare_counts(kind, en_items, zh_items, en_name, zh_name):
    en_count, zh_count = collections.Counter(en_items), collections.Counter(zh_items)
    return [f"{zh_name}: {kind} {item!r} appears {zh_count[item]} time(s), {en_count[item]} in {en_name}"
            for item in sorted(en_count | zh_count) if en_count[item] != zh_count[item]]


def compare_tables(en, zh, en_name, zh_name):
    en_tables, zh_tables = tables(en), tables(zh)
    problems = compare_lengths("tables", en_tables, zh_tables, en_name, zh_name)
    for t, ((en_line, en_rows), (zh_line, zh_rows)) in enumerate(zip(en_tables, zh_tables), 1):
        where = f"{zh_name}: table {t} (line {zh_line}; {en_name} line {en_line})"
        if [len(c) for _, c in en_rows] != [len(c) for _, c in zh_rows]:
            problems.append(f"{where} has rows x columns {[len(c) for _, c in zh_rows]}, "
                            f"{en_name}'s {[len(c) for _, c in en_rows]}")
            continue
        for r, ((_, en_cells), (_, zh_cells)) in enumerate(zip(en_rows, zh_rows), 1):
            for c, (a, b) in enumerate(zip(en_cells, zh_cells), 1):
                if (is_number(a) or is_number(b)) and a != b:
                    problems.append(f"{where}, row {r}, column {c}: {b!r} instead of {a!r}")
    return problems


def check_links(text, name, texts, root):
    """Every relative link of the file `name` points at a file in the repository, and every
    anchor at a heading of its target; texts holds the pair's own texts, read from there."""
    problems = []
    for line, target in links(text):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            continue                               # http:, mailto: ...: not checked offline
        path, _, anchor = urllib.parse.unquote(target).partition("#")
        full = os.path.normpath(os.path.join(root, path or name))
        where = f"{name}, line {line}: link {target!r}"
        if os.path.relpath(full, root).startswith(".."):
            problems.append(f"{where} points outside the repository")
        elif path not in texts and not os.path.exists(full):
            problems.append(f"{where}: {path} does not exist")
        elif anchor:
            key = path or name
            if key not in texts:
                if not key.endswith(".md"):
                    problems.append(f"{where}: an anchor into {key}, which is not markdown")
                    continue
                with open(full, encoding="utf-8") as f:
                    texts = {**texts, key: f.read()}
            if anchor not in anchors(texts[key]):
                problems.append(f"{where}: {key} has no heading with the anchor #{anchor}")
    return problems


def links_to_twin(text, name, twin):
    if not any(line <= TWIN_WITHIN_LINES and target.partition("#")[0] == twin for line, target in links(text)):
        return [f"{name} does not link to its twin {twin} in its first {TWIN_WITHIN_LINES} lines"]
    return []


def check_pair(english_text, chinese_text, root, stem):
    """Every way the Chinese text stem.zh-CN.md has drifted from its English twin stem.md, one line each."""
    en_name, zh_name = stem + ".md", stem + ZH
    en, zh = english_text, chinese_text
    texts = {en_name: en, zh_name: zh}
    return (compare_code_blocks(en, zh, en_name, zh_name)
            + compare_counts("inline command", inline_commands(en), inline_commands(zh), en_name, zh_name)
            + compare_tables(en, zh, en_name, zh_name)
            + compare_counts("citation", citations(en), citations(zh), en_name, zh_name)
            + compare_counts("file name in backticks", file_names(en), file_names(zh), en_name, zh_name)
            + check_links(en, en_name, texts, root) + check_links(zh, zh_name, texts, root)
            + links_to_twin(en, en_name, zh_name) + links_to_twin(zh, zh_name, en_name))


# --- the repository's pairs ----------------------------------------------------------------

PAIRS = sorted(name[:-len(ZH)] for name in os.listdir(ROOT) if name.endswith(ZH))


def read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def test_there_is_a_chinese_edition():
    assert "EXERCISES" in PAIRS


@pytest.mark.parametrize("stem", PAIRS)
def test_the_chinese_edition_matches_its_english_twin(stem):
    assert os.path.exists(os.path.join(ROOT, stem + ".md")), f"{stem}{ZH} has no English twin {stem}.md"
    problems = check_pair(read(stem + ".md"), read(stem + ZH), ROOT, stem)
    assert not problems, "\n".join(problems)


# --- each check bites: one change to the Chinese text, in memory ----------------------------

def change_code_block(text, stem):
    start = next(FENCE.finditer(text)).start()
    end_of_first_line = text.index("\n", text.index("\n", start) + 1)
    return text[:end_of_first_line] + " -v" + text[end_of_first_line:], "code block 1"


def change_inline_command(text, stem):
    start, end, code = next(span for span in inline_code(text) if span[2].startswith(COMMAND_STARTS))
    changed = code.replace(" ", " -x ", 1)
    return text[:start] + f"`{changed}`" + text[end:], f"inline command {changed!r} appears 1 time(s), 0 in"


def change_table_number(text, stem):
    lines = text.split("\n")
    i, cell = next((i, cell) for _, rows in tables(text) for i, row in rows for cell in row if is_number(cell))
    digit = re.search(r"\d", cell)
    changed = cell[:digit.start()] + str((int(digit.group()) + 1) % 10) + cell[digit.end():]
    parts = split_row(lines[i])
    parts[parts.index(next(p for p in parts if p.strip() == cell))] = f" {changed} "
    lines[i] = "|".join(parts)
    return "\n".join(lines), f"{changed!r} instead of {cell!r}"


def change_citation(text, stem):
    found = CITATION.search(prose(text))
    if found:
        path, line = found.group().rsplit(":", 1)
        changed = f"{path}:{int(line) + 1}"
        return text[:found.start()] + changed + text[found.end():], f"citation {changed!r} appears"
    top = text.index("\n\n")
    return text[:top] + "\n\n见 `speculative.py:1`。" + text[top:], "citation 'speculative.py:1' appears 1 time(s), 0 in"


def change_file_name(text, stem):
    start, end, name = next(span for span in inline_code(text) if FILE_NAME.fullmatch(span[2]))
    return text[:start] + f"`old_{name}`" + text[end:], f"file name in backticks 'old_{name}' appears 1 time(s)"


def break_link(text, stem):
    line, target = links(text)[-1]
    cut = max(target.rfind("/"), target.rfind("#")) + 1
    broken = target[:cut] + "missing-" + target[cut:]
    lines = text.split("\n")
    lines[line - 1] = lines[line - 1].replace(f"({target})", f"({broken})", 1)
    return "\n".join(lines), f"{stem}{ZH}, line {line}: link {broken!r}"


def drop_twin_link(text, stem):
    return re.sub(r"\[[^\]]*\]\(" + re.escape(stem + ".md") + r"\)", "", text, count=1), "does not link to its twin"


MUTATIONS = [change_code_block, change_inline_command, change_table_number, change_citation, change_file_name,
             break_link, drop_twin_link]


@pytest.mark.parametrize("mutate", MUTATIONS, ids=[m.__name__ for m in MUTATIONS])
@pytest.mark.parametrize("stem", PAIRS)
def test_the_checker_notices_a_change_in_the_chinese_text(stem, mutate):
    english, chinese = read(stem + ".md"), read(stem + ZH)
    try:
        changed, expected = mutate(chinese, stem)
    except StopIteration:
        pytest.skip(f"{stem}{ZH} has nothing {mutate.__name__} could change")
    assert changed != chinese
    problems = check_pair(english, changed, ROOT, stem)
    assert any(expected in problem and f"{stem}{ZH}" in problem for problem in problems), \
        f"{mutate.__name__}: expected a problem containing {expected!r}, got:\n" + "\n".join(problems)


def test_anchors_follow_github_headings(tmp_path):
    (tmp_path / "X.md").write_text("")
    (tmp_path / "X.zh-CN.md").write_text("")
    english = "# Title\n[中文版](X.zh-CN.md)\n\n## Part 3: speculative sampling\n[up](#part-3-speculative-sampling)\n"
    chinese = "# 标题\n[English](X.md)\n\n## 第 3 部分：投机采样（speculative sampling）\n"
    assert check_pair(english, chinese + "[上](#第-3-部分投机采样speculative-sampling)\n", tmp_path, "X") == []
    assert check_pair(english, chinese + "[上](X.md#part-3-speculative-sampling)\n", tmp_path, "X") == []
    assert check_pair(english, chinese + "[上](#第-3-部分)\n", tmp_path, "X") == [
        "X.zh-CN.md, line 5: link '#第-3-部分': X.zh-CN.md has no heading with the anchor #第-3-部分"]
