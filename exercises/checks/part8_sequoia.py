"""Part 8, continued: exercise 29 (Sequoia's dynamic program on a toy acceptance vector). The answer runs on the
boundaries its text names (promises.py), then on hand-made acceptance vectors and random ones, each against the
project's own program, beyond/sequoia.py's best_values (the reference, at the end: read it after the exercise)."""

import copy
import functools
import math

import numpy as np

from .contract import Boundary, shown
from .running import Exercise, attempt, wrong

INF = math.inf


def agree(a, b):
    """Two values of F agree: both -inf, or within 1e-9 (NaN agrees with nothing)."""
    return a == b or abs(a - b) <= 1e-9


def call_text(acceptance, n_nodes, max_depth):
    return f"best_expected_tokens({list(acceptance)}, n_nodes={n_nodes}, max_depth={max_depth})"


# ---------------------------------------------------------------------------
# The program of the exercise's text, and the usual ways to get it wrong
# ---------------------------------------------------------------------------

def program(acceptance, n_nodes, max_depth, skip=False, at_most=False, whole=True, additive=False):
    """The largest F, by a recursion over (nodes, depth) and over (rank, nodes); skip: a rank may stay empty while a
    later one has a subtree; at_most: the best of at most n_nodes drafted nodes; whole (False): a subtree never takes
    all the nodes left to share; additive: a node adds its own acceptance[rank], not the product down its path."""
    a = list(acceptance)

    @functools.lru_cache(maxsize=None)
    def best(n, d):  # a tree of n nodes, the root included, and depth <= d
        if n == 1:
            return 1.0
        return -INF if d <= 0 else 1.0 + share(0, n - 1, d - 1)

    @functools.lru_cache(maxsize=None)
    def share(i, m, d):  # m nodes among the subtrees (each of depth <= d) of ranks i, i + 1, ...
        if m == 0:
            return 0.0
        if i == len(a):
            return -INF
        options = [(a[i] + best(s, d) - 1 if additive else a[i] * best(s, d)) + share(i + 1, m - s, d)
                   for s in range(1, m + 1 if whole else m) if best(s, d) > -INF]
        return max(options + ([share(i + 1, m, d)] if skip else []), default=-INF)

    if n_nodes < 0:
        return -INF
    return max(best(n, max_depth) for n in range(1, n_nodes + 2)) if at_most else best(n_nodes + 1, max_depth)


def greedy(acceptance, n_nodes, max_depth):
    """The tree grown a node at a time, each where it adds the most: the next rank under a node already there."""
    a, total, nodes = list(acceptance), 1.0, [(1.0, 0, 0)]  # (f, depth, children so far), the root first
    for _ in range(n_nodes):
        places = [(f * a[k], i) for i, (f, depth, k) in enumerate(nodes) if depth < max_depth and k < len(a)]
        if not places:
            return -INF
        value, i = max(places, key=lambda place: place[0])
        f, depth, k = nodes[i]
        nodes[i] = (f, depth, k + 1)
        nodes.append((value, depth + 1, 0))
        total += value
    return total


PROGRAM_HINT = ("best(n, d), the largest F of a tree of n nodes (the root included) and depth <= d, is 1 + the best "
                "way to share n - 1 nodes among the root's subtrees, the one of rank k weighed by acceptance[k] and "
                "itself a best tree of depth d - 1; the answer is best(n_nodes + 1, max_depth)")
