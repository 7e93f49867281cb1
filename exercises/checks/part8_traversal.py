"""Part 8, the newest methods: exercise 28 (traversal verification on a toy tree); 29 is part8_sequoia.py. The answer
runs on the boundaries its text names (promises.py), then on hand-made trees and random ones, each against the
project's own walk, beyond/traversal.py's traverse (the reference, at the end: read it after the exercise)."""

import copy
import functools
import math

import numpy as np

from .contract import Boundary, shown
from .running import Exercise, attempt, show, wrong


def f32(*rows):
    return np.array(rows, np.float32)


# ---------------------------------------------------------------------------
# The outcomes, as a failure shows and compares them
# ---------------------------------------------------------------------------

def agree(a, b):
    """Two outcomes (path, last) agree: the same path, and last the same distribution up to float32's rounding."""
    return (list(a[0]) == list(b[0]) and np.shape(a[1]) == np.shape(b[1])
            and bool(np.allclose(a[1], b[1], atol=1e-5, rtol=0)))


def display(outcome):
    path, last = outcome
    return f"({list(path)}, {show(last, 4)})"


def call_text(args):
    """kept_path(...) as a failure shows it: every number of a small tree (3 decimals); a larger tree's q and p by
    their shapes."""
    parents, tokens, q, p, rs = args
    uniforms = "[" + ", ".join(shown(float(r)) for r in rs) + "]"
    if len(parents) <= 3:
        rows = "[" + ", ".join(show(row) for row in q) + "]"
        draft = "{" + ", ".join(f"{x}: {show(row)}" for x, row in p.items()) + "}"
    else:
        rows, draft = f"<float32 {list(np.shape(q))}>", f"<{len(p)} rows: after {sorted(p)}>"
    return f"kept_path({list(parents)}, {list(tokens)}, q={rows}, p={draft}, rs={uniforms})"


RS_HINT = ("rs holds exactly the r's the walk uses, one per node tested, in the walk's order: none for the root (it "
           "always passes), one for each node once its children's subtrees are done, leaves first")
ZERO_HINT = ("where Z = Σ max(w target - p, 0) is 0, w becomes 0 / (1 - w) = 0 and the target cannot be divided by Z: "
             "it stays as it is (nothing below is kept any more)")


def spare(args):
    """The arguments with r's to spare after the walk's own (0.999: a node of weight below 1 that takes one fails)."""
    parents, tokens, q, p, rs = args
    return parents, tokens, q, p, list(rs) + [0.999] * (len(parents) + 1)


def asked_for_more(f, args):
    """(what more, where to look) for a walk that ran out of r's (IndexError, StopIteration): what it returns given
    more of them, told apart by the usual mistakes (running.attempt calls this with the arguments as they came)."""
    more = spare(args)
    try:
        got = attempt("kept_path(...) with more r's", f, *copy.deepcopy(more))
    except AssertionError:
        return "", RS_HINT
    expected = reference_traversal_toy()(*more)
    if agree(got, expected):
        return ("given more r's it keeps the right path: it asks for an r the walk does not use",
                "the root always passes and takes no r; each node takes one, once, when its children's subtrees are "
                "done")
    said, hint = explain_traversal(more, got, expected, f)
    n, hint = len(args[4]), hint or PATH_HINT
    uses = "1 r" if n == 1 else f"{n} r's"
    return (f"the walk uses {uses} here, and given more yours returns {display(got)}, where the walk gives "
            f"{display(expected)}" + (f": {said}" if said else ""), hint)


CRASH_HINTS = (
    ((IndexError, StopIteration), asked_for_more),
    (KeyError, "p[X] is the draft's distribution after node X (p[-1] after the root), given for the root and every "
               "node with children: a child C of X was drawn from p[X], so its ratio is target(C) / p[X](C)"),
    (ZeroDivisionError, ZERO_HINT),
)


# ---------------------------------------------------------------------------
# The walk of the exercise's text, and the usual ways to get it wrong
# ---------------------------------------------------------------------------

class Exhausted(Exception):
    """A walk asked for more r's than rs holds."""


