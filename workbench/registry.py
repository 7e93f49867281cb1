"""What a method is to the workbench: how it runs, what it can be told, how its rounds are shown.

Each family of methods declares its own in a file of workbench/methods/ (a line of drafts, sampling, trees,
drafts from the text, heads on the oracle, another vocabulary, the baselines): its Method records,
with everything about running and showing them. The command line, the session, the benchmarks and the page
read these records and nothing else about a method; workbench/methods/__init__.py gathers them.

    Method("speculative", "greedy speculative decoding (speculative.py)", run_speculative, n_draft=4,
           shown=Shown(reasons=line_reasons))

A method's run(call) gets a Call: the models, the prompt's ids, how many tokens to make, its draft length,
the settings, the Stats to fill in and the sampling methods' random generator; it returns the generator of
token ids. Its rounds go to Stats.add_round (stats.py), and its Shown turns each into trace lines and a
page row. An Option is a setting only some methods take (beam search's n_beams): declared once on them,
it becomes a flag, a session command, a bound and a part of the settings line.
"""

from dataclasses import dataclass, field
from typing import Callable

from decoding import GenerationError
from errors import quoted
from workbench.program import UsageError


# ---------------------------------------------------------------------------
# An option: a setting, its bounds, its flag and its session command
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    """A setting a user can give: --NAME-with-dashes on the command line, /NAME in the session, Settings.NAME."""
    name: str
    type: type            # int, float, str (one of choices) or bool (on/off)
    default: object
    help: str             # what it sets, in a few words
    low: float = None     # a number's bounds, both included (but low where low_open)
    high: float = None
    low_open: bool = False
    choices: tuple = ()
    command: str = None   # the session's command, where it is not /NAME

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    @property
    def session_command(self):
        return "/" + (self.command or self.name)

    def bounds(self):
        """What a value must be, in words: "a whole number from 1 to 128"."""
        if self.type is bool:
            return "on or off"
        if self.type is str:
            return " or ".join(self.choices)
        shown = str if self.type is int else "{:g}".format
        what = "a whole number" if self.type is int else "a number"
        if self.low_open:
            return f"{what} above {shown(self.low)} and at most {shown(self.high)}"
        return f"{what} from {shown(self.low)} to {shown(self.high)}"

    def parse(self, text, name=None):
        """The value of what a user typed (or a value), checked; else UsageError naming the setting (name, or --flag)."""
        if self.type is bool:
            value = ON_OFF.get(str(text).lower()) if not isinstance(text, bool) else text
        elif self.type is str:
            value = text if text in self.choices else None
        else:
            try:
                value = self.type(text)
            except (TypeError, ValueError, OverflowError):
                value = None
            if value is not None:  # NaN is inside no bounds
                inside = (value > self.low if self.low_open else value >= self.low) and value <= self.high
                value = value if inside else None
        if value is None:
            raise UsageError(f"{name or self.flag} must be {self.bounds()}, not {quoted(text)}")
        return value


ON_OFF = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}


# ---------------------------------------------------------------------------
# How a method's rounds are shown
# ---------------------------------------------------------------------------

def no_lines(r, show):
    return []


@dataclass(frozen=True)
class Shown:
    """How a method's rounds (stats.Round) are shown: --trace's lines and the --html page's parts, each made from
    the round's own record. show(tokens) -> their text. The defaults are a line of drafts' (workbench/display.py,
    workbench/page/report.py)."""
    legend: tuple = ()             # trace: how to read the rounds, printed once before them
    drafts: Callable = None        # (r, show) -> the trace's lines of what was drafted and checked (None: a line's)
    reasons: Callable = no_lines   # (r, show) -> why: what the rule decided, and what it chose for the next round
    setting: Callable = None       # r.details -> ", threshold 0.42": beside the round's number, trace and page alike
    how_to_read: str = None        # page: how to read the rounds (None: a line of greedy drafts')
    page_before: Callable = None   # (run, r) -> html before the round's table: where its drafts came from
    page_table: Callable = None    # (run, r) -> html of the round's table (None: a line's, drafts beside choices)
    page_after: Callable = None    # (run, r, number) -> html after it: the method's own picture of the round
    marks: dict = field(default_factory=dict)  # page: the text's marks whose meaning differs here {mark: (name, text)}
    sampled: Callable = None       # r -> True when its drafts were sampled and kept or resampled (None: never)
    tree: Callable = None          # r -> the round's tree.TreeDetails, for a tree-shaped method (None: a line)
    alpha_note: str = None         # page: how to read the histogram's alpha, where SpS's reading does not fit

    def is_sampled(self, r):
        return bool(self.sampled and self.sampled(r))

    def tree_of(self, r):
        return self.tree(r) if self.tree else None


