"""Property-based fuzzing of the numbers a user types (hypothesis, a test-only dependency): every number option's
flag on the command line, through its Option's parse (workbench/registry.py) and cli.parse_args, in process (4),
and the session's numeric commands (/n_draft X, /temperature X, /ngram_n X ...) through Session.handle (5). The
options are the registry's: the settings every method has and the methods' own. A negative control shows the
property catches what it is meant to: a parser that lets int()'s ValueError through, or one without bounds,
fails it. The property: fuzzing.py's."""

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytestmark = pytest.mark.slow  # as test_fuzz.py is (conftest.py's SLOW_FILES)

import contextlib  # noqa: E402
import copy  # noqa: E402
import io  # noqa: E402

from hypothesis import find, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from errors import CONTROL  # noqa: E402
from fuzzing import REFUSED, Bounded, NotClear, fuzz, parsed  # noqa: E402
from processors import Processor  # noqa: E402
from workbench import cli, methods, session  # noqa: E402
from workbench import settings as common  # noqa: E402
from workbench.program import UsageError  # noqa: E402
from workbench.settings import Settings  # noqa: E402


# What a user may type for a number: text of any kind, and the spellings that trip up int() and float().
TRICKY_NUMBERS = ["", " ", "0", "-0", "+0", "-0.0", "00", "1", "-1", "2", "4", "64", "65", "128", "129", "1000", "1000.0",
                  "1000.0000001", "100000", "100001", "1e-46", "5e-324", "1e-400", "1e308", "1e309", "-1e309", "2e-45",
                  "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "infinity", "1_000", "1__0", "_1", "1_", "0x10", "0b1",
                  "0o7", "1.", ".5", "0.5", "1.0", "1e3", "1E-3", "1e", "e3", " 5 ", "\t5\n", "5\x00", "\x005", "٣", "١٢",
                  "１２", "𝟙", "²", "Ⅻ", "٣.٥", "1,5", "1/2", "True", "None", "[]", str(2 ** 63 - 1), str(2 ** 63), str(-2 ** 63),
                  "9" * 5000, "1" + "0" * 4300, "0." + "0" * 400 + "1", "\x1b[31m5", "5\u202e", "\udc805", "5\udcff",
                  "\u2028", "½", "0.99999999999999999", "1.00000000000000001", "0.000000000000000000001"]
NUMBERISH = st.one_of(
    st.sampled_from(TRICKY_NUMBERS),
    st.text(max_size=20),
    st.integers().map(str),
    st.integers(min_value=-3, max_value=2 ** 64).map(str),
    st.floats().map(repr),
    st.floats().map("{:e}".format),
    st.floats(min_value=-2, max_value=2000).map(str),
    st.from_regex(r"\A[ \t]?[+-]?[0-9٠-٩０-９_]{0,6}\.?[0-9_]{0,4}([eE][+-]?[0-9]{1,4})?[ \t]?\Z"),
    st.tuples(st.sampled_from(TRICKY_NUMBERS), st.text(max_size=3)).map("".join),
)


# Every setting a user gives as a number, by name: the ones every method has, and the methods' own (workbench/methods/).
OPTIONS = {o.name: o for o in common.COMMON + tuple(methods.options()) if o.type in (int, float)}


def in_bounds(field, value):
    """value is what the option `field` allows: its type, within its bounds (above low where low is open: top_p)."""
    o = OPTIONS[field]
    if type(value) is not o.type:
        return False
    return (value > o.low if o.low_open else value >= o.low) and value <= o.high


def parse_setting(field, text):
    """What the command line and the session do with a number typed for `field`: its Option's parse."""
    return OPTIONS[field].parse(text)


# ---------------------------------------------------------------------------
# 4. The command line's numbers
# ---------------------------------------------------------------------------

