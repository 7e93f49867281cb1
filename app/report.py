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
    every child checked (tree speculative sampling), the oracle's blocks with
    the draft's first L marked (self-speculative), the earlier match in the text
    and what followed it (suffix drafts).

Tokens are bytes: a Chinese character or an emoji is often split over two or
three of them, and a token can be any byte string at all. Every token's text
is escaped, and bytes that are not (yet) a whole character show as \\xNN.
"""

import codecs
import html
import unicodedata
from collections import Counter
from dataclasses import dataclass

from app import display, methods
from beyond import tree_sampling
from beyond.suffix import continuation
from errors import UserError
from speed.predict import expected_tokens_per_round, truncated_geometric
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
    stats: object             # a decoding.Stats, with stats.trace = a list of decoding.Round, one per oracle pass
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
    except OSError as e:
        raise ReportError(f"cannot write the page to {path}: {e.strerror or e}") from None


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


# ---------------------------------------------------------------------------
# Token text, escaped and visible
# ---------------------------------------------------------------------------

WHITESPACE_MARKS = {" ": "\u2423", "\n": "\u21b5", "\t": "\u2192"}  # ␣ ↵ →
BIDI_CONTROLS = set("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible(text, in_token):  # -> [(css class or "", text)]
    """text cut into pieces a reader can see, each with its CSS class.

    text comes from decoding with errors="surrogateescape": each byte that is
    not part of a whole UTF-8 character is a surrogate U+DC80..U+DCFF and shows
    as \\xNN (always >= \\x80). Control characters show as \\xNN below 0x80,
    \\uNNNN above. In a token (in_token) spaces, newlines and tabs get a visible
    mark and every invisible character is escaped; in running text newlines and
    tabs stay what they are.
    """
    pieces = []
    for c in text:
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF:
            pieces.append(("byte", f"\\x{code - 0xDC00:02x}"))
        elif in_token and c in WHITESPACE_MARKS:
            pieces.append(("ws", WHITESPACE_MARKS[c]))
        elif c in " \n\t":
            pieces.append(("", c))
        elif unicodedata.category(c) in ("Cc", "Cs") or c in BIDI_CONTROLS or (
                in_token and unicodedata.category(c) in ("Cf", "Zs", "Zl", "Zp")):
            pieces.append(("byte", f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"))
        else:
            pieces.append(("", c))
    return pieces


def as_html(pieces):  # text only, never an attribute: quotes need no escaping
    return "".join(f'<span class="{cls}">{html.escape(s, quote=False)}</span>' if cls else html.escape(s, quote=False)
                   for cls, s in pieces)


def token_text(run, token):
    return run.token_bytes(token).decode("utf-8", errors="surrogateescape")


def chip(run, token, kind=""):
    """One token as a boxed chip, its id in the tooltip."""
    return (f'<span class="{"tok " + kind if kind else "tok"}" title="token {int(token)}">'
            f'{as_html(visible(token_text(run, token), in_token=True))}</span>')


def chips(run, tokens, kinds):
    return " ".join(chip(run, t, kind) for t, kind in zip(tokens, kinds))


# ---------------------------------------------------------------------------
# What each generated token was: accepted draft, correction, bonus
# ---------------------------------------------------------------------------

KINDS = {  # kind: (label, what it means)
    "draft": ("accepted draft", "proposed by the draft, kept by the oracle"),
    "fix": ("correction", "the oracle's own token at the first disagreement"),
    "bonus": ("bonus", "every draft was kept: the oracle's next token comes with the same pass"),
    "oracle": ("oracle", "nothing was drafted: the oracle's token alone"),
}
LETTERS = ("Letters as in Chen et al. 2023: q is the target (the oracle), p the draft; "
           "Leviathan et al. 2023 and Hugging Face name them the other way round.")
SAMPLING_KINDS = {
    "fix": ("resampled", "drawn from the residual (q \u2212 p)+ after a rejection"),
    "bonus": ("bonus", "all K drafts kept: one more token drawn from q"),
}


def sampling(method):
    """True for a method that verifies sampled drafts (its tokens are kept or resampled, app/methods.py)."""
    m = methods.METHODS.get(method)
    return bool(m and m.samples and m.verifies)


def last_kind(r):
    """What the token the oracle adds at the end of round r is: "fix", "bonus" or "oracle"."""
    if not r.drafted:
        return "oracle"
    if "path" in r.details:  # a tree: a bonus where the path ends in a leaf, else a correction
        end = r.details["path"][-1] if r.details["path"] else -1
        return "fix" if end in r.details["parents"] else "bonus"
    return "fix" if r.accepted < len(r.drafted) else "bonus"


def round_kinds(r):
    return ["draft"] * r.accepted + [last_kind(r)]


def token_kinds(run, trace):
    """One kind per generated token, from the rounds; from stats.from_draft where there are none."""
    kinds = [kind for r in trace for kind in round_kinds(r)]
    from_draft = run.stats.from_draft
    kinds += ["draft" if from_draft[i] else "oracle" for i in range(len(kinds), len(from_draft))]
    return kinds + ["oracle"] * (len(run.tokens) - len(kinds))


# ---------------------------------------------------------------------------
# The top: what ran, how fast, and the text
# ---------------------------------------------------------------------------

def header(run):
    stats = run.stats
    prompt = as_html(visible(run.prompt, in_token=False)) if run.prompt else "(empty: the text starts from &lt;|endoftext|&gt;)"
    settings = ", ".join(f"{html.escape(str(k))} = {html.escape(str(v))}" for k, v in run.settings.items())
    roles = [r for r in ("draft", "oracle") if r in run.models] + [r for r in run.models if r not in ("draft", "oracle")]
    models = "<br>".join(f"{html.escape(role)}: {html.escape(str(run.models[role]))}" for role in roles)
    speed = stats.n_tokens / run.elapsed if run.elapsed > 0 else 0.0
    cards = [(f"{speed:.1f}", "tokens/s", f"{stats.n_tokens} tokens in {run.elapsed:.2f} s"),
             (f"{stats.acceptance_rate:.0%}", "acceptance", f"{stats.accepted} of {stats.drafted} drafts accepted"),
             (f"{stats.tokens_per_round:.2f}", "tokens per oracle pass", f"{stats.n_tokens} tokens in {stats.rounds} passes")]
    return (f'<table class="facts">\n<tr><th>prompt</th><td class="prompt">{prompt}</td></tr>\n'
            f"<tr><th>models</th><td>{models}</td></tr>\n"
            f"<tr><th>method</th><td><b>{html.escape(run.method)}</b>{' (' + settings + ')' if settings else ''}</td></tr>\n"
            f"<tr><th>time</th><td>draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s, "
            f"generation {run.elapsed:.2f} s</td></tr>\n</table>\n"
            '<div class="cards">' + "".join(f'<div class="card"><b>{big}</b>{what}<small>{note}</small></div>'
                                            for big, what, note in cards) + "</div>")


def legend(method, kinds, samples=None):
    samples = sampling(method) if samples is None else samples
    texts = {**KINDS, **(SAMPLING_KINDS if samples else {})}
    letters = f"<li>{html.escape(LETTERS)}</li>" if samples else ""
    return ('<ul class="legend">' + "".join(f'<li><span class="{kind}">{texts[kind][0]}</span> {html.escape(texts[kind][1])}</li>'
                                            for kind in KINDS if kind in kinds) + letters + "</ul>")


def running_text(run, kinds):
    """The prompt, then each generated token marked by its kind.

    An incremental UTF-8 decoder (as display.stream) holds back the bytes of a
    character split over tokens: the token that completes it shows it whole,
    and one that completes nothing shows nothing. Bytes still pending at the
    end are shown as \\xNN.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    parts = [f'<span class="prompt">{as_html(visible(run.prompt, in_token=False))}</span>']
    for i, (token, kind) in enumerate(zip(run.tokens, kinds)):
        text = decoder.decode(run.token_bytes(token))
        if i == len(run.tokens) - 1:
            text += decoder.decode(b"", final=True)
        if text:
            parts.append(f'<span class="{kind}">{as_html(visible(text, in_token=False))}</span>')
    return "".join(parts)