# ---------------------------------------------------------------------------
# A method
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Method:
    name: str
    summary: str                  # one line for --help, /help and the benchmark's tables
    run: Callable                 # run(call: Call) -> the generator of the new token ids
    draft_model: bool = True      # needs a draft model besides the oracle
    n_draft: int = None           # the default draft length (--n-draft, /n_draft); None: the method has none
    samples: bool = False         # draws tokens: the processor (temperature, top-k, top-p) and the seed apply
    verifies: bool = True         # works in draft-and-verify rounds, which --trace and --html show
    exact: bool = None            # its text must equal greedy decoding's (default: verifies and not samples)
    needs_cache: bool = False     # cannot run with /cache off (its drafts or beams share a prefix)
    baseline: str = None          # what --compare and the benchmark run beside it (default: greedy, or sample)
    head: str = None              # drafts with the oracle's trained head of this name (weights/heads.py)
    draft_head: str = None        # reads the draft's trained head of this name (SpecDec++'s "accept")
    across: "Method" = None       # the same method with a draft of another vocabulary; None: such a draft is refused
    draft_writes: bool = False    # the draft model writes the text alone: the text is in its tokens (draft-alone)
    options: tuple = ()           # its own settings (Option), besides the ones every method has
    shown: Shown = Shown()
    batched: Callable = None      # batched(call, batch_ids) -> a list of new ids per prompt (--prompts); None: one at a time
    predict_tokens: Callable = None  # (a run's rounds) -> tokens a round should make by its paper's model (None:
    #                                  Leviathan et al.'s, from alpha and the draft length; the suite shows both)

    def __post_init__(self):  # the defaults that follow from the other fields
        if self.exact is None:
            object.__setattr__(self, "exact", self.verifies and not self.samples)
        if self.baseline is None:
            object.__setattr__(self, "baseline", "sample" if self.samples and self.verifies else "greedy")


@dataclass
class Call:
    """What a method's run() is given."""
    method: Method         # the method that runs
    draft: object          # the draft model, None for a method without one
    oracle: object
    ids: list              # the prompt's token ids
    n_new: int             # tokens to generate
    n_draft: int           # the draft length (decoding.py): the setting, else the method's default
    settings: object       # workbench.settings.Settings: its own options' values among them (option())
    stats: object          # stats.Stats, filled in as the generator runs
    rng: object = None     # numpy Generator of the sampling methods
    drafter: object = None  # an NGramDrafter kept between generations (the session), else a new one
    encs: tuple = None     # (the draft's tokenizer, the oracle's) when the draft's vocabulary is not the oracle's

    def option(self, name):
        """The value of one of the method's own options: the one given, else its default."""
        if name in self.settings.options:
            return self.settings.options[name]
        return next(o.default for o in self.method.options if o.name == name)


def n_draft_of(method, settings):
    """The draft length a generation uses: the setting, else the method's default."""
    return settings.n_draft or method.n_draft or 4


METHODS = {}


def register(*methods):
    """Add methods (or replace those of the same names)."""
    for method in methods:
        METHODS[method.name] = method


def get(name):
    if name not in METHODS:
        raise GenerationError(f"unknown method {name!r}; the methods are: {', '.join(METHODS)}")
    return METHODS[name]


def variant(method, other_vocabulary):
    """The Method that runs: method itself, or with a draft whose vocabulary is not the oracle's, its `across`
    (None: it cannot run with such a draft). The one place a draft of another vocabulary is routed."""
    return method.across if other_vocabulary else method


def across_vocabularies():
    """The names of the methods that verify a draft of another vocabulary (for the line that refuses one)."""
    return [m.name for m in METHODS.values() if m.across is not None and m.verifies]


def options():
    """Every option some method takes, once each, in the order the methods declare them."""
    found = {}
    for method in METHODS.values():
        for option in method.options:
            if found.setdefault(option.name, option) != option:
                raise ValueError(f"option {option.name} is declared twice, differently")
    return list(found.values())


def methods_taking(name):
    """The names of the methods that take the option `name`."""
    return [m.name for m in METHODS.values() if any(o.name == name for o in m.options)]
