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


def write_csv(path, rows, columns):
    """The rows as CSV, written whole or not at all (weights/files.py)."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    files.write_text(path, out.getvalue())
