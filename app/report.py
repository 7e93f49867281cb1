"""--html FILE: one run on one self-contained page, round by round.

    python speculative.py "The meaning of life is" --method sps --html run.html

The page is a single HTML file: inline CSS and SVG, no script or font from
anywhere else, readable offline, on a projector and on paper. From the top:
  - the prompt, the models, the method and its settings, the speed, and the
    text with every token marked: an accepted draft, the oracle's correction,
    or the bonus token;
  - a histogram of the drafts accepted per round beside what a constant
    acceptance probability alpha predicts;
  - one row per round: what the draft proposed and what the oracle chose at
    each position (for SpS p(x), q(x), r and the decision, and at a rejection
    the residual it drew from), what was kept, and the caches after the rollback;
    and each method's own picture of the round: the tree of sampled drafts with
    every child checked (tree speculative sampling, with or without replacement),
    the oracle's blocks with the draft's first L marked (self-speculative, the
    trained exit's adapter named), the earlier match in the text and what
    followed it (suffix drafts), the weights w along the block with each
    prefix's test (block verification), the Jacobi window and the n-grams checked
    in the same pass (lookahead), the heads' candidates and the oracle's choices
    (Medusa), the chain of guessed features (EAGLE).

Its pieces are in app/page/: the tokens (escaped, visible, marked), the
figures (figures.py; block.py, lookahead.py and heads.py for the newer
methods), the stylesheet; and the real-text benchmark's own page.
"""

import codecs
import html
from collections import Counter
from dataclasses import dataclass

from app import display, methods
from app.page.figures import (acceptance_histogram, histogram_svg, layers_figure, residual_figure,
                              sampled_tree_figure, suffix_figure)
from app.page.block import block_table
from app.page.heads import eagle_figure, medusa_figure
from app.page.lookahead import lookahead_figure
from app.page.style import CSS
from app.page.tokens import (LETTERS, MARKS, SAMPLING_MARKS, as_html, chip, chips, last_mark, plural, probability,
                             round_marks, token_marks, visible)
from errors import UserError
from speedup import expected_tokens_per_round
from weights import files

MAX_ROUNDS = 200   # rounds shown; the histogram and the numbers at the top still count every round
OPEN_ROUNDS = 20   # a run with at most this many rounds shows them all open, a longer one its first OPEN_FIRST
OPEN_FIRST = 5


class ReportError(UserError):
    """The page cannot be written (no such directory, a directory in the way, a full disk)."""


@dataclass
class Run:
    """Everything the page shows about one generation."""
    prompt: str               # the prompt text as the user gave it
    prompt_ids: list          # its token ids
    tokens: list              # the generated token ids
    stats: object             # a decoding.Stats, with stats.trace = a list of decoding.Round, one per round
    method: str               # a name in app/methods.py: "speculative", "sps", "tree", "suffix", ...
    settings: dict            # e.g. {"n_draft": 4} or {"n_draft": 4, "processor": "topk 20, temperature 0.8", "seed": 0}
    models: dict              # {"draft": "gpt2 (12 layers, width 768)", "oracle": "..."}; no draft for ngram
    elapsed: float            # seconds of generation
    token_bytes: callable     # token id -> bytes (tiktoken's enc.decode_single_token_bytes)


def write_page(path, run):
    """Write page(run) to path atomically: a reader never sees half a page, and a failed write
    leaves no temporary file and an older page at path as it was.

    (files.write_text: a temporary file of this writer's own beside path, then a rename.)
    """
    text = page(run)
    try:
        files.write_text(path, text)
    except (OSError, files.WriteError) as e:  # WriteError: a directory, link or device in the way
        raise ReportError(f"cannot write the page to {path}: {getattr(e, 'strerror', None) or e}") from None


def page(run):
    """The whole page as one HTML string."""
    trace = run.stats.trace or []
    title = f"Speculative decoding: {run.method}"
    return "\n".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>",
        f"<h1>{html.escape(title)}</h1>",
        header(run),
        text_section(run, trace),
        histogram_section(run.method, trace),
        rounds_section(run, trace),
        "</body>\n</html>\n"])


def sampling(method):
    """True for a method that verifies sampled drafts (its tokens are kept or resampled, app/methods.py)."""
    m = methods.METHODS.get(method)
    return bool(m and m.samples and m.verifies)


