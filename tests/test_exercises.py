"""The exercises' checkers (exercises/checks/): they pass the project's own functions, hold every exercise to the
one contract (contract.py, promises.py) and say so in each exercise file, and call an untouched exercise "not solved
yet". The wrong answers, each with the message it must get, are in tests/test_exercises_*.py.

Nothing here runs the exercise files' functions, so a student's solved repository stays green.
"""

import ast
import itertools
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from fixtures import ROOT

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from wrong_answers import fails


@pytest.mark.slow
def test_the_reference_solutions_pass_every_check():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises", "--reference"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(checks.EXERCISES)} passed" in r.stdout


@pytest.mark.parametrize("number", checks.EXERCISES)
def test_an_untouched_exercise_is_not_solved_yet(number):
    def stub(*args):
        raise NotImplementedError("the stub of every exercise file")
    with pytest.raises(checks.NotSolved) as failure:
        checks.check(number, stub)
    module = checks.EXERCISES[number].module
    assert str(failure.value) == f"exercise {number} is not solved yet: see EXERCISES.md, then edit exercises/{module}.py"


def test_exercises_md_numbers_the_exercises_as_their_files():
    # Exercise N is "### N. title (grade[, hands-on])" in EXERCISES.md and, if hands-on,
    # exercises/exNN_name.py, checked by `pytest exercises/ -k exNN`.
    with open(os.path.join(ROOT, "EXERCISES.md"), encoding="utf-8") as f:
        sections = re.split(r"^### ", f.read(), flags=re.M)[1:]
    headings = [re.match(r"(\d+)\. (.*)", s).groups() for s in sections]
    assert [int(n) for n, _ in headings] == list(range(1, len(headings) + 1)) and len(headings) >= 18
    for (n, title), text in zip(headings, sections):
        assert re.search(r"\((warm-up|core|stretch)(, hands-on)?\)$", title), f"exercise {n} has no grade: {title}"
        number = f"{int(n):02d}"
        assert title.endswith(", hands-on)") == (number in checks.EXERCISES), title
        if number in checks.EXERCISES:
            assert f"`exercises/{checks.EXERCISES[number].module}.py`" in text, title
            assert f"pytest exercises/ -k ex{number}\n" in text, title


WRONG_ANSWER_FILES = sorted(name for name in os.listdir(os.path.dirname(os.path.abspath(__file__)))
                            if name.startswith("test_exercises_") and name.endswith(".py"))


def test_every_hands_on_exercise_has_five_wrong_answers_at_least():
    # A wrong answer is a call fails(number, ...) in tests/test_exercises_*.py, apart from the files as shipped
    # (unsolved=True): the classes of mistakes a learner makes (real-size ids, zero probabilities, the wrong type, ...).
    wrong_answers = Counter()
    for name in WRONG_ANSWER_FILES:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), encoding="utf-8") as f:
            calls = [node for node in ast.walk(ast.parse(f.read())) if isinstance(node, ast.Call)
                     and getattr(node.func, "id", None) == "fails"]
        wrong_answers.update(call.args[0].value for call in calls if isinstance(call.args[0], ast.Constant)
                             and not any(k.arg == "unsolved" for k in call.keywords))
    assert {n: wrong_answers[n] for n in checks.EXERCISES if wrong_answers[n] < 5} == {}


def test_the_checkers_and_their_tests_stay_short():
    here = os.path.dirname(os.path.abspath(__file__))
    files = [os.path.join(here, name) for name in WRONG_ANSWER_FILES + ["test_exercises.py", "wrong_answers.py"]]
    folder = os.path.join(ROOT, "exercises", "checks")
    files += [os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".py")]
    long = {os.path.basename(path): n for path in files if (n := len(open(path, encoding="utf-8").readlines())) > 600}
    assert long == {}


# --- the contract: every exercise is held to it, and its file says so -----------------------------------------

RULES = {"returns", "arguments", "randomness", "boundaries"}


@pytest.mark.parametrize("number", checks.EXERCISES)
def test_the_contract_holds_every_exercises_reference(number):
    terms = checks.promises.CONTRACTS[number]
    assert terms.unchanged and terms.probes() and terms.boundaries(), number
    checks.check(number, checks.EXERCISES[number].reference())
    expected = RULES | ({"passes"} if terms.passes else set())
    assert checks.contract.RAN[number] == expected, (number, checks.contract.RAN[number])


