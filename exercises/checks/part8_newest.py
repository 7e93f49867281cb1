"""Part 8, the newest methods (a draft of their checks, self-contained until they join the shared contract):
exercise 28 (traversal verification on a toy tree) and 29 (Sequoia's dynamic program).

Each check takes your function and raises AssertionError with what went wrong on a concrete input, then, on a
line of its own, where to look; NotImplementedError (the untouched stub) goes through, for "not solved yet".
The references are the project's own functions (beyond/traversal.py, beyond/sequoia.py), thinly adapted.
"""

import math

import numpy as np


def wrong(what, hint):
    return AssertionError(f"{what}\n  where to look: {hint}")


def attempt(call, f, *args):
    try:
        return f(*args)
    except NotImplementedError:
        raise
    except Exception as e:  # a crash: one paragraph, not a traceback
        raise wrong(f"{call} raised {type(e).__name__}: {e}", "call it yourself on this input and read the traceback") from None


# ---------------------------------------------------------------------------
# Exercise 28: traversal verification on a toy tree
# ---------------------------------------------------------------------------

def reference_traversal_toy():
    """kept_path over beyond/traversal.py's traverse."""
    from beyond.traversal import traverse
    from tree import Node

    def kept_path(parents, tokens, q, p, rs):
        nodes = []
        for token, parent in zip(tokens, parents):
            nodes.append(Node(token, parent, 1 if parent == -1 else nodes[parent].depth + 1))
        uniforms = iter(rs)
        path, last, _ = traverse(nodes, np.asarray(q), p, lambda: next(uniforms))
        return path, last
    return kept_path


def traversal_cases():
    """(parents, tokens, q, p, rs): hand-made trees where a shortfall is made up below it, and random ones; each
    with the uniforms its walk uses (drawn once, fixed)."""
    f32 = lambda *x: np.array(x, np.float32)  # noqa: E731
    cases = [
        # A child the oracle likes less than the draft (q/p = 0.5) whose own child it likes more (q/p = 2): the path
        # keeps with weight 1 at the leaf, where a top-down rule would have stopped at the first child.
        ([-1, 0], [0, 1], [f32(0.25, 0.75), f32(0.2, 0.8), f32(0.5, 0.5)], {-1: f32(0.5, 0.5), 0: f32(0.6, 0.4)},
         [0.9]),
        # Two children of the root; the first's leaf fails, then the first child itself, then the second passes.
        ([-1, -1, 0], [0, 1, 1], [f32(0.3, 0.7), f32(0.5, 0.5), f32(0.6, 0.4), f32(0.9, 0.1)],
         {-1: f32(0.6, 0.4), 0: f32(0.2, 0.8)}, [0.99, 0.95, 0.3]),
    ]
    rng = np.random.default_rng(28)
    shapes = [[-1, 0, 1], [-1, -1, 0, 2], [-1, -1, 0, 0, 2], [-1, -1, -1], [-1, 0, 0, 1]]
    for n, parents in enumerate(shapes * 3):
        V = 3 + n % 2
        q = [rng.dirichlet(np.ones(V)).astype(np.float32) for _ in range(len(parents) + 1)]
        p = {i: rng.dirichlet(np.full(V, 0.6)).astype(np.float32) for i in [-1] + sorted(set(parents) - {-1})}
        tokens = [int(rng.choice(V, p=p[parent] / p[parent].sum())) for parent in parents]
        rs = [float(r) for r in rng.random(len(parents))]  # at most one a node
        cases.append((parents, tokens, q, p, rs))
    return cases


