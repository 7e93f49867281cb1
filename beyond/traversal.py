"""Traversal verification: a tree of sampled drafts judged sequence by sequence, from the leaves to the root.

Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi, "Traversal Verification for Speculative Tree Decoding", NeurIPS 2025,
arXiv 2505.12398. No code was published with it; this module is a teaching implementation, checked by
enumerating every outcome (tests/test_traversal.py).

beyond/tree_sampling.py (tree-sps) walks a tree of sampled drafts from the root down, one token at a time
(SpecInfer's rule): once a node is rejected its whole subtree is lost, however well its descendants match
the oracle. Traversal verification walks the tree the other way. It starts at the deepest leftmost leaf and
asks whether the whole path from the root to it can be kept, with a weight that carries the path's
likelihood ratio along it, as beyond/block_verification.py does for a line: a shortfall early on the path
(q/p < 1) is made up by a later token the oracle likes more (q/p > 1). A node that fails is deleted and
its parent's weight and distribution become the residual that knows the loss; the walk goes on to the
next sibling's subtree, and to the parent itself once all its children are gone (a post-order traversal).
On a chain it is block verification exactly; on any tree it emits exactly the oracle's distribution,
and in expectation it keeps at least as many drafts as the token-level rule (tests/test_traversal.py
checks all three by enumeration).

Letters: the project's (Chen et al.'s, sps.py): q is the target (the oracle), p the draft. The paper writes
M_b (the big model) and M_s (the small one), p_α for the weight of a node's path, and its sibling p_β;
here p_α is w, as in beyond/block_verification.py.

  paper                              here
  M_b(. | X), M_s(. | X)             q[X + 1], p[X]: the oracle's and the draft's distributions after node X
  p_α(X)                             w: the chance that the path from the root to X, or a longer one through X, is kept
  η ~ U(0, 1)                        r = uniform(): one per node tested
  the residual at X                  after_rejection(w, target, p): w' and max(w target - p, 0), renormalised

The walk (traverse; a node's children are i.i.d. draws from p after it, as tree-sps drafts them):
  1  w(root) = 1, target(root) = q(. | root)
  2  visit(X, w, target):
  3    for each child C of X, in order:
  4      w_C = min(1, w q_target(C) / p(C | X))                  the path's weight down to C (block_weights' step)
  5      if visit(C, w_C, q(. | C)) kept a path: return it with C in front
  6      C's subtree was rejected: Z = Σ_x max(w target(x) - p(x | X), 0)
           w <- Z / (Z + 1 - w), target <- max(w target - p, 0) / Z     (X's weight and target without C)
  7    every child gone (or a leaf): r ~ U[0, 1); r < w: keep the path to X, else X's subtree is rejected
  8  the last token: drawn from target(X) at the kept node X: q itself at an untouched leaf (the bonus),
     the residual of line 6 where children were deleted; the root always passes (its w stays 1).

Why the output has exactly q's distribution: the invariant of a node X with weight w and target q_X whose
children are i.i.d. draws from p (the proof of block verification's identity (b), on a tree):
  (a) the walk keeps a path through X (X or a descendant) with chance exactly w;
  (b) given that, the token after X is x with chance q_X(x) (and the tokens after it follow q, by (b) below).
By induction on the number of children. None: line 7 keeps X with chance w and draws from q_X. A first
child C ~ p: by (a) for C, its subtree is kept with chance w_C = min(1, w q_X(C) / p(C)), so C is the token
after X with chance Σ_C p(C) min(1, w q_X(C) / p(C)) = Σ min(p(x), w q_X(x)), which for x is min(p(x), w q_X(x));
the subtree is rejected with chance 1 - w + Z. Then X has the weight w' = Z / (Z + 1 - w) and the target
q' = max(w q_X - p, 0) / Z, and the children left are still i.i.d. draws from p (independent of C and its
coins), so by induction they keep a path through X with chance w' and emit x with chance w' q'(x).
In all: kept through X with chance (w - Z) + (1 - w + Z) w' = w, and x is emitted with chance
min(p(x), w q_X(x)) + Z q'(x) = min(p(x), w q_X(x)) + max(w q_X(x) - p(x), 0) = w q_X(x). At the root w = 1.
Line 6's w' is exactly the number that makes (a) hold (block verification's h_i); the draft's p never
changes, since the siblings were drawn i.i.d. A repeat of a rejected sibling C is kept with chance 0: a
rejection needs w q_X(C) < p(C), and then q'(C) = 0 (tree-sps gives such a repeat no children).

Temperature 0: p and q are one-hot, every weight is 1 down to the first draft the oracle's argmax does not
pick and 0 below it, so the walk keeps the longest path of argmaxes and the token after it is the oracle's
argmax: the text is greedy decoding's.

One round (traversal_generate): tree-sps's steps 1, 2 and 4 (tree_sampling.sample_tree, oracle_pass, the
caches kept to the kept path), with step 3 this walk.
"""

import math
from dataclasses import dataclass

import numpy as np

from beyond.tree_sampling import chosen_after, oracle_pass, sample_tree
from decoding import cache_lengths, check_args
from stats import Stats
from kvcache import KVCache
from processors import as_processor
from speculative import rollback
from sps import likelihood_ratio, sample
from tree import TreeDetails, tree_depth


