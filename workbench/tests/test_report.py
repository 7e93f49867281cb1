"""workbench/page/report.py: one self-contained page per run, one row per round, every token escaped, and a real
browser renders it: a page for every method of the registry that has rounds to show. Each newer method's own
drawing is workbench/tests/test_page_drawings.py's."""

import os
import re
import unicodedata
from html.parser import HTMLParser

import numpy as np
import pytest

import browser
from processors import Processor
from sps import SpsDetails
from speedup import expected_tokens_per_round, truncated_geometric
from stats import Stats
from weights.tokenizer import encode, load_tokenizer
from workbench import methods, runner
from workbench.page import figures as page_figures, report, tokens as page_tokens
from workbench.settings import Settings

PROMPT = "the cat and the dog"
N_NEW = 40
# Every method with rounds that runs on the tiny pair (the tiny oracle has no trained heads: their pages are
# test_page_drawings.py's, on heads of its own), at these draft lengths and options.
PAGED = [m.name for m in methods.METHODS.values() if m.verifies and m.head is None and m.draft_head is None]
N_DRAFT = {"threshold": 8}  # the others: 4
OPTIONS = {"self-speculative": {"draft_layers": 2}}
TREES = [name for name in PAGED if methods.get(name).shown.tree is not None]  # no prediction from alpha beside them
ATTRIBUTES = {"lang", "charset", "name", "content", "class", "title", "open", "type", "onclick", "viewbox", "width",
              "height", "role", "aria-label", "x", "y", "x1", "y1", "x2", "y2", "stroke", "stroke-width", "text-anchor"}


@pytest.fixture(scope="module")
def enc(tiny_dirs):
    return load_tokenizer(tiny_dirs["oracle"])


@pytest.fixture(scope="module")
def runs(related, oracle, enc):
    """method -> a Run of the tiny models (the noisy copy as the draft, so rounds end everywhere) through the
    registry's route (runner.generator), made once; its settings as the page shows them."""
    made = {}

    def run(method):
        if method not in made:
            m = methods.get(method)
            settings = Settings(method=method, max_new_tokens=N_NEW, n_draft=N_DRAFT.get(method, 4), seed=0,
                                processor=Processor(1.0 if m.samples else 0.0), options=OPTIONS.get(method, {}))
            ids, stats = encode(enc, PROMPT), Stats(trace=[])
            tokens = list(runner.generator(settings, related if m.draft_model else None, oracle, ids, stats,
                                           rng=np.random.default_rng(0)))
            models = {"draft": "tiny related (3 layers, width 64)", "oracle": "tiny oracle (3 layers, width 64)"}
            if not m.draft_model:
                del models["draft"]
            made[method] = report.Run(PROMPT, ids, tokens, stats, m, runner.describe_settings(settings), models, 0.5,
                                      enc.decode_single_token_bytes)
        return made[method]
    return run


# ---------------------------------------------------------------------------
# Reading a page back
# ---------------------------------------------------------------------------

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source", "track", "embed"}


