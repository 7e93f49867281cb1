"""The page's drawings of the newer beyond/ methods (each its family's, workbench/methods/): each round drawn from its
own record, every number in the drawing the record's, every token escaped. test_report.py has the page as a whole."""

import html
import re
import unicodedata

import numpy as np
import pytest

from workbench import methods
from workbench.methods.sampling import step_digits
from workbench.methods.text import SUFFIX_WINDOW
from workbench.page import report
from workbench.page.tokens import probability, svg_label
from beyond.block_verification import BlockDetails, block_sample
from beyond.self_speculative import LayersDetails, self_speculative_generate
from beyond.suffix import SuffixDetails
from beyond.tree_sampling import SampledTreeDetails
from stats import Stats
from test_report import ATTRIBUTES, NASTY, Page, assert_self_contained, read_page, runs  # noqa: F401 (runs: a fixture)
from weights.tokenizer import encode, load_tokenizer

PROMPT = "the cat and the dog"


@pytest.fixture(scope="module")
def enc(tiny_dirs):
    return load_tokenizer(tiny_dirs["oracle"])


def traced_run(method, generate, enc, settings, models=None, prompt=PROMPT):
    from stats import Stats
    ids, stats = encode(enc, prompt), Stats(trace=[])
    tokens = list(generate(ids, stats))
    return report.Run(prompt, ids, tokens, stats, methods.get(method), settings, models or {"oracle": "tiny oracle"}, 0.5,
                      enc.decode_single_token_bytes)