# ---------------------------------------------------------------------------
# The top: what ran, how fast, and the text
# ---------------------------------------------------------------------------

def header(run):
    stats = run.stats
    prompt = as_html(visible(run.prompt, in_token=False)) if run.prompt else "(empty: the text starts from &lt;|endoftext|&gt;)"
    settings = ", ".join(f"{html.escape(str(k))} = {html.escape(str(v))}" for k, v in run.settings.items())
    roles = [r for r in ("draft", "oracle") if r in run.models] + [r for r in run.models if r not in ("draft", "oracle")]
    models = "<br>".join(f"{html.escape(role)}: {html.escape(str(run.models[role]))}" for role in roles)
    speed = stats.n_generated / run.elapsed if run.elapsed > 0 else 0.0
    cards = [(f"{speed:.1f}", "tokens/s", f"{stats.n_generated} tokens in {run.elapsed:.2f} s"),
             (f"{stats.kept_fraction:.0%}", "acceptance", f"{stats.accepted} of {stats.drafted} drafts accepted"),
             (f"{stats.n_generated / max(stats.oracle_passes, 1):.2f}", "tokens per oracle pass",
              f"{stats.n_generated} tokens in {stats.oracle_passes} passes")]
    return (f'<table class="facts">\n<tr><th>prompt</th><td class="prompt">{prompt}</td></tr>\n'
            f"<tr><th>models</th><td>{models}</td></tr>\n"
            f"<tr><th>method</th><td><b>{html.escape(run.method)}</b>{' (' + settings + ')' if settings else ''}</td></tr>\n"
            f"<tr><th>time</th><td>draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s, "
            f"generation {run.elapsed:.2f} s</td></tr>\n</table>\n"
            '<div class="cards">' + "".join(f'<div class="card"><b>{big}</b>{what}<small>{note}</small></div>'
                                            for big, what, note in cards) + "</div>")


def legend(method, marks, samples=None, kinds=()):
    """The marks' key; kinds: the kinds of the rounds that drafted (each names its own ending where it differs)."""
    samples = sampling(method) if samples is None else samples
    texts = {**MARKS, **(SAMPLING_MARKS if samples else {})}
    if "block" in kinds:  # block verification judges the block at once; its last token comes from its own residual
        texts["draft"] = ("accepted draft", "sampled from the draft's p, kept in the longest prefix whose test r < h passed")
        texts["fix"] = ("resampled", "drawn from the residual max(w q \u2212 p, 0) after the drafts kept")
    if "tree-sps" in kinds:  # a tree's tests meet residuals after a sibling's rejection, and so does its last token
        texts["draft"] = ("accepted draft", "sampled from the draft's p, kept by its test r < min(1, q/p) (q\u2032, "
                                            "q\u2033, ... after a sibling's rejection)")
        texts["fix"] = ("resampled", "drawn from the residual left after every child of the node reached was rejected")
        texts["bonus"] = ("bonus", "a leaf was kept: one more token drawn from q")
    if kinds and set(kinds) <= {"tree", "suffix-tree", "medusa"}:  # greedy trees: the walk follows the oracle's choices
        texts["fix"] = ("correction", "the oracle's own token where none of the children was its choice")
        texts["bonus"] = ("bonus", "the kept path ended at a leaf: the oracle's next token comes with the same pass")
    letters = f"<li>{html.escape(LETTERS)}</li>" if samples else ""
    return ('<ul class="legend">' + "".join(f'<li><span class="{mark}">{texts[mark][0]}</span> {html.escape(texts[mark][1])}</li>'
                                            for mark in MARKS if mark in marks) + letters + "</ul>")