def text_section(run, trace):
    kinds = token_kinds(run, trace)
    samples = sampling(run.method) or any("visits" in r.details for r in trace)  # tree sampling, registered or not
    return (f"<h2>The text</h2>\n{legend(run.method, set(kinds), samples)}\n"
            f'<div class="text">{running_text(run, kinds)}</div>')


# ---------------------------------------------------------------------------
# Accepted drafts per round: measured, and predicted from alpha
# ---------------------------------------------------------------------------

def draft_length(r):
    """The most drafts round r could have kept: k for a line of drafts, the number of levels for a tree."""
    if "parents" not in r.details:
        return len(r.drafted)
    depth = []
    for parent in r.details["parents"]:  # level order: a parent comes before its children
        depth.append(1 if parent == -1 else depth[parent] + 1)
    return max(depth, default=0)


def acceptance_histogram(trace):
    """(alpha, measured, predicted) over the rounds that drafted something.

    alpha is the chance that a checked draft is kept: accepted / (accepted +
    rejections), since the drafts after a rejection are never checked (the
    acceptance at the top, accepted / drafted, counts them as lost).
    measured[i] counts the rounds that kept i drafts; predicted[i] adds up
    truncated_geometric over the rounds, each with its own draft length k
    (for a tree, whose alpha means less, its depth).
    """
    rounds = [(draft_length(r), r.accepted) for r in trace if r.drafted]
    accepted = sum(n for _, n in rounds)
    rejections = sum(n < k for k, n in rounds)
    alpha = accepted / (accepted + rejections) if accepted + rejections else 0.0
    k_max = max(k for k, _ in rounds)
    measured, predicted = [0] * (k_max + 1), [0.0] * (k_max + 1)
    for k, n in rounds:
        measured[n] += 1
        for i, p in enumerate(truncated_geometric(alpha, k)):
            predicted[i] += p
    return alpha, measured, predicted


def plural(n, noun):
    return f"{n} {noun}" + ("" if n == 1 else "s")


def histogram_svg(measured, predicted=None):
    """Bars of the measured counts, each beside an outlined bar of the predicted count."""
    n = len(measured)
    top = max(measured + (predicted or [])) or 1
    slot, plot_h, left, base = 96, 200, 50, 240
    parts = [f'<svg class="histogram" viewBox="0 0 {left + n * slot + 10} 290" width="{left + n * slot + 10}" '
             'role="img" aria-label="accepted drafts per round">',
             f'<line x1="{left}" y1="{base}" x2="{left + n * slot}" y2="{base}" stroke="#000" stroke-width="2"/>']
    for i in range(n):
        x = left + i * slot + 10
        bars = [(measured[i], str(measured[i]), "measured")]
        if predicted is not None:
            bars.append((predicted[i], f"{predicted[i]:.1f}", "predicted"))
        for j, (value, label, cls) in enumerate(bars):
            h = plot_h * value / top
            parts.append(f'<rect class="{cls}" x="{x + j * 38}" y="{base - h:.1f}" width="34" height="{h:.1f}">'
                         f"<title>{cls}: {label}</title></rect>"
                         f'<text x="{x + j * 38 + 17}" y="{base - h - 6:.1f}" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{x + 36}" y="{base + 28}" text-anchor="middle" class="axis">{i}</text>')
    parts.append(f'<text x="{left + n * slot / 2}" y="{base + 48}" text-anchor="middle" class="axis">'
                 "drafts accepted in the round</text>")
    return "".join(parts) + "</svg>"


SUITE_COLORS = {"prose": "#4e79a7", "code": "#f28e2b", "lists": "#59a14f", "repeat": "#b07aa1"}