def walk(parents, tokens, q, p, rs, carry=True, inverted=False, scaled=True, clip=True, normalise=True, update=True,
         retarget=True, guard=True, pre_order=False, by_node=False, reverse=False, row=1, bonus=False,
         leaf_first=False, strict=True, f32=False, cap=True, w_first=False, fixed_target=False, own_q=False):
    """The text's walk; each keyword one mistake: the path's weight not carried down (carry), p/q for q/p
    (inverted), the residual without w (scaled), without max(., 0) (clip), not divided by Z (normalise), the
    weight or the target not updated after a rejection (update, retarget), no care for Z = 0 (guard), a node
    tested before its children (pre_order), node i given rs[i] (by_node), children last first (reverse),
    q[i + row] after node i, last q after the kept node always (bonus), the path leaf first, r <= w for r < w
    (strict), r and w compared in float32 (f32), a child's weight without min(1, .) (cap), w updated before the
    excess is taken (w_first), a child's ratio from q after its parent whatever the rejections before it
    (fixed_target), or from the child's own q[C + 1] (own_q). Raises Exhausted where rs runs out."""
    uniforms, children = iter(rs), {x: [c for c, parent in enumerate(parents) if parent == x]
                                    for x in range(-1, len(parents))}

    def draw(x):
        r = (rs[x] if x < len(rs) else None) if by_node else next(uniforms, None)
        if r is None:
            raise Exhausted
        return r

    def passes(x, w):
        r = draw(x)
        r, w = (np.float32(r), np.float32(w)) if f32 else (r, w)
        return r < w if strict else r <= w

    def visit(x, w, target):  # -> (the path below x, last), or None when x's subtree is rejected
        if pre_order and x != -1 and not passes(x, w):
            return None
        first_target = target
        for c in children[x][::-1] if reverse else children[x]:
            toward = q[c + 1] if own_q else first_target if fixed_target else target
            qx, px = float(toward[tokens[c]]), float(p[x][tokens[c]])
            ratio = (px / qx if qx else math.inf) if inverted else qx / px
            weight = w * ratio if carry else ratio
            kept = visit(c, min(1.0, weight) if cap else weight, q[c + row])
            if kept is not None:
                return [c] + kept[0], kept[1]
            if w_first:
                z = float(np.maximum(np.float32(w) * target - p[x], 0).sum())
                w = z / (z + 1.0 - w) if z + 1.0 - w > 0 else 1.0
            excess = np.float32(w if scaled else 1.0) * target - p[x]
            excess = np.maximum(excess, 0) if clip else excess
            z = float(excess.sum())
            if update and not w_first:
                w = z / (z + 1.0 - w) if z + 1.0 - w > 0 else 1.0
            if (z > 0 or not guard) and retarget:
                target = excess / np.float32(z) if normalise else excess
        if x != -1 and not pre_order and not passes(x, w):
            return None
        return [], (q[x + row] if bonus else target)

    with np.errstate(all="ignore"):
        path, last = visit(-1, 1.0, q[0])
    return (path[::-1] if leaf_first else path), last


def top_down(parents, tokens, q, p, rs):
    """The token-level rule (tree-sps's, SpecInfer's): from the root down, each child tested on its own ratio with
    an r of its own, a rejected child's whole subtree lost."""
    from sps import residual
    uniforms, path, at, target = iter(rs), [], -1, q[0]
    while True:
        for c in [c for c, parent in enumerate(parents) if parent == at]:
            r = next(uniforms, None)
            if r is None:
                raise Exhausted
            if r < min(1.0, float(target[tokens[c]]) / float(p[at][tokens[c]])):
                path, at, target = path + [c], c, q[c + 1]
                break
            target = residual(target, p[at])
        else:
            return path, target


PATH_HINT = ("the walk: a child C of X has weight w_C = min(1, w target(C) / p[X](C)) and target q[C + 1]; a node is "
             "tested, r < w, once its children's subtrees are done; a child's subtree rejected makes X's weight "
             "Z / (Z + 1 - w) and its target max(w target - p[X], 0) / Z")
LAST_HINT = ("last is the kept node's target: q after it (the bonus) where no child of it was rejected, else the "
             "residual max(w target - p, 0) / Z it had after the rejections")

