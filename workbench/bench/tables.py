"""Rows of results (a list of dicts) as an aligned text table for the terminal, and as a CSV file."""

import csv
import io

from weights import files


def text(rows, columns):
    """The rows as aligned text columns."""
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def markdown(rows, columns, titles=None):
    """The rows as a markdown table (README.md and PERFORMANCE.md take them as they are); titles: the
    header's words for the columns, if not their keys."""
    lines = ["| " + " | ".join(titles or columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows])


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet runs a cell that starts so as a formula


def spreadsheet_safe(value):
    """A cell as text no spreadsheet runs: text starting like a formula ("+2 / -1") gets a leading
    apostrophe, as OWASP's advice for CSV files has it; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_csv(path, rows, columns):
    """The rows as CSV, spreadsheet-safe, written whole or not at all (weights/files.py)."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows({key: spreadsheet_safe(value) for key, value in row.items()} for row in rows)
    files.write_text(path, out.getvalue())