def assert_escaped(text, parsed):
    assert not parsed.problems, parsed.problems[:5]
    assert_self_contained(text, parsed)
    assert "<script" not in text and "&lt;script&gt;alert('x')&lt;/script&gt;" in text
    raw = {c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"} | ({"\u202e"} & set(text))
    assert not raw, raw
    assert {name for e in parsed.elements for name in e["attrs"]} <= ATTRIBUTES


# ---------------------------------------------------------------------------
# beyond/: each method's own picture of a round
# ---------------------------------------------------------------------------

def inside(parsed, outer, tag=None, cls=None):
    """The elements within `outer`, in page order, optionally of one tag and one class."""
    return [e for e in parsed.elements if any(a is outer for a in e["ancestors"])
            and (tag is None or e["tag"] == tag) and (cls is None or cls in e["classes"])]


def token_of(parsed, element):  # a rect's <title> (or a chip's title) names its token: "... token 249 ..."
    found = re.search(r"token (\d+)", parsed.text(element) if element["tag"] == "rect" else element["attrs"]["title"])
    return int(found.group(1))


def test_tree_sampling_draws_the_tree_every_check_and_the_last_token(runs, tmp_path):
    run = runs("tree-sps")
    trace = run.stats.trace
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    assert_self_contained(text, parsed)
    figures = parsed.having("sampled-tree", "svg")
    assert len(figures) == len(trace) and not parsed.having("tree", "ul")  # the SVG tree replaces the greedy tree's list
    endings = set()
    for svg, r in zip(figures, trace):
        d = r.details
        checks = [(c, check) for v in d.visits for c, check in zip(v["children"], v["checks"])]
        rejected = [r.drafted[c] for c, check in checks if not check["accepted"]]
        # the accepted path, in order, its tokens the round's accepted drafts
        path = inside(parsed, svg, "rect", "node-path")
        assert [token_of(parsed, e) for e in path] == [r.drafted[i] for i in d.path] == r.new[:-1]
        assert all(parsed.text(e).startswith(f"token {token_of(parsed, e)}: kept by its test r < min(1, q") for e in path)
        assert len(inside(parsed, svg, "line", "edge-on")) == len(d.path) + 1  # root -> path -> the last token
        # every rejected child marked so, with the target it met (q, then the residuals q', q'', ...)
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-rejected")] == rejected
        assert all(parsed.text(e).startswith(f"token {token_of(parsed, e)}: rejected by its test r < min(1, q")
                   for e in inside(parsed, svg, "rect", "node-rejected"))
        assert len(inside(parsed, svg, "rect", "node-unchecked")) == len(r.drafted) - len(checks)
        # the last token: from the residual after every child was rejected, or the bonus at an accepted leaf
        ending = "node-fix" if d.last["from"] == "residual" else "node-bonus"
        [last] = inside(parsed, svg, "rect", ending)
        assert not inside(parsed, svg, "rect", "node-bonus" if ending == "node-fix" else "node-fix")
        assert token_of(parsed, last) == d.last["token"] == r.new[-1]
        assert ("residual" in parsed.text(last)) == (ending == "node-fix")
        endings.add(ending)
    assert endings == {"node-fix", "node-bonus"}  # the run shows both endings
    assert sum(not c["accepted"] for r in trace for v in r.details.visits for c in v["checks"]) > 0
    # the table under each tree: one row per check, then the last token
    tables = parsed.having("checks", "table")
    assert [len(inside(parsed, t, "tr")) for t in tables] == [
        1 + sum(len(v["checks"]) for v in r.details.visits) + 1 for r in trace]
    assert text.count("&cross; rejected") == sum(not c["accepted"] for r in trace for v in r.details.visits
                                                  for c in v["checks"])
    assert "branched into the draft" not in text  # the greedy tree's rule is not how this tree was made
    assert "resampled" in text and "multi-round rejection" in text


@pytest.mark.parametrize("n_layers", [1, 2])
def test_self_speculative_marks_the_drafts_layers_and_where_verification_starts(oracle, enc, n_layers, tmp_path):
    ids, stats = encode(enc, PROMPT), Stats(trace=[])
    tokens = list(self_speculative_generate(oracle, ids, 20, n_draft=3, n_layers_draft=n_layers, stats=stats))
    run = report.Run(PROMPT, ids, tokens, stats, methods.get("self-speculative"), {"n_draft": 3, "draft_layers": n_layers},
                     {"oracle": "tiny oracle (3 layers of width 64)"}, 0.5, enc.decode_single_token_bytes)
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    n = oracle.n_layer
    figures = parsed.having("layers", "svg")
    assert len(figures) == len(stats.trace) > 1
    for svg, r in zip(figures, stats.trace):
        columns = len(r.drafted) + 1  # the text's newest token, then each draft
        # the oracle's blocks, the first L the draft's, and every column through them
        assert len(inside(parsed, svg, "rect", "blk-draft")) == n_layers
        assert len(inside(parsed, svg, "rect", "blk-oracle")) == n - n_layers
        assert len(inside(parsed, svg, "rect", "lay-draft")) == n_layers * columns
        assert len(inside(parsed, svg, "rect", "lay-oracle")) == (n - n_layers) * columns
        assert f"verification starts at layer {n_layers}," in parsed.text(svg)
        # the draft's early exits propose the drafts; the oracle's choices on top, kept where they agree
        exits = [e for e in inside(parsed, svg, "rect", "exit") if "stack" not in e["classes"]]
        assert [token_of(parsed, e) for e in exits] == r.drafted
        assert sum("ok" in e["classes"] for e in exits) == r.accepted
        tops = [e for e in inside(parsed, svg, "rect", "head") if not {"exit", "stack"} & set(e["classes"])]
        assert [token_of(parsed, e) for e in tops] == r.oracle
    draft_blocks = "block 0" if n_layers == 1 else f"blocks 0\u2013{n_layers - 1}"
    captions = [parsed.text(e) for e in parsed.elements if e["tag"] == "figcaption"]
    assert len(captions) == len(figures) and all(c.startswith(f"The draft is {draft_blocks} of the oracle's {n}, ")
                                                 for c in captions)


@pytest.mark.parametrize("method", ["suffix", "suffix-tree"])
def test_suffix_drafts_show_the_match_and_what_followed_it(runs, method, tmp_path):
    run = runs(method)
    trace = run.stats.trace
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    matched = [r for r in trace if "end" in r.details.match]
    figures = parsed.having("suffix", "figure")
    assert len(figures) == len(matched) >= 5
    full = run.prompt_ids + run.tokens
    for figure, r in zip(figures, matched):
        m, n = r.details.match, r.context_length
        start, end = m["end"] - m["length"] + 1, m["end"]

        def marked(cls):  # {position: token} of the text's tokens marked cls in the strip
            return {int(e["attrs"]["title"].split()[1]): token_of(parsed, inside(parsed, e, "span", "tok")[0])
                    for e in inside(parsed, figure, "span", cls) if "pos" in e["classes"]}
        # the earlier occurrence, the same tokens as the suffix the text ends in
        assert marked("sfx-match") == {i: full[i] for i in range(start, end + 1)}
        assert marked("sfx-end") == {i: full[i] for i in range(n - m["length"], n)}
        assert [full[i] for i in range(start, end + 1)] == full[n - m["length"]:n]
        # every earlier occurrence, as many as the drafter counted, the latest the one drawn
        ends = [e for e in range(m["length"] - 1, n - 1) if full[e - m["length"] + 1:e + 1] == full[n - m["length"]:n]]
        assert len(ends) == m["occurrences"] and max(ends) == end
        occurrences = {i: full[i] for e in ends for i in range(e - m["length"] + 1, e + 1)}
        others = marked("sfx-other")
        assert others == occurrences if n <= SUFFIX_WINDOW else others.items() <= occurrences.items()
        # what followed it, in the text, and in the caption: the draft itself (a line), or the tree's latest line
        follows = marked("sfx-follow")
        assert sorted(follows) == list(range(end + 1, min(end + 1 + len(follows), n))) and follows
        caption = [token_of(parsed, e) for e in inside(parsed, figure, "span", "sfx-follow") if "tok" in e["classes"]]
        if method == "suffix":
            assert caption == r.drafted
            assert [follows[i] for i in sorted(follows)] == r.drafted[:len(follows)]
        else:
            assert [follows[i] for i in sorted(follows)] == caption[:len(follows)]
    assert "longest suffix of the text that occurred earlier" in text


# Hand-made rounds of each beyond/ method whose tokens are the hostile ones (NASTY): every drawing escapes them.

def beyond_run(method, prompt_ids, rounds):
    """A Run of hand-made rounds: (drafted, n accepted, new, oracle choices, details)."""
    stats, tokens, context = Stats(trace=[]), [], len(prompt_ids)
    for drafted, n, new, choices, details in rounds:
        stats.add_round(new, drafted, n, context_length=context, oracle=choices, cached={"draft": None, "oracle": context},
                        details=details)
        tokens += new
        context += len(new)
    return report.Run("a <b> & \"c\"\x07", prompt_ids, tokens, stats, methods.get(method), {"n_draft": 4}, {"oracle": "o <x>"},
                      1.0,
                      NASTY.__getitem__)


HOSTILE_RUNS = {
    "tree-sps": lambda: beyond_run("tree-sps", [10, 3], [(
        [0, 1, 2, 9], 1, [0, 11], [0, 11, None, None, None],
        SampledTreeDetails(parents=[-1, -1, 0, 0], path=[0], probs=[0.5, 0.2, 0.4, 0.3], width=2,
         visits=[{"node": -1, "children": [0, 1], "checks": [
                        {"token": 0, "p": 0.5, "q": 0.6, "accept_prob": 1.0, "r": 0.3, "accepted": True}]},
                    {"node": 0, "children": [2, 3], "checks": [
                        {"token": 2, "p": 0.4, "q": 0.1, "accept_prob": 0.25, "r": 0.7, "accepted": False},
                        {"token": 9, "p": 0.3, "q": 0.0, "accept_prob": 0.0, "r": 0.2, "accepted": False}]}],
         last={"token": 11, "from": "residual", "prob": 0.9}))]),
    "self-speculative": lambda: beyond_run("self-speculative", [10, 3], [(
        [0, 1, 2], 1, [0, 9], [0, 9, 4, 5],
        LayersDetails(n_draft=3, k=3, layers=1, n_layer=2))]),
    # the text 10 0 1 0 1 ends in "0 1", which ended earlier at position 2; after it came 0 1, then (copied on) 0 1
    "suffix": lambda: beyond_run("suffix", [10, 0, 1, 0, 1], [(
        [0, 1, 0, 1], 2, [0, 1, 9], [0, 1, 9, 2, 3],
        SuffixDetails({"length": 2, "end": 2, "occurrences": 1}, min_match=1))]),
}


@pytest.mark.parametrize("method", HOSTILE_RUNS)
def test_the_beyond_drawings_escape_every_token(method):
    run = HOSTILE_RUNS[method]()
    text = report.page(run)
    parsed = Page(text)
    assert_escaped(text, parsed)
    assert sum("onclick" in e["attrs"] for e in parsed.elements) == 2
    svg_text = [parsed.text(e) for e in parsed.elements if e["tag"] == "text"]
    if method == "tree-sps":
        [svg] = parsed.having("sampled-tree", "svg")
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-path")] == [0]
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-rejected")] == [2, 9]
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-fix")] == [11]
        assert "<script>\u2026 \u2713" in svg_text and "\\x00\\x1b\u2026 \u2717" in svg_text and "\\u202e \u2717" in svg_text
    if method == "self-speculative":
        [svg] = parsed.having("layers", "svg")
        assert len(inside(parsed, svg, "rect", "blk-draft")) == 1 and len(inside(parsed, svg, "rect", "blk-oracle")) == 1
        assert len(inside(parsed, svg, "rect", "lay-draft")) == len(inside(parsed, svg, "rect", "lay-oracle")) == 4
        assert "\u2192 <scri\u2026" in svg_text and "<scrip\u2026 \u2713" in svg_text
    if method == "suffix":
        [figure] = parsed.having("suffix", "figure")
        positions = {cls: [int(e["attrs"]["title"].split()[1]) for e in inside(parsed, figure, "span", cls)
                           if "pos" in e["classes"]] for cls in ("sfx-match", "sfx-end", "sfx-follow")}
        assert positions == {"sfx-match": [1, 2], "sfx-end": [3, 4], "sfx-follow": [3, 4]}
        caption = [token_of(parsed, e) for e in inside(parsed, figure, "span", "sfx-follow") if "tok" in e["classes"]]
        assert caption == [0, 1, 0, 1] and "the last 2 tokens are copied on" in text


def test_a_long_texts_suffix_picture_keeps_the_match_and_the_end_and_counts_the_gap():
    # 0 1 2 9, then 120 tokens of 10 11, then 0 1: the match "0 1" ended at position 1, 2 9 10 11 followed it
    prompt = [0, 1, 2, 9] + [10, 11] * 60 + [0, 1]
    run = beyond_run("suffix", prompt, [([2, 9, 10, 11], 0, [3], [3, 9, 9, 9, 9],
                                         SuffixDetails({"length": 2, "end": 1, "occurrences": 1}, min_match=1))])
    parsed = Page(report.page(run))
    [figure] = parsed.having("suffix", "figure")
    [strip] = inside(parsed, figure, "div", "strip")
    positions = {cls: [int(e["attrs"]["title"].split()[1]) for e in inside(parsed, strip, "span", cls)]
                 for cls in ("sfx-match", "sfx-end", "sfx-follow")}
    assert positions == {"sfx-match": [0, 1], "sfx-end": [124, 125], "sfx-follow": [2, 3, 4, 5]}
    n_tokens = len(inside(parsed, strip, "span", "tok"))
    [gap] = inside(parsed, strip, "span", "gap")  # the tokens left out, counted: all 126 are accounted for
    assert n_tokens < len(prompt) and n_tokens + int(parsed.text(gap).split()[1]) == len(prompt)
    assert [token_of(parsed, e) for e in inside(parsed, figure, "span", "sfx-follow") if "tok" in e["classes"]] == \
        [2, 9, 10, 11]


# ---------------------------------------------------------------------------
# Block verification: w along the block, h and r at each prefix, the tests from the end
# ---------------------------------------------------------------------------

def test_block_verification_draws_w_h_r_and_the_tests_from_the_end(related, oracle, enc, tmp_path):
    run = traced_run("sps-block", lambda ids, s: block_sample(related, oracle, ids, 40, n_draft=4,
                                                              rng=np.random.default_rng(0), stats=s),
                     enc, {"n_draft": 4, "seed": 0})
    trace = [r for r in run.stats.trace if r.drafted]
    assert any(r.details.kept < len(r.drafted) for r in trace) and any(r.details.kept == len(r.drafted) for r in trace)
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    figures = parsed.having("block", "svg")
    assert len(figures) == len(trace)
    for svg, r in zip(figures, trace):
        d, k = r.details, len(r.drafted)
        tested = [s for s in d.steps if s["r"] is not None]
        assert len(inside(parsed, svg, "rect", "w-dot")) == k + 1 and len(inside(parsed, svg, "line", "w-line")) == k
        assert len(inside(parsed, svg, "rect", "h-bar")) == k
        assert len(inside(parsed, svg, "rect", "untested")) == k - len(tested) == max(d.kept - 1, 0)
        assert [("pass" in e["classes"]) for e in inside(parsed, svg, "line", "r-tick")] == [s["passed"] for s in tested]
        # each tick sits at its r and each bar's top at its h, on the same scale
        ticks = [float(e["attrs"]["y1"]) for e in inside(parsed, svg, "line", "r-tick")]
        tops = [float(e["attrs"]["y"]) for e in inside(parsed, svg, "rect", "h-bar") if "untested" not in e["classes"]]
        assert all((y_r > y_h) == s["passed"] for y_r, y_h, s in zip(ticks, tops, tested) if abs(y_r - y_h) > 0.2)
        labels = [parsed.text(e) for e in inside(parsed, svg, "text")]
        numbers = [int(m.group(1)) for m in (re.match(r"test (\d+)", t) for t in labels) if m]
        assert sorted(numbers) == list(range(1, len(tested) + 1 + (d.kept == 0)))
        [last] = inside(parsed, svg, "rect", "node-bonus" if d.last["from"] == "bonus" else "node-fix")
        assert token_of(parsed, last) == r.new[-1]
        kept = [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-path")]
        assert kept == r.drafted[:d.kept]
    # each table's last column: q(x) in the q row, the block residual's chance in its own row (a bonus has none)
    tables = [t for t in parsed.having("steps", "table")]
    assert len(tables) == len(run.stats.trace)
    for table, r in zip(tables, run.stats.trace):
        rows = {parsed.text(th): [parsed.text(td) for td in inside(parsed, tr, "td")]
                for tr in inside(parsed, table, "tr") for th in inside(parsed, tr, "th")}
        assert rows["q(x) target"][-1] == probability(r.details.last["q"])
        assert rows["its chance in the block residual"][-1] == (
            probability(r.details.last["prob"]) if r.details.last["from"] == "residual" else "")
        assert rows["q/p"][:-1] == [f"{s['ratio']:.{step_digits(s)}g}" for s in r.details.steps]
    untested = sum(max(r.details.kept - 1, 0) for r in trace)
    assert text.count(">not tested</td>") == text.count(">not tested</text>") == untested  # the table, the drawing
    assert "tested from the end" in text and "first disagreement" not in text
    assert "drawn from the residual max(w q \u2212 p, 0) after the drafts kept" in text  # the text's legend
    assert "(q \u2212 p)+ after a rejection" not in text


def test_block_verification_drawing_escapes_every_token():
    steps = [{"token": 0, "p": 0.5, "q": 0.25, "ratio": 0.5, "w": 0.5, "h": 0.3, "r": None, "passed": None, "kept": True},
             {"token": 9, "p": 0.2, "q": 0.3, "ratio": 1.5, "w": 0.75, "h": 0.4, "r": 0.1, "passed": True, "kept": True},
             {"token": 2, "p": 0.4, "q": 0.1, "ratio": 0.25, "w": 0.19, "h": 0.19, "r": 0.7, "passed": False, "kept": False}]
    run = beyond_run("sps-block", [10, 3], [([0, 9, 2], 2, [0, 9, 4], None,
                                             BlockDetails(steps, 2, {"token": 4, "from": "residual", "prob": 0.5, "q": 0.2,
                                                                     "w": 0.75}))])
    text = report.page(run)
    parsed = Page(text)
    assert_escaped(text, parsed)
    [svg] = parsed.having("block", "svg")
    assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-path")] == [0, 9]
    assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "node-fix")] == [4]
    assert "drafts 2 (q/p 1.5) made up for" not in text  # one draft: 'draft 2'
    assert "draft 2 (q/p 1.5) made up for the shortfall of draft 1 (q/p 0.5)" in text