def running_text(run, marks):
    """The prompt, then each generated token marked (MARKS).

    An incremental UTF-8 decoder (as display.stream) holds back the bytes of a
    character split over tokens: the token that completes it shows it whole,
    and one that completes nothing shows nothing. Bytes still pending at the
    end are shown as \\xNN.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    parts = [f'<span class="prompt">{as_html(visible(run.prompt, in_token=False))}</span>']
    for i, (token, mark) in enumerate(zip(run.tokens, marks)):
        text = decoder.decode(run.token_bytes(token))
        if i == len(run.tokens) - 1:
            text += decoder.decode(b"", final=True)
        if text:
            parts.append(f'<span class="{mark}">{as_html(visible(text, in_token=False))}</span>')
    return "".join(parts)


def text_section(run, trace):
    marks = token_marks(run, trace)
    samples = sampling(run.method) or any(is_sampled(r) for r in trace)  # registered or not
    return (f"<h2>The text</h2>\n{legend(run.method, set(marks), samples, {r.kind for r in trace if r.drafted})}\n"
            f'<div class="text">{running_text(run, marks)}</div>')


def histogram_section(method, trace):
    head = "<h2>Accepted drafts per round</h2>\n"
    if not any(r.drafted for r in trace):
        return head + "<p>No round drafted anything, so there is nothing to count.</p>"
    alpha, measured, predicted = acceptance_histogram(trace)
    ks = Counter(len(r.drafted) for r in trace if r.drafted)
    n_counted, skipped = sum(ks.values()), sum(1 for r in trace if not r.drafted)
    note = f" ({plural(skipped, 'round')} drafted nothing and {'is' if skipped == 1 else 'are'} not counted)" if skipped else ""
    if any(display.tree_of(r) is not None for r in trace):  # tree, suffix-tree, tree sampling
        return (head + histogram_svg(measured) +
                f"<p>{plural(n_counted, 'round')}{note}, counted by the length of the accepted path. The other methods' "
                "pages set a prediction from &alpha; beside this histogram; it is for a line of drafts, and a tree hedges "
                "with branches, so it is left out here.</p>")
    k = ks.most_common(1)[0][0]
    counted = [r for r in trace if r.drafted]
    mean_measured = sum(r.accepted + 1 for r in counted) / n_counted
    mean_predicted = sum(expected_tokens_per_round(alpha, len(r.drafted)) for r in counted) / n_counted
    varying = (f" The rounds drafted {', '.join(str(x) for x in sorted(ks))} tokens (most often {k}); each round's "
               f"prediction uses its own k, averaging to {mean_predicted:.2f} tokens per pass." if len(ks) > 1 else "")
    if any(r.kind == "block" for r in trace):  # the whole block judged at once: no draft-by-draft check to count
        why_alpha = (f"Here &alpha; = accepted / (accepted + rounds that dropped a draft) = <b>{alpha:.3f}</b>, the "
                     "&alpha; under which these rounds are likeliest in that model. Block verification does not test "
                     "draft by draft, though: it judges the whole block at once, testing its prefixes from the longest "
                     "down, and given its first i drafts it keeps all of them with chance w<sub>i</sub>, the weight "
                     "after draft i: at least SpS's product of min(1, q/p) over them, and more where a later q/p above 1 "
                     "made up for an earlier one below 1. So the prediction is SpS's model, a yardstick here, not "
                     "block verification's own (q the target, p the draft, as in Chen et al.).")
    else:
        letters = (" In SpS a draft x ~ p is kept with probability min(1, q(x)/p(x)), so &alpha; estimates its mean "
                   "(q the target, p the draft, as in Chen et al.)."
                   if sampling(method) else "")
        why_alpha = (f"Here &alpha; = accepted / (accepted + rejections) = <b>{alpha:.3f}</b>: the drafts after a "
                     f"rejection are never checked, so they do not count against it.{letters}")
    return (head + '<p class="key"><span class="swatch measured"></span> measured '
            '<span class="swatch predicted"></span> predicted</p>\n' + histogram_svg(measured, predicted) +
            f"<p>{plural(n_counted, 'round')}{note}. The prediction assumes that every checked draft is kept with the same "
            f"probability &alpha;, independently: P(i accepted) = &alpha;<sup>i</sup> (1 &minus; &alpha;) for i &lt; k, "
            f"&alpha;<sup>k</sup> for i = k. {why_alpha}</p>\n"
            f"<p>Tokens per round (one verification pass each): predicted (1 &minus; &alpha;<sup>k+1</sup>) / (1 &minus; &alpha;) = "
            f"<b>{expected_tokens_per_round(alpha, k):.2f}</b> for k = {k}; measured over the same rounds <b>{mean_measured:.2f}</b>."
            f"{varying}</p>")


# ---------------------------------------------------------------------------
# One row per round
# ---------------------------------------------------------------------------

HOW_TO_READ = {
    "greedy": "Each round the draft proposes k tokens; the oracle checks them all in one pass, giving its own choice "
              "after each prefix. The drafts are kept up to the first disagreement, then the oracle's token is added.",
    "tree": "Each round the draft proposes a tree of guesses; the oracle reads every node in one pass. From the root "
            "(the text so far) it follows the oracle's choices down the tree as far as the tree guessed them.",
    "sps": "Each round the draft samples K = n_draft tokens x from p (fewer where fewer are left to make); the "
           "oracle computes q at every position in one pass. "
           "Draft t is kept if r < min(1, q(x)/p(x)), r uniform on [0, 1); at the first rejection a token is drawn from "
           "the residual (q \u2212 p)+ instead. " + LETTERS,
    "block": "Each round the draft samples K = n_draft tokens x from p; the oracle computes q at every position in one "
             "pass. Block verification (Sun et al. 2025) weighs the whole block: w_i = min(1, w_(i-1) q(x_i)/p(x_i)) "
             "carries a shortfall along, so a later q/p > 1 can make up for an earlier one below 1. The prefixes are "
             "tested from the end, the longest first, each with its own r against its h: the first test that passes "
             "decides how many drafts are kept (a failed test does not end the round, as a rejection ends SpS's), "
             "and the next token is drawn from max(w q \u2212 p, 0), or from q after a whole block. " + LETTERS,
    "lookahead": "There is no draft model. Each round is one pass of the oracle over two branches: the lookahead "
                 "branch, a window of Jacobi iterations that guess the next few places at once (each pass improves every "
                 "guess, and the diagonals of the window become n-grams for a pool), and the verification branch, the "
                 "pool's n-grams that start with the text's last token. The best n-gram is kept up to its first "
                 "disagreement with the oracle's choice, then the oracle's token is added: greedy decoding's text.",
    "medusa": "There is no draft model: Medusa's heads, small layers trained on the oracle's own top state, each guess "
              "one more place ahead from the state that gave the newest token. Their top candidates make a tree (every "
              "combination), and the oracle reads every node in one pass, each node seeing only the text and its own "
              "ancestors. From the root (the newest token) it follows the oracle's choices down the tree as far as "
              "the heads guessed them, then adds its own token: greedy decoding's text.",
    "tree-sps": "Each round the draft samples a tree: at every node it draws its children i.i.d. from its p there; the "
                "oracle computes q after the root and after every node in one pass. From the root, the children of the "
                "node reached are checked in turn, as in SpS: kept if r < min(1, q(x)/p(x)), else q becomes the residual "
                "(q \u2212 p)+ renormalised (q\u2032, q\u2033, ...) for the next sibling (SpecInfer's multi-round "
                "rejection). The walk goes down after an accepted child; when every child is rejected, the last token is "
                "drawn from the final residual, and at an accepted leaf the bonus from q itself. " + LETTERS,
    "tree-sps-wor": "Each round the draft samples a tree whose siblings are all different: at every node child 1 is "
                    "drawn from its p there, child 2 from p without child 1 (renormalised), and so on; the oracle "
                    "computes q after the root and after every node in one pass. From the root, the children of the "
                    "node reached are checked in turn: kept if r < min(1, q(x)/p(x)); after a rejection q becomes the "
                    "residual (q − p)+ renormalised (q′, q″, ...) AND p loses the rejected token "
                    "(p′, p″, ...), as the next sibling was drawn without it (Sequoia's rule; with p kept, "
                    "the check would be biased). The walk goes down after an accepted child; when every child is "
                    "rejected, the last token is drawn from the final residual, and at an accepted leaf the bonus from "
                    "q itself. " + LETTERS,
}
EXTRA_HOW_TO_READ = {  # a round's kind: what its own picture shows
    "layers": "The draft is the oracle itself cut short: its first L blocks, then its ln_f and LM head. Each round's "
              "picture shows the oracle's blocks with the draft's marked, one column per token fed: the draft runs "
              "blocks 0 to L \u2212 1 (their keys and values are the oracle's too), exits early to propose the next "
              "token, and the oracle verifies from block L on, over the draft's own hidden states.",
    "crossvocab": "The draft has a vocabulary of its own (crossvocab.py, Timor et al. 2025): each round it writes "
                  "its tokens, shown first as they are in its vocabulary; their text, in the oracle's tokens, is what "
                  "the oracle checks (the candidates: p\u2032 beside each when sampling, the draft's p on the tokens both "
                  "vocabularies share, renormalised). The tokens are the oracle's everywhere else on this page; after "
                  "the round the draft keeps its tokens whose text begins the agreed text and reads the rest in its own.",
    "suffix": "There is no draft model: each round looks for the longest suffix of the text that occurred earlier, and "
             "drafts what followed its latest earlier occurrence. Each round's picture shows that suffix at the end "
             "of the text, its earlier occurrence, and what followed it.",
}


SAMPLED = ("sps", "block", "tree-sps")  # the kinds of round whose drafts are sampled and kept or resampled
STYLES = {"sps": "sps", "block": "block", "lookahead": "lookahead", "medusa": "medusa", "tree": "tree", "suffix-tree": "tree", "tree-sps": "tree-sps"}  # kind -> HOW_TO_READ's key


def is_sampled(r):
    """True for a round whose drafts were sampled and kept or resampled (a round across vocabularies: its sampling one)."""
    return r.kind in SAMPLED or (r.kind == "crossvocab" and r.details.tests is not None)


def rounds_section(run, trace):
    head = "<h2>Rounds</h2>\n"
    if not trace:
        return head + "<p>This run kept no record of its rounds (Stats(trace=[]) keeps one).</p>"
    kinds = {r.kind for r in trace}
    styles = {"sps" if r.kind == "crossvocab" and is_sampled(r) else STYLES.get(r.kind) for r in trace}
    style = next((s for s in ("tree-sps", "medusa", "tree", "block", "sps", "lookahead") if s in styles), "greedy")
    if style == "tree-sps" and any(getattr(r.details, "siblings", "") == "without replacement" for r in trace):
        style = "tree-sps-wor"
    shown = trace[:MAX_ROUNDS]
    n_open = len(shown) if len(trace) <= OPEN_ROUNDS else OPEN_FIRST
    rows = [round_row(run, r, i, i <= n_open) for i, r in enumerate(shown, 1)]
    if len(trace) > len(shown):
        rows.append(f'<p class="note">{len(trace) - len(shown)} more rounds (rounds {len(shown) + 1} to {len(trace)}) '
                    "are left out; the numbers and the histogram above count them.</p>")
    buttons = ('<p class="noprint"><button type="button" onclick="for (const d of document.querySelectorAll(\'details.round\')) '
               'd.open = true">open all rounds</button> <button type="button" onclick="for (const d of '
               'document.querySelectorAll(\'details.round\')) d.open = false">close all rounds</button></p>')
    extra = " ".join(text for kind, text in EXTRA_HOW_TO_READ.items()
                     if kind in kinds or (kind == "suffix" and "suffix-tree" in kinds))
    if getattr(methods.METHODS.get(getattr(run, "method", None)), "head", None) == "eagle":
        extra += (" There is no draft model: the drafts come from the EAGLE head (Li et al. 2024), one small layer "
                  "trained on the oracle's own top states (its features): from a feature and the token after it, it "
                  "guesses the next feature, and the oracle's own LM head reads the draft from that guess. Each round's "
                  "picture shows that chain.")
    if any(r.kind == "layers" and getattr(r.details, "trained", False) for r in trace):
        extra += (" Here the early exit is trained (Kangaroo, Liu et al. 2024): between block L \u2212 1 and ln_f sits "
                  "a small adapter, trained on the oracle's own choices, so the first L blocks guess what the whole "
                  "oracle would; the verification is the same, so the text is still greedy decoding's.")
    return head + f"<p>{html.escape(HOW_TO_READ[style])}</p>\n" + (f"<p>{html.escape(extra)}</p>\n" if extra else "") + \
        f"{buttons}\n" + "\n".join(rows)


def round_row(run, r, number, is_open):
    marks = round_marks(r)
    ending = {**MARKS, **(SAMPLING_MARKS if is_sampled(r) else {})}[marks[-1]][0]
    extra = SETTINGS[r.kind](r.details) if r.kind in SETTINGS else ""
    unit = "nodes" if display.tree_of(r) is not None else "drafts"
    kept = f"kept {r.accepted} of {len(r.drafted)} {unit} + {ending}{extra}"
    body = BEFORE[r.kind](run, r) if r.kind in BEFORE else ""  # where the drafts came from, before how they fared
    body += BODIES.get(r.kind, greedy_table)(run, r)
    body += AFTER[r.kind](run, r, number) if r.kind in AFTER else ""
    drafter = getattr(methods.METHODS.get(getattr(run, "method", None)), "head", None)
    body += DRAFTERS[drafter](run, r, number) if drafter in DRAFTERS else ""
    show = lambda tokens: " ".join(display.token_text(run.token_bytes, t) for t in tokens)  # noqa: E731
    reasons = display.round_reasons(r, show)
    if reasons:
        body += '<ul class="why">' + "".join(f"<li>{html.escape(line)}</li>" for line in reasons) + "</ul>"
    caches = ""
    if r.cached:
        draft_cache = "none" if r.cached.get("draft") is None else r.cached["draft"]
        caches = (f'<p class="caches">After the rollback the caches hold: draft {draft_cache}, oracle {r.cached["oracle"]} '
                  f"positions; the text is {r.context_length + len(r.new)} tokens (the newest is fed in the next round).</p>")
    return (f'<details class="round"{" open" if is_open else ""}><summary><b>Round {number}</b> '
            f'<span class="context">(after {r.context_length} tokens)</span> {kept}: {chips(run, r.new, marks)}</summary>\n'
            f'<div class="body">{body}{caches}</div></details>')


def cells(header_cell, items):
    return f"<tr><th>{header_cell}</th>" + "".join(f'<td class="{cls}">{content}</td>' if cls else f"<td>{content}</td>"
                                                   for cls, content in items) + "</tr>"


def greedy_table(run, r):
    """Draft and oracle side by side at each position, k drafts and the oracle's k + 1 choices."""
    k, n = len(r.drafted), r.accepted
    # Agreed ("ok"), the first disagreement ("miss"), past it ("unused": those choices followed a wrong
    # draft); the last column is the oracle's bonus when every draft was kept.
    status = ["ok" if j < n else "miss" if j == n else "unused" for j in range(k)]
    status.append(last_mark(r) if n == k else "unused")
    oracle_mark = {"ok": "draft", "miss": "fix", "bonus": "bonus"}
    drafted = [(s, chip(run, t, "draft" if s == "ok" else "")) for s, t in zip(status, r.drafted)] + [("unused", "&mdash;")]
    oracle = [(s, chip(run, t, oracle_mark.get(s, ""))) for s, t in zip(status, r.oracle or [])]
    verdict = {"ok": "&check; same", "miss": "&cross; first disagreement", "unused": "", "bonus": "bonus",
               "oracle": "nothing drafted"}
    return ('<div class="scroll"><table class="steps">'
            + cells("position", [("", str(j + 1)) for j in range(k + 1)])
            + cells("draft", drafted) + cells("oracle", oracle)
            + cells("", [(s, verdict[s]) for s in status]) + "</table></div>")


