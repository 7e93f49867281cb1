"""How a run is shown in a terminal: the text as it comes, the statistics line, the per-round trace.

Used by the command line (cli.py) and the session (session.py). What a round's trace says is its method's
(registry.Shown, from its family's file in methods/); this file prints the rounds around it and holds what
the families share: a line of drafts, the clause for a round cut short, numbers printed with the digits
that decide them. The page for a browser is page/report.py's.
"""

import codecs
import os

from errors import printable

GREEN, RESET = "\x1b[32m", "\x1b[0m"


def use_color(setting, out):
    """--color auto|always|never: auto means a terminal, and NO_COLOR unset (no-color.org)."""
    if setting == "always":
        return True
    return setting == "auto" and out.isatty() and not os.environ.get("NO_COLOR") and ansi_works()


def ansi_works():
    """Colour codes work on POSIX terminals; on Windows only once virtual-terminal mode is on."""
    if os.name != "nt":
        return True
    try:
        import ctypes
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.GetStdHandle(-11)  # STD_OUTPUT_HANDLE
        mode = ctypes.c_uint32()
        return bool(kernel32.GetConsoleMode(handle, ctypes.byref(mode))
                    and kernel32.SetConsoleMode(handle, mode.value | 0x0004))  # ENABLE_VIRTUAL_TERMINAL_PROCESSING
    except (AttributeError, OSError):
        return False


def as_utf8(text_io, errors):
    """A pipe or a file as UTF-8, whatever the locale says; a terminal keeps its own encoding.
    errors: what a character that cannot be encoded or decoded becomes. Output uses
    "replace" (shown as ?, never an error); input "surrogateescape" (bytes that do not decode
    arrive as lone surrogates, which the prompt's check names in one line)."""
    if not hasattr(text_io, "reconfigure"):
        return
    if text_io.isatty():
        text_io.reconfigure(errors=errors)
    else:
        text_io.reconfigure(encoding="utf-8", errors=errors)