class Page(HTMLParser):
    """Parses a page: whether its tags balance, its elements, their attributes and text."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.open, self.problems, self.elements, self.styles = [], [], [], []
        self.feed(text)
        self.close()
        self.problems += [f"<{e['tag']}> never closed" for e in self.open]

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "classes": (dict(attrs).get("class") or "").split(), "text": [],
                   "ancestors": list(self.open)}
        self.elements.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_startendtag(self, tag, attrs):  # <line ... />
        self.elements.append({"tag": tag, "attrs": dict(attrs), "classes": (dict(attrs).get("class") or "").split(), "text": [],
                              "ancestors": list(self.open)})

    def handle_endtag(self, tag):
        if not self.open or self.open[-1]["tag"] != tag:
            self.problems.append(f"</{tag}> closes <{self.open[-1]['tag'] if self.open else 'nothing'}>")
            return
        self.open.pop()

    def handle_data(self, data):
        for element in self.open:  # every enclosing element gets the text
            element["text"].append(data)
        if self.open and self.open[-1]["tag"] == "style":
            self.styles.append(data)

    def having(self, cls, tag=None):
        return [e for e in self.elements if cls in e["classes"] and (tag is None or e["tag"] == tag)]

    def text(self, element):
        return "".join(element["text"])


def read_page(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parsed = Page(text)
    assert text.startswith("<!DOCTYPE html>") and not parsed.problems, parsed.problems[:5]
    return text, parsed


def assert_self_contained(text, parsed):
    """Nothing is fetched from anywhere: no external script, style, image, frame or font."""
    assert not {"link", "script", "img", "iframe", "object", "embed", "audio", "video", "source", "base"} & {
        e["tag"] for e in parsed.elements}
    for e in parsed.elements:
        assert not {"src", "href", "xlink:href", "srcset", "action", "data", "poster"} & set(e["attrs"]), e
    assert "url(" not in "".join(parsed.styles) and "@import" not in "".join(parsed.styles)
    assert "http://" not in text and "https://" not in text


def shown(text):
    """What the running text should read, computed differently from report.py: the whole byte
    string decoded at once, undecodable bytes and control characters as \\xNN, newlines and tabs kept."""
    def escape(c):
        if unicodedata.category(c) != "Cc" or c in "\n\t":
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}"
    return "".join(escape(c) for c in text)


# ---------------------------------------------------------------------------
# A page for every method
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", PAGED)
def test_a_page_for_each_method(runs, method, tmp_path):
    run = runs(method)
    trace = run.stats.trace
    assert len(trace) == run.stats.rounds > 0
    path = tmp_path / "page.html"
    report.write_page(str(path), run)
    assert os.listdir(tmp_path) == ["page.html"]  # the temporary file is gone
    text, parsed = read_page(path)
    assert_self_contained(text, parsed)

    # One row per round, all open in a short run, each listing the tokens the round added.
    rows = parsed.having("round", "details")
    assert len(rows) == len(trace)
    assert sum("open" in row["attrs"] for row in rows) == (len(trace) if len(trace) <= report.OPEN_ROUNDS else report.OPEN_FIRST)
    summaries = re.findall(r"<summary>.*?</summary>", text, re.S)
    assert len(summaries) == len(trace)
    for summary, r in zip(summaries, trace):
        assert summary.count('class="tok draft"') == r.accepted
        assert summary.count('class="tok') == len(r.new)
        assert f"kept {r.accepted} of {len(r.drafted)}" in summary

    # The text as generated, every token marked by what it was.
    generated = b"".join(run.token_bytes(t) for t in run.tokens).decode("utf-8", errors="backslashreplace")
    [running] = parsed.having("text", "div")
    assert parsed.text(running) == shown(PROMPT + generated)
    drafts = sum(r.accepted for r in trace)
    assert drafts == run.stats.accepted and drafts > 0
    assert len(parsed.having("histogram", "svg")) == 1
    if method not in TREES:
        assert len(parsed.having("predicted", "rect")) == len(parsed.having("measured", "rect")) >= 2

    # Each method's own detail: the setting a round drafted under, beside its number, as the trace prints it.
    if method in ("threshold", "adaptive", "adaptive-hf"):
        key, shown_as = ("threshold", "threshold {:.3g}") if method == "threshold" else ("n_draft", "n_draft {}")
        assert all(shown_as.format(getattr(r.details, key)) in s for s, r in zip(summaries, trace))
    if method == "tree":
        assert len(parsed.having("measured", "rect")) == 4 + 1  # paths of 0 to n_draft nodes
        lists = parsed.having("tree", "ul")
        assert len(lists) == len(trace)
        # the root and every node on the accepted path show the oracle's choice
        assert text.count("&rarr; oracle:") == sum(len(r.details.path) + 1 for r in trace)
        # the text's legend: a tree's correction and bonus, not a line's ("the first disagreement", "every draft")
        [key] = re.findall(r'<ul class="legend">.*?</ul>', text, re.S)
        assert "where none of the children was its choice" in key and "first disagreement" not in key
    if all(r.cached["draft"] is None for r in trace):  # no draft cache (drafts from the text): said so
        assert text.count("draft none") == len(trace) and method != "speculative"
    assert method != "ngram" or "draft none" in text
    if methods.get(method).samples:  # sampled drafts: tests and residuals, never a greedy choice
        words = re.sub(r"<[^>]+>", " ", text)
        assert not re.search(r"oracle's choice|oracle chose|first disagreement|oracle's own token|argmax", words)
        assert "kept by its test r &lt; min(1, q/p)" in text or method == "sps-block"
    if method == "sps-block":  # the histogram's words: the whole block judged at once, not SpS's draft by draft
        [paragraph] = [p for p in re.findall(r"<p>(.*?)</p>", text, re.S) if "&alpha; =" in p]
        assert "never checked" not in paragraph and "judges the whole block at once" in paragraph
        assert "longest prefix whose test r &lt; h passed" in text  # the text's legend for a kept draft


def test_sps_shows_each_step_and_the_residual_at_each_rejection(runs, tmp_path):
    run = runs("sps")
    trace = run.stats.trace
    rejections = [r for r in trace if r.details.resampled is not None]
    bonuses = [r for r in trace if r.details.bonus is not None and r.drafted]
    assert rejections and bonuses  # the run exercises both endings
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    charts = parsed.having("chart", "svg")
    assert len(charts) == len(rejections)
    n_top = sum(len(r.details.resampled["top"]) for r in rejections)
    for bar in ("p", "q", "min", "residual"):
        assert len(parsed.having(bar, "rect")) == n_top
    # the drawn token is always among the tokens shown (sps.explain_round puts it there) and marked in its chart
    assert all(any(e["token"] == r.details.resampled["token"] for e in r.details.resampled["top"])
               for r in rejections)
    assert len(parsed.having("drawn", "rect")) == len(rejections)
    # and so is the rejected draft, the token the residual exists to replace, labelled in the chart and the table
    for r in rejections:
        rejected = r.drafted[r.accepted]
        assert r.details.resampled["rejected"] == rejected
        assert any(e["token"] == rejected for e in r.details.resampled["top"])
        assert len(r.details.resampled["top"]) <= 8
    assert text.count(">rejected draft</text>") == len(rejections)
    assert text.count("(rejected draft)</td>") == len(rejections)
    # every checked position shows its decision, every unchecked one says so
    assert text.count("keep: r &lt; min") == sum(r.accepted for r in trace)
    assert text.count("reject: r &ge; min") == len(rejections)
    assert text.count("not checked") == sum(len(r.drafted) - len(r.details.steps) for r in trace)
    assert text.count("bonus, drawn from q") == len(bonuses)
    assert "q is the target (the oracle), p the draft" in text and "Leviathan et al." in text


# ---------------------------------------------------------------------------
# Escaping: a hand-made run whose tokens are everything a token can be
# ---------------------------------------------------------------------------

CHINESE, EMOJI = "中".encode(), "😀".encode()
NASTY = {
    0: b"<script>alert('x')</script>",
    1: b' & "quoted" \'single\'',
    2: b"\x00\x1b[31m\x7f",
    3: b"\n\t",
    4: CHINESE[:2], 5: CHINESE[2:],                 # one character over two tokens
    6: EMOJI[:1], 7: EMOJI[1:3], 8: EMOJI[3:],      # one over three
    9: "\u202e".encode(),                           # right-to-left override
    10: b" plain",
    11: CHINESE[:1],                                # the text ends in the middle of a character
}


def hand_made_run(rounds, prompt="a <b> & \"c\"\x07"):
    """A Run from (drafted, oracle choices) pairs, verified greedily as speculative.py does."""
    stats, tokens, context = Stats(trace=[]), [], 3
    for drafted, choices in rounds:
        n = next((i for i, (d, c) in enumerate(zip(drafted, choices)) if d != c), len(drafted))
        new = drafted[:n] + [choices[n]]
        stats.add_round(new, drafted, n, context_length=context, oracle=choices, cached={"draft": context + len(new) - 1,
                                                                                    "oracle": context + len(new) - 1})
        tokens += new
        context += len(new)
    return report.Run(prompt, [0, 1, 2], tokens, stats, methods.get("speculative"), {"n_draft": 3}, {"oracle": "o & p", "draft": "d <x>"},
                      1.0, NASTY.__getitem__)


NASTY_ROUNDS = [([0, 1, 2], [0, 1, 3, 5]),   # kept 0, 1, then the correction 3
                ([4, 5], [4, 5, 6]),         # both kept, 6 the bonus
                ([], [7]),                   # nothing drafted
                ([8, 9, 10], [8, 9, 2, 4]),  # kept 8, 9, then the correction 2
                ([11], [10, 11]),            # wrong at once: the correction 10
                ([], [11])]                  # nothing drafted; the text ends in half a character


def test_every_token_is_escaped_and_split_characters_show_whole(tmp_path):
    run = hand_made_run(NASTY_ROUNDS)
    assert run.tokens == [0, 1, 3, 4, 5, 6, 7, 8, 9, 2, 10, 11]
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    assert "<script" not in text and "&lt;script&gt;alert('x')&lt;/script&gt;" in text
    # no control character and no bidi override reaches the page as itself
    raw = {c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"} | ({"\u202e"} & set(text))
    assert not raw, raw
    # attributes are ours only: a quote in a token cannot open a new one
    names = {name for e in parsed.elements for name in e["attrs"]}
    assert names <= ATTRIBUTES, names
    assert sum("onclick" in e["attrs"] for e in parsed.elements) == 2  # the open/close buttons

    # The running text: whole characters where tokens split them, the bytes left over at the end as \\xNN.
    [running] = parsed.having("text", "div")
    assert parsed.text(running) == ('a <b> & "c"\\x07' + "<script>alert('x')</script>" + ' & "quoted" \'single\'' + "\n\t"
                                    + "中😀" + "\\u202e" + "\\x00\\x1b[31m\\x7f" + " plain" + "\\xe4")

    # In the rounds each token is a chip: split characters show their bytes, whitespace a mark.
    chips = {e["attrs"]["title"]: parsed.text(e) for e in parsed.elements if "tok" in e["classes"]}
    assert chips["token 4"] == "\\xe4\\xb8" and chips["token 5"] == "\\xad"
    assert chips["token 6"] == "\\xf0" and chips["token 7"] == "\\x9f\\x98" and chips["token 8"] == "\\x80"
    assert chips["token 3"] == "\u21b5\u2192" and chips["token 10"] == "\u2423plain"
    assert chips["token 9"] == "\\u202e" and chips["token 2"] == "\\x00\\x1b[31m\\x7f"
    assert chips["token 1"] == '\u2423&\u2423"quoted"\u2423\'single\''
    assert parsed.text(parsed.having("prompt", "td")[0]) == 'a <b> & "c"\\x07'
    assert "draft: d &lt;x&gt;<br>oracle: o &amp; p" in text  # the draft first, whatever the dict's order


def test_the_sps_chart_escapes_its_labels():
    # One SpS round by hand: draft 0 rejected, token 2 drawn from the residual; the chart's labels are SVG text.
    stats = Stats(trace=[])
    top = [{"token": t, "p": p, "q": q, "min": min(p, q), "residual": res}
           for t, p, q, res in ((0, 0.6, 0.2, 0.0), (2, 0.1, 0.5, 0.8), (1, 0.05, 0.15, 0.2))]
    stats.add_round([2], [0], 0, context_length=3, cached={"draft": 3, "oracle": 3}, details=SpsDetails(
        1, 1, steps=[{"token": 0, "p": 0.6, "q": 0.2, "accept_prob": 1 / 3, "r": 0.5, "accepted": False}],
        resampled={"token": 2, "top": top}))
    run = report.Run("x", [0, 1, 2], [2], stats, methods.get("sps"), {"n_draft": 1}, {"oracle": "o"}, 1.0, NASTY.__getitem__)
    parsed = Page(report.page(run))
    assert not parsed.problems
    [chart] = parsed.having("chart", "svg")
    labels = [parsed.text(e) for e in parsed.elements if e["tag"] == "text" and any(a is chart for a in e["ancestors"])]
    # each label cut to 10 characters and an ellipsis (the table under the chart has them whole)
    assert labels == ["<script>al\u2026", "\\x00\\x1b[3\u2026", "drawn", "\u2423&\u2423\"quoted\u2026"]
    assert len(parsed.having("drawn", "rect")) == 1


def test_kinds_in_the_text_follow_the_rounds():
    run = hand_made_run(NASTY_ROUNDS)
    parsed = Page(report.page(run))
    [running] = parsed.having("text", "div")
    spans = [e for e in parsed.elements if any(a is running for a in e["ancestors"])
             and e["classes"] and e["classes"][0] in page_tokens.MARKS]
    # Token 4 completes no character: the accepted draft 5 after it shows the whole of it. Tokens 6 (a bonus)
    # and 7 (the oracle's, nothing drafted) complete none either: the accepted draft 8 shows the emoji.
    assert [(e["classes"][0], parsed.text(e)) for e in spans] == [
        ("draft", "<script>alert('x')</script>"), ("draft", ' & "quoted" \'single\''), ("fix", "\n\t"), ("draft", "中"),
        ("draft", "😀"), ("draft", "\\u202e"), ("fix", "\\x00\\x1b[31m\\x7f"), ("fix", " plain"), ("oracle", "\\xe4")]


# ---------------------------------------------------------------------------
# The numbers of the histogram
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("k", range(1, 7))
def test_the_prediction_is_a_distribution_with_the_papers_mean(alpha, k):
    p = truncated_geometric(alpha, k)
    assert len(p) == k + 1 and sum(p) == pytest.approx(1)
    assert sum((i + 1) * pi for i, pi in enumerate(p)) == pytest.approx(expected_tokens_per_round(alpha, k))
    assert p[k] == pytest.approx(alpha ** k) and all(p[i] == pytest.approx(alpha ** i * (1 - alpha)) for i in range(k))


def test_the_histogram_counts_rounds_and_measures_alpha_per_checked_draft():
    rounds = [([1, 2, 3, 4], [1, 2, 3, 4, 5]),  # 4 of 4
              ([1, 2, 3, 4], [9, 9, 9, 9, 9]),  # 0 of 4
              ([1, 2, 3, 4], [1, 2, 9, 9, 9]),  # 2 of 4
              ([1, 2], [1, 9, 9]),              # 1 of 2
              ([], [9])]                        # nothing drafted: not counted
    alpha, measured, predicted = page_figures.acceptance_histogram(hand_made_run(rounds).stats.trace)
    assert alpha == 7 / (7 + 3)  # 7 kept, 3 rejections
    assert measured == [1, 1, 1, 0, 1]
    four, two = truncated_geometric(alpha, 4), truncated_geometric(alpha, 2)
    assert predicted == pytest.approx([3 * four[i] + (two[i] if i < 3 else 0) for i in range(5)])
    assert sum(predicted) == pytest.approx(4)


# ---------------------------------------------------------------------------
# Large runs and writing
# ---------------------------------------------------------------------------

def test_a_long_run_stays_small_and_collapsed(tmp_path):
    rng = np.random.default_rng(0)
    rounds = []
    for _ in range(350):
        drafted = [10] * 4
        n = int(rng.integers(0, 5))
        rounds.append((drafted, [10] * n + [1] * (5 - n)))
    run = hand_made_run(rounds, prompt="long")
    assert run.stats.rounds == 350
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    rows = parsed.having("round", "details")
    assert len(rows) == report.MAX_ROUNDS < 350
    assert sum("open" in row["attrs"] for row in rows) == report.OPEN_FIRST
    assert f"{350 - report.MAX_ROUNDS} more rounds (rounds {report.MAX_ROUNDS + 1} to 350) are left out" in text
    assert "350 rounds" in text and sum(page_figures.acceptance_histogram(run.stats.trace)[1]) == 350  # all counted
    assert len(text.encode()) < 600_000


def test_writing_is_atomic_and_errors_are_one_line(tmp_path, monkeypatch):
    run = hand_made_run(NASTY_ROUNDS)
    path = tmp_path / "page.html"
    path.write_text("old page")
    report.write_page(str(path), run)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>") and os.listdir(tmp_path) == ["page.html"]

    with pytest.raises(report.ReportError, match=r"cannot write the page to .*missing/page.html: No such file or directory"):
        report.write_page(str(tmp_path / "missing" / "page.html"), run)
    (tmp_path / "a directory").mkdir()
    with pytest.raises(report.ReportError, match="is a directory"):  # weights/files.py refuses it before writing
        report.write_page(str(tmp_path / "a directory"), run)
    assert sorted(os.listdir(tmp_path)) == ["a directory", "page.html"] and not os.listdir(tmp_path / "a directory")

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")
    path.write_text("old page")
    monkeypatch.setattr(report.files.os, "replace", full_disk)
    with pytest.raises(report.ReportError, match="No space left on device"):
        report.write_page(str(path), run)
    assert path.read_text() == "old page" and sorted(os.listdir(tmp_path)) == ["a directory", "page.html"]


# ---------------------------------------------------------------------------
# A real browser
# ---------------------------------------------------------------------------

DRAFT_GREEN = (0xBD, 0xEC, 0xBD)  # workbench/page/style.py's .draft background


@pytest.mark.skipif(browser.find_chromium() is None, reason=browser.MISSING)
def test_chromium_renders_the_page(runs, tmp_path):
    run = runs("sps")
    page_path = tmp_path / "page.html"
    report.write_page(str(page_path), run)
    png = browser.screenshot(page_path, tmp_path / "page.png", width=1280, height=2000)
    pixels = browser.read_png(png)
    assert pixels.shape[:2] == (2000, 1280)
    colours = browser.colours(png)
    white = colours.get((255, 255, 255), 0)
    assert len(colours) > 50 and white < 0.97 * 1280 * 2000  # not a blank page
    assert colours.get(DRAFT_GREEN, 0) > 500  # the style sheet was applied: accepted drafts are green
    dom = browser.dump_dom(page_path)
    assert dom.count('<details class="round"') == run.stats.rounds
    assert f"Round {run.stats.rounds}" in dom and "Accepted drafts per round" in dom