@pytest.mark.parametrize("number", checks.EXERCISES)
def test_each_exercise_file_says_what_the_contract_holds_it_to(number):
    exercise = checks.EXERCISES[number]
    with open(os.path.join(ROOT, "exercises", f"{exercise.module}.py"), encoding="utf-8") as f:
        docstring = ast.get_docstring(ast.parse(f.read()))
    said = checks.promises.CONTRACTS[number].describe()
    assert " ".join(said.split()) in " ".join(docstring.split()), f"exercises/{exercise.module}.py should say:\n{said}"


def wrong_type(kind, value):
    """value as another type than kind promises, as an answer would return it."""
    from checks import contract
    if isinstance(kind, contract.Int):
        return float(value)
    if isinstance(kind, contract.Float):
        return np.float32(value)
    if isinstance(kind, contract.Bool):
        return int(value)
    if isinstance(kind, contract.List):
        return tuple(value)
    if isinstance(kind, contract.Tuple):
        return list(value)
    if isinstance(kind, contract.Dict):
        return list(value.items())
    if isinstance(kind, contract.Array32):
        return value.astype(np.float64)
    return 0  # Nothing's: rollback returns nothing


@pytest.mark.parametrize("number", [n for n in checks.EXERCISES if n != "05"])
def test_the_contract_names_a_type_the_text_does_not_promise(number):
    reference = checks.EXERCISES[number].reference()
    kind = checks.promises.CONTRACTS[number].returns
    message = fails(number, lambda *args: wrong_type(kind, reference(*args)), r" returned .*[,:] (a|an|nothing|not)\b")
    assert not re.search(r"\bexpected\b", message.split("\n")[0]), message  # the type is named, before any value


def changed(value):
    """value, changed in place as an answer changes an argument it was given."""
    if isinstance(value, np.ndarray):
        value[...] = value + 1
    elif isinstance(value, dict):
        value[max(value) + 1] = 0.0
    else:
        value.append(value[-1] if value else 0)


@pytest.mark.parametrize("number", [n for n in checks.EXERCISES if n not in ("04", "05")])
def test_the_contract_names_an_argument_changed(number):
    reference, terms = checks.EXERCISES[number].reference(), checks.promises.CONTRACTS[number]
    name = next(iter(terms.unchanged))

    def answer(*args):
        result = reference(*args)
        changed(args[terms.signature.index(name)])
        return result
    fails(number, answer, rf"changed its argument {name}: ", "work on a copy")


def another(kind, args, result):
    """Another answer than result, of the same type: what a draw of an answer's own makes of it."""
    from checks import contract
    if isinstance(kind, contract.Nothing):  # rollback: its outcome is the caches
        for cache in args[1:]:
            cache.truncate(0)
        return result
    if isinstance(kind, contract.Yields):
        return (token ^ 1 for token in result)
    if isinstance(kind, contract.Array32):
        return result + np.float32(1)
    if isinstance(kind, contract.List):  # as many entries: a round's passes stay the same
        return result[:-1] + [result[-1] ^ 1] if result else [0]
    if isinstance(kind, contract.Tuple):  # (counts...) or (path, last): another first entry
        return (result[0] + [0] if isinstance(result[0], list) else result[0] + 1, *result[1:])
    if isinstance(kind, contract.Dict):
        return {**result, "extra": 0.5}
    return (not result) if isinstance(kind, contract.Bool) else result + 1


@pytest.mark.parametrize("number", checks.EXERCISES)
def test_the_contract_names_an_answer_that_draws_on_its_own(number):
    reference, terms = checks.EXERCISES[number].reference(), checks.promises.CONTRACTS[number]
    draws = itertools.cycle([False, True])  # a draw of the answer's own: its two calls with the same arguments differ

    def answer(*args):
        result = reference(*args)
        return another(terms.returns, args, result) if next(draws) else result
    fails(number, answer, "called twice with the same arguments", "draws differently each call")