MISTAKES = [  # (the walk's mistake, what it is, where to look)
    (dict(strict=False), "that is the walk with r <= w for r < w", "the test is strict, r < w: r can be exactly 0.0 "
     "(rng.random() draws from [0, 1)), and a node of weight 0 must not be kept even then"),
    (dict(f32=True), "that is the walk that compares r with w in float32: r just below 1 rounds to 1.0 there",
     "compare r with w as Python floats (min(1.0, ...) of float(...) ratios): NumPy compares a Python float with an "
     "np.float32 (np.minimum's, or a weight computed from float32 entries) in float32, where r = 1 - 2^-53 is 1.0"),
    (dict(leaf_first=True), "that is the path leaf first",
     "the path root first: the root's child, then its child, down to the node kept"),
    (top_down, "that is the token-level rule's path (tree-sps's, from the root down): a child tested on its own ratio "
               "and its subtree lost when it fails", "the walk starts at the deepest leftmost leaf and tests the "
     "whole path to it with the path's weight w: a shortfall above (q/p < 1) is made up below (q/p > 1)"),
    (dict(inverted=True), "that is the walk with p/q for q/p", "a child's weight is min(1, w target(C) / p[X](C)): the "
     "oracle's probability (the target, q) over the draft's (p), Chen et al.'s letters"),
    (dict(carry=False), "that is the walk whose child weight is min(1, q/p) alone, not carried down the path",
     "w_C = min(1, w target(C) / p[X](C)): the parent's weight w times the child's ratio"),
    (dict(row=0), "that is the walk with q[i] as the oracle's distribution after node i",
     "q[0] is after the root and q[i + 1] after node i: a child C's target is q[C + 1]"),
    (dict(reverse=True), "that is the walk over each node's children last first",
     "children in the order they were drawn (their indices): the walk starts at the deepest LEFTMOST leaf"),
    (dict(pre_order=True), "that is the walk that tests a node before its children",
     "a node is tested once its children's subtrees are all done, leaves first: the r's go to the nodes in that order"),
    (dict(by_node=True), "that is the walk that gives node i the r rs[i]",
     "rs are in the walk's order, one per node tested: the first is the deepest leftmost leaf's, not node 0's"),
    (dict(update=False), "that is the walk that keeps a node's weight after a child's subtree is rejected",
     "after a rejection the node's weight becomes Z / (Z + 1 - w), as its target becomes the residual"),
    (dict(retarget=False), "that is the walk that keeps a node's target after a child's subtree is rejected",
     "after a rejection the node's target becomes the residual max(w target - p[X], 0) / Z, for its next children "
     "and for the last token"),
    (dict(scaled=False), "that is the walk with the residual max(target - p, 0), without the weight w",
     "Z and the new target come from w target: max(w target - p[X], 0)"),
    (dict(bonus=True), "the last token is drawn from q after the kept node, but a child of it was rejected", LAST_HINT),
    (dict(clip=False), "that is the walk with the residual w target - p, without max(., 0)",
     "the residual is max(w target - p[X], 0): the entries where p is larger are 0, not negative"),
    (dict(normalise=False), "that is the walk whose residual is not divided by Z",
     "the new target is max(w target - p[X], 0) / Z: a distribution, summing to 1"),
    (dict(guard=False), "where Z is 0, the target divided by it is 0 / 0, NaN, and min(1, NaN) is 1: a child below "
                        "then gets weight 1", ZERO_HINT),
    (dict(cap=False), "that is the walk whose child weight is w target(C) / p[X](C) without min(1, .): a weight "
                      "above 1 then scales the residual", "w_C = min(1, w target(C) / p[X](C)): a weight is a "
                                                          "probability, at most 1"),
    (dict(w_first=True), "that is the walk that updates a node's weight before it takes the excess: the residual "
                         "then comes from the new weight", "after a rejection, first the excess max(w target - p[X], "
                                                           "0) and Z with the weight w it had, then w = Z / (Z + 1 - w)"),
    (dict(fixed_target=True), "that is the walk whose children are all weighed against q after their parent, never "
                              "the residual left by their rejected siblings", "a child C of X is weighed against X's "
                              "target as it is when C's turn comes: the residual after the siblings rejected before it"),
    (dict(own_q=True), "that is the walk that weighs a child C with q[C + 1], the oracle's distribution after C, not "
                       "the one C was drawn against", "a child C of X has weight min(1, w target(C) / p[X](C)), "
                                                      "target the oracle's distribution after X (its target)"),
]


def explain_traversal(args, got, expected, f=None):
    """(what went wrong, where to look) for kept_path(*args) = got, where the walk gives expected: the usual mistake
    that gives got (where several do, the one f makes on the checker's other trees too), else what differs."""
    found = [m for m in MISTAKES if made_by(m, args, got) and not made_by(m, args, expected)]
    if len(found) > 1 and f is not None:
        found = told_apart(f, found)
    if found:
        return "; or ".join(said for _, said, _ in found), "; or ".join(hint for _, _, hint in found)
    path, last = got
    last = np.asarray(last, np.float64)
    if not np.all(np.isfinite(last)):
        return (f"the last token's distribution is {show(last)}: a division by Z where Z is 0",
                "Z = Σ max(w target - p, 0) (without the max(., 0) the sum is w - 1, 0 at the root); " + ZERO_HINT)
    if np.any(last < 0):
        return ("the last token's distribution has negative entries",
                "the residual is max(w target - p, 0): the entries where p is larger are 0, not negative")
    if list(path) == list(expected[0]):
        if not abs(float(last.sum()) - 1) <= 1e-4:
            return f"the path is right, but the last token's distribution sums to {last.sum():.4g}, not 1", LAST_HINT
        return "the path is right, but not the last token's distribution", LAST_HINT
    return "", None  # a boundary's own hint, else PATH_HINT


