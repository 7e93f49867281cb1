"""A draft with a vocabulary of its own: speculative decoding and SpS through the text (crossvocab.py).

Not methods of their own: they are how speculative and sps run when the draft's tokenizer files spell other
tokens than the oracle's (workbench/runner.py's load_tokenizers decides; registry.variant routes). Each
round shows the draft's own tokens, their text, the oracle's candidates (that text in its tokens), the
oracle's choices or each test's p', q and r, and how the draft caught up with the agreed text.
"""

from crossvocab import crossvocab_generate, crossvocab_sample
from workbench.display import bytes_text, decisive_digits, length_reason
from workbench.page.report import cells, greedy_table
from workbench.page.tokens import as_html, chip, last_mark, plural, probability, visible
from workbench.registry import Method, Shown

LEGEND = ("across vocabularies (crossvocab.py): the draft writes in its own tokens; their text, in the oracle's",
          "tokens, is what the oracle checks (the candidates). Greedy: the candidates are kept up to the first",
          "one the oracle would not write itself. Sampling: x is kept when r < min(1, q(x)/p'(x)), r uniform on",
          "[0, 1), p' the draft's p on the tokens both vocabularies share, renormalised, q the oracle's; at a",
          "rejection the last token is drawn from (q - p')+. Then the draft keeps its tokens whose text begins",
          "the agreed text and reads the rest in its own tokens. Each cache counts its own model's tokens.")
ACROSS = ("The draft has a vocabulary of its own (crossvocab.py, Timor et al. 2025): each round it writes its tokens, "
          "shown first as they are in its vocabulary; their text, in the oracle's tokens, is what the oracle checks "
          "(the candidates). The tokens are the oracle's everywhere else on this page; after the round the draft keeps "
          "its tokens whose text begins the agreed text and reads the rest in its own.")
GREEDY_HOW = ("Each round the oracle checks the candidates in one pass, giving its own choice after each prefix: they are "
              "kept up to the first disagreement, then the oracle's token is added. " + ACROSS)
SAMPLING_HOW = ("Each round the draft samples its tokens from p\u2032, its p on the tokens both vocabularies share, "
                "renormalised; the oracle computes q at every candidate in one pass. Candidate x is kept if r < "
                "min(1, q(x)/p\u2032(x)), r uniform on [0, 1); at the first rejection a token is drawn from the residual "
                "(q \u2212 p\u2032)+ instead. Letters as in Chen et al. 2023: q is the target (the oracle), p the draft. "
                + ACROSS)


def crossvocab_lines(r, show):
    """A round across vocabularies (crossvocab.py): the draft's own tokens shown as text, their text, the
    oracle's candidates (that text in its tokens), the oracle's choices (greedy) or each test's p', q and r
    (sampling), what was kept, and how the draft's token list caught up with the agreed text."""
    d = r.details  # a crossvocab.CrossVocabDetails
    own = " ".join(bytes_text(piece) for piece in d.draft_pieces)
    how = "sampled from p', its p on the tokens both vocabularies share" if d.tests is not None else "greedy"
    lines = [f"  draft    {own or '(nothing)'}   ({len(d.draft_ids)} token(s) of the draft's own vocabulary, {how})",
             f"  as text  {bytes_text(d.text)}",
             f"  checked  {show(r.drafted) or '(nothing)'}   (that text in the oracle's tokens: the candidates)"]
    if d.tests is None:
        if r.oracle is not None:
            lines.append(f"  oracle   {show(r.oracle)}   (its choice after each candidate prefix)")
        lines.append(f"  kept     {r.accepted} candidate(s) + {show(r.new[-1:])} from the oracle")
    else:
        for t, test in enumerate(d.tests, 1):
            a = min(1.0, test["q"] / test["p"])
            digits = decisive_digits((test["r"], a), (a, 1.0), (test["r"], 1.0), least=3)
            lines.append(f"  x~{t} {show([test['token']]):14s} p'(x) {test['p']:.3g}  q(x) {test['q']:.3g}  "
                         f"min(1, q/p') {a:.{digits}g}  r {test['r']:.{digits}g}  -> "
                         f"{'accept' if test['accepted'] else 'REJECT'}")
        last = show(r.new[-1:])
        drawn = (f"resampled from (q - p')+ renormalised, after candidate {r.accepted + 1} was rejected"
                 if r.accepted < len(r.drafted) else
                 f"drawn from q: all {len(r.drafted)} kept" if r.drafted else "drawn from q: nothing drafted")
        lines.append(f"  kept     {r.accepted} candidate(s) + {last} {drawn}")
    again = " ".join(bytes_text(piece) for piece in d.reencoded_pieces)
    lines.append(f"  draft    keeps {d.draft_kept} of its {len(d.draft_ids)} token(s) (their text begins the agreed "
                 f"text) and reads the rest of it in its own tokens: {again or '(nothing left)'}")
    return lines


def crossvocab_reasons(r, show):
    d = r.details
    k = len(d.draft_ids)
    if d.stopped:
        return [f"drafted {k} of n_draft {d.n_draft}: {d.stopped}"]
    return [length_reason(d.n_draft, k)]


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


def run_speculative(c):  # string-level exact match
    draft_enc, oracle_enc = c.encs
    return crossvocab_generate(c.draft, c.oracle, draft_enc, oracle_enc, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


def run_sps(c):  # token-level intersection
    draft_enc, oracle_enc = c.encs
    return crossvocab_sample(c.draft, c.oracle, draft_enc, oracle_enc, c.ids, c.n_new, n_draft=c.n_draft, rng=c.rng,
                             processor=c.settings.processor, stats=c.stats)


# Not registered: lines.py's speculative and sampling.py's sps take them as their `across`.
SPECULATIVE = Method("speculative", "greedy speculative decoding across vocabularies (crossvocab.py)", run_speculative,
                     n_draft=4, shown=Shown(legend=LEGEND, drafts=crossvocab_lines, reasons=crossvocab_reasons,
                                            how_to_read=GREEDY_HOW, page_table=crossvocab_table))
SPS = Method("sps", "speculative sampling across vocabularies (crossvocab.py)", run_sps, n_draft=4, samples=True,
             shown=Shown(legend=LEGEND, drafts=crossvocab_lines, reasons=crossvocab_reasons, how_to_read=SAMPLING_HOW,
                         page_table=crossvocab_table, sampled=lambda r: r.details.tests is not None))