def suite_svg(rows):
    """Grouped bars: for each method, its speedup on each kind of text (the median of the rounds,
    a whisker from min to max), against the line at 1, the oracle alone."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    kinds = [k for k in SUITE_COLORS if any(r["kind"] == k for r in rows)]
    top = max(2.0, max(r["speedup_max"] for r in rows) * 1.1)
    bar, gap, left, base, height = 14, 22, 50, 260, 230
    slot = bar * len(kinds) + gap
    width = left + slot * len(methods) + 20

    def y(value):
        return base - height * value / top

    parts = [f'<svg class="suite" viewBox="0 0 {width} 340" width="{width}" role="img" '
             'aria-label="speedup over the oracle alone, per method and kind of text">',
             f'<line x1="{left}" y1="{y(1):.1f}" x2="{width - 10}" y2="{y(1):.1f}" stroke="#000" stroke-dasharray="4 3"/>',
             f'<text x="{left - 6}" y="{y(1) + 4:.1f}" text-anchor="end" class="axis">1x</text>',
             f'<text x="{left - 6}" y="{y(2) + 4:.1f}" text-anchor="end" class="axis">2x</text>',
             f'<line x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#000"/>']
    at = {(r["method"], r["kind"]): r for r in rows}
    for i, method in enumerate(methods):
        x0 = left + i * slot + gap / 2
        for j, kind in enumerate(kinds):
            r = at.get((method, kind))
            if r is None:
                continue
            x = x0 + j * bar
            parts.append(f'<rect x="{x:.1f}" y="{y(r["speedup"]):.1f}" width="{bar - 2}" height="{base - y(r["speedup"]):.1f}" '
                         f'fill="{SUITE_COLORS[kind]}"><title>{html.escape(method)}, {kind}: {r["speedup"]}x '
                         f'({r["speedup_min"]}-{r["speedup_max"]})</title></rect>'
                         f'<line x1="{x + bar / 2 - 1:.1f}" y1="{y(r["speedup_min"]):.1f}" x2="{x + bar / 2 - 1:.1f}" '
                         f'y2="{y(r["speedup_max"]):.1f}" stroke="#000"/>')
        parts.append(f'<text x="{x0 + bar * len(kinds) / 2:.1f}" y="{base + 14}" text-anchor="end" class="axis" '
                     f'transform="rotate(-35 {x0 + bar * len(kinds) / 2:.1f} {base + 14})">{html.escape(method)}</text>')
    for j, kind in enumerate(kinds):
        parts.append(f'<rect x="{left + j * 80}" y="8" width="12" height="12" fill="{SUITE_COLORS[kind]}"/>'
                     f'<text x="{left + j * 80 + 16}" y="19" class="axis">{kind}</text>')
    return "".join(parts) + "</svg>"


def write_suite_page(path, rows, facts, command):
    """The real-text benchmark (app/suite.py) on one page: its figure and its table."""
    columns = list(rows[0]) if rows else []
    table = ("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" +
             "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in columns) + "</tr>" for r in rows) +
             "</table>")
    text = "\n".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Speculative decoding on held-out text</title>\n<style>{CSS}</style>\n</head>\n<body>",
        "<h1>Every method on held-out text</h1>",
        f"<p><code>{html.escape(command)}</code>: {facts['prompts']} prompts from documents the pair never saw, "
        f"{facts['n_new']} new tokens each, {facts['rounds']} rounds taking turns; c = T_draft(1) / T_oracle(1) = "
        f"{facts['c']}. A bar is the median speedup over the oracle alone (greedy decoding, or sampling for the "
        "sampling methods), its whisker the rounds' min to max; below the dashed line a method loses.</p>",
        suite_svg(rows), table, "</body>\n</html>\n"])
    try:
        files.write_text(path, text)
    except OSError as e:
        raise ReportError(f"cannot write the page to {path}: {e.strerror or e}") from None


def histogram_section(method, trace):
    head = "<h2>Accepted drafts per round</h2>\n"
    if not any(r.drafted for r in trace):
        return head + "<p>No round drafted anything, so there is nothing to count.</p>"
    alpha, measured, predicted = acceptance_histogram(trace)
    ks = Counter(len(r.drafted) for r in trace if r.drafted)
    n_counted, skipped = sum(ks.values()), sum(1 for r in trace if not r.drafted)
    note = f" ({plural(skipped, 'round')} drafted nothing and {'is' if skipped == 1 else 'are'} not counted)" if skipped else ""
    if any("parents" in r.details for r in trace):  # tree, suffix-tree, tree sampling
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
    letters = (" In SpS a draft x ~ p is kept with probability min(1, q(x)/p(x)), so &alpha; estimates its mean "
               "(q the target, p the draft, as in Chen et al.)."
               if sampling(method) else "")
    return (head + '<p class="key"><span class="swatch measured"></span> measured '
            '<span class="swatch predicted"></span> predicted</p>\n' + histogram_svg(measured, predicted) +
            f"<p>{plural(n_counted, 'round')}{note}. The prediction assumes that every checked draft is kept with the same "
            f"probability &alpha;, independently: P(i accepted) = &alpha;<sup>i</sup> (1 &minus; &alpha;) for i &lt; k, "
            f"&alpha;<sup>k</sup> for i = k. Here &alpha; = accepted / (accepted + rejections) = <b>{alpha:.3f}</b>: "
            f"the drafts after a rejection are never checked, so they do not count against it.{letters}</p>\n"
            f"<p>Tokens per oracle pass: predicted (1 &minus; &alpha;<sup>k+1</sup>) / (1 &minus; &alpha;) = "
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
    "sps": "Each round the draft samples K tokens x from p; the oracle computes q at every position in one pass. "
           "Draft t is kept if r < min(1, q(x)/p(x)), r uniform on [0, 1); at the first rejection a token is drawn from "
           "the residual (q \u2212 p)+ instead. " + LETTERS,
    "tree-sps": "Each round the draft samples a tree: at every node it draws its children i.i.d. from its p there; the "
                "oracle computes q after the root and after every node in one pass. From the root, the children of the "
                "node reached are checked in turn, as in SpS: kept if r < min(1, q(x)/p(x)), else q becomes the residual "
                "(q \u2212 p)+ renormalised (q\u2032, q\u2033, ...) for the next sibling (SpecInfer's multi-round "
                "rejection). The walk goes down after an accepted child; when every child is rejected, the last token is "
                "drawn from the final residual, and at an accepted leaf the bonus from q itself. " + LETTERS,
}
EXTRA_HOW_TO_READ = {  # detail key: what each round's own picture shows
    "layers": "The draft is the oracle itself cut short: its first L blocks, then its ln_f and LM head. Each round's "
              "picture shows the oracle's blocks with the draft's marked, one column per token fed: the draft runs "
              "blocks 0 to L \u2212 1 (their keys and values are the oracle's too), exits early to propose the next "
              "token, and the oracle verifies from block L on, over the draft's own hidden states.",
    "match": "There is no draft model: each round looks for the longest suffix of the text that occurred earlier, and "
             "drafts what followed its latest earlier occurrence. Each round's picture shows that suffix at the end "
             "of the text, its earlier occurrence, and what followed it.",
}


def rounds_section(run, trace):
    head = "<h2>Rounds</h2>\n"
    if not trace:
        return head + "<p>This run kept no record of its rounds (Stats(trace=[]) keeps one).</p>"
    style = "tree-sps" if any("visits" in r.details for r in trace) else \
        "tree" if any("parents" in r.details for r in trace) else \
        "sps" if any("steps" in r.details for r in trace) else "greedy"
    shown = trace[:MAX_ROUNDS]
    n_open = len(shown) if len(trace) <= OPEN_ROUNDS else OPEN_FIRST
    rows = [round_row(run, r, i, style, i <= n_open) for i, r in enumerate(shown, 1)]
    if len(trace) > len(shown):
        rows.append(f'<p class="note">{len(trace) - len(shown)} more rounds (rounds {len(shown) + 1} to {len(trace)}) '
                    "are left out; the numbers and the histogram above count them.</p>")
    buttons = ('<p class="noprint"><button type="button" onclick="for (const d of document.querySelectorAll(\'details.round\')) '
               'd.open = true">open all rounds</button> <button type="button" onclick="for (const d of '
               'document.querySelectorAll(\'details.round\')) d.open = false">close all rounds</button></p>')
    extra = " ".join(text for key, text in EXTRA_HOW_TO_READ.items() if any(key in r.details for r in trace))
    return head + f"<p>{html.escape(HOW_TO_READ[style])}</p>\n" + (f"<p>{html.escape(extra)}</p>\n" if extra else "") + \
        f"{buttons}\n" + "\n".join(rows)


def round_row(run, r, number, style, is_open):
    kinds = round_kinds(r)
    ending = {**KINDS, **(SAMPLING_KINDS if style in ("sps", "tree-sps") else {})}[kinds[-1]][0]
    extra = ""
    if "threshold" in r.details:
        extra = f", threshold {r.details['threshold']:.2f}"
    elif "gamma" in r.details:
        extra = f", &gamma; = {r.details['gamma']}"
    unit = "nodes" if style in ("tree", "tree-sps") else "drafts"
    kept = f"kept {r.accepted} of {len(r.drafted)} {unit} + {ending}{extra}"
    body = {"greedy": greedy_table, "tree": tree_list, "sps": sps_table, "tree-sps": sampled_tree_figure}[style](run, r)
    if "match" in r.details:  # suffix drafts: where they came from, before how they fared
        body = suffix_figure(run, r) + body
    if "layers" in r.details:  # self-speculative: which blocks drafted, which verified
        body += layers_figure(run, r, number)
    show = lambda tokens: " ".join(display.token_text(run.token_bytes, t) for t in tokens)  # noqa: E731
    if "visits" in r.details:  # display's tree lines speak of a greedy tree's branching rule: say the checks instead
        reasons = [tree_sampling.describe(r.details, show)]
    else:
        reasons = display.round_reasons(r, show)
    if reasons:
        body += '<ul class="why">' + "".join(f"<li>{html.escape(line)}</li>" for line in reasons) + "</ul>"
    caches = ""
    if r.cached:
        draft_cache = "none" if r.cached.get("draft") is None else r.cached["draft"]
        caches = (f'<p class="caches">After the rollback the caches hold: draft {draft_cache}, oracle {r.cached["oracle"]} '
                  f"positions; the text is {r.context + len(r.new)} tokens (the newest is fed in the next round).</p>")
    return (f'<details class="round"{" open" if is_open else ""}><summary><b>Round {number}</b> '
            f'<span class="context">(after {r.context} tokens)</span> {kept}: {chips(run, r.new, kinds)}</summary>\n'
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
    status.append(last_kind(r) if n == k else "unused")
    oracle_kind = {"ok": "draft", "miss": "fix", "bonus": "bonus"}
    drafted = [(s, chip(run, t, "draft" if s == "ok" else "")) for s, t in zip(status, r.drafted)] + [("unused", "&mdash;")]
    oracle = [(s, chip(run, t, oracle_kind.get(s, ""))) for s, t in zip(status, r.oracle)]
    verdict = {"ok": "&check; same", "miss": "&cross; first disagreement", "unused": "", "bonus": "bonus",
               "oracle": "nothing drafted"}
    return ('<div class="scroll"><table class="steps">'
            + cells("position", [("", str(j + 1)) for j in range(k + 1)])
            + cells("draft", drafted) + cells("oracle", oracle)
            + cells("", [(s, verdict[s]) for s in status]) + "</table></div>")


def tree_list(run, r):
    """The tree as a nested list, the accepted path marked, the oracle's choice at the root and on the path."""
    parents, path = r.details["parents"], r.details["path"]
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
            kind = last_kind(r)
            label += f" &rarr; oracle: {chip(run, r.oracle[i + 1], kind)} ({KINDS[kind][0]})"
        elif i == -1 or i in on_path:  # the oracle's choice here is the next node on the path
            label += f" &rarr; oracle: {chip(run, r.oracle[i + 1], 'draft')} &check;"
        below = "".join(item(c) for c in children[i])
        return (f"<li>{label}" if i == -1 or i in on_path else f'<li class="unused">{label}') + (
            f"<ul>{below}</ul>" if below else "") + "</li>"

    return f'<ul class="tree">{item(-1)}</ul>'


