"""Running a check: "not solved yet", a wrong answer in two stages, a crash named by the line of your file.

A failure says first what went wrong, on a concrete input (what your function
gave, what it should give), then, on a line of its own, where to look.
"""

import copy
import os
import traceback
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Exercise:
    number: str      # as in EXERCISES.md, two digits
    module: str      # exercises/<module>.py
    function: str    # what you write there
    check: callable  # check(f) raises AssertionError (NotImplementedError, StillBuggy) if f is wrong
    reference: callable  # () -> the project's own function, which --reference checks instead
    shipped: callable = None  # shipped(f) raises StillBuggy if f still does what the file was shipped with


def project(module, name):
    """The reference that is the project's own function module.name, imported when asked for."""
    return lambda: getattr(__import__(module), name)


class NotSolved(AssertionError):
    """The exercise is untouched: its stub raises NotImplementedError, or the shipped bug is still there."""


class StillBuggy(Exception):
    """Raised by a check when the answer does exactly what the bug the file was shipped with does."""


class Endless(BaseException):
    """Raised by an argument a call reads without end (not an Exception: an answer's `except Exception` lets it
    through); attempt() turns it into a failure: the call did not finish, what it did, where to look."""

    def __init__(self, what, hint):
        super().__init__(what)
        self.what, self.hint = what, hint


class Wrong(AssertionError):
    """A check's failure: what went wrong, then where to look. (An AssertionError an answer raises is a crash.)"""


class Crash(Wrong):
    """A check's failure where the answer raised: a boundary may say more about what led there (contract.py)."""


def wrong(what, hint):
    """A failure in two stages: what went wrong (observed vs expected), then where to look."""
    return Wrong(f"{what}\n  where to look: {hint}")


def attempt(call_text, f, *args, hint=None, hints=()):
    """f(*args), with a crash turned into a one-paragraph failure naming the line of your file.
    hints ((exception type, hint), ...) choose the hint by the exception's type; hint is the one otherwise. A hint
    may be a function (f, the arguments as they came) -> (what more, where to look): a crash the exercise tells
    apart by calling f again (exercise 28: a walk that asks for more r's than it is given).
    f held to its exercise's contract (contract.Held) is told the call's text, for the contract's messages."""
    wanted = [getattr(h, "needs_args", "copy") for _, h in hints if callable(h)]
    given = copy.deepcopy(args) if "copy" in wanted else args if wanted else None  # "as they are": models uncopied
    try:
        return f.call(call_text, *args) if hasattr(f, "call") else f(*args)
    except (NotImplementedError, Wrong):
        raise
    except Endless as e:
        raise wrong(f"{call_text} did not finish: {e.what}", e.hint) from None
    except Exception as e:
        chosen = next((h for kind, h in hints if isinstance(e, kind)), hint)
        if callable(chosen):
            more, chosen = chosen(f, given)
            if more:
                raise wrong(f"{crashed(call_text, e)}; {more}", chosen) from None
        raise crash(call_text, e, chosen) from None


def crash(call_text, e, hint=None):
    where = in_your_file(e)
    return Crash(wrong(crashed(call_text, e), hint or ("the line named above" if where else
                                                       "call it yourself on this input and read the traceback")).args[0])


def confirmed(f, hypothesis, inputs, close=lambda a, b: a == b, call=None):
    """Whether f gives what a hypothesis about it gives on every one of inputs (tuples of arguments, each call a deep
    copy): a diagnosis read off one failing case is said only where it holds on others too. f None: taken as said.
    call(*input): what f gives there, where f is not simply called on the input (the input names its arguments)."""
    if f is None:
        return True
    for args in inputs:
        try:
            got = call(*args) if call is not None else f(*copy.deepcopy(args))
            if not close(got, hypothesis(*copy.deepcopy(args))):
                return False
        except (Exception, Endless):  # a crash, a rule of the contract broken, a loop without end: not this one
            return False
    return True


def crashed(call_text, e):
    """'f(...) raised ValueError: ... (exercises/exNN_x.py, line 12: `code`)'."""
    return f"{call_text} raised {type(e).__name__}{f': {e}' if str(e) else ''}{in_your_file(e)}"


def in_your_file(e):
    """' (exercises/exNN_x.py, line 12: `code`)' for the deepest frame in an exercise file, else ''."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.basename(f.filename).startswith("ex")
              and os.path.dirname(os.path.abspath(f.filename)) == os.path.join(ROOT, "exercises")]
    if not frames:
        return ""
    f = frames[-1]
    return f" (exercises/{os.path.basename(f.filename)}, line {f.lineno}: `{f.line}`)"


def fresh(ids):
    """The same ids as new int objects, as a decoder makes them (np.argmax(...).tolist(), int(np.argmax(...))):
    equal ids written in one function's code are one shared object, and would hide an `is` for `==`."""
    return np.array(ids, dtype=np.int64).tolist()


def unchanged(call, name, before, after, why):
    """The failure for a function that changed the argument `name` it was given (before: a deep copy of it, taken
    before the call), naming the first place that changed; why: what the caller goes on doing with it."""
    path, was, now = first_change(name, before, after)
    def seen(a):
        text = show(a) if isinstance(a, np.ndarray) and a.ndim == 1 and a.size <= 12 else repr(a)
        return text if len(text) <= 160 else f"{text[:76]} ... {text[-76:]}"
    change = f"{seen(was)} became {seen(now)}" if path == name else f"{path} was {seen(was)}, and became {seen(now)}"
    raise wrong(f"{call} changed its argument {name}: {change}",
                f"the caller's {name} is the caller's ({why}): work on a copy (list(...), x.copy(), `x = x - m` instead "
                "of `x -= m`) or build a new value, and leave the argument as it came")


def first_change(path, before, after):
    """(where, what it was, what it is) for the first place after differs from before: inside a list or tuple of
    lists or tuples whose length stayed, the first entry that changed."""
    if isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)) and len(before) == len(after):
        i = next((i for i, (b, a) in enumerate(zip(before, after)) if not _equal(b, a)), None)
        if i is not None and isinstance(before[i], (list, tuple)) and isinstance(after[i], (list, tuple)):
            return first_change(f"{path}[{i}]", before[i], after[i])
    return path, before, after


def _equal(a, b):
    try:
        return bool(a == b) if not isinstance(a, np.ndarray) else np.array_equal(a, b)
    except (TypeError, ValueError):
        return False


def span(first, last):
    """'position 4' or 'positions 4..6'."""
    return f"position {first}" if first == last else f"positions {first}..{last}"


def show(values, digits=3):
    """A list of numbers, rounded for a message; digits=None: each float32 exactly, in its shortest form."""
    if digits is None:
        return "[" + ", ".join(str(np.float32(v)) for v in values) + "]"
    return "[" + ", ".join(f"{float(v):.{digits}g}" for v in values) + "]"