def answer_in_exercises_md(number):
    """Exercise number's folded answer in EXERCISES.md, made a function with its file's signature."""
    import textwrap
    with open(os.path.join(ROOT, "EXERCISES.md"), encoding="utf-8") as f:
        section = next(s for s in re.split(r"^### ", f.read(), flags=re.M) if s.startswith(f"{int(number)}. "))
    code = re.search(r"<summary>Answer</summary>.*?```python\n(.*?)```", section, re.S).group(1)
    exercise = checks.EXERCISES[number]
    with open(os.path.join(ROOT, "exercises", f"{exercise.module}.py"), encoding="utf-8") as f:
        source = f.read()
    header = next(line for line in source.splitlines() if line.startswith(f"def {exercise.function}("))
    if not code.startswith("def "):
        code = header + "\n" + textwrap.indent(code, "    ")
    from speedup import predicted_speedup  # what the answers use, as the exercise files import it
    from stats import Stats
    from gpt2 import MASKED, softmax
    from ngram import NGramDrafter
    from speculative import speculative_generate
    from sps import residual, sample
    namespace = {"np": np, "softmax": softmax, "sample": sample, "residual": residual, "MASKED": MASKED,
                 "Stats": Stats, "predicted_speedup": predicted_speedup, "speculative_generate": speculative_generate,
                 "NGramDrafter": NGramDrafter}
    exec(compile(code, f"EXERCISES.md, exercise {int(number)}", "exec"), namespace)
    return namespace[exercise.function]


@pytest.mark.parametrize("number", [n for n in checks.EXERCISES if n not in ("05", "08")])
def test_the_answers_in_exercises_md_pass_their_checkers(number):
    # 5 and 8 answer in words and a changed line: their fixed files are test_exercises_part1.py's and _part2.py's
    checks.check(number, answer_in_exercises_md(number))


# --- EXERCISES.md's snippets, run as written ----------------------------------------------------

SNIPPET = re.compile(r'^python -c "\n(.*?)"$', re.M | re.S)


def snippets():
    """{exercise number: the code of its `python -c "..."` snippet}, from EXERCISES.md's bash blocks."""
    with open(os.path.join(ROOT, "EXERCISES.md"), encoding="utf-8") as f:
        sections = re.split(r"^### ", f.read(), flags=re.M)[1:]
    found = {}
    for section in sections:
        number = int(re.match(r"\d+", section).group(0))
        for block in re.findall(r"^```bash\n(.*?)^```", section, re.M | re.S):
            found.update({number: code for code in SNIPPET.findall(block)})
    return found


def test_the_snippets_are_found():
    assert sorted(snippets()) == [21, 22, 23, 24, 25]


@pytest.fixture(scope="module")
def snippet_dir(tmp_path_factory, tiny_dirs, demo_dirs):
    """A directory to run the snippets in, as a student's checkout after the exercises and the commands before
    each snippet: exercises/ holds solved files (each function the project's own); assets/learned-pair/prompts.json
    the first held-out prompt of each kind (the snippets read all 16: one of each runs the same code in a quarter
    of the time); bench_results/ what `python workbench.py bench --quick` (on tiny models standing in for gpt2 and gpt2-xl)
    and `python workbench.py bench suite` (on the learned pair, 8 tokens a prompt) write there."""
    import json
    base = tmp_path_factory.mktemp("snippets")
    (base / "exercises").mkdir()
    for exercise in checks.EXERCISES.values():
        (base / "exercises" / f"{exercise.module}.py").write_text(
            f"import checks\n{exercise.function} = checks.EXERCISES[{exercise.number!r}].reference()\n")
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    (base / "assets" / "learned-pair").mkdir(parents=True)
    (base / "assets" / "learned-pair" / "prompts.json").write_text(
        json.dumps(list({p["kind"]: p for p in reversed(prompts)}.values())), encoding="utf-8")
    models = base / "models"
    shutil.copytree(tiny_dirs["related"], models / "gpt2")
    shutil.copytree(tiny_dirs["oracle"], models / "gpt2-xl")
    for args in (["--quick", "--models-dir", models, "--new-tokens", 8, "--context", 16],
                 ["suite", "--methods", "speculative", "--rounds", 1, "-n", 8, "--models-dir",
                  os.path.dirname(demo_dirs["draft"])]):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "bench", *map(str, args), "--out",
                            base / "bench_results"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    return base


@pytest.mark.parametrize("number", [21, 22, 23, 24, 25])
@pytest.mark.slow
def test_each_snippet_runs_as_written(number, snippet_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "exercises")]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", snippets()[number]], cwd=snippet_dir, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