# ---------------------------------------------------------------------------
# Lookahead: the window above the line, the n-grams checked below it, each new n-gram a diagonal
# ---------------------------------------------------------------------------

def box_at(parsed, svg, x, y):
    """The rect of the drawing whose centre is (x, y)."""
    [rect] = [e for e in inside(parsed, svg, "rect") if
              abs(float(e["attrs"]["x"]) + float(e["attrs"]["width"]) / 2 - x) < 0.01 and
              abs(float(e["attrs"]["y"]) + float(e["attrs"]["height"]) / 2 - y) < 0.01]
    return rect


def test_lookahead_draws_the_window_the_checked_ngrams_and_each_new_ngram_as_a_diagonal(oracle, enc, tmp_path):
    from beyond.lookahead import lookahead_generate
    run = traced_run("lookahead", lambda ids, s: lookahead_generate(oracle, ids, 40, W=3, N=4, stats=s), enc, {"N": 4},
                     prompt=PROMPT + " " + PROMPT)  # the prompt twice: the pool finds n-grams to check
    trace = run.stats.trace
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    figures = parsed.having("lookahead", "svg")
    assert len(figures) == len(trace)
    whole = run.prompt_ids + run.tokens
    n_diagonals = 0
    for svg, r in zip(figures, trace):
        d = r.details
        assert len(inside(parsed, svg, "rect", "la-guess")) == sum(len(level) for level in d.window)
        assert len(inside(parsed, svg, "rect", "la-other")) == sum(len(c) for g, c in enumerate(d.candidates) if g != d.best)
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "la-ok")][:r.accepted] == r.new[:r.accepted]
        lines = inside(parsed, svg, "line", "ngram")
        assert len(lines) == len(d.ngrams) * len(d.window)
        for c, ngram in enumerate(d.ngrams):  # the diagonal's boxes, from the bottom up, hold the n-gram's tokens
            segment = lines[c * len(d.window):(c + 1) * len(d.window)]
            ends = [(float(e["attrs"]["x1"]), float(e["attrs"]["y1"])) for e in segment]
            ends.append((float(segment[-1]["attrs"]["x2"]), float(segment[-1]["attrs"]["y2"])))
            held = []
            for x, y in ends:
                rect = box_at(parsed, svg, x, y)
                held.append(whole[r.context_length - 1] if "node-root" in rect["classes"] else token_of(parsed, rect))
            assert held == ngram
            n_diagonals += 1
    assert n_diagonals and any(r.details.candidates for r in trace) and any(r.accepted for r in trace)
    assert "Jacobi" in text and "first disagreement" in text