def probability(x):
    return "0" if x == 0 else f"{x:.1e}" if x < 0.001 else f"{x:.3f}"


def sps_table(run, r):
    """Step 3 of Chen et al. at each drafted position, then the residual chart or the bonus."""
    steps, columns = r.details["steps"], []
    for t, token in enumerate(r.drafted):
        if t < len(steps):
            s = steps[t]
            decision = "&check; keep: r &lt; min" if s["accepted"] else "&cross; reject: r &ge; min"
            columns.append(("ok" if s["accepted"] else "miss", chip(run, token, "draft" if s["accepted"] else ""),
                            probability(s["p"]), probability(s["q"]), probability(s["accept_prob"]), f"{s['r']:.3f}", decision))
        else:
            columns.append(("unused", chip(run, token), "", "", "", "", "not checked"))
    if "bonus" in r.details:  # all drafts kept (or none drafted): one token drawn from q
        b, kind = r.details["bonus"], last_kind(r)
        columns.append((kind, chip(run, b["token"], kind), "", probability(b["q"]), "", "",
                        "bonus, drawn from q" if kind == "bonus" else "drawn from q, nothing drafted"))
    names = ["token x", "p(x) draft", "q(x) target", "min(1, q/p)", "r", "decision"]
    table = ('<div class="scroll"><table class="steps">'
             + cells("position", [("", str(t + 1)) for t in range(len(columns))])
             + "".join(cells(name, [(col[0], col[row + 1]) for col in columns]) for row, name in enumerate(names))
             + "</table></div>")
    if "resampled" in r.details:
        table += residual_figure(run, r.details["resampled"], len(steps))
    return table


BARS = (("p", "p(x), draft"), ("q", "q(x), target"), ("min", "min(p, q)"), ("residual", "(q \u2212 p)+, renormalised"))