def applying(option):
    """The other arguments a flag needs to apply: a sampling setting the method sps, a method's own option a method
    that takes it."""
    if option in (common.TEMPERATURE, common.TOP_K, common.TOP_P, common.SEED):
        return ["--method", "sps"]
    return ["--method", methods.methods_taking(option.name)[0]] if option not in common.COMMON else []


# flag -> (its setting, the other arguments it needs to apply): every number option's flag
FLAGS = {o.flag: (o.name, applying(o)) for o in OPTIONS.values()}


def check_setting(parse, field, text):
    """The property of a number a user types: a value of the option's type within its bounds, or UsageError."""
    value = parsed(lambda: parse(field, text), UsageError)
    if value is not REFUSED:
        if not in_bounds(field, value):
            raise NotClear(f"{field} {text!r} accepted as {value!r}, outside {OPTIONS[field].bounds()}")
    return value


def test_4_every_number_option_is_fuzzed():
    assert {"n_draft", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "n_beams", "ngram_n", "ema"} <= set(OPTIONS)
    assert set(FLAGS) == {"--" + name.replace("_", "-") for name in OPTIONS}


@fuzz(500)
@given(field=st.sampled_from(sorted(OPTIONS)), text=NUMBERISH)
def test_4_parse_setting(field, text):
    check_setting(parse_setting, field, text)


@fuzz()
@given(flag=st.sampled_from(sorted(FLAGS)), text=NUMBERISH, form=st.sampled_from(["=", " "]))
def test_4_command_line_flags(flag, text, form):
    field, others = FLAGS[flag]
    argv = ([f"{flag}={text}"] if form == "=" else [flag, text]) + others
    stderr = io.StringIO()
    try:
        with Bounded(), contextlib.redirect_stderr(stderr):
            args = cli.parse_args(argv)
            cli.settings_from(args)  # and the processor the values make
    except SystemExit as e:
        lines = stderr.getvalue().split("\n")
        assert e.code == 2 and len(lines) == 2 and lines[0].startswith("error: ") and lines[1] == "", stderr.getvalue()
        assert not CONTROL.search(stderr.getvalue()), stderr.getvalue()
        assert form == " " or flag in lines[0], lines[0]  # ("--flag -1" is read as two flags: argparse's own message)
        return
    except (NotClear, KeyboardInterrupt):
        raise
    except BaseException as e:
        raise NotClear(f"{argv}: {type(e).__name__}: {str(e)[:300]}") from e
    assert stderr.getvalue() == ""
    assert in_bounds(field, getattr(args, field)), (argv, getattr(args, field))


# ---------------------------------------------------------------------------
# 5. The session's numeric commands
# ---------------------------------------------------------------------------

# command -> the setting it changes (session.command_table): every number option's command, and the documentation's
# alias of one (/egag_ema)
NUMERIC_COMMANDS = {**{(o.command or o.name): o.name for o in OPTIONS.values() if o not in (common.TOP_K, common.TOP_P)},
                    "egag_ema": "ema"}
OTHER_COMMANDS = ["processor topk", "processor nucleus", "processor topknucleus", "processor topknucleus 20",
                  "processor greedy", "processor multinomial", "set_ngramstorage basic", "set_ngramstorage onelevel"]


def assert_settings_in_bounds(s):
    for field in ("max_new_tokens", "n_draft", "seed"):  # Settings' own fields
        value = getattr(s, field)
        assert value is None or in_bounds(field, value), (field, value)
    for field, value in s.options.items():  # the methods' own, as given
        assert field not in OPTIONS or in_bounds(field, value), (field, value)
    p = s.processor
    assert in_bounds("temperature", float(p.temperature)), p
    assert p.top_k is None or in_bounds("top_k", p.top_k), p
    assert p.top_p is None or in_bounds("top_p", p.top_p), p
    low, high = (s.options.get(name, OPTIONS[name].default) for name in ("n_draft_min", "n_draft_max"))
    assert low <= high


