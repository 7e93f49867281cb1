"""The shape of the code: modules import each other without a cycle, each error class exists once,
and no comment quotes a timing of the machine it was measured on."""

import ast
import os
import re
import subprocess
import sys

from conftest import ROOT

MODULES = sorted(f[:-3] for f in os.listdir(ROOT) if f.endswith(".py"))


def is_main_block(node):
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def local_imports(module):
    """Every project module that `module` imports, at the top or inside a function.

    The `if __name__ == "__main__":` block is left out: it runs only when the
    file is the program, never when another module imports it.
    """
    with open(os.path.join(ROOT, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    tree.body = [node for node in tree.body if not is_main_block(node)]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(MODULES)


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


def test_the_shared_plumbing_imports_no_decoder():
    decoders = {"speculative", "threshold", "sps", "tree", "ngram", "adaptive", "beam", "cli"}
    assert not local_imports("decoding") & decoders
    assert not local_imports("errors")  # download_weights.py and bench.py use it without the decoders


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


def test_running_speculative_py_loads_it_once():
    # -X importtime lists every module imported; `speculative` must not be among
    # them: cli.py's `import speculative` finds the running file itself.
    r = subprocess.run([sys.executable, "-X", "importtime", "speculative.py", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert r.returncode == 0 and "cli" in imported and "decoding" in imported
    assert "speculative" not in imported


TIMING = re.compile(r"\b\d+(\.\d+)?\s*(ms|GB/s|MB/s|us|µs)\b|\b\d+(\.\d+)?x\b|this machine|on this host")


def test_no_comment_quotes_a_timing():
    # Measured figures live in PERFORMANCE.md, from a named bench.py run; code says why.
    offenders = []
    for module in MODULES:
        with open(os.path.join(ROOT, module + ".py"), encoding="utf-8") as f:
            source = f.read()
        comments = [line.split("#", 1)[1] for line in source.splitlines() if "#" in line and not line.strip().startswith(("'", '"'))]
        docstrings = [ast.get_docstring(node) or "" for node in ast.walk(ast.parse(source))
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))]
        for text in comments + docstrings:
            if TIMING.search(text):
                offenders.append(f"{module}.py: {TIMING.search(text).group(0)!r} in {text.strip()[:80]!r}")
    assert not offenders, "\n".join(offenders)
