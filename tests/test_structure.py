"""The shape of the code: the teaching modules at the root, each kind of plumbing in its package,
imports without a cycle (those inside functions counted), a model that imports no plumbing,
thin entry scripts, each error class once, and no comment quoting a timing."""

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest

from fixtures import ROOT

PACKAGES = ("app", "weights", "speed", "beyond")


def module_files():
    """{dotted module name: path} of every module of the project (the root's files and the packages')."""
    found = {f[:-3]: os.path.join(ROOT, f) for f in os.listdir(ROOT) if f.endswith(".py")}
    for package in PACKAGES:
        folder = os.path.join(ROOT, package)
        for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if f.endswith(".py"):
                name = package if f == "__init__.py" else f"{package}.{f[:-3]}"
                found[name] = os.path.join(folder, f)
    return found


MODULES = module_files()
ENTRY_SCRIPTS = ("bench", "demo", "download_weights")  # a docstring and a hand-over to app/, nothing else


def is_main_block(node):
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def parse(module):
    with open(MODULES[module], encoding="utf-8") as f:
        return ast.parse(f.read())


def local_imports(module, tree=None):
    """Every project module that `module` imports, at the top or inside a function.

    The `if __name__ == "__main__":` blocks are left out: they run only when the
    file is the program, never when another module imports it.
    """
    tree = tree or parse(module)
    tree.body = [node for node in tree.body if not is_main_block(node)]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else ".".join(module.split(".")[:-node.level] + [node.module])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from app import cli`: the module app.cli
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


def test_the_module_graph_has_no_cycle():
    graph = {m: local_imports(m) for m in MODULES}
    assert find_cycle(graph) is None, "import cycle: " + " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) in (["a", "b", "c", "a"],)
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_imports_inside_functions_count():
    tree = ast.parse("def f():\n    from weights import checkpoint\n")
    assert "weights.checkpoint" in local_imports("gpt2", tree)


def test_the_model_imports_only_numpy_the_cache_and_the_standard_library():
    tree = parse("gpt2")
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            top.add(node.module.split(".")[0])
    assert top - set(sys.stdlib_module_names) <= {"numpy", "kvcache"}, top
    # and `import gpt2` loads nothing of the plumbing, directly or through another module
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import gpt2"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    loaded = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert r.returncode == 0
    forbidden = {"requests", "urllib3", "tqdm", "download_weights", "demo", "cli", "app", "speed", "weights"}
    assert not loaded & forbidden, loaded & forbidden
    assert not any(name.startswith(("speed.", "app.", "weights.")) for name in loaded)


def test_the_forward_pass_is_numpys_product():
    with open(MODULES["gpt2"], encoding="utf-8") as f:
        source = f.read()
    assert "return x @ w + b" in source


def test_the_teaching_modules_import_no_plumbing():
    # The decoders, the model and the cache: NumPy, the standard library and each other only.
    teaching = {"gpt2", "kvcache", "decoding", "speculative", "threshold", "sps", "processors", "tree", "ngram",
                "adaptive", "beam", "crossvocab"} | {m for m in MODULES if m.startswith("beyond.")}
    for module in teaching:
        plumbing = {m for m in local_imports(module) if m.startswith(("app", "weights", "speed"))}
        assert not plumbing or (module == "gpt2" and plumbing == {"weights", "weights.checkpoint", "weights.models"}), \
            (module, plumbing)  # gpt2's from_pretrained hands over to weights/, inside the method


def test_the_shared_plumbing_imports_no_decoder():
    decoders = {"speculative", "threshold", "sps", "tree", "ngram", "adaptive", "beam"}
    assert not local_imports("decoding") & decoders
    assert not local_imports("errors")  # imported by every layer, it imports none
    for module in MODULES:
        if module.startswith(("weights", "speed")):
            assert not {m for m in local_imports(module) if m.startswith("app")}, module  # app/ is the top


def test_entry_scripts_only_hand_over_and_nothing_imports_them():
    # An entry script defines nothing: no class or state can exist twice when it runs as the program.
    for script in ENTRY_SCRIPTS + ("speculative",):
        tree = parse(script)
        for node in tree.body:
            if is_main_block(node):
                for statement in node.body:
                    assert isinstance(statement, (ast.Import, ast.ImportFrom, ast.Expr)) or (
                        isinstance(statement, ast.Raise) and statement.exc.func.id == "SystemExit"), (script, ast.dump(statement))
                    assert not isinstance(statement, ast.ImportFrom) or statement.module.startswith("app"), script
            elif script in ENTRY_SCRIPTS:
                assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant), (script, ast.dump(node))
    for module in MODULES:
        assert not local_imports(module) & set(ENTRY_SCRIPTS), module


def test_speculative_py_defines_functions_only():
    # speculative.py is a decoder and the command line's entry: the first file a student edits holds
    # functions only (its module code runs once per run, below; no state to keep in step).
    for node in parse("speculative").body:
        assert isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom)) or is_main_block(node) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)), ast.dump(node)


RUNS = """
import contextlib, io, runpy, sys
defined = []
def trace(frame, event, arg):  # each `def` line of speculative.py's module code that runs, and as which module
    if frame.f_code.co_name != "<module>" or frame.f_code.co_filename.replace("\\\\", "/").split("/")[-1] != "speculative.py":
        return None
    def line(frame, event, arg):
        if event == "line" and LINES[frame.f_lineno - 1].startswith("def "):
            defined.append(frame.f_globals["__name__"])
        return line
    return line
LINES = open("speculative.py", encoding="utf-8").read().splitlines()
sys.settrace(trace)
sys.argv = ["speculative.py", "--help"]
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    runpy.run_path("speculative.py", run_name="__main__")
sys.settrace(None)
print(sorted(set(defined)), len(defined) == sum(l.startswith("def ") for l in LINES))
"""


def test_a_run_executes_speculative_pys_module_code_once():
    # python speculative.py hands over to app/cli.py before its functions are defined: they are defined
    # once, in the module `speculative` that app/cli.py imports, never a second time as __main__.
    r = subprocess.run([sys.executable, "-c", RUNS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['speculative'] True", r.stdout


def test_a_check_only_a_decoder_makes_is_one_line_from_the_command_line(tiny_dirs):
    # adaptive.py checks its own `rule`; break that check's table, then run
    # speculative.py as a user would. Its GenerationError must be the class the
    # command line catches (one class, not a __main__ copy and an imported one).
    code = ("import runpy, sys, adaptive; adaptive.RULES = (); "
            "sys.argv = ['speculative.py', 'the cat', '--method', 'adaptive', '-n', '4', "
            f"'--draft', {tiny_dirs['related']!r}, '--oracle', {tiny_dirs['oracle']!r}]; "
            "runpy.run_path('speculative.py', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("error: rule must be one of") and sum(line.startswith("error") for line in lines) == 1


TIMING = re.compile(r"\b\d+(\.\d+)?\s*(ms|GB/s|MB/s|us|µs)\b|\b\d+(\.\d+)?x\b|this machine|on this host")


def test_no_comment_quotes_a_timing():
    # Measured figures live in PERFORMANCE.md, from a named bench.py run; code says why.
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
# One vocabulary: one name for each idea (decoding.py's table maps the papers' letters to these names)
# ---------------------------------------------------------------------------

PAPERS_LETTERS = {"K", "Ks", "gamma", "gammas", "k_max", "K_max"}  # the draft length: n_draft; a round's: k
SECOND_NAMES = {"acceptance_rate"}  # alpha is sps.alpha(q, p); a run's share kept Stats.kept_fraction; its estimate
                                    # of alpha Stats.alpha_estimate


def python_files():
    """Every Python file of the checkout: the modules, the exercises and their checkers, the tests, the tools."""
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("models", "__pycache__", "bench_results")]
        yield from (os.path.join(folder, n) for n in names if n.endswith(".py"))


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


def test_the_draft_length_has_one_flag_and_one_session_command(tmp_path):
    from workbench import cli, runner, session
    from workbench.bench import ablation
    out = ["--out", str(tmp_path / "ablation.csv")]
    assert cli.parse_args(["--n-draft", "3"]).n_draft == 3
    assert ablation.parse_args(["--n-draft", "3", *out]).n_draft == 3
    for parse in (cli.parse_args, lambda argv: ablation.parse_args(argv + out)):
        for other in (["-K", "3"], ["--gamma", "3"]):
            with pytest.raises(SystemExit):
                parse(other)
    table = session.command_table(session.Session("d", "o", ROOT, runner.Settings()))
    setters = [name for name, (handler, _, usage, _) in table.items() if usage.split()[0] in ("/n_draft", "/gamma", "/K")]
    assert setters == ["n_draft"]
    assert not hasattr(runner.Settings, "k") and not {"gamma", "K", "egag_gamma_min", "egag_gamma_max"} & set(table)


def test_each_method_is_registered_by_a_named_function():
    # A reader (or a tool) follows the call from --method to its decoder: no lambda in the registry.
    tree = parse("app.methods")
    assert not [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Lambda)]
    from workbench import methods
    assert all(m.generate.__name__.startswith("run_") for m in methods.METHODS.values())
    # and so is each way a method runs a draft of another vocabulary (crossvocab.py)
    assert all(m.across.__name__.startswith("run_") for m in methods.METHODS.values() if m.across is not None)
