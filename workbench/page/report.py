"""--html FILE: one run on one self-contained page, round by round.

    python workbench.py "The meaning of life is" --method sps --html run.html

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

What is the same for every method is here; what a method's round looks like
(how to read it, its table, its picture) is its own, registry.Shown, from its
family's file in workbench/methods/. The pieces beside this file: the tokens
(escaped, visible, marked), the histogram, the stylesheet, and the real-text
benchmark's own page.
"""

import codecs
import html
from collections import Counter
from dataclasses import dataclass

from errors import UserError
from speedup import expected_tokens_per_round
from weights import files
from workbench import display
from workbench.page.figures import acceptance_histogram, histogram_svg
from workbench.page.style import CSS
from workbench.page.tokens import (LETTERS, MARKS, SAMPLING_MARKS, as_html, chip, chips, last_mark, plural, round_marks,
                                   token_marks, visible)

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
    method: object            # the registry.Method that ran (with a draft of another vocabulary: its `across`)
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
    title = f"Speculative decoding: {run.method.name}"
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
            f"<tr><th>method</th><td><b>{html.escape(run.method.name)}</b>{' (' + settings + ')' if settings else ''}</td></tr>\n"
            f"<tr><th>time</th><td>draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s, "
            f"generation {run.elapsed:.2f} s</td></tr>\n"
            f"<tr><th>kept by draft position</th><td>{html.escape(display.by_position(stats) or 'nothing drafted')} "
            f"(the share of rounds that drafted a position and kept it; vLLM's acceptance per position)</td></tr>\n"
            "</table>\n"
            '<div class="cards">' + "".join(f'<div class="card"><b>{big}</b>{what}<small>{note}</small></div>'
                                            for big, what, note in cards) + "</div>")


def legend(method, marks, samples):
    """The marks' key: each mark's meaning, a sampling method's where its drafts are sampled, then the method's own."""
    texts = {**MARKS, **(SAMPLING_MARKS if samples else {}), **method.shown.marks}
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
    samples = run.method.samples or any(run.method.shown.is_sampled(r) for r in trace)
    return (f"<h2>The text</h2>\n{legend(run.method, set(marks), samples)}\n"
            f'<div class="text">{running_text(run, marks)}</div>')


def histogram_section(method, trace):
    head = "<h2>Accepted drafts per round</h2>\n"
    if not any(r.drafted for r in trace):
        return head + "<p>No round drafted anything, so there is nothing to count.</p>"
    shown = method.shown
    alpha, measured, predicted = acceptance_histogram(trace, shown.tree_of)
    ks = Counter(len(r.drafted) for r in trace if r.drafted)
    n_counted, skipped = sum(ks.values()), sum(1 for r in trace if not r.drafted)
    note = f" ({plural(skipped, 'round')} drafted nothing and {'is' if skipped == 1 else 'are'} not counted)" if skipped else ""
    if shown.tree is not None:
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
    if shown.alpha_note:
        why_alpha = shown.alpha_note.format(alpha=f"<b>{alpha:.3f}</b>")
    else:
        letters = (" In SpS a draft x ~ p is kept with probability min(1, q(x)/p(x)), so &alpha; estimates its mean "
                   "(q the target, p the draft, as in Chen et al.)." if method.samples and method.verifies else "")
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

GREEDY_HOW_TO_READ = ("Each round the draft proposes k tokens; the oracle checks them all in one pass, giving its own "
                      "choice after each prefix. The drafts are kept up to the first disagreement, then the oracle's "
                      "token is added.")


def rounds_section(run, trace):
    head = "<h2>Rounds</h2>\n"
    if not trace:
        return head + "<p>This run kept no record of its rounds (Stats(trace=[]) keeps one).</p>"
    listed = trace[:MAX_ROUNDS]
    n_open = len(listed) if len(trace) <= OPEN_ROUNDS else OPEN_FIRST
    rows = [round_row(run, r, i, i <= n_open) for i, r in enumerate(listed, 1)]
    if len(trace) > len(listed):
        rows.append(f'<p class="note">{len(trace) - len(listed)} more rounds (rounds {len(listed) + 1} to {len(trace)}) '
                    "are left out; the numbers and the histogram above count them.</p>")
    buttons = ('<p class="noprint"><button type="button" onclick="for (const d of document.querySelectorAll(\'details.round\')) '
               'd.open = true">open all rounds</button> <button type="button" onclick="for (const d of '
               'document.querySelectorAll(\'details.round\')) d.open = false">close all rounds</button></p>')
    how = run.method.shown.how_to_read or GREEDY_HOW_TO_READ
    return head + f"<p>{html.escape(how)}</p>\n{buttons}\n" + "\n".join(rows)


def round_row(run, r, number, is_open):
    shown = run.method.shown
    tree = shown.tree_of(r)
    marks = round_marks(r, tree)
    ending = {**MARKS, **(SAMPLING_MARKS if shown.is_sampled(r) else {}), **shown.marks}[marks[-1]][0]
    extra = shown.setting(r.details) if shown.setting and r.details is not None else ""
    kept = f"kept {r.accepted} of {len(r.drafted)} {'nodes' if tree is not None else 'drafts'} + {ending}{extra}"
    body = shown.page_before(run, r) if shown.page_before else ""  # where the drafts came from, before how they fared
    body += (shown.page_table or greedy_table)(run, r)
    body += shown.page_after(run, r, number) if shown.page_after else ""
    show = lambda tokens: " ".join(display.token_text(run.token_bytes, t) for t in tokens)  # noqa: E731
    reasons = shown.reasons(r, show)
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