# ---------------------------------------------------------------------------
# Trees sampled without replacement: tree-sps's record, their own rule on the page
# ---------------------------------------------------------------------------

def test_a_tree_sampled_without_replacement_is_read_by_its_own_rule(related, oracle, enc):
    from beyond.tree_sampling import tree_sample_generate
    from beyond.tree_without_replacement import tree_sample_wor_generate
    pages = {}
    for method, generate in (("tree-sps", tree_sample_generate), ("tree-sps-wor", tree_sample_wor_generate)):
        run = traced_run(method, lambda ids, s: generate(related, oracle, ids, 30, n_draft=3, width=2,
                                                         rng=np.random.default_rng(1), stats=s), enc, {"n_draft": 3})
        pages[method] = (run, report.page(run))
    run, text = pages["tree-sps-wor"]
    assert "drawn without replacement (siblings all different)" in text and "Sequoia" in text
    assert "i.i.d." not in text.split("<h2>Rounds</h2>")[1]
    # every check after a rejection at its node says the draft's p changed too: p', p'', ... beside q', q'', ...
    n_after = sum(i for r in run.stats.trace for v in r.details.visits for i in range(len(v["checks"])))
    assert n_after and text.count("<td>p\u2032</td>") == sum(
        1 for r in run.stats.trace for v in r.details.visits for i in range(len(v["checks"])) if i == 1)
    for r in run.stats.trace:  # and its siblings are indeed all different
        for v in r.details.visits:
            tokens = [r.drafted[c] for c in v["children"]]
            assert len(set(tokens)) == len(tokens)
    run, text = pages["tree-sps"]
    assert "drawn i.i.d." in text and "without replacement" not in text and "<td>p\u2032</td>" not in text