def stream(tokens, token_bytes, from_draft, color, out):
    """Write each token's text as it arrives; return the list of tokens.

    Tokens are byte sequences: a Chinese character or an emoji is often split
    over two or three of them. An incremental UTF-8 decoder holds the bytes
    back until a character is complete, so nothing prints as garbage. On a
    terminal, control characters are shown as \\xNN rather than sent to it.
    from_draft is the generator's Stats.from_draft, filled in as it runs.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    terminal = out.isatty()
    generated = []
    for token in tokens:
        generated.append(token)
        text = decoder.decode(token_bytes(token))
        if terminal:  # a generated escape character must not drive the user's terminal: show it instead
            text = printable(text)
        if color and from_draft[len(generated) - 1] and text:
            text = f"{GREEN}{text}{RESET}"
        out.write(text)
        out.flush()
    out.write(decoder.decode(b"", final=True))
    return generated


def listed(number, total, text):
    """One entry of a listing of many texts (a batch's continuations, in order): a line naming it, then the
    text, every line of it indented by two spaces, its control characters escaped, on any output. A naming
    line starts at the first column and no line of text does, and no character of the text can start a new
    line but the newline itself (the line and paragraph separators are escaped too): so no prompt, and no
    generated text, can pass for the next entry's line, whatever reads it (a terminal, a file, a program
    splitting lines)."""
    shown = printable(text).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"=== {number} of {total} ===\n" + "".join(f"  {line}\n" for line in shown.split("\n"))


def summary(method, stats, elapsed):
    """The statistics line: tokens/s; for a method of rounds, its rounds, tokens per round and acceptance (the
    mean accepted length, vLLM's name for tokens per round) and where the time went; else its forward passes."""
    line = f"{method}: {stats.n_generated} new tokens in {elapsed:.2f} s, {stats.n_generated / max(elapsed, 1e-9):.1f} tokens/s; "
    if not stats.rounds:  # the oracle alone, the draft alone, beam search: no rounds, a forward pass per token or beam
        return line + f"{stats.draft_passes + stats.oracle_passes} forward passes"
    line += f"{stats.rounds} rounds, {stats.oracle_passes} oracle passes, {stats.tokens_per_round:.2f} tokens per round"
    if stats.drafted:
        line += (f"; acceptance {stats.kept_fraction:.1%} ({stats.accepted}/{stats.drafted} drafts), by draft position "
                 f"{by_position(stats)}; time in draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s")
    return line


def by_position(stats, most=8):
    """The acceptance rate at each draft position (vLLM's per-position acceptance; a tree's positions are its
    depths): "1: 83%, 2: 61%, 3: 40%", the first `most` positions. Tokens per round, beside it, is vLLM's mean
    acceptance length and Spec-Bench's mean accepted tokens."""
    rates = stats.acceptance_at()
    shown = ", ".join(f"{i}: {rate:.0%}" for i, rate in enumerate(rates[:most], 1))
    return shown + (", ..." if len(rates) > most else "")


# ---------------------------------------------------------------------------
# The per-round trace (--trace)
# ---------------------------------------------------------------------------

def token_text(token_bytes, token):
    """A token as Python would write it: its text in quotes, or its bytes where they are not whole UTF-8."""
    return bytes_text(token_bytes(token))


def bytes_text(raw):
    """Bytes as Python would write them: their text in quotes, or the bytes themselves where they are not whole UTF-8."""
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:  # part of a character split over several tokens
        return repr(raw)


# ---------------------------------------------------------------------------
# The per-round trace (--trace)
# ---------------------------------------------------------------------------

def format_trace(shown, trace, token_bytes, n_prompt):
    """The lines of --trace: one block per round (a stats.Round each), its lines made by its method's shown
    (a registry.Shown): how to read them once, then per round its drafts and checks, why, the text it added
    and what the caches hold."""
    def show(tokens):
        return " ".join(token_text(token_bytes, t) for t in tokens)

    lines = [f"trace: prompt of {n_prompt} tokens; in each round the oracle checks the drafts in one pass"]
    lines += [f"  {line}" for line in shown.legend]
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")  # across rounds: a character split over two rounds shows whole
    for i, r in enumerate(trace, 1):
        setting = shown.setting(r.details) if shown.setting and r.details is not None else ""
        lines.append(f"round {i}: context {r.context_length} tokens{setting}")
        lines += (shown.drafts or line_lines)(r, show)
        lines += [f"  why      {reason}" for reason in shown.reasons(r, show)]
        lines.append(f"  text     {text.decode(b''.join(token_bytes(t) for t in r.new), final=i == len(trace))!r}")
        caches = ", ".join(f"{name} {n}" for name, n in (r.cached or {}).items() if n is not None)
        lines.append(f"  caches   {caches} positions (context is now {r.context_length + len(r.new)} tokens)")
    return lines


def line_lines(r, show, drafted=None):
    """A line of drafts: what the draft proposed (drafted: as shown, default each token), the oracle's
    choice after each prefix, what was kept."""
    drafted = show(r.drafted) if drafted is None else drafted
    lines = [f"  drafted  {drafted or '(nothing)'}"]
    if r.oracle is not None:
        lines.append(f"  oracle   {show(r.oracle)}   (its choice after each draft prefix)")
    return lines + [f"  kept     {r.accepted} draft(s) + {show(r.new[-1:])} from the oracle"]


def cut_short(n_draft, most, what="draft"):
    """"" or the clause saying that the tokens left to make allowed this round at most `most` (< n_draft)."""
    if n_draft is None or most is None or most >= n_draft:
        return ""
    return (f"; at most {most} {what}{'s' if most != 1 else ''} this round (n_draft {n_draft}): only {most + 1} "
            f"token{'s were' if most + 1 != 1 else ' was'} left to make")


def length_reason(n_draft, k, letter=""):
    """A fixed draft length, and where the tokens left to make cut this round's draft short (k < n_draft)."""
    left = k + 1
    cut = "" if k == n_draft else \
        f"; {k} drafted because only {left} token{'s were' if left != 1 else ' was'} left to make"
    return f"fixed draft length n_draft{letter} {n_draft}{cut}"


def decisive_digits(*compared, least=2):
    """How many significant digits a trace or a page prints numbers with where a rule compared them: the
    fewest, at least `least`, at which every pair (a, b) in `compared` that differs prints differently
    (r beside min(1, q/p) or h, q/p beside 1). Rounding to a number of significant digits keeps order, so the
    printed pair then reads the way the rule decided: a q/p of 1.046 shows as 1.05 beside 1, never as 1."""
    for digits in range(least, 18):  # 17 digits tell any two float64 apart
        if all(a == b or f"{a:.{digits}g}" != f"{b:.{digits}g}" for a, b in compared):
            return digits
    return 17