def tree_list(run, r):
    """The tree as a nested list, the accepted path marked, the oracle's choice at the root and on the path."""
    tree = display.tree_of(r)
    parents, path = tree.parents, tree.path
    children = {i: [] for i in range(-1, len(parents))}
    for i, parent in enumerate(parents):
        children[parent].append(i)
    end, on_path = (path[-1] if path else -1), set(path)

    def item(i):  # i = -1 is the root, the text so far
        if i == -1:
            label = '<span class="root">the text so far</span>'
        else:
            label = chip(run, r.drafted[i], "draft" if i in on_path else "")
        if i == end:  # the oracle's choice here is the round's last token
            mark = last_mark(r)
            label += f" &rarr; oracle: {chip(run, r.oracle[i + 1], mark)} ({MARKS[mark][0]})"
        elif i == -1 or i in on_path:  # the oracle's choice here is the next node on the path
            label += f" &rarr; oracle: {chip(run, r.oracle[i + 1], 'draft')} &check;"
        below = "".join(item(c) for c in children[i])
        return (f"<li>{label}" if i == -1 or i in on_path else f'<li class="unused">{label}') + (
            f"<ul>{below}</ul>" if below else "") + "</li>"

    return f'<ul class="tree">{item(-1)}</ul>'


def sps_table(run, r):
    """Step 3 of Chen et al. at each drafted position, then the residual chart or the bonus."""
    d = r.details  # an sps.SpsDetails
    steps, columns = d.steps, []
    for t, token in enumerate(r.drafted):
        if t < len(steps):
            s = steps[t]
            decision = "&check; keep: r &lt; min" if s["accepted"] else "&cross; reject: r &ge; min"
            columns.append(("ok" if s["accepted"] else "miss", chip(run, token, "draft" if s["accepted"] else ""),
                            probability(s["p"]), probability(s["q"]), probability(s["accept_prob"]), f"{s['r']:.3f}", decision))
        else:
            columns.append(("unused", chip(run, token), "", "", "", "", "not checked"))
    if d.bonus is not None:  # all drafts kept (or none drafted): one token drawn from q
        b, mark = d.bonus, last_mark(r)
        columns.append((mark, chip(run, b["token"], mark), "", probability(b["q"]), "", "",
                        "bonus, drawn from q" if mark == "bonus" else "drawn from q, nothing drafted"))
    names = ["token x", "p(x) draft", "q(x) target", "min(1, q/p)", "r", "decision"]
    table = ('<div class="scroll"><table class="steps">'
             + cells("position", [("", str(t + 1)) for t in range(len(columns))])
             + "".join(cells(name, [(col[0], col[row + 1]) for col in columns]) for row, name in enumerate(names))
             + "</table></div>")
    if d.resampled is not None:
        table += residual_figure(run, d.resampled, len(steps))
    return table