MISTAKES = [  # (the value of a mistaken program, what it is, where to look)
    (lambda a, n, d: program(a, n - 1, d), "that is the best tree of n_nodes nodes with the root among them",
     "n_nodes counts the drafted nodes alone: the tree has n_nodes + 1 nodes with the root, best(n_nodes + 1, ...)"),
    (lambda a, n, d: program(a, n, d) - 1, "that is F without the root's 1",
     "F(T) = 1 + Σ_v f(v): the 1 is the oracle's own token, which every round makes, drafts kept or not"),
    (lambda a, n, d: program(a, n, d + 1), "that is the best tree of depth max_depth + 1",
     "the root's children are at depth 1: a tree of depth d has d levels below the root, and a child's subtree "
     "has depth d - 1"),
    (lambda a, n, d: program(a, n, d - 1), "that is the best tree of depth max_depth - 1",
     "the root's children are at depth 1: a tree of depth d has d levels below the root, the root's children's "
     "subtrees depth d - 1"),
    (greedy, "that is the tree grown greedily, a node at a time where it adds the most: the best only when acceptance "
             "falls with the rank", "a node worth little can open the way for one worth much (its second child): "
     "compare every way to share the nodes among the ranks, each subtree a best tree itself"),
    (lambda a, n, d: program(a, n, d, skip=True), "that is the best tree whose children take the best ranks, in any "
     "order (acceptance sorted, or a rank left empty beside a later one: the same)", "children come in rank order: "
     "a (k+1)-th child exists only beside the first k, and acceptance[k] is its own whatever its value: the ranks "
     "share the nodes from rank 0 on, none skipped or reordered"),
    (lambda a, n, d: program([a[0]] * len(a), n, d), "that is the best tree with every child weighed by acceptance[0]",
     "a child of rank k (its place among its siblings) weighs its subtree by acceptance[k]"),
    (lambda a, n, d: program(a, n, d, at_most=True), "that is the best tree of at most n_nodes drafted nodes",
     "exactly n_nodes drafted nodes; where no tree of that size fits, -inf"),
    (lambda a, n, d: program(a, n, n + 1), "that is the best tree of any depth: max_depth left out",
     "a child's subtree has depth at most d - 1, and with no level left only the root alone fits (best(n, 0) is "
     "-inf for n > 1)"),
    (lambda a, n, d: program(a, n, min(d, 1)), "that is the best star (every node a child of the root)",
     "a child's subtree is itself a best tree of depth d - 1, not a single node"),
    (lambda a, n, d: program(a[:1], n, d), "that is the best line (one child a node)",
     "a node has up to len(acceptance) children, the ranks sharing the nodes"),
    (lambda a, n, d: program(a, n, d, whole=False), "that is the program in which a subtree never takes all the "
     "nodes left to share (sizes s = 1 .. m - 1)", "a rank's subtree can take any size s = 1 .. m of the m nodes left, "
                                                   "all of them included: range(1, m + 1)"),
    (lambda a, n, d: program(a, n, d, additive=True), "that is F with each node adding its own acceptance[rank], not "
     "the product down its path", "F(T) = 1 + Σ_v Π_u acceptance[rank(u)], the product over the path from the root "
                                  "to v: a subtree under a child of rank k adds acceptance[k] TIMES its own F"),
]


def capacity(ranks, depth):
    """The most drafted nodes a tree of depth <= depth with at most `ranks` children a node holds."""
    return sum(ranks ** level for level in range(1, depth + 1))


def explain_sequoia(args, got, expected, f=None):
    """(what went wrong, where to look) for best_expected_tokens(*args) = got, where the program gives expected: the
    usual mistake that gives got (where several do, the one f makes on the checker's other cases too), else what
    differs."""
    acceptance, n, d = args
    if isinstance(got, float) and math.isnan(got):
        return ("NaN is 0 * -inf: a rank of acceptance 0 weighed a subtree size that does not fit",
                "leave out the sizes no subtree can take (best = -inf) before weighing them by acceptance[k]")
    found = [m for m in MISTAKES if made_by(m, args, got) and not made_by(m, args, expected)]
    if found and f is not None:
        found = told_apart(f, found)
    if found:
        return "; or ".join(said for _, said, _ in found), "; or ".join(hint for _, _, hint in found)
    if expected == -INF:
        return (f"no tree of {n} drafted nodes has depth at most {d} with at most {len(acceptance)} children a node "
                f"(such trees hold at most {capacity(len(acceptance), d)})", "return -inf (float('-inf')) where no "
                "tree fits: a size no subtree can take is -inf, and so is every sum that needs it")
    if got == -INF:
        return (f"a tree of {n} drafted nodes and depth at most {d} exists (up to {capacity(len(acceptance), d)} "
                "fit)", "-inf only where nothing fits: the ranks past the last can take no node, but the ranks "
                "before can share them")
    return "", None  # a boundary's own hint, else PROGRAM_HINT


def made_by(mistake, args, value):
    return agree(mistake[0](list(args[0]), *args[1:]), value)


def told_apart(f, found):
    """Those of the mistakes found that f makes on every case of the checker's: on a small case a mistake can give
    the value of another, or the value of an answer whose mistake is none of them (then none is said)."""
    for args in [b.args() for b in sequoia_boundaries()] + list(HAND_MADE):
        if not found:
            break
        try:
            got = attempt("best_expected_tokens(...)", f, *copy.deepcopy(args))
        except (AssertionError, Exception):
            continue
        found = [m for m in found if made_by(m, args, got)]
    return found


# ---------------------------------------------------------------------------
# The checker's own cases: hand-made acceptance vectors, then random ones
# ---------------------------------------------------------------------------