# ---------------------------------------------------------------------------
# Medusa: one state, a column of candidates per head, the oracle's choices along the kept branch
# ---------------------------------------------------------------------------

def test_medusa_draws_each_heads_candidates_and_the_oracles_choices(oracle, enc, tmp_path):
    from beyond.medusa import medusa_generate
    from test_medusa import copying_heads
    run = traced_run("medusa", lambda ids, s: medusa_generate(copying_heads(oracle), oracle, ids, 30, widths=(3, 2, 2),
                                                              stats=s), enc, {"n_draft": 3}, prompt="the the the the")
    report.write_page(str(tmp_path / "page.html"), run)
    text, parsed = read_page(tmp_path / "page.html")
    rounds = [r for r in run.stats.trace if r.drafted]
    figures = parsed.having("medusa", "svg")
    assert len(figures) == len(rounds) and len(parsed.having("tree", "ul")) == len(rounds)
    for svg, r in zip(figures, rounds):
        d = r.details
        widths = (3, 2, 2)[:d.k]
        boxes = [e for e in inside(parsed, svg, "rect") if {"cand-kept", "cand-reached", "cand-off"} & set(e["classes"])]
        assert len(boxes) == sum(widths)  # each head's candidates once, not once per parent
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "cand-kept")] == [r.drafted[i] for i in d.path]
        choices = [e for e in inside(parsed, svg, "rect") if "head" in e["classes"]]
        assert [token_of(parsed, e) for e in choices] == r.new  # the kept tokens, then the oracle's own
        assert "fix" in choices[-1]["classes"] or "bonus" in choices[-1]["classes"]
    assert any(r.details.path for r in rounds) and "no draft model" in text.lower()
    assert len(parsed.having("histogram", "svg")) == 1 and "a tree hedges" in text  # a tree's histogram