def check_traversal_toy(f):
    reference = reference_traversal_toy()
    for parents, tokens, q, p, rs in traversal_cases():
        call = f"kept_path({parents}, {tokens}, q, p, rs={[round(r, 3) for r in rs]})"
        got = attempt(call, f, list(parents), list(tokens), [row.copy() for row in q], {k: v.copy() for k, v in p.items()},
                      list(rs))
        want_path, want_last = reference(parents, tokens, q, p, rs)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise wrong(f"{call} returned {got!r}", "return a pair: (the kept path, the last token's distribution)")
        path, last = got
        if not isinstance(path, list) or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                                 for i in path):
            raise wrong(f"{call} returned the path {path!r}", "the path is a list of node indices (ints), root first")
        path = [int(i) for i in path]
        if path != want_path:
            if path == want_path[::-1] and len(path) > 1:
                raise wrong(f"{call} returned the path {path}, expected {want_path}", "the path reads root first")
            if path == top_down(parents, tokens, q, p, rs):
                raise wrong(f"{call} returned the path {path}, the token-level (top-down) rule's; traversal keeps "
                            f"{want_path}", "the walk starts at the deepest leftmost leaf and judges the whole path "
                            "to it, with its weight w")
            raise wrong(f"{call} returned the path {path}, expected {want_path}",
                        "a node's weight w = min(1, w_parent q(x) / p(x)) with q the parent's target of the moment; "
                        "after a child's subtree is rejected the parent's w becomes Z / (Z + 1 - w) and its target "
                        "max(w q - p, 0) / Z; the r's are used in the order the walk tests the nodes")
        last = np.asarray(last, dtype=np.float64)
        if last.shape != want_last.shape or not np.allclose(last, want_last, atol=1e-5):
            raise wrong(f"{call} kept {path} (right), but its last token's distribution is "
                        f"{np.round(last, 4).tolist()}, expected {np.round(want_last, 4).tolist()}",
                        "at an untouched leaf: its q (the bonus); where children were rejected: the node's residual "
                        "max(w q - p, 0), renormalised, with the weight w it had then")


def top_down(parents, tokens, q, p, rs):
    """The token-level walk (tree-sps's rule, one r a child) on the same tree and r's: for the hint only."""
    from beyond.tree_sampling import accept_at_node
    at, path, used = -1, [], iter(rs)
    while True:
        children = [i for i, parent in enumerate(parents) if parent == at]
        if not children:
            return path
        rows = [next(used, 0.0) for _ in children]
        i, _, _ = accept_at_node(q[at + 1], p[at], [tokens[c] for c in children], rows)
        if i is None:
            return path
        at = children[i]
        path.append(at)


# ---------------------------------------------------------------------------
# Exercise 29: Sequoia's dynamic program
# ---------------------------------------------------------------------------

def reference_sequoia_dp():
    """best_expected_tokens over beyond/sequoia.py's best_values."""
    from beyond.sequoia import best_values

    def best_expected_tokens(acceptance, n_nodes, max_depth):
        best, _ = best_values(acceptance, n_nodes + 1, max_depth)
        return best[max_depth][n_nodes + 1]
    return best_expected_tokens


SEQUOIA_CASES = [([0.6, 0.2, 0.1], n, d) for n in (0, 1, 2, 4, 7) for d in (1, 2, 3)] + [
    ([0.3, 0.3, 0.3], 6, 2), ([0.8], 5, 3), ([0.8], 5, 6), ([0.5, 0.45], 6, 4),
    ([0.1, 0.5, 0.2], 3, 2), ([0.1, 0.5, 0.2], 5, 3),  # a second child likelier than the first
    ([0.1, 0.9, 0.5], 4, 2),  # ... and a node worth little whose second child is worth much: growing greedily fails
    ([0.9, 0.05], 3, 1), ([0.9, 0.05], 2, 1)]


def check_sequoia_dp(f):
    reference = reference_sequoia_dp()
    for acceptance, n, d in SEQUOIA_CASES:
        call = f"best_expected_tokens({acceptance}, n_nodes={n}, max_depth={d})"
        got = attempt(call, f, list(acceptance), n, d)
        want = reference(acceptance, n, d)
        if isinstance(got, bool) or not isinstance(got, (int, float, np.floating, np.integer)):
            raise wrong(f"{call} returned {got!r}", "return a number: the expected tokens of the best tree")
        got = float(got)
        if want == -math.inf:
            if got != -math.inf:
                raise wrong(f"{call} returned {got}, but no tree of {n} nodes and depth at most {d} exists with "
                            f"{len(acceptance)} children a node at most", "return -inf where no tree fits")
            continue
        if math.isclose(got, want, abs_tol=1e-9):
            continue
        if math.isclose(got + 1, want, abs_tol=1e-9):
            raise wrong(f"{call} returned {got}, expected {want}", "F counts the root's 1: the oracle's own token")
        raise wrong(f"{call} returned {got}, expected {want}",
                    "best(n, d) = 1 + the best way to share n - 1 nodes among the root's subtrees, the one of rank i "
                    "weighed by acceptance[i] and itself a best tree of depth d - 1; ranks come in order (a second "
                    "child needs a first), and n_nodes does not count the root")