def made_by(mistake, args, outcome):
    """Whether the walk with this mistake gives outcome on args (never, where it runs out of r's)."""
    try:
        made = mistake[0](*args) if callable(mistake[0]) else walk(*args, **mistake[0])
    except Exhausted:
        return False
    return agree(made, outcome)


def told_apart(f, found):
    """Those of the mistakes found that f makes on every tree of the checker's (each with r's to spare) where f
    makes one of them: on a small tree two mistakes can give the same outcome."""
    for _, args in [(b.what, b.args()) for b in traversal_boundaries()] + list(traversal_cases()):
        if len(found) == 1:
            break
        more = spare(args)
        try:
            got = attempt("kept_path(...)", f, *copy.deepcopy(more))
        except AssertionError:
            continue
        found = [m for m in found if made_by(m, more, got)] or found
    return found


# ---------------------------------------------------------------------------
# The checker's own trees: hand-made, then random ones
# ---------------------------------------------------------------------------

HAND_MADE = [
    ("two children of the root: the first's leaf fails, then the first child itself, then the second passes",
     ([-1, -1, 0], [0, 1, 1], f32([0.3, 0.7], [0.5, 0.5], [0.6, 0.4], [0.9, 0.1]),
      {-1: f32(0.6, 0.4), 0: f32(0.2, 0.8)}, [0.99, 0.95, 0.3])),
    ("a line of three: the first node short of the oracle (q/p = 0.5), the next two make it up",
     ([-1, 0, 1], [0, 0, 1], f32([0.3, 0.7], [0.8, 0.2], [0.3, 0.7], [0.5, 0.5]),
      {-1: f32(0.6, 0.4), 0: f32(0.5, 0.5), 1: f32(0.4, 0.6)}, [0.9])),
    ("a node of weight 1 whose child is rejected: Z / (Z + 1 - 1) keeps its weight exactly 1, and r just below 1 "
     "keeps it", ([-1, 0], [0, 1], f32([0.5, 0.3, 0.2], [0.5, 0.1, 0.4], [0.3, 0.3, 0.4]),
                  {-1: f32(0.4, 0.4, 0.2), 0: f32(0.3, 0.6, 0.1)}, [float(np.nextafter(1.0, 0.0))] * 2)),
]
SHAPES = [[-1, 0, 1], [-1, -1, 0, 2], [-1, -1, 0, 0, 2], [-1, -1, -1], [-1, 0, 0, 1], [-1, 0, 1, 2],
          [-1, -1, 0, 0, 1, 1], [-1, 0, 0, 1, 1, 2, 2]]


def random_tree(rng, parents, V):
    """q and p of a drafted tree: each p[X] near the oracle's q after X (a draft that agrees now and then), each
    child a draw from its parent's p, and the r's its walk uses, none within 1e-3 of the weight it is tested against
    (so that float32's rounding of w never decides a case)."""
    q = rng.dirichlet(np.ones(V), size=len(parents) + 1).astype(np.float32)
    p = {}
    for x in [-1] + sorted(set(parents) - {-1}):
        mixed = 0.5 * q[x + 1] + 0.5 * rng.dirichlet(np.full(V, 0.7))
        p[x] = (mixed / mixed.sum()).astype(np.float32)
    tokens = [int(rng.choice(V, p=p[parent] / p[parent].sum(dtype=np.float64))) for parent in parents]
    while True:
        rs = [float(r) for r in rng.random(len(parents))]
        _, _, tests = reference_walk(parents, tokens, q, p, rs)
        if all(abs(t["r"] - t["w"]) > 1e-3 for t in tests):
            return parents, tokens, q, p, rs[:len(tests)]


@functools.lru_cache(maxsize=1)
def traversal_cases():
    """(what, args) of the checker's own cases: the hand-made trees, then random ones (seeded, the same each run)."""
    rng = np.random.default_rng(28)
    drawn = [(f"random tree {i + 1}, a vocabulary of {V}", random_tree(rng, parents, V))
             for i, (parents, V) in enumerate((shape, 3 + k % 3) for k in range(3) for shape in SHAPES)]
    return HAND_MADE + drawn


def traversal_probes():
    """The randomness stage's calls: every case of the checker's own, each made twice (promises.py)."""
    return [(call_text(args), lambda args=args: copy.deepcopy(args)) for _, args in traversal_cases()]