# ---------------------------------------------------------------------------
# The trained early exit: self-speculative's picture, the adapter in the exit
# ---------------------------------------------------------------------------

def test_the_trained_exit_shows_its_adapter_and_the_untrained_one_does_not(oracle, enc):
    from beyond.early_exit import early_exit_generate
    from beyond.self_speculative import self_speculative_generate
    from test_early_exit import random_adapter
    runs = {"early-exit": traced_run("early-exit", lambda ids, s: early_exit_generate(random_adapter(oracle, exit_layer=1),
                                                                                     oracle, ids, 12, stats=s), enc, {}),
            "self-speculative": traced_run("self-speculative", lambda ids, s: self_speculative_generate(
                oracle, ids, 12, n_layers_draft=1, stats=s), enc, {})}
    for method, run in runs.items():
        trained = method == "early-exit"
        text, parsed = report.page(run), Page(report.page(run))
        svgs = parsed.having("layers", "svg")
        assert len(svgs) == len(run.stats.trace)
        exits = [parsed.text(e) for svg in svgs for e in inside(parsed, svg, "text") if "exit" in parsed.text(e)]
        assert exits.count("exit: adapter, ln_f, head") == (len(svgs) if trained else 0)
        assert ("Kangaroo" in text) == trained and ("the adapter, ln_f and the LM head" in text) == trained
        for r in run.stats.trace:
            why = " | ".join(run.method.shown.reasons(r, lambda t: " ".join(map(str, t))))
            assert ("the early exit after block 0 is trained" in why) == trained