def traversal_generate(draft, oracle, ids, n_new, n_draft=4, width=2, max_nodes=32, rng=None, processor=None,
                       stats=None, **flags):
    """Speculative sampling over a tree of depth n_draft with width i.i.d. children per node (at most max_nodes
    nodes), verified by traversal: yields n_new ids distributed exactly as sps.autoregressive_sample(oracle, ...).
    One processor makes both p and q (a processors.Processor, or its flags temperature, top_k, top_p)."""
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng  # one generator for the whole run
    processor = as_processor(processor, **flags)
    check_args(ids, n_new, draft, oracle, n_draft=n_draft, width=width, max_nodes=max_nodes)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)  # a path plus the last token: never overshoot
        # 1. The tree: width i.i.d. children per node, each drawn from the draft's p there (tree-sps's).
        nodes, p, n_fed = sample_tree(draft, draft_cache, tokens, k, width, max_nodes, processor, rng,
                                      stats) if k else ([], {}, 0)
        # 2. q after the root and after every node, in one oracle pass.
        q = oracle_pass(oracle, oracle_cache, tokens, nodes, processor, stats)
        # 3. From the leaves to the root: the kept path and the distribution of the last token.
        path, last, tests = traverse(nodes, q, p, rng.random)
        new_tokens = [nodes[i].token for i in path] + [sample(last, rng)]
        # 4. Keep the text and the kept path; the draft never fed the last level.
        n = len(tokens)
        oracle_cache.keep(list(range(n)) + [n + i for i in path])
        draft_cache.keep(list(range(min(n, draft_cache.n_tokens()))) + [n + i for i in path if i < n_fed])
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        details = explain_round(nodes, path, tests, last, new_tokens, width, n_draft, k) \
            if stats.trace is not None else None
        stats.add_round(new_tokens, [node.token for node in nodes], len(path), context_length=n,
                        oracle=chosen_after(nodes, path, new_tokens), cached=cache_lengths(draft_cache, oracle_cache),
                        details=details, positions=tree_depth(nodes))
        yield from new_tokens


# ---------------------------------------------------------------------------
# Step 3: the walk, as pure functions of the distributions and the uniforms
# ---------------------------------------------------------------------------

def traverse(nodes, q, p, uniform):
    """Lines 1-8 over the whole tree. nodes: level order (tree.Node); q: [1 + len(nodes), V], row i + 1 after node
    i; p: {node: the draft's p after it} (-1: the root) for every node that has children; uniform(): one draw of
    U[0, 1) (the generator passes rng.random). Returns (the kept path, root first; the distribution the last
    token is drawn from; one record per node tested, in the order of the walk)."""
    children = {i: [c for c, node in enumerate(nodes) if node.parent == i] for i in range(-1, len(nodes))}
    tests = []

    def visit(x, w, target):  # line 2: X's subtree, X's weight and target -> (path below X, last) or None
        deleted = 0
        for c in children[x]:  # line 3
            kept = visit(c, child_weight(w, target, p[x], nodes[c].token), q[c + 1])  # lines 4 and 5
            if kept is not None:
                return [c] + kept[0], kept[1]
            w, target = after_rejection(w, target, p[x])  # line 6
            deleted += 1
        if x == -1:  # line 8: the root's weight stays 1, it always passes and takes no r
            return [], target
        r = uniform()  # line 7
        tests.append({"node": x, "token": nodes[x].token, "w": w, "r": float(r), "passed": bool(r < w),
                      "deleted": deleted})
        return ([], target) if r < w else None

    path, last = visit(-1, 1.0, q[0])  # line 1
    return path, last, tests


def child_weight(w, target, p, token):
    """Line 4: w_C = min(1, w target(C) / p(C)), the weight of the path down to child C (block_weights' step);
    0 where target(C) or p(C) is NaN or infinite (sps.likelihood_ratio)."""
    return min(1.0, w * likelihood_ratio(target, p, token))


def after_rejection(w, target, p):  # w, [V], [V] -> (w', [V])
    """Line 6: a node's weight and target once the subtree of one of its children is rejected.
    Z = Σ_x max(w target(x) - p(x), 0); w' = Z / (Z + 1 - w) (block verification's h_i); the target becomes
    max(w target - p, 0) / Z. Where Z + 1 - w is 0 (w = 1 and target <= p: they are equal, and a rejection had
    chance 0) w' is 1 and the target stays; where Z is 0 and w < 1, w' is 0 and nothing below is kept, so the
    target is never used and stays too; a NaN (in p) keeps nothing."""
    excess = np.maximum(np.float32(w) * target - p, 0)
    mass = float(excess.sum())
    if not math.isfinite(mass):
        return 0.0, target
    denominator = mass + 1.0 - w
    return (mass / denominator if denominator > 0 else 1.0), (excess / np.float32(mass) if mass > 0 else target)


# ---------------------------------------------------------------------------
# The round's record, for --trace and --html
# ---------------------------------------------------------------------------

@dataclass
class TraversalDetails(TreeDetails):
    """A round's record: the tree (tree.py's fields), every node tested in the order of the walk and where the
    last token came from."""
    width: int = 2
    tests: list = None  # per node tested, leaves first: {node, token, w (its weight then), r, passed, deleted
    #                     (children whose subtrees were rejected before: w is then line 6's residual weight)}
    last: dict = None   # {token, node (-1: the root), from: "bonus", "residual" or "oracle", prob}


def explain_round(nodes, path, tests, last, new_tokens, width, n_draft, k):
    """The round's record: the tree, every node tested and where the last token came from."""
    at = path[-1] if path else -1
    deleted = sum(1 for node in nodes if node.parent == at)  # kept at a node: every child of it was rejected
    source = "oracle" if not nodes else "bonus" if path and not deleted else "residual"
    return TraversalDetails([node.parent for node in nodes], path, [node.p for node in nodes], n_draft=n_draft, k=k,
                            width=width, tests=tests, last={"token": int(new_tokens[-1]), "node": at, "from": source,
                                                            "prob": float(last[new_tokens[-1]])})
