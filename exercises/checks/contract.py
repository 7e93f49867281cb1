"""The contract: the rules every checker holds an answer to, from this one place, before any case of its own.

An exercise's text promises what its function does, and its file's docstring says, under "Held to", exactly
what of that the checker holds it to (promises.py: each exercise's terms; describe() writes those lines). The
rules come in this order, and a failure names the first one broken:

  1. returns     the type the text says, exactly: an int is Python's int (not NumPy's int64, not 2.0), a float
                 Python's float (not np.float32), a list a list (not an array), an array float32 of the shape
                 said;
  2. arguments   the caller's arguments come back as they went in: deep copies taken before the call are compared
                 with them after it (the caller goes on with its lists and arrays);
  3. randomness  the rng given is the only source of randomness: the same seed gives the same answer (the
                 checker's own generators, np.random's global one changed between the calls); a function given no
                 rng draws nothing, and the same arguments give the same answer;
  4. passes      where the exercise is about forward passes, each model's passes are counted;
  5. boundaries  the inputs at the edges the text names (r = 0.0, threshold 1.0, a temperature below the smallest
                 float32, zero probabilities, empty lists, the end of the context), each against the reference.

Rules 1, 2 and 4 hold at every call, the checker's own cases included (Held); 3 and 5 are stages that run
first (hold). RAN records the rules held on each exercise: the test suite shows every exercise went through
every one.
"""

import contextlib
import copy
import random
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .running import Crash, Wrong, attempt, crash, show, unchanged, wrong

RAN = defaultdict(set)  # exercise number -> the rules held on its last check


# ---------------------------------------------------------------------------
# Rule 1: what the text says a function returns
# ---------------------------------------------------------------------------

