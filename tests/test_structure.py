"""The shape of the code: two houses on one lot. The reading house at the root (the model, its cache, the
decoders, beyond/, weights/) never imports the workbench; the workbench beside it (workbench.py and
workbench/) may import the root. Imports make no circle (those inside functions and under __main__
counted), no module is over 600 lines, the model imports no plumbing, python speculative.py reaches
speculative_generate's loop in three frames, and one name means one thing."""

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest

from fixtures import ROOT

SKIPPED = {".git", ".venv", "__pycache__", "models", "bench_results", ".hypothesis", ".pytest_cache"}
MAX_LINES = 600


def python_files():
    """Every Python file of the checkout: the modules, the exercises and their checkers, the tests, the tools."""
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED)
        yield from (os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))


def module_name(path):
    """'workbench/methods/lines.py' -> 'workbench.methods.lines'; a package's __init__.py is the package."""
    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files():
    """{dotted module name: path} of every module a program can import: the root's, beyond/, weights/ and the
    workbench's (its tests aside: test modules are imported by pytest alone)."""
    found = {}
    for path in python_files():
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(("tests" + os.sep, "exercises" + os.sep, os.path.join("workbench", "tests"))) or rel == "conftest.py":
            continue
        found[module_name(path)] = path
    return found


MODULES = module_files()
READING_HOUSE = {m for m in MODULES if not m.startswith("workbench")}  # the root's modules, beyond/, weights/


def parse(module):
    with open(MODULES[module], encoding="utf-8") as f:
        return ast.parse(f.read())


