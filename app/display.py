"""How a run is shown in a terminal: the text as it comes, the statistics line, the per-round trace.

Used by the command line (cli.py) and the interactive session (session.py).
The page for a browser is report.py's.
"""

import codecs
import os
import re

GREEN, RESET = "\x1b[32m", "\x1b[0m"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters but tab and newline


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
            text = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
        if color and from_draft[len(generated) - 1] and text:
            text = f"{GREEN}{text}{RESET}"
        out.write(text)
        out.flush()
    out.write(decoder.decode(b"", final=True))
    return generated


def summary(method, stats, elapsed):
    """The statistics line: tokens/s, oracle passes, tokens per pass, acceptance, where the time went."""
    passes = {"drafter": "draft model passes", "beam": "steps"}.get(method, "oracle passes")  # what Stats.rounds counts
    line = (f"{method}: {stats.n_tokens} new tokens in {elapsed:.2f} s, {stats.n_tokens / max(elapsed, 1e-9):.1f} tokens/s; "
            f"{stats.rounds} {passes}, {stats.tokens_per_round:.2f} tokens per pass")
    if stats.drafted:
        line += (f"; acceptance {stats.acceptance_rate:.1%} ({stats.accepted}/{stats.drafted} drafts); "
                 f"time in draft {stats.draft_time:.2f} s, oracle {stats.oracle_time:.2f} s")
    return line


# ---------------------------------------------------------------------------
# The per-round trace (--trace)
# ---------------------------------------------------------------------------

def token_text(token_bytes, token):
    """A token as Python would write it: its text in quotes, or its bytes where they are not whole UTF-8."""
    raw = token_bytes(token)
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:  # part of a character split over several tokens
        return repr(raw)


def format_trace(trace, token_bytes, n_prompt):
    """The lines of --trace: one block per round (a decoding.Round each)."""
    def show(tokens):
        return " ".join(token_text(token_bytes, t) for t in tokens)

    lines = [f"trace: prompt of {n_prompt} tokens; in each round the oracle checks the drafts in one pass"]
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")  # across rounds: a character split over two rounds shows whole
    for i, r in enumerate(trace, 1):
        setting = "".join(f", {name} {value:.3g}" if isinstance(value, float) else f", {name} {value}"
                          for name, value in r.details.items() if name in ("threshold", "gamma"))
        lines.append(f"round {i}: context {r.context} tokens{setting}")
        if "steps" in r.details:
            lines += sps_lines(r, show)
        elif "parents" in r.details:
            lines += tree_lines(r, show)
        else:
            lines += [f"  drafted  {show(r.drafted) or '(nothing)'}",
                      f"  oracle   {show(r.oracle)}   (its choice after each draft prefix)",
                      f"  kept     {r.accepted} draft(s) + {show(r.new[-1:])} from the oracle"]
        lines.append(f"  text     {text.decode(b''.join(token_bytes(t) for t in r.new), final=i == len(trace))!r}")
        caches = ", ".join(f"{name} {n}" for name, n in r.cached.items() if n is not None)
        lines.append(f"  caches   {caches} positions (context is now {r.context + len(r.new)} tokens)")
    return lines


def sps_lines(r, show):
    """An SpS round: each draft's p(x), q(x), the acceptance probability, r and the decision (Chen et al.'s
    letters: q is the target, i.e. the oracle, p the draft)."""
    lines = [f"  drafted  {show(r.drafted)}   (sampled from the draft's p)"]
    for t, step in enumerate(r.details["steps"], 1):
        verdict = "accept" if step["accepted"] else "REJECT"
        # .3g: rare tokens' probabilities stay readable (0.00055, not 0.001 beside 0.000)
        lines.append(f"  x~{t} {show([step['token']]):14s} p(x) {step['p']:.3g}  q(x) {step['q']:.3g}  "
                     f"min(1, q/p) {step['accept_prob']:.3g}  r {step['r']:.3g}  -> {verdict}")
    if "resampled" in r.details:
        res = r.details["resampled"]
        drawn = next((e["residual"] for e in res["top"] if e["token"] == res["token"]), None)
        largest = sorted((e for e in res["top"] if e["residual"] > 0), key=lambda e: -e["residual"])
        top = "  ".join(f"{show([e['token']])} {e['residual']:.3g}" for e in largest)
        chance = f", where it had {drawn:.3g}" if drawn is not None else ""
        lines.append(f"  resample {show([res['token']])} from (q - p)+ renormalised{chance}; "
                     f"there, among the likeliest tokens: {top or '(none)'}")
    else:
        bonus = r.details["bonus"]
        lines.append(f"  bonus    {show([bonus['token']])} sampled from q (q(x) {bonus['q']:.3g}): all {len(r.drafted)} accepted")
    return lines


def tree_lines(r, show):
    """A tree round: each node under its parent, the accepted path marked."""
    parents, path = r.details["parents"], set(r.details["path"])
    lines = [f"  tree     {len(r.drafted)} nodes; * = on the accepted path"]

    def walk(parent, depth):
        for i, p in enumerate(parents):
            if p == parent:
                lines.append(f"  {'  ' * depth}{'*' if i in path else '-'} {show([r.drafted[i]])}"
                             f"   (oracle's choice after it: {show([r.oracle[i + 1]])})")
                walk(i, depth + 1)

    walk(-1, 1)
    lines.append(f"  kept     {r.accepted} node(s) + {show(r.new[-1:])} from the oracle")
    return lines