def check_traversal_toy(f):
    reference = reference_traversal_toy()
    for what, args in traversal_cases():
        call = call_text(args)
        got = attempt(call, f, *copy.deepcopy(args), hints=CRASH_HINTS)
        expected = reference(*args)
        if not agree(got, expected):
            said, hint = explain_traversal(args, got, expected, f)
            raise wrong(f"{call} ({what}) returned {display(got)}, expected {display(expected)}"
                        + (f": {said}" if said else ""), hint or PATH_HINT)


# ---------------------------------------------------------------------------
# The boundaries the text names (promises.py holds the exercise to them first)
# ---------------------------------------------------------------------------

def case(what, args, hint):
    return Boundary(what, call_text(args), lambda: copy.deepcopy(args), hint,
                    lambda got, expected, f: explain_traversal(args, got, expected, f))


def traversal_boundaries():
    below_one = float(np.nextafter(1.0, 0.0))
    return [
        case("a tree of the root alone: no node to test, no r", ([], [], f32([0.2, 0.5, 0.3]), {}, []),
             "the root always passes and takes no r: with no node the path is empty, and last is q[0]"),
        case("one node of weight 1 (q(x) >= p(x)) and r just below 1: kept, and the last token from q after it",
             ([-1], [0], f32([0.5, 0.3, 0.2], [0.1, 0.1, 0.8]), {-1: f32(0.4, 0.4, 0.2)}, [below_one]),
             "min(1, q(x)/p(x)) is 1 here, and every r in [0, 1) is below it; at a kept leaf, last is q after it"),
        case("r = 0.0 at a token the oracle never emits (q(x) = 0): weight 0, and 0.0 < 0 is False",
             ([-1], [0], f32([0.0, 0.5, 0.5], [0.2, 0.2, 0.6]), {-1: f32(0.4, 0.5, 0.1)}, [0.0]),
             "the test is strict, r < w: a node of weight 0 is never kept, not even at r = 0.0 (`<=` keeps it); "
             "the last token then comes from the root's residual"),
        case("a line whose first node the oracle likes less than the draft (q/p = 0.5) and the second more (q/p = 2)",
             ([-1, 0], [0, 1], f32([0.25, 0.75], [0.2, 0.8], [0.5, 0.5]), {-1: f32(0.5, 0.5), 0: f32(0.6, 0.4)}, [0.9]),
             "a node's weight carries its path's, w_C = min(1, w target(C) / p[X](C)), and the walk tests the "
             "leaf first: here the path to the leaf has weight 1"),
        case("a node kept after its child's subtree was rejected: the last token from its residual",
             ([-1, 0], [0, 1], f32([0.6, 0.2, 0.2], [0.5, 0.1, 0.4], [0.3, 0.3, 0.4]),
              {-1: f32(0.5, 0.3, 0.2), 0: f32(0.3, 0.6, 0.1)}, [0.5, 0.7]), LAST_HINT),
        case("a weight that falls to 0 after a rejection (Z = 0, w target <= p): nothing more below that node is kept",
             ([-1, 0, 0], [0, 0, 1], f32([0.2, 0.4, 0.4], [0.5, 0.25, 0.25], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]),
              {-1: f32(0.4, 0.3, 0.3), 0: f32(0.5, 0.25, 0.25)}, [0.7, 0.6, 0.2]), ZERO_HINT),
        case("every node rejected: the last token from the root's residual after both its children",
             ([-1, -1], [0, 1], f32([0.3, 0.2, 0.35, 0.15], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]),
              {-1: f32(0.5, 0.3, 0.1, 0.1)}, [0.8, 0.3]),
             "each child rejected at the root makes the root's target its residual max(w target - p, 0) / Z; the "
             "root itself always passes"),
    ]


def reference_walk(parents, tokens, q, p, rs):
    """beyond/traversal.py's traverse on the exercise's arguments: (path, last, one record per node tested)."""
    from beyond.traversal import traverse
    from tree import Node
    nodes = []
    for token, parent in zip(tokens, parents):
        nodes.append(Node(token, parent, 1 if parent == -1 else nodes[parent].depth + 1))
    uniforms = iter(rs)
    return traverse(nodes, q, p, lambda: next(uniforms))


def reference_traversal_toy():
    def kept_path(parents, tokens, q, p, rs):
        path, last, _ = reference_walk(parents, tokens, q, p, rs)
        return path, last
    return kept_path


EXERCISES = (Exercise("28", "ex28_traversal_toy", "kept_path", check_traversal_toy, reference_traversal_toy),)