def assert_one_line_and_bounded(command, argument, more):
    """The session's property: any line /COMMAND ARGUMENT MORE is one line (the new value, or an error), the
    session goes on, a refused value changes nothing, every setting stays within its bounds."""
    out = io.StringIO()
    s = session.Session("draft", "oracle", None, Settings(processor=Processor(0.0)), out=out)
    assert command.split()[0] in s.commands
    before = copy.deepcopy(s.settings)
    line = f"/{command} {argument}{more}"
    try:
        with Bounded():
            going_on = s.handle(line)
    except (NotClear, KeyboardInterrupt):
        raise
    except BaseException as e:
        raise NotClear(f"{line!r}: {type(e).__name__}: {str(e)[:300]}") from e
    said = out.getvalue()
    assert going_on is True, line
    assert not CONTROL.search(said), said  # everything typed is shown escaped
    assert said.endswith("\n") and said.count("\n") == 1, said  # one line: the new value, or the error
    if said.startswith("error: "):
        assert vars(s.settings) == vars(before), (line, said)  # a refused value changes nothing
    assert_settings_in_bounds(s.settings)


OWN_COMMANDS = sorted(o.name for o in methods.options() if o.name in NUMERIC_COMMANDS)  # the methods' own options'


@fuzz()
@given(command=st.sampled_from(sorted(set(NUMERIC_COMMANDS) - set(OWN_COMMANDS)) + OTHER_COMMANDS), argument=NUMBERISH,
       more=st.one_of(st.just(""), NUMBERISH.map(lambda t: " " + t)))
def test_5_session_numeric_commands(command, argument, more):
    assert_one_line_and_bounded(command, argument, more)


@fuzz()
@given(command=st.sampled_from(OWN_COMMANDS), argument=NUMBERISH, more=st.one_of(st.just(""), NUMBERISH.map(lambda t: " " + t)))
def test_5_session_commands_of_the_methods_own_options(command, argument, more):
    assert_one_line_and_bounded(command, argument, more)


def test_5_the_methods_own_options_with_one_value():
    # Meanwhile (the test above), one value each: the property holds for every method option's command.
    for command in OWN_COMMANDS:
        for argument in TRICKY_NUMBERS:
            assert_one_line_and_bounded(command, argument, "")


# ---------------------------------------------------------------------------
# Negative controls: the same properties catch a parser that breaks them
# ---------------------------------------------------------------------------

def raw_parse_setting(field, text, name=None):
    """Option.parse without its try: int()'s and float()'s ValueError reach the user as a traceback."""
    o = OPTIONS[field]
    value = o.type(text)
    if not o.low <= value <= o.high:
        raise UsageError(f"{name or field} must be {o.bounds()}")
    return value


def unbounded_parse_setting(field, text, name=None):
    """Option.parse without its bounds: any number at all (nan, inf, a billion) gets through."""
    try:
        return OPTIONS[field].type(text)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name or field} must be a number") from None


def fails(parse, field, text):
    try:
        check_setting(parse, field, text)
    except NotClear:
        return True
    return False


@pytest.mark.parametrize("broken, found", [(raw_parse_setting, "ValueError instead of UsageError"),
                                           (unbounded_parse_setting, "outside")])
def test_the_property_catches_a_broken_parser(broken, found):
    # The same property, the same strategies and settings as test_4_parse_setting, on a broken parser:
    # hypothesis finds a failing example, shrinks it and raises its failure.
    @fuzz()
    @given(field=st.sampled_from(sorted(OPTIONS)), text=NUMBERISH)
    def the_property_on_the_broken_parser(field, text):
        check_setting(broken, field, text)

    with pytest.raises(NotClear, match=found):
        the_property_on_the_broken_parser()
    # find: the smallest text that breaks it, which the real parser refuses clearly.
    text = find(NUMBERISH, lambda t: fails(broken, "n_draft", t), settings=fuzz())
    assert not fails(parse_setting, "n_draft", text)
    with pytest.raises(UsageError):
        parse_setting("n_draft", text)