HAND_MADE = [([0.6, 0.2, 0.1], n, d) for n in (1, 2, 4, 7) for d in (1, 2, 3)] + [
    ([0.3, 0.3, 0.3], 6, 2), ([0.8], 5, 6), ([0.5, 0.45], 6, 4),
    ([0.1, 0.5, 0.2], 3, 2), ([0.1, 0.5, 0.2], 5, 3),  # a second child likelier than the first
    ([0.1, 0.9, 0.5], 4, 2),  # a node worth little whose second child is worth much: growing greedily fails
    ([0.9, 0.05], 3, 1), ([0.9, 0.05], 2, 1), ([0.7, 0.0, 0.4], 6, 2)]


@functools.lru_cache(maxsize=1)
def sequoia_cases():
    """The hand-made cases, then random ones (seeded, the same each run): 1 to 4 ranks, acceptance in any order."""
    rng = np.random.default_rng(29)
    drawn = [([round(float(x), 2) for x in rng.random(int(rng.integers(1, 5)))], int(rng.integers(1, 11)),
              int(rng.integers(1, 5))) for _ in range(40)]
    return HAND_MADE + drawn


def sequoia_probes():
    """The randomness stage's calls: the hand-made cases, each made twice (promises.py)."""
    return [(call_text(*args), lambda args=args: copy.deepcopy(args)) for args in HAND_MADE]


def check_sequoia_dp(f):
    reference = reference_sequoia_dp()
    for acceptance, n, d in sequoia_cases():
        call = call_text(acceptance, n, d)
        got = attempt(call, f, list(acceptance), n, d, hints=CRASH_HINTS)
        expected = reference(list(acceptance), n, d)
        if not agree(got, expected):
            said, hint = explain_sequoia((acceptance, n, d), got, expected, f)
            raise wrong(f"{call} returned {shown(got)}, expected {shown(expected)}" + (f": {said}" if said else ""),
                        hint or PROGRAM_HINT)


CRASH_HINTS = (
    (IndexError, "a node has at most len(acceptance) children: the ranks are 0 .. len(acceptance) - 1, and past the "
                 "last no subtree can take a node"),
    (ValueError, "max() of no option is an error: where no size fits, -inf (max(..., default=-inf)); and with "
                 "n_nodes = 0 the tree is the root alone, best(n_nodes + 1, max_depth) = best(1, ...) = 1.0"),
    (RecursionError, "each step of the program has fewer nodes, or fewer levels, or a later rank: best(1, d) = 1, "
                     "and with no level left (d = 0) only the root alone fits"),
    (TypeError, "where it says unhashable type: 'list': acceptance is a list, and a cache keyed on it "
                "(functools.lru_cache, a dict) needs tuple(acceptance)"),
)


# ---------------------------------------------------------------------------
# The boundaries the text names (promises.py holds the exercise to them first)
# ---------------------------------------------------------------------------

def case(what, args, hint):
    return Boundary(what, call_text(*args), lambda: copy.deepcopy(args), hint,
                    lambda got, expected, f: explain_sequoia(args, got, expected, f))


def sequoia_boundaries():
    nothing = "return -inf (float('-inf')) where no tree fits"
    return [case("no drafted node (n_nodes = 0): the root alone, which makes one token", ([0.6, 0.2, 0.1], 0, 3),
                 "a tree of the root alone makes 1 token, the oracle's own: F = 1.0"),
            case("max_depth = 1: every node a child of the root", ([0.6, 0.2, 0.1], 2, 1),
                 "at depth 1 the root's children are the whole tree, one of each rank from rank 0"),
            case("more nodes than max_depth = 1 holds with two ranks: no tree", ([0.6, 0.2], 3, 1), nothing),
            case("a single rank: the tree is a line, and fits", ([0.8], 3, 5),
                 "with one rank every node has one child at most: a line of n_nodes"),
            case("a single rank and a line longer than max_depth: no tree", ([0.8], 4, 3), nothing),
            case("a rank of acceptance 0: a node there adds nothing", ([0.7, 0.0], 4, 2),
                 "a size no subtree can take is -inf: leave it out before weighing it by acceptance[k]")]


def reference_sequoia_dp():
    """best_expected_tokens over beyond/sequoia.py's best_values (which counts the root in a tree's size)."""
    from beyond.sequoia import best_values

    def best_expected_tokens(acceptance, n_nodes, max_depth):
        best, _ = best_values(acceptance, n_nodes + 1, max_depth)
        return best[max_depth][n_nodes + 1]
    return best_expected_tokens


EXERCISES = (Exercise("29", "ex29_sequoia_dp", "best_expected_tokens", check_sequoia_dp, reference_sequoia_dp),)