def piece_chip(piece):
    """A token of the draft's own vocabulary (a round across vocabularies) as a chip: its bytes, not an oracle id."""
    return (f'<span class="tok" title="a token of the draft\'s vocabulary">'
            f'{as_html(visible(piece.decode("utf-8", errors="surrogateescape"), in_token=True))}</span>')


def crossvocab_table(run, r):
    """A round across vocabularies: the draft's own tokens, then the candidates as a line of drafts (greedy) or
    with each test's p\u2032, q and r (sampling), then how the draft caught up with the agreed text."""
    d = r.details  # a crossvocab.CrossVocabDetails
    own = " ".join(piece_chip(piece) for piece in d.draft_pieces) or "nothing"
    head = f'<p class="note">The draft wrote, in its own vocabulary: {own}. Below, that text in the oracle\'s tokens.</p>'
    again = " ".join(piece_chip(piece) for piece in d.reencoded_pieces) or "nothing"
    tail = (f'<p class="note">The draft keeps {plural(d.draft_kept, "token")} of its {len(d.draft_ids)} and reads the rest '
            f"of the agreed text in its own tokens: {again}.</p>")
    if d.tests is None:
        return head + greedy_table(run, r) + tail
    columns = []
    for test in d.tests:
        a = min(1.0, test["q"] / test["p"])
        decision = "&check; keep: r &lt; min" if test["accepted"] else "&cross; reject: r &ge; min"
        columns.append(("ok" if test["accepted"] else "miss", chip(run, test["token"], "draft" if test["accepted"] else ""),
                        probability(test["p"]), probability(test["q"]), probability(a), f"{test['r']:.3f}", decision))
    mark = last_mark(r)
    drawn = {"fix": "resampled, from (q \u2212 p\u2032)+", "bonus": "bonus, drawn from q", "oracle": "drawn from q, nothing drafted"}
    columns.append((mark, chip(run, r.new[-1], mark), "", "", "", "", drawn[mark]))
    names = ["token x", "p\u2032(x) draft", "q(x) target", "min(1, q/p\u2032)", "r", "decision"]
    table = ('<div class="scroll"><table class="steps">'
             + cells("position", [("", str(t + 1)) for t in range(len(columns))])
             + "".join(cells(name, [(col[0], col[row + 1]) for col in columns]) for row, name in enumerate(names))
             + "</table></div>")
    return head + table + tail


# Each kind of round (decoding.Round.kind): the setting in its summary, the picture before its table (where
# its drafts came from), its table, and the picture after it. A kind missing here shows the line table.
SETTINGS = {"threshold": lambda d: f", threshold {d.threshold:.2f}", "adaptive": lambda d: f", n_draft {d.n_draft}"}
BEFORE = {"suffix": suffix_figure, "suffix-tree": suffix_figure}
BODIES = {"crossvocab": crossvocab_table, "sps": sps_table, "block": block_table, "lookahead": lookahead_figure, "tree": tree_list, "suffix-tree": tree_list, "tree-sps": sampled_tree_figure,
          "medusa": tree_list}
AFTER = {"layers": layers_figure, "medusa": medusa_figure}
# A trained drafter (app/methods.py's Method.head) whose rounds are recorded as another kind's (EAGLE's are a line's
# or SpS's): its picture of how the round was drafted, after the round's own table.
DRAFTERS = {"eagle": eagle_figure}