def file_type(value):
    """What a value is, in a message: 'a float', 'a NumPy integer (np.int64)', 'a NumPy array of float64', ..."""
    if value is None:
        return "nothing"
    if isinstance(value, np.bool_):
        return "a NumPy bool"
    if isinstance(value, np.integer):
        return f"a NumPy integer (np.{type(value).__name__})"
    if isinstance(value, np.floating):
        return f"a NumPy float (np.{type(value).__name__})"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of {value.dtype}"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def shown(value, limit=200):
    """A value for a message: 1-D arrays as their rounded numbers, anything long cut in the middle."""
    if type(value) is float:  # to float32's digits, but never 1 for a value below it (r can be 1 - 2^-53)
        short = f"{value:.6g}"
        if value < 1 and short == "1":
            return repr(value)
        return short + ".0" if short.lstrip("-").isdigit() else short
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, np.ndarray) and value.ndim != 1:
        return f"an array of shape {value.shape}"
    text = show(value) if isinstance(value, np.ndarray) and value.size <= 12 else repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2 - 3]} ... {text[-limit // 2:]}"


NUMPY_INT = ("int(...) turns it into Python's int: np.argmax, np.sum, np.minimum and the entries of an array are NumPy "
             "integers, which the text does not promise (json refuses them, and they wrap around where an int grows)")
NUMPY_FLOAT = ("float(...) turns it into Python's float: a NumPy sum or entry is a NumPy scalar, which the text does not "
               "promise (an np.float32 carries float32's 7 digits into everything computed from it, and json refuses "
               "it)")
COUNT = ("the type of what you return: a count used as an index or a slice bound must be an int (`/` gives a float, "
         "`//` or a counter that goes up by 1 an int)")
NONE = ("return a value on every path: a function that ends without a return statement (or a loop that never "
        "sets its answer) returns None")
ENTRY = ("the type of what you return: every entry must be a Python int (a NumPy array of floats, np.zeros or a `/` "
         "makes floats, and an array's entries are NumPy's; 2393.0 == 2393 is True, but a float is no list index "
         "and no token a model can read)")


class Kind:
    """A type the text promises. problem(value, args) is None, or (what is wrong, where to look): `what` goes after
    "f(...) returned <value>, "."""
    said = ""

    def check(self, call, value, args):
        problem = self.problem(value, args)
        if problem is not None:
            raise wrong(f"{call} returned {shown(value)}{': ' if value is None else ', '}{problem[0]}", problem[1])


class Int(Kind):
    def __init__(self, what="a count", hint=COUNT):
        self.what, self.hint = what, hint
        self.said = f"a Python int ({what.rstrip(',')})"

    def problem(self, value, args=None):
        if type(value) is int:
            return None
        if isinstance(value, np.integer):
            return f"{file_type(value)}; {self.what} is a Python int", NUMPY_INT
        if isinstance(value, (float, np.floating)):
            return f"a float; {self.what} is an int", self.hint
        if value is None:
            return f"nothing; {self.what} is an int", NONE
        return f"{file_type(value)}; {self.what} is an int", self.hint


class Float(Kind):
    def __init__(self, what):
        self.what = what
        self.said = f"a Python float ({what})"

    def problem(self, value, args=None):
        if type(value) is float:
            return None
        if isinstance(value, np.floating):
            return f"{file_type(value)}; {self.what} is a Python float", NUMPY_FLOAT
        if value is None:
            return f"nothing; {self.what} is a float", NONE
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return (f"{file_type(value)}; {self.what} is a float",
                    "return a float on every path: 0.0 and 1.0, not 0 and 1 (or float(...))")
        return f"not a number; {self.what} is a float", "what the function returns on every path: one float"


class Bool(Kind):
    said = "True or False (a bool; NumPy's np.bool_, which comparing float32 numbers gives, is one too)"

    def problem(self, value, args=None):
        if isinstance(value, (bool, np.bool_)):
            return None
        return f"{file_type(value)}, not True or False", "return the comparison itself: r < ..., a bool"


class Bytes(Kind):
    said = "bytes"

    def __init__(self, what):
        self.what = what

    def problem(self, value, args=None):
        if type(value) is bytes:
            return None
        if isinstance(value, str):
            return (f"a str; {self.what} is bytes", "the text is bytes and can end inside a UTF-8 character "
                    "(b'caf\\xc3'), which no str can hold: compare and slice bytes, never decode them")
        if isinstance(value, list) and all(type(x) is int for x in value):
            return (f"a list of ints; {self.what} is bytes", "iterating over bytes gives ints (list(b'ab') is "
                    "[97, 98]): slice the text, text[end:], to keep bytes")
        return f"{file_type(value)}; {self.what} is bytes", "a slice of bytes is bytes: text[end:]"


class List(Kind):
    def __init__(self, of, what, hint="return a list on every path (list(...) of a tuple, a range or a generator)"):
        self.of, self.what, self.hint = of, what, hint
        self.said = f"a list of Python ints ({what})"

    def problem(self, value, args=None):
        if isinstance(value, np.ndarray):
            return (f"{file_type(value)}; the text promises a list ({self.what})", "the type of what you return: "
                    "`.tolist()` turns an "
                    "array into a list of Python ints (and an array's == compares entry by entry: `x == [3, 5]` is an "
                    "array, not True or False)")
        if type(value) is not list:
            return f"{file_type(value)}, not a list; the text promises a list ({self.what})", self.hint
        for i, entry in enumerate(value):
            problem = self.of.problem(entry)
            if problem is not None:
                return f"whose entry {i} is {entry!r}, {problem[0]}", ENTRY if problem[1] == COUNT else problem[1]
        return None


class Sized(List):
    """A list of a length the arguments bound: length(args) -> (fewest, most, what the bound is, where to look)."""

    def __init__(self, of, what, length):
        super().__init__(of, what)
        self.length = length

    def problem(self, value, args=None):
        problem = super().problem(value, args)
        if problem is not None or args is None:
            return problem
        fewest, most, bound, hint = self.length(*args)
        if not fewest <= len(value) <= most:
            return f"{len(value)} token id(s); {bound}", hint
        return None


class Tuple(Kind):
    def __init__(self, names, kinds, what):
        self.names, self.kinds, self.what = names, kinds, what
        self.said = f"a tuple ({', '.join(names)}): {what}"

    def problem(self, value, args=None):
        pair = "(" + ", ".join(self.names) + ")"
        if type(value) is not tuple or len(value) != len(self.names):
            if isinstance(value, list) and len(value) == len(self.names):
                return (f"a list; the text promises a tuple {pair}",
                        f"return {', '.join(self.names)}: a tuple, as the text says")
            return f"{file_type(value)}; the text promises a tuple {pair}", f"return {', '.join(self.names)} on every path"
        for name, kind, entry in zip(self.names, self.kinds, value):
            problem = kind.problem(entry, args)
            if problem is not None:
                return f"whose {name} is {shown(entry, 80)}, {problem[0]}", problem[1]
        return None


class Dict(Kind):
    def __init__(self, values, what):
        self.values, self.what = values, what
        self.said = f"a dict {what}, each {values.said}"

    def problem(self, value, args=None):
        if type(value) is not dict:
            return f"{file_type(value)}, not a dict; the text promises a dict {self.what}", "return a dict, one entry per kind"
        for key, entry in value.items():
            problem = self.values.problem(entry)
            if problem is not None:
                return f"whose entry [{key!r}] is {shown(entry, 80)}, {problem[0]}", problem[1]
        return None


class Array32(Kind):
    def __init__(self, shape, said, what, hint):
        self.shape, self.said, self.what, self.hint = shape, said, what, hint

    def problem(self, value, args):
        expected = self.shape(*args)
        if not isinstance(value, np.ndarray):
            return (f"{file_type(value)}, not an array; the text promises a float32 array of shape {expected} "
                    f"({self.what})", self.hint)
        if value.dtype != np.float32:
            return (f"{file_type(value)}; the text promises float32 ({self.what})", "which operation brings in another "
                    "dtype (a "
                    "np.float64 scalar, np.exp of a float64 array, np.zeros or np.full without dtype=np.float32, ...)")
        if value.shape != expected:
            return f"not of shape {expected}, as the text says", self.hint
        return None


class Nothing(Kind):
    said = "None: nothing (the caches are cut in place)"

    def problem(self, value, args=None):
        if value is None:
            return None
        return f"{file_type(value)}; the function returns nothing (None)", "cut the caches in place; return nothing"


class Yields(Kind):
    """A generator's promise: each item it yields is of kind `of` (Held checks them one by one)."""

    def __init__(self, of, what):
        self.of, self.what = of, what
        self.said = f"yields the new token ids one by one, each a Python int ({what})"

    def problem(self, value, args=None):
        try:
            is_iterator = iter(value) is value
        except TypeError:
            return f"{file_type(value)}, not a generator", "yield the new tokens, round by round"
        if not is_iterator:  # a list made whole and returned at the end: nothing comes out until the run is done
            return (f"{file_type(value)}, not a generator; the text promises the tokens one by one, as they are made",
                    "yield each round's tokens as the round makes them (`yield from new_tokens`): the caller prints "
                    "each token as it comes, and a list returned at the end gives nothing until the run is done")
        return None


# ---------------------------------------------------------------------------
# An exercise's terms, and a function held to them at every call (rules 1, 2, 4)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Boundary:
    what: str      # the boundary the text names, as the failure says it
    call: str      # the call's text
    args: callable  # () -> fresh arguments
    hint: str      # where to look when the answer fails there
    explain: callable = None  # (got, expected, f) -> (what, hint) naming the mistake more closely, or None
    crash: callable = None    # (f) -> (what, hint) for an answer that raised there: what led to it, or None


@dataclass(frozen=True)
class Contract:
    signature: tuple           # the argument names, in order; "*caches" for a variable number
    returns: Kind              # rule 1
    unchanged: dict            # rule 2: {argument name: what the caller goes on doing with it}
    probes: callable           # rule 3: () -> [(call text, () -> fresh arguments)], each called twice
    boundaries: callable       # rule 5: () -> [Boundary]
    said_boundaries: str       # rule 5 in the docstring's words
    rng: str = None            # rule 3: the argument that is the only randomness
    draws: int = 2             # rule 3: seeds each probe is called with (more where an answer is True or False)
    randomness_hint: str = "this function draws nothing: the same arguments, the same answer"
    passes: str = ""           # rule 4 in the docstring's words ("": the exercise is not about passes)
    models: tuple = ()         # rule 4: the arguments whose forward passes Held counts
    counted: callable = None   # rule 4: (args by name, result, {model: passes}) -> None or (what, hint)
    observe: callable = None   # (args, result) -> what a call did, when more than its result (ex04's caches)
    close: callable = None     # (a, b) -> whether two outcomes agree (default: the same, exactly)
    display: callable = None   # an outcome as a boundary's failure shows it (default: shown)
    hints: tuple = ()          # ((exception type, where to look), ...) for a call of the stages that raises one
    #                            (where to look: a string, or running.attempt's function of the call)
    verb: str = "returned"     # how a failure says what a call did ("left its caches at": what observe saw)
    notes: tuple = field(default=())  # more lines for the docstring's "Held to"

    def names(self, n_args):
        if self.signature and self.signature[-1].startswith("*"):
            return list(self.signature[:-1]) + [self.signature[-1][1:]] * (n_args - len(self.signature) + 1)
        return list(self.signature[:n_args])

    def outcome(self, args, result):
        return result if self.observe is None else self.observe(args, result)

    def agree(self, a, b):
        return same(a, b) if self.close is None else self.close(a, b)

    def describe(self):
        """The docstring's lines "Held to": what this exercise is held to, rule by rule."""
        kept = ", ".join(self.unchanged)
        rows = [("returns", self.returns.said),
                ("arguments", f"{kept} come{'s' if len(self.unchanged) == 1 else ''} back unchanged"),
                ("randomness", f"only the rng given: the same seed, the same answer" if self.rng else
                 "none: the same arguments, the same answer"),
                ("passes", self.passes or "not counted"),
                ("boundaries", self.said_boundaries)] + list(self.notes)
        lines = ["Held to (exercises/checks/contract.py), before the checker's own cases:"]
        for name, text in rows:
            lines += textwrap.wrap(text, 76, initial_indent=f"  {name:<11}", subsequent_indent=" " * 13)
        return "\n".join(lines)


YIELDED = ("what each `yield` gives: one token id, a Python int; `yield from new_tokens` yields a round's tokens one "
           "by one, where `yield new_tokens` yields the whole list as one item")


def module_sizes(f):
    """{name: length} of the lists, dicts and sets at the top of f's module: a cache kept there between calls grows."""
    return {name: len(value) for name, value in getattr(f, "__globals__", {}).items()
            if isinstance(value, (list, dict, set)) and not name.startswith("__")}


def same(a, b):
    """Deep equality that tells types apart: arrays by dtype, shape and values; lists, tuples, dicts entry by entry;
    a float NaN is the same as a NaN (an answer that gives NaN twice gives the same answer)."""
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")))
    if isinstance(a, (list, tuple)):
        return isinstance(b, type(a)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(b, np.ndarray):
        return False
    return type(a) is type(b) and (bool(a == b) or (isinstance(a, float) and a != a and b != b))  # NaN is NaN


class Counted:
    """Stands in for a model: passes every call on, counting its forward passes."""

    def __init__(self, model):
        self.model, self.passes = model, 0

    def __getattr__(self, name):  # vocab_size, n_positions, ...
        return getattr(self.model, name)

    def forward(self, *args, **kwargs):
        self.passes += 1
        return self.model.forward(*args, **kwargs)


class Held:
    """f, held to exercise `number`'s contract at every call: what it returns (rule 1), the arguments it was given
    (rule 2) and, where the exercise is about them, the forward passes it made (rule 4). attempt() passes the
    call's text to call(); a direct call makes its own."""

    def __init__(self, number, contract, f, name):
        self.number, self.contract, self.f, self.name = number, contract, f, name
        self.grew = set()  # names of the answer's module-level lists, dicts and sets that grew during a call

    def __call__(self, *args):
        return self.call(f"{self.name}({', '.join(shown(a, 60) for a in args)})", *args)

    def call(self, text, *args):
        names = self.contract.names(len(args))
        before = {name: copy.deepcopy(a) for name, a in zip(names, args) if name in self.contract.unchanged}
        counters = {}
        if self.contract.models:
            args = tuple(counters.setdefault(name, Counted(a)) if name in self.contract.models else a
                         for name, a in zip(names, args))
        sizes = module_sizes(self.f)
        result = self.f(*args)
        self.grew |= {name for name, n in module_sizes(self.f).items() if n > sizes.get(name, n)}
        given = tuple(before.get(name, a) for name, a in zip(names, args))  # a shape is the arguments' as they came
        self.contract.returns.check(text, result, given)
        if isinstance(self.contract.returns, Yields):
            return self.yielding(text, result, args, names, before)
        RAN[self.number].add("returns")
        self.kept(text, args, names, before)
        if self.contract.counted is not None:
            problem = self.contract.counted(dict(zip(names, args)), result,
                                            {name: c.passes for name, c in counters.items()})
            if problem is not None:
                raise wrong(f"{text} returned {shown(result)}, but {problem[0]}", problem[1])
            RAN[self.number].add("passes")
        return result

    def kept(self, text, args, names, before):
        """Rule 2: each argument the caller keeps is as it came (the first one changed is named)."""
        for name, a in zip(names, args):
            if name in before and not same(before[name], a):
                unchanged(text, name, before[name], a, self.contract.unchanged[name])
        RAN[self.number].add("arguments")

    def yielding(self, text, result, args, names, before):
        for i, item in enumerate(result):
            problem = self.contract.returns.of.problem(item)
            if problem is not None:
                raise wrong(f"{text}: the token it yielded {i} is {item!r}, {problem[0]}",
                            YIELDED if problem[1] == COUNT else problem[1])
            RAN[self.number].add("returns")
            self.kept(text, args, names, before)
            yield item


# ---------------------------------------------------------------------------
# The stages: rule 3 (randomness) and rule 5 (boundaries), before any case of the checker's own
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def global_generators():
    """np.random's and random's global state, restored after the block (the checks change them on purpose)."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def seeded(numpy_seed, python_seed):
    np.random.seed(numpy_seed)
    random.seed(python_seed)


def hold(number, contract, held, reference):
    """Stages 3 and 5 on the held answer: randomness, then the boundaries (rules 1, 2 and 4 hold at each call)."""
    with global_generators():
        hold_randomness(number, contract, held)
    hold_boundaries(number, contract, held, reference)


def run(contract, held, text, args, hint=None):
    """What one call did: its result, or what contract.observe makes of it (a generator is run to its end)."""
    result = attempt(text, held, *args, hint=hint, hints=contract.hints)
    try:
        return outcome(contract, args, result)
    except (NotImplementedError, Wrong):
        raise
    except Exception as e:  # a generator's body runs as it is iterated
        raise crash(text, e, hint) from None


def outcome(contract, args, result):
    if contract.observe is not None:
        return contract.observe(args, result)
    return list(result) if isinstance(contract.returns, Yields) else result


def hold_randomness(number, contract, held):
    outcomes = []
    for text, make in contract.probes():
        seeded(1, 1)
        first = second = run(contract, held, text, make())
        for seed in range(2, contract.draws + 1):  # a True or False drawn on its own agrees half the time
            seeded(seed, seed)
            second = run(contract, held, text, make())
            if not (same(first, second) or contract.agree(first, second)):
                break
        if not (same(first, second) or contract.agree(first, second)):
            source = randomness_source(contract, held, text, make)
            if contract.rng:
                raise wrong(f"called twice with the same arguments and a generator of the same seed, {text} returned "
                            f"{shown(first)}, then {shown(second)}: the {contract.rng} given is the only source of "
                            "randomness, so the same seed must give the same answer",
                            f"{source} draws differently each call: draw every r and every token with the "
                            f"{contract.rng} given (rng.random(), sample(probs, rng))")
            raise wrong(f"called twice with the same arguments, {text} returned {shown(first)}, then {shown(second)}: "
                        f"nothing in exercise {number}'s text is random (no rng is given), so the same arguments must "
                        "give the same answer", f"{source} draws differently each call; {contract.randomness_hint}")
        outcomes.append((text, first))
    if contract.rng and len(outcomes) > 1 and all(same(outcomes[0][1], o) for _, o in outcomes[1:]):
        raise wrong(f"called with {len(outcomes)} generators of different seeds, the round returned "
                    f"{shown(outcomes[0][1])} every time: nothing in it depends on the {contract.rng} given",
                    f"draw every r and every token with the {contract.rng} given: a generator made inside the "
                    "function (np.random.default_rng(0)) repeats the same draws each time")
    RAN[number].add("randomness")


def randomness_source(contract, held, text, make):
    """Which generator made two calls differ: np.random's global one, Python's random, or one of the answer's own.
    A generator is named where seeding it alone makes the calls agree, three times over: two draws of an answer's
    own generator agree now and then by chance (a round of a few tokens over a vocabulary of 6)."""
    for name, fixed in (("np.random's global generator (np.random.random(), np.random.choice(...), ...)", 0),
                        ("Python's random module (random.random(), random.choices(...))", 1)):
        agreed = True
        for seed in (3, 6, 9):
            outcomes = []
            for other in (seed + 1, seed + 2):  # the generator named keeps its seed, the other one changes
                seeded(*((seed, other) if fixed == 0 else (other, seed)))
                outcomes.append(run(contract, held, text, make()))
            agreed = agreed and (same(*outcomes) or contract.agree(*outcomes))
        if agreed:
            return name
    return "a generator of its own, made inside the function (np.random.default_rng() without a seed)"


def hold_boundaries(number, contract, held, reference):
    for b in contract.boundaries():
        args = b.args()
        expected = outcome(contract, args, reference(*args))
        try:
            got = run(contract, held, b.call, b.args(), b.hint)
        except Crash as e:
            raise crashed_at(b, held, e) from None
        if contract.agree(got, expected):
            continue
        try:
            closer = in_float32(got, expected) or (b.explain(got, expected, held) if b.explain else None)
        except Exception:  # an answer odd enough to trip the diagnosis still gets the boundary's own message
            closer = None
        if not (closer and closer[0]):
            closer = rounded(got, expected) or closer
        display = contract.display or shown
        said = display(got), display(expected)
        if said[0] == said[1]:  # numbers that differ past the digits shown
            said = repr(got), repr(expected)
        what = f"{b.call} {contract.verb} {said[0]}, expected {said[1]}: {b.what}"
        raise wrong(f"{what}; {closer[0]}" if closer and closer[0] else what, closer[1] if closer and closer[1] else b.hint)
    RAN[number].add("boundaries")


def crashed_at(b, held, e):
    """The failure of an answer that raised at boundary b: what led to the crash where the boundary can tell."""
    try:
        closer = b.crash(held) if b.crash else None
    except Exception:
        closer = None
    if not closer:
        return e
    return wrong(f"{str(e).split(chr(10) + '  where to look: ')[0]}; {closer[0]}", closer[1])


def near_miss(got, expected):
    """(what, where to look) for a float a hair from the right one: float32's rounding, or a rounding to decimals."""
    return in_float32(got, expected) or rounded(got, expected)


def floats(got, expected):
    return (type(got) is float and type(expected) is float and got != expected and got == got
            and expected == expected)


def in_float32(got, expected):
    """(what, where to look) for the right value rounded to float32's 7 digits, or None: said before any other
    diagnosis (the rest of the answer is right)."""
    if floats(got, expected) and np.float32(got) == np.float32(expected) and abs(got - expected) <= 1e-6 * max(
            abs(expected), 1e-30):
        return (f"that is the right value in float32, off by {abs(got - expected):.2g}: float32 carries 7 digits",
                "compute it in Python floats: a np.float32, or an entry of a float32 array, carries float32's rounding "
                "into everything computed from it (float(x) of a float32 keeps its 7 digits)")
    return None


def rounded(got, expected):
    """(what, where to look) for the right value rounded to a few decimals, or None."""
    digits = next((d for d in range(1, 7) if got == round(expected, d)), None) if floats(got, expected) else None
    if digits is not None:
        return (f"that is the right value rounded to {digits} decimal{'s' if digits != 1 else ''}",
                "return the value as computed: no round(...), which only a display needs")
    return None