# ---------------------------------------------------------------------------
# EAGLE: its rounds are a line's (or SpS's); the registry's drafter gives the picture of the feature chain
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["eagle", "eagle-sps"])
def test_eagle_draws_the_chain_of_guessed_features_and_drafts(oracle, enc, method):
    from beyond.eagle import eagle_generate, eagle_sample
    from test_eagle import random_head
    head = random_head(oracle)
    generate = (lambda ids, s: eagle_generate(head, oracle, ids, 30, n_draft=3, stats=s)) if method == "eagle" else \
        (lambda ids, s: eagle_sample(head, oracle, ids, 30, n_draft=3, rng=np.random.default_rng(0), stats=s))
    run = traced_run(method, generate, enc, {"n_draft": 3})
    text, parsed = report.page(run), Page(report.page(run))
    assert not parsed.problems
    rounds = [r for r in run.stats.trace if r.drafted]
    figures = parsed.having("eagle", "svg")
    assert len(figures) == len(rounds) and "There is no draft model: the drafts come from the EAGLE head" in text
    whole = run.prompt_ids + run.tokens
    for svg, r in zip(figures, rounds):
        boxes = [e for e in inside(parsed, svg, "rect") if {"cand-kept", "cand-reached", "cand-off"} & set(e["classes"])]
        fed, drafts = boxes[0::2], boxes[1::2]  # per column: the token in, then the draft out
        assert [token_of(parsed, e) for e in drafts] == r.drafted
        assert [token_of(parsed, e) for e in inside(parsed, svg, "rect", "cand-kept")] == r.drafted[:r.accepted]
        labels = [parsed.text(e) for e in inside(parsed, svg, "text")]
        assert len(fed) == len(r.drafted) and labels.count("true f (oracle)") == 1
        assert len(inside(parsed, svg, "line", "feeds")) == 2 * (len(r.drafted) - 1)
        assert labels.count("kept \u2713") == r.accepted
        newest = page_label(run, whole[r.context_length - 1])
        assert newest in labels
    run.method = methods.get("speculative")  # the same rounds under a method without the head: no chain drawn
    assert 'class="eagle"' not in report.page(run)