def residual_figure(run, resampled, position):
    """At a rejection: p, q, min(p, q) and the renormalised residual over the top tokens, the drawn token marked."""
    top = resampled["top"]
    highest = max(max(entry[key] for key, _ in BARS) for entry in top) or 1
    slot, plot_h, base = 118, 170, 200
    svg = [f'<svg class="chart" viewBox="0 0 {len(top) * slot + 20} 262" width="{len(top) * slot + 20}" role="img" '
           f'aria-label="p, q, min and residual over the top tokens">',
           f'<line x1="10" y1="{base}" x2="{len(top) * slot + 10}" y2="{base}" stroke="#000" stroke-width="2"/>']
    for g, entry in enumerate(top):
        x = 10 + g * slot
        drawn, rejected = entry["token"] == resampled["token"], entry["token"] == resampled.get("rejected")
        if drawn:
            svg.append(f'<rect class="drawn" x="{x + 2}" y="8" width="{slot - 4}" height="{base + 50}"/>')
        for j, (key, name) in enumerate(BARS):
            h = plot_h * entry[key] / highest
            svg.append(f'<rect class="{key}" x="{x + 10 + j * 25}" y="{base - h:.1f}" width="22" height="{h:.1f}">'
                       f"<title>{html.escape(name)}: {probability(entry[key])}</title></rect>")
        label = "".join(s for _, s in visible(token_text(run, entry["token"]), in_token=True))
        label = html.escape(label if len(label) <= 11 else label[:10] + "\u2026", quote=False)  # the table below has it whole
        svg.append(f'<text x="{x + slot / 2}" y="{base + 26}" text-anchor="middle" class="label">{label}</text>')
        if drawn or rejected:
            svg.append(f'<text x="{x + slot / 2}" y="{base + 50}" text-anchor="middle" class="label">'
                       f'{"drawn" if drawn else "rejected draft"}</text>')
    rows = "".join(('<tr class="drawn">' if e["token"] == resampled["token"] else "<tr>")
                   + f"<td>{chip(run, e['token'])}{' (rejected draft)' if e['token'] == resampled.get('rejected') else ''}</td>"
                   + "".join(f"<td>{probability(e[key])}</td>" for key, _ in BARS) + "</tr>" for e in top)
    key = " ".join(f'<span class="swatch {k}"></span> {html.escape(name)}' for k, name in BARS)
    rejected = (f"the draft's {chip(run, resampled['rejected'], 'miss')} (where q &lt; p, so its residual is 0) is replaced by "
                if "rejected" in resampled else "")
    return (f'<figure><figcaption>Rejected at position {position}: {rejected}a token drawn from the residual '
            f"(q &minus; p)+ renormalised, here {chip(run, resampled['token'], 'fix')}. "
            "q(x) = min(p(x), q(x)) + (q(x) &minus; p(x))+: a rejection supplies the part of q that accepted drafts cannot. "
            f"Letters as in Chen et al.: q the target, p the draft.</figcaption>\n<p class=\"key\">{key}</p>\n"
            + "".join(svg) + "</svg>\n"
            + '<table class="numbers"><tr><th>token</th>' + "".join(f"<th>{html.escape(name)}</th>" for _, name in BARS)
            + f"</tr>{rows}</table></figure>")


# ---------------------------------------------------------------------------
# Each beyond/ method's own picture of a round
# ---------------------------------------------------------------------------

def svg_label(run, token, limit=10):
    """A token's visible text for an SVG <text>, cut to `limit` characters and an ellipsis (a chip nearby has it whole)."""
    label = "".join(s for _, s in visible(token_text(run, token), in_token=True))
    return html.escape(label if len(label) <= limit else label[:limit - 1] + "\u2026", quote=False)


def primes(n):
    """q, q', q'', ...: the target after n rejections at one node."""
    return "q" + "\u2032" * n


TREE_KEY = (("node-path", "accepted child (the path)"), ("node-rejected", "checked and rejected"),
            ("node-unchecked", "never checked"), ("node-fix", "last token, drawn from the residual"),
            ("node-bonus", "last token, the bonus drawn from q"))