def local_imports(module, tree=None):
    """Every project module that `module` imports: at the top, inside a function, under `if __name__ == "__main__"`."""
    tree = tree or parse(module)
    package = module if MODULES.get(module, "").endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from workbench import cli`: the module
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args and \
                isinstance(node.args[0], ast.JoinedStr):  # the families, imported by name (workbench/methods)
            found |= {m for m in MODULES if m.startswith(module + ".")}
    return {m for m in found if m in MODULES and m != module}


def find_cycle(graph):
    """A list of modules that import each other in a circle, or None."""
    state = {}

    def visit(module, path):
        state[module] = "open"
        for other in sorted(graph[module]):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state:
                cycle = visit(other, path + [other])
                if cycle:
                    return cycle
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [module])
            if cycle:
                return cycle
    return None


# ---------------------------------------------------------------------------
# Two houses, no circle
# ---------------------------------------------------------------------------

def test_the_module_graph_has_no_cycle():
    graph = {m: local_imports(m) for m in MODULES}
    assert find_cycle(graph) is None, "import cycle: " + " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) in (["a", "b", "c", "a"],)
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_imports_inside_functions_and_under_main_count():
    assert "weights.checkpoint" in local_imports("gpt2", ast.parse("def f():\n    from weights import checkpoint\n"))
    assert "workbench.cli" in local_imports("demo", ast.parse("if __name__ == '__main__':\n    from workbench import cli\n"))


def test_the_reading_house_never_imports_the_workbench():
    # The root, beyond/ and weights/: a reader who starts at speculative.py never lands in workbench/. The one
    # module at the root that does is workbench.py, the workbench's own entry.
    found = {m: sorted(i for i in local_imports(m) if i.startswith("workbench")) for m in READING_HOUSE - {"workbench"}}
    assert {m: i for m, i in found.items() if i} == {}


def test_no_module_is_over_600_lines():
    # Code, tests, exercises and tools alike: a file a reader can hold in mind.
    long = {os.path.relpath(p, ROOT): n for p in python_files()
            if (n := sum(1 for _ in open(p, encoding="utf-8"))) > MAX_LINES}
    assert long == {}


# ---------------------------------------------------------------------------
# The model, and the path from the command to the math
# ---------------------------------------------------------------------------

def test_the_model_imports_only_numpy_and_the_standard_library():
    tree = parse("gpt2")
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            top.add(node.module.split(".")[0])
    assert top - set(sys.stdlib_module_names) <= {"numpy"}, top
    # and `import gpt2` loads nothing of the plumbing, directly or through another module
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import gpt2"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    loaded = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert r.returncode == 0
    assert not loaded & {"requests", "urllib3", "tqdm", "threadpoolctl", "workbench", "weights"}, loaded
    assert not any(name.startswith(("workbench.", "weights.")) for name in loaded)


def test_the_forward_pass_is_numpys_product():
    with open(MODULES["gpt2"], encoding="utf-8") as f:
        source = f.read()
    assert "return x @ w + b" in source


def test_the_decoders_import_only_the_reading_house():
    # The decoders, the model and the cache: NumPy, the standard library and each other; gpt2's from_pretrained
    # hands over to weights/ inside the method.
    for module in READING_HOUSE - {"workbench"}:
        if module.startswith("weights") or module in ("download_weights", "demo"):
            continue
        plumbing = {m for m in local_imports(module) if m.startswith("weights")}
        allowed = {"gpt2": {"weights", "weights.checkpoint", "weights.models"},
                   "speculative": {"weights", "weights.tokenizer"}}.get(module, set())  # main reads the tokenizer
        assert plumbing <= allowed, (module, plumbing)


def test_what_every_decoder_shares_imports_no_decoder():
    decoders = {"speculative", "threshold", "sps", "tree", "ngram", "adaptive", "beam", "batch", "crossvocab"}
    for shared in ("decoding", "stats", "speedup", "roofline", "errors", "kvcache"):
        assert not local_imports(shared) & decoders, shared
    assert local_imports("errors") == set()  # imported first by every program, it imports nothing of the project


FRAMES = """
import runpy, sys
seen = {}
def trace(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "speculative_generate" and "loop" not in seen:
        stack, f = [], frame
        while f is not None:
            stack.append((f.f_code.co_filename.replace("\\\\", "/").rsplit("/", 1)[-1], f.f_code.co_name))
            f = f.f_back
        seen["loop"] = stack[::-1]
    if event == "call" and frame.f_code.co_name == "forward" and "forward" not in seen:
        f, files = frame, []
        while f is not None:
            files.append(f.f_code.co_filename.replace("\\\\", "/"))
            f = f.f_back
        seen["forward"] = (frame.f_code.co_filename.replace("\\\\", "/").rsplit("/", 1)[-1], files)
    return None
sys.settrace(trace)
sys.argv = ["speculative.py", "If the file does not exist, the function", "-n", "8", *sys.argv[1:]]
try:
    runpy.run_path("speculative.py", run_name="__main__")
except SystemExit:
    pass
sys.settrace(None)
import json
print(json.dumps({"loop": seen["loop"], "forward": seen["forward"],
                  "workbench": sorted(m for m in sys.modules if m.split(".")[0] == "workbench")}))
"""


def test_three_frames_from_the_command_to_the_loop_and_the_model_is_gpt2_py(demo_dirs):
    # python speculative.py: its main (run by errors.run) is the frame that iterates speculative_generate; stepping
    # into the oracle's forward from the loop lands in gpt2.py, with nothing of the workbench loaded at all.
    import json
    r = subprocess.run([sys.executable, "-c", FRAMES, "--draft", demo_dirs["draft"], "--oracle", demo_dirs["oracle"]],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    stack = seen["loop"]
    start = next(i for i, (file, _) in enumerate(stack) if file == "speculative.py" and stack[i][1] == "<module>")
    path = [name for _, name in stack[start + 1:]]
    assert path == ["run", "main", "speculative_generate"], stack  # errors.run -> main -> the loop: three frames
    file, files = seen["forward"]
    assert file == "gpt2.py" and not any("/workbench/" in f for f in files), seen["forward"]
    assert seen["workbench"] == []


def test_speculative_pys_main_is_short_and_at_the_bottom():
    tree = parse("speculative")
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    main = next(f for f in functions if f.name == "main")
    assert main.end_lineno - main.lineno + 1 <= 30, main.end_lineno - main.lineno + 1
    names = [f.name for f in functions]
    assert names.index("speculative_generate") == 0 and names.index("main") > names.index("greedy_generate")


def test_entry_scripts_start_quietly_and_nothing_imports_them():
    # Every script a user runs makes Ctrl-C one line before anything heavy loads, then hands its main() to
    # errors.run; no module imports a script.
    scripts = ("speculative", "demo", "download_weights", "workbench")
    for script in scripts:
        with open(os.path.join(ROOT, script + ".py"), encoding="utf-8") as f:  # workbench.py, beside the package
            body = ast.parse(f.read()).body
        first = next(node for node in body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)))
        assert isinstance(first, ast.If) and "interrupt_quietly" in ast.dump(first), script
    for module in MODULES:
        assert not local_imports(module) & {"demo", "download_weights"}, module  # workbench.py: the package shadows it


TIMING = re.compile(r"\b\d+(\.\d+)?\s*(ms|GB/s|MB/s|us|µs)\b|\b\d+(\.\d+)?x\b|this machine|on this host")


def test_no_comment_quotes_a_timing():
    # Measured figures live in workbench/PERFORMANCE.md, from a named run; code says why.
    offenders = []
    for module, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            source = f.read()
        comments = [line.split("#", 1)[1] for line in source.splitlines() if "#" in line and not line.strip().startswith(("'", '"'))]
        docstrings = [ast.get_docstring(node) or "" for node in ast.walk(ast.parse(source))
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))]
        for text in comments + docstrings:
            if TIMING.search(text):
                offenders.append(f"{module}: {TIMING.search(text).group(0)!r} in {text.strip()[:80]!r}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("made", ["report.html", "page.html", "workbench/tools/data/train.ids", "workbench/tools/out/oracle.pt",
                                  "bench_results/x.csv", "models/gpt2/model.safetensors"])
def test_what_runs_make_is_ignored_by_git(made):
    """Pages (--html), the training corpus and stages, benchmark results and models never show up in git status."""
    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("needs git and a clone")
    r = subprocess.run(["git", "check-ignore", "-q", "--no-index", made], cwd=ROOT)
    assert r.returncode == 0, f"{made} would show up in git status: .gitignore misses it"


# ---------------------------------------------------------------------------
# One name for each idea, one idea for each name (decoding.py's table maps the papers' letters to these names)
# ---------------------------------------------------------------------------

PAPERS_LETTERS = {"K", "Ks", "gamma", "gammas", "k_max", "K_max"}  # the draft length: n_draft; a round's: k
SECOND_NAMES = {"acceptance_rate",  # alpha is sps.alpha(q, p); a run's share kept Stats.kept_fraction; its estimate
                                    # of alpha Stats.alpha_estimate
                "k_limit", "room", "depth_max"}  # what a round may draft is its k (a tree's: its depth, k too)


def names_in(tree):
    """(name, line) of every name the code gives or uses: variables, parameters, attributes, keywords, functions."""
    for node in ast.walk(tree):
        name = (getattr(node, "id", None) or getattr(node, "arg", None) or getattr(node, "attr", None)
                or (node.name if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else None))
        if isinstance(name, str):
            yield name, getattr(node, "lineno", 0)


def test_one_name_for_the_draft_length_and_for_each_alpha_in_code():
    found = []
    for path in python_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found += [f"{os.path.relpath(path, ROOT)}:{line} {name}" for name, line in names_in(tree)
                  if name in PAPERS_LETTERS | SECOND_NAMES]
    assert found == [], found


def test_seed_means_the_random_seed_in_code():
    # The source documents are named for what they are; only docs/sources.md numbers them.
    found = []
    for path in python_files():
        with open(path, encoding="utf-8") as f:
            found += [f"{os.path.relpath(path, ROOT)}: {m.group(0)!r}" for m in re.finditer(r"[Ss]eed 00\d", f.read())]
    assert found == [], found


def library_keywords(tree, name):
    """Lines where name is a keyword of a call (NumPy's argsort(kind="stable")), not a name the code gives."""
    return {node.lineno for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == name}


def test_a_round_is_shown_by_its_method_not_by_a_kind():
    # "kind" is a kind of text (the suite's prose, code, lists, repeat); a round has no kind, a head is a head.
    shown = [m for m in MODULES if m in READING_HOUSE or m.startswith(("workbench.methods", "workbench.registry",
                                                                       "workbench.display", "workbench.page.report"))]
    found = [f"{m}:{line}" for m in shown for name, line in names_in(parse(m))
             if name == "kind" and line not in library_keywords(parse(m), "kind")]
    assert found == [], found


def test_every_signature_takes_the_target_before_the_draft():
    # q the target's distribution, p the draft's: (q, p), as sps.py's functions take them.
    found = []
    for path in python_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
                if "p" in names and "q" in names and names.index("p") < names.index("q"):
                    found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert found == [], found