def page_label(run, token):  # a token as an SVG label reads, once parsed
    return html.unescape(svg_label(run, token, 9))


# Hand-made rounds whose tokens are the hostile ones (test_report.NASTY): every new drawing escapes them.

def hostile_lookahead():
    from beyond.lookahead import LookaheadDetails
    window = [[1, 2], [9, 3, 0], [4, 5, 6]]
    return beyond_run("lookahead", [10, 0], [([0, 9, 2], 1, [0, 11], [0, 11, 1, 2],
                                              LookaheadDetails(window, [[1, 2, 3], [0, 9, 2]], 1, [[0, 9, 4, 7]], 12, W=3,
                                                               N=4, pool_size=1, left=5))])


def hostile_medusa():
    from beyond.medusa import MedusaDetails
    return beyond_run("medusa", [10, 3], [([0, 9, 2, 1], 1, [0, 11], [0, 11, 5, 6, 7],
                                           MedusaDetails(parents=[-1, -1, 0, 0], path=[0], probs=[0.5, 0.2, 0.4, 0.3],
                                                         n_draft=2, k=2, widths=[2, 2]))])


def hostile_eagle():
    from stats import Line
    return beyond_run("eagle", [10, 3], [([0, 9, 2], 1, [0, 11], [0, 11, 5, 6], Line(3, 3))])


@pytest.mark.parametrize("make", [hostile_lookahead, hostile_medusa, hostile_eagle], ids=lambda f: f.__name__)
def test_the_new_drawings_escape_every_token(make):
    run = make()
    text = report.page(run)
    parsed = Page(text)
    assert_escaped(text, parsed)
    svg_text = [parsed.text(e) for e in parsed.elements if e["tag"] == "text"]
    assert any(t.startswith("<script") for t in svg_text)  # the hostile token is drawn, as text
    assert any(t.startswith("\\x00") for t in svg_text) and any("\\u202e" in t for t in svg_text)