def sampled_tree_figure(run, r):
    """Tree speculative sampling: the sampled tree left to right, the accepted path marked, every child checked
    marked kept or rejected, and the round's last token hung where the walk ended; then every check in order."""
    d = r.details
    parents, path, visits, last = d["parents"], d["path"], d["visits"], d["last"]
    n = len(parents)
    checked = {}  # node -> (how many siblings were rejected before it, its check)
    for visit in visits:
        for i, (child, check) in enumerate(zip(visit["children"], visit["checks"])):
            checked[child] = (i, check)
    end = path[-1] if path else -1
    children = {i: [] for i in range(-1, n + 1)}
    for i, parent in enumerate(parents):
        children[parent].append(i)
    children[end].append(n)  # node n: the round's last token, below where the walk ended
    depth = {-1: 0}
    for i, parent in enumerate(parents + [end]):  # level order: a parent comes before its children
        depth[i] = depth[parent] + 1
    rows, row = {}, [0]

    def place(i):  # leaves take the next row, a parent sits midway between its first and last child
        for c in children[i]:
            place(c)
        if children[i]:
            rows[i] = (rows[children[i][0]] + rows[children[i][-1]]) / 2
        else:
            rows[i], row[0] = row[0], row[0] + 1
    place(-1)

    box_w, box_h, col, line, top = 132, 28, 176, 38, 10
    ending = "fix" if last["from"] == "residual" else "bonus"
    width = 20 + col * max(depth.values()) + box_w + 250
    height = top * 2 + line * row[0]

    def at(i):
        return 10 + col * depth[i], top + line * rows[i]

    svg = [f'<svg class="sampled-tree" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           'aria-label="the sampled tree, the accepted path and the last token">']
    for i in range(n + 1):  # the edges first, under the boxes
        x, y = at(i)
        px, py = at(parents[i] if i < n else end)
        on = "on" if i in path or i == n else "off"
        svg.append(f'<line class="edge-{on}" x1="{px + box_w}" y1="{py + box_h / 2:.1f}" x2="{x}" '
                   f'y2="{y + box_h / 2:.1f}"/>')
    x, y = at(-1)
    svg.append(f'<rect class="node-root" x="{x}" y="{y:.1f}" width="{box_w}" height="{box_h}"><title>the text so far, '
               f'{r.context} tokens</title></rect><text x="{x + 8}" y="{y + 20:.1f}" class="axis">the text</text>')
    for i in range(n):
        x, y = at(i)
        token = r.drafted[i]
        if i in checked:
            before, c = checked[i]
            cls, mark = ("node-path", " \u2713") if c["accepted"] else ("node-rejected", " \u2717")
            note = (f"{'accepted' if c['accepted'] else 'rejected'}: p(x) {probability(c['p'])}, {primes(before)}(x) "
                    f"{probability(c['q'])}, min(1, {primes(before)}/p) {probability(c['accept_prob'])}, r {c['r']:.3f}")
        else:
            cls, mark, note = "node-unchecked", "", f"never checked; p(x) {probability(d['probs'][i])}"
        svg.append(f'<rect class="{cls}" x="{x}" y="{y:.1f}" width="{box_w}" height="{box_h}"><title>token {int(token)}: '
                   f'{note}</title></rect><text x="{x + 6}" y="{y + 20:.1f}">{svg_label(run, token, 9)}{mark}</text>')
    x, y = at(n)
    said = (f"residual ({primes(len(visits[-1]['checks']))} after every child)" if ending == "fix" else
            "bonus from q" if path else "from q, nothing drafted")
    svg.append(f'<rect class="node-{ending}" x="{x}" y="{y:.1f}" width="{box_w}" height="{box_h}"><title>token '
               f'{int(last["token"])}: {said}, probability {probability(last["prob"])}</title></rect>'
               f'<text x="{x + 6}" y="{y + 20:.1f}">{svg_label(run, last["token"], 10)}</text>'
               f'<text x="{x + box_w + 8}" y="{y + 20:.1f}" class="axis">&larr; {html.escape(said, quote=False)}</text>')
    key = " ".join(f'<span class="swatch {cls}"></span> {html.escape(name)}' for cls, name in TREE_KEY)

    rows_html = []
    for depth_i, visit in enumerate(visits, 1):
        for i, c in enumerate(visit["checks"]):
            verdict = "&check; accepted" if c["accepted"] else "&cross; rejected"
            rows_html.append(f'<tr class="{"ok" if c["accepted"] else "miss"}"><td>{depth_i}</td><td>{i + 1}</td>'
                             f"<td>{chip(run, c['token'], 'draft' if c['accepted'] else '')}</td>"
                             f"<td>{probability(c['p'])}</td><td>{primes(i)}</td><td>{probability(c['q'])}</td>"
                             f"<td>{probability(c['accept_prob'])}</td><td>{c['r']:.3f}</td><td>{verdict}</td></tr>")
    last_chip = chip(run, last["token"], ending if path or visits else "oracle")
    rows_html.append(f'<tr class="{ending}"><td>last</td><td></td><td>{last_chip}'
                     f'</td><td></td><td>{primes(len(visits[-1]["checks"])) if ending == "fix" else "q"}</td>'
                     f'<td>{probability(last["prob"])}</td><td></td><td></td><td>{html.escape(said)}</td></tr>')
    table = ('<table class="numbers checks"><tr><th>depth</th><th>child</th><th>token x</th><th>p(x) draft</th>'
             "<th>target</th><th>target(x)</th><th>min(1, target/p)</th><th>r</th><th>decision</th></tr>"
             + "".join(rows_html) + "</table>")
    return (f'<figure class="sampled-tree"><figcaption>The tree the draft sampled ({n} nodes, {d["width"]} children '
            f"per node), the root on the left. The children of the node reached are checked top to bottom; a rejection "
            f"turns the target into the residual for the next sibling (q&prime;, q&Prime;, ...).</figcaption>\n"
            f'<p class="key">{key}</p>\n' + "".join(svg) + "</svg>\n"
            f'<div class="scroll">{table}</div></figure>')


def layers_figure(run, r, number):
    """Self-speculative: the oracle's blocks, the draft's first L marked, one column per token fed; the draft's
    early exit proposes each next token, the oracle's verification runs from block L on and chooses at the top."""
    L, k, n = r.details["layers"], len(r.drafted), r.details.get("n_layer")  # the oracle's blocks
    if not isinstance(n, int) or not 0 < L < n:
        return f'<p class="note">The draft is the oracle\'s first {int(L)} blocks; the oracle\'s depth is not recorded.</p>'
    h = max(8, min(24, 240 // n))       # one block's height
    band, stack_w, col, x0 = 30, 190, 104, 230
    y_head = 26                          # the oracle's ln_f + LM head, its choice in each column
    y_deep = y_head + band               # blocks n-1 .. L
    y_line = y_deep + h * (n - L)        # below block L: where the verification starts
    y_exit = y_line + 24                 # the draft's early exit: ln_f + LM head after block L-1
    y_draft = y_exit + band              # blocks L-1 .. 0
    y_in = y_draft + h * L               # the tokens fed
    width, height = x0 + col * (k + 1) + 10, y_in + 56
    status = ["ok" if j < r.accepted else "miss" if j == r.accepted else "unused" for j in range(k)]
    status.append(last_kind(r) if r.accepted == k else "unused")

    def block_y(layer):
        return y_deep + h * (n - 1 - layer) if layer >= L else y_draft + h * (L - 1 - layer)

    svg = [f'<svg class="layers" viewBox="0 0 {width} {height}" width="{width}" role="img" '
           f'aria-label="the oracle\'s {n} blocks, the draft\'s first {L}">',
           f'<text x="10" y="18" class="axis">the oracle&#x27;s {n} blocks</text>']
    for layer in range(n):  # the stack: the oracle's blocks, the draft's marked
        y, who = block_y(layer), "draft" if layer < L else "oracle"
        svg.append(f'<rect class="blk-{who}" x="10" y="{y}" width="{stack_w}" height="{h}">'
                   f"<title>block {layer}: {'the draft and the oracle' if who == 'draft' else 'the oracle only'}"
                   "</title></rect>")
        if h >= 16:
            svg.append(f'<text x="16" y="{y + h - 4}" class="small">block {layer}</text>')
    if h < 16:  # too thin to name each block: name the two groups
        for first, last, y in ((0, L - 1, y_draft + h * L / 2), (L, n - 1, y_deep + h * (n - L) / 2)):
            svg.append(f'<text x="16" y="{y + 5:.1f}" class="small">'
                       f'{"block " + str(first) if first == last else f"blocks {first}&ndash;{last}"}</text>')
    svg.append(f'<rect class="head stack" x="10" y="{y_head}" width="{stack_w}" height="{band - 4}"/>'
               f'<text x="16" y="{y_head + 19}" class="small">ln_f + LM head</text>'
               f'<rect class="head exit stack" x="10" y="{y_exit + 2}" width="{stack_w}" height="{band - 4}"/>'
               f'<text x="16" y="{y_exit + 21}" class="small">draft exit: ln_f + head</text>'
               f'<text x="16" y="{y_in + 22}" class="small">tokens fed</text>')
    for j in range(k + 1):
        x = x0 + j * col
        token = r.drafted[j - 1] if j else None
        for layer in range(n):
            who = "draft" if layer < L else "oracle"
            svg.append(f'<rect class="lay-{who}" x="{x}" y="{block_y(layer)}" width="{col - 8}" height="{h}"/>')
        # the oracle's choice at the top, compared with the draft's exit in the same column
        choice, s = r.oracle[j], status[j]
        mark = {"ok": " \u2713", "miss": " \u2717", "bonus": " +"}.get(s, "")
        svg.append(f'<rect class="head {s}" x="{x}" y="{y_head}" width="{col - 8}" height="{band - 4}"><title>the oracle'
                   f"&#x27;s choice after this column: token {int(choice)}</title></rect>"
                   f'<text x="{x + 4}" y="{y_head + 19}">{svg_label(run, choice, 7)}{mark}</text>')
        if j < k:  # draft pass j exits early with the next draft; pass k runs its blocks for the oracle only
            svg.append(f'<rect class="head exit {s if s != "bonus" else "ok"}" x="{x}" y="{y_exit + 2}" width="{col - 8}" '
                       f'height="{band - 4}"><title>the draft\'s exit: token {int(r.drafted[j])}</title></rect>'
                       f'<text x="{x + 4}" y="{y_exit + 21}">&rarr; {svg_label(run, r.drafted[j], 6)}</text>')
        else:
            svg.append(f'<text x="{x + 4}" y="{y_exit + 21}" class="small">no exit</text>')
        svg.append(f'<text x="{x + (col - 8) / 2}" y="{y_in + 22}" text-anchor="middle">'
                   f'{svg_label(run, token, 8) if token is not None else "text" if number > 1 else "prompt"}</text>'
                   f'<text x="{x + (col - 8) / 2}" y="{y_in + 42}" text-anchor="middle" class="small">'
                   f'{"d" + str(j) if j else "last token" if number > 1 else "whole prompt"}</text>')
    svg.append(f'<line class="start" x1="10" y1="{y_line}" x2="{width - 10}" y2="{y_line}"/>'
               f'<text x="{x0}" y="{y_line + 17}" class="small">&uarr; the oracle: verification starts at layer {L}, '
               f"over all {k + 1} columns in one pass</text>")
    draft_blocks = "block 0" if L == 1 else f"blocks 0&ndash;{L - 1}"
    return (f'<figure class="layers"><figcaption>The draft is {draft_blocks} of the oracle\'s {n}, then ln_f and the '
            f"LM head. Column j is draft pass j: it runs {'the text' if number > 1 else 'the prompt'} (then d<sub>j</sub>) "
            f"through {draft_blocks}, their keys and values going into the one cache both share, and exits early with "
            f"the next draft; the last pass proposes nothing, its rows are for the oracle. The oracle then runs only "
            f"blocks {L}&ndash;{n - 1}, in one pass over all {k + 1} columns, from the draft's hidden states after block "
            f"{L - 1}, and chooses at the top: a draft is kept while the oracle's choice in its column equals the "
            f"draft's exit there.</figcaption>\n" + "".join(svg) + "</svg></figure>")


SUFFIX_WINDOW = 48  # a text up to this long is shown whole in a round's suffix picture; a longer one around the match


def suffix_figure(run, r):
    """Suffix drafts: the text before the round with the suffix it ends in, the latest earlier occurrence of that
    suffix (and any other earlier one in view), and what followed it there: the draft (tree: its likeliest line)."""
    m = r.details["match"]
    if "end" not in m:
        return ""  # nothing matched, or too short: the round's reason says so
    text = (list(getattr(run, "prompt_ids", [])) + list(getattr(run, "tokens", [])))[:r.context]
    n, length, end = len(text), m["length"], m["end"]
    start = end - length + 1
    if not (0 <= start and end < n - 1 and length <= n and text[start:end + 1] == text[n - length:]):
        return ('<p class="note">The match this round recorded does not fit the page\'s text (the prompt\'s ids, then '
                "the tokens generated), so it is not drawn.</p>")
    suffix = text[n - length:]
    ends = [e for e in range(length - 1, n - 1) if text[e - length + 1:e + 1] == suffix]  # every earlier occurrence
    followed = continuation(text, end, max(len(r.drafted) if "parents" not in r.details else draft_length(r), 1))
    in_text = list(range(end + 1, min(end + 1 + len(followed), n)))  # what followed, as far as the text goes
    roles = {}
    for e in ends:
        for i in range(e - length + 1, e + 1):
            roles.setdefault(i, set()).add("sfx-other")
    for i in range(start, end + 1):
        roles.setdefault(i, set()).add("sfx-match")
    for i in in_text:
        roles.setdefault(i, set()).add("sfx-follow")
    for i in range(n - length, n):
        roles.setdefault(i, set()).add("sfx-end")
    if n <= SUFFIX_WINDOW:
        shown = list(range(n))
    else:  # around the earlier occurrence and what followed it, and the text's end
        shown = sorted({i for i in range(start - 6, min(start + 10, n))} | {i for i in range(end - 8, end + 1)}
                       | set(in_text[:16]) | set(range(end + 1 + len(in_text) - 4, end + 1 + len(in_text) + 4))
                       | set(range(n - length - 6, n - length + 8)) | set(range(n - 10, n)))
        shown = [i for i in shown if 0 <= i < n]
    parts, previous = [], -1
    for i in shown:
        if i > previous + 1:
            parts.append(f'<span class="gap">&hellip; {plural(i - previous - 1, "token")} &hellip;</span>')
        classes = " ".join(c for c in ("sfx-other", "sfx-match", "sfx-follow", "sfx-end") if c in roles.get(i, ()))
        parts.append(f'<span class="pos {classes}" title="position {i}">{chip(run, text[i])}</span>' if classes
                     else chip(run, text[i]))
        previous = i
    if shown and shown[-1] < n - 1:
        parts.append(f'<span class="gap">&hellip; {plural(n - 1 - shown[-1], "token")} &hellip;</span>')
    copied = len(followed) - len(in_text)
    copy_note = (f"; the text ends {plural(len(in_text), 'token')} after it, so the last {plural(copied, 'token')} "
                 f"{'is' if copied == 1 else 'are'} copied on from what was just copied, as LZ77 does" if copied else "")
    others = (f" It is the latest of {m['occurrences']} earlier occurrences (in lighter yellow where shown)."
              if m.get("occurrences", 1) > 1 else "")
    tree = (" The tree below gathers what followed every earlier occurrence, the most frequent first; this line is "
            "what followed the latest." if "parents" in r.details else "")
    key = " ".join(f'<span class="swatch {cls}"></span> {html.escape(name)}' for cls, name in (
        ("sfx-end", "the suffix the text ends in"), ("sfx-match", "its latest earlier occurrence"),
        ("sfx-follow", "what followed it there: the draft"), ("sfx-other", "another earlier occurrence")))
    return (f'<figure class="suffix"><figcaption>The text before the round ends in {plural(length, "token")} '
            f"{chips(run, suffix, ['sfx-end'] * length)} that occurred earlier, ending at position {end} (positions "
            f"count from 0, the prompt included).{others} What followed there: "
            f"{chips(run, followed, ['sfx-follow'] * len(followed))}{copy_note}.{tree}</figcaption>\n"
            f'<p class="key">{key}</p>\n<div class="strip">{" ".join(parts)}</div></figure>')


CSS = """
:root { color-scheme: light; }
body { font: 20px/1.5 "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #000; background: #fff;
       max-width: 1240px; margin: 0 auto; padding: 0.5em 1.2em 2em; }
h1 { font-size: 1.7em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.35em; border-bottom: 3px solid #000; margin: 1.4em 0 0.5em; }
table.facts th { text-align: left; vertical-align: top; padding: 0.1em 1em 0.1em 0; }
table.facts td.prompt { white-space: pre-wrap; font-weight: bold; }
.cards { display: flex; gap: 0.8em; flex-wrap: wrap; margin: 0.8em 0; }
.card { border: 3px solid #000; border-radius: 8px; padding: 0.3em 0.9em; min-width: 11em; }
.card b { display: block; font-size: 2em; line-height: 1.2; }
.card small { display: block; font-size: 0.8em; color: #333; }
.text { font-size: 1.2em; line-height: 2; white-space: pre-wrap; overflow-wrap: anywhere; border: 2px solid #000;
        padding: 0.5em 0.8em; }
.text .prompt { color: #444; }
.draft { background: #bdecbd; }
.fix { background: #ffd4c2; }
.bonus { background: #c9dbff; }
span.draft { border-bottom: 3px solid #0b6b0b; }
span.fix { border-bottom: 3px dashed #b02a00; }
span.bonus { border-bottom: 4px double #133f9e; }
td.bonus { background: #e4edff; }
.text .draft, .text .fix, .text .bonus { box-shadow: inset -1px 0 #fff; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 0.4em 1.6em; }
ul.legend span { font-weight: bold; padding: 0 0.3em; }
.tok { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; white-space: pre; border: 1px solid #666;
       border-radius: 4px; padding: 0 0.2em; display: inline-block; min-width: 0.6em; line-height: 1.4; }
.ws { color: #777; }
.byte { color: #a00000; font-family: "DejaVu Sans Mono", monospace; font-size: 0.9em; white-space: nowrap; }
details.round { border: 2px solid #888; border-radius: 6px; margin: 0.4em 0; padding: 0.2em 0.7em; }
details.round[open] { border-color: #000; }
summary { cursor: pointer; }
.context { color: #444; font-size: 0.85em; }
.scroll { overflow-x: auto; }
table.steps { border-collapse: collapse; margin: 0.4em 0; }
table.steps th { text-align: right; padding: 0.15em 0.6em 0.15em 0; font-weight: normal; color: #333; white-space: nowrap; }
table.steps td { text-align: center; padding: 0.15em 0.4em; border-left: 1px solid #bbb; white-space: nowrap; }
td.miss { background: #ffe9e0; font-weight: bold; }
td.unused, li.unused > .tok { color: #666; }
td.unused .tok, li.unused > .tok { border-style: dotted; }
.caches { color: #222; margin: 0.3em 0; }
ul.tree, ul.tree ul { list-style: none; margin: 0.2em 0; padding-left: 1.4em; }
ul.tree ul { border-left: 2px solid #888; }
ul.tree li { margin: 0.2em 0; }
.root { font-style: italic; }
figure { margin: 0.6em 0; }
figcaption { margin-bottom: 0.3em; }
svg { max-width: 100%; height: auto; display: block; margin: 0.3em 0; }
svg text { font: 16px "DejaVu Sans Mono", monospace; fill: #000; }
svg text.axis { font-family: "DejaVu Sans", sans-serif; }
rect.measured { fill: #1b4f9c; }
rect.predicted { fill: #fff; stroke: #000; stroke-width: 2; stroke-dasharray: 5 3; }
rect.p { fill: #e69f00; } rect.q { fill: #0072b2; } rect.min { fill: #999; } rect.residual { fill: #b0407a; }
rect.drawn { fill: #fff2b3; stroke: #000; stroke-width: 2; }
.swatch { display: inline-block; width: 1em; height: 1em; vertical-align: -0.15em; border: 1px solid #000; }
.swatch.measured { background: #1b4f9c; } .swatch.predicted { background: #fff; border: 2px dashed #000; }
.swatch.p { background: #e69f00; } .swatch.q { background: #0072b2; } .swatch.min { background: #999; }
.swatch.residual { background: #b0407a; }
.key { margin: 0.2em 0; }
table.numbers { border-collapse: collapse; }
table.numbers td, table.numbers th { padding: 0.1em 0.6em; text-align: right; border-bottom: 1px solid #ccc; }
table.numbers tr.drawn { background: #fff2b3; font-weight: bold; }
.note { font-weight: bold; }
svg text.small { font: 13px "DejaVu Sans", sans-serif; }
rect.node-root { fill: #fff; stroke: #000; stroke-width: 2; stroke-dasharray: 4 3; }
rect.node-path { fill: #bdecbd; stroke: #0b6b0b; stroke-width: 3; }
rect.node-rejected { fill: #ffd4c2; stroke: #b02a00; stroke-width: 2; stroke-dasharray: 6 3; }
rect.node-unchecked { fill: #f2f2f2; stroke: #999; stroke-width: 1; stroke-dasharray: 2 2; }
rect.node-fix { fill: #ffd4c2; stroke: #b02a00; stroke-width: 3; }
rect.node-bonus { fill: #c9dbff; stroke: #133f9e; stroke-width: 3; }
line.edge-on { stroke: #0b6b0b; stroke-width: 4; } line.edge-off { stroke: #aaa; stroke-width: 1.5; }
.swatch.node-path { background: #bdecbd; border: 2px solid #0b6b0b; }
.swatch.node-rejected { background: #ffd4c2; border: 2px dashed #b02a00; }
.swatch.node-unchecked { background: #f2f2f2; border: 1px dotted #999; } .swatch.node-fix { background: #ffd4c2; }
.swatch.node-bonus { background: #c9dbff; }
table.checks td { text-align: center; } table.checks tr.miss { background: #ffe9e0; }
table.checks tr.fix { background: #ffd4c2; } table.checks tr.bonus { background: #e4edff; }
rect.blk-draft, rect.lay-draft { fill: #bdecbd; stroke: #0b6b0b; }
rect.blk-oracle, rect.lay-oracle { fill: #c9dbff; stroke: #133f9e; }
rect.head { fill: #fff; stroke: #000; } rect.head.exit { fill: #f4fff4; stroke: #0b6b0b; }
rect.head.ok { fill: #bdecbd; } rect.head.miss { fill: #ffd4c2; } rect.head.bonus { fill: #c9dbff; }
rect.head.unused { fill: #eee; stroke: #999; stroke-dasharray: 2 2; }
line.start { stroke: #000; stroke-width: 3; stroke-dasharray: 8 4; }
.strip { line-height: 2.2; overflow-wrap: anywhere; }
.strip .gap { color: #555; font-style: italic; padding: 0 0.3em; }
.pos { padding: 0.15em 0.05em; border-radius: 4px; }
.sfx-other { background: #fff7d6; }
.sfx-match { background: #ffe066; outline: 2px solid #8a6d00; }
.sfx-follow { background: #e3cff5; outline: 2px dashed #6a2c91; }
.sfx-end { background: #ffe066; outline: 3px solid #000; }
.swatch.sfx-other { background: #fff7d6; } .swatch.sfx-match { background: #ffe066; }
.swatch.sfx-follow { background: #e3cff5; } .swatch.sfx-end { background: #ffe066; border: 3px solid #000; }
button { font-size: 0.9em; padding: 0.2em 0.8em; }
@media print {
  .noprint { display: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  .scroll { overflow: visible; }
  details.round { break-inside: avoid; }
  body { max-width: none; font-size: 14px; }
}
"""
