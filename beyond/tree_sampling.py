"""Tree speculative sampling: a tree of SAMPLED drafts, checked by SpecInfer's multi-round rejection.

sps.py samples one line of drafts; tree.py checks a whole tree of drafts in one oracle pass, but
greedily. This module does both. The draft samples `width` children at every node of a tree of
depth n_draft, the oracle reads every node in ONE pass (tree.py's tree mask), and the walk down the tree
is SpecInfer's multi-step speculative sampling (Miao et al. 2023, arXiv 2305.09781, Algorithm 2,
VerifyStochastic; SpecTr, Sun et al. 2023, starts from the same rule). The output has exactly the
oracle's (processed) distribution, whatever the draft.

Letters: Chen et al.'s, as in sps.py: q is the target (the oracle), p the draft. SpecInfer writes
P(x | u, Θ_LLM) for q and P(x | u, Θ_SSM) for p; Leviathan et al. swap the two letters.

VerifyStochastic (its line numbers), from u = the root, the last token of the text:
  26     while u has children:
  27-29    take the children c_1..c_m of u in turn, r ~ U[0, 1) for each
  30-34    r < min(1, q(c_i) / p(c_i)): accept c_i, u <- c_i, back to 26
  37       else q <- norm(max(q - p, 0)): the residual is the target for the next child; p stays
  39-40    every child rejected: leave the loop
  42-43  draw the last token from q at u: the residual after rejections, or at an accepted
         leaf the oracle's own q (the bonus)
SpecInfer takes the children in a random order; ours are i.i.d. draws, so their order already is.

Why the output has exactly q's distribution (q, p: the target and the draft at one node).
1. One child is SpS's step 3: a child x ~ p is kept with probability min(1, q(x)/p(x)), so x is
   emitted as a kept child with probability min(p(x), q(x)), and the child is rejected with
   probability b = 1 - sum_y min(p(y), q(y)) = sum_y (q(y) - p(y))+.
2. m children, by induction on m. With none, the token is drawn from q itself. With m + 1, the
   first emits x with probability min(p(x), q(x)); otherwise (probability b) the m others meet
   the target q' = (q - p)+ / b and, by induction, emit x with probability q'(x). That holds
   because they were drawn independently of the first child and its coin: rejecting c_1 says
   nothing about c_2, which is still a draw from p. (Drawn without replacement, c_2 would not
   be, and p would have to change too.) In all: min(p(x), q(x)) + (q(x) - p(x))+ = q(x).
3. The tree, by induction on depth. The children of the node where the walk stands were drawn
   from the draft's p after exactly the text so far, independently of the coins that led
   there, so by 2 the next token follows the oracle's q after that text; at a leaf the bonus is
   drawn from q itself. Every token of a round thus follows q given all the tokens before it,
   which is autoregressive sampling; where a round stops depends only on the past and on fresh
   randomness, so the rounds chain the same way.
A child equal to an earlier sibling is never kept: that sibling was rejected, so q(x) < p(x)
there and every residual after it is 0 at x. Such a child gets no children of its own
(sample_tree): no outcome changes, and neither model computes a subtree that cannot be used.

Temperature 0: p and q are one-hot (processors.greedy), so every child is the draft's argmax
d. If the oracle's argmax is d, q/p = 1 keeps it; else q/p = 0 rejects it, the residual is
one-hot at the oracle's argmax, and every copy of d is rejected in turn: the round emits the
oracle's argmax. That is speculative.py's rule, so the text is greedy decoding's.

One round (tree_sample_generate):
  1. sample the tree, level by level: one draft pass per level, tree-masked (sample_tree);
  2. one oracle pass over the root and every node: q after each (oracle_pass);
  3. walk down with VerifyStochastic (walk_tree, accept_at_node), draw the last token;
  4. keep only the accepted root path in both KV caches (KVCache.keep, then rollback).
"""

from dataclasses import dataclass

import numpy as np

from decoding import cache_lengths, check_args, feed, timed_forward
from stats import Stats
from kvcache import KVCache
from processors import as_processor
from speculative import rollback
from sps import acceptance_probability, residual, sample
from tree import Node, TreeDetails, check_shape, tree_depth, tree_logits, tree_mask


@dataclass
class SampledTreeDetails(TreeDetails):
    """A round's record for --trace and --html: the tree (tree.py's fields), every check made and where the
    last token came from."""
    width: int = 2
    visits: list = None  # per node whose children were checked: {node, children, checks: [{token, p, q, accept_prob, r, accepted}]}
    last: dict = None    # {token, from: "residual" or "bonus", prob: its chance in the distribution it was drawn from}
    siblings: str = "i.i.d."  # how a node's children were drawn: "i.i.d." (tree-sps) or "without replacement"


def tree_sample_generate(draft, oracle, ids, n_new, n_draft=4, width=2, max_nodes=32, rng=None, processor=None,
                         stats=None, draw_children=None, accept=None, siblings="i.i.d.", shape=None, **flags):
    """Speculative sampling over a tree of depth n_draft with width sampled children per node (at most max_nodes
    nodes): yields n_new ids distributed exactly as sps.autoregressive_sample(oracle, ...).

    One processor makes both p and q (a processors.Processor, or its flags temperature, top_k, top_p).
    draw_children and accept are the rule: how a node's children are drawn (iid_children) and checked
    (accept_at_node, VerifyStochastic); beyond/tree_without_replacement.py passes its own pair, and siblings,
    the name of its draw ("without replacement"), which the trace and the page print with each test.
    shape: a fixed tree (parents in level order, tree.check_shape) in place of width children a node; max_nodes is
    then its size.
    """
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng  # one generator for the whole run
    processor = as_processor(processor, **flags)
    draw_children = iid_children if draw_children is None else draw_children
    accept = accept_at_node if accept is None else accept
    check_args(ids, n_new, draft, oracle, n_draft=n_draft, width=width, max_nodes=max_nodes)
    if shape is not None:
        check_shape(shape, draft.vocab_size)
        max_nodes = len(shape)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)  # a path plus the last token: never overshoot
        # 1. The tree: width children per node, each drawn from the draft's p there.
        nodes, p, n_fed = sample_tree(draft, draft_cache, tokens, k, width, max_nodes, processor, rng, stats,
                                      draw_children, shape) if k else ([], {}, 0)
        # 2. q after the root and after every node, in one oracle pass.
        q = oracle_pass(oracle, oracle_cache, tokens, nodes, processor, stats)
        # 3. Down the tree with multi-round rejection; the last token from the residual or the leaf's q.
        path, last, visits = walk_tree(nodes, q, p, rng.random, accept)
        new_tokens = [nodes[i].token for i in path] + [sample(last, rng)]
        # 4. Keep the text and the accepted path; the draft never fed the last level.
        n = len(tokens)
        oracle_cache.keep(list(range(n)) + [n + i for i in path])
        draft_cache.keep(list(range(min(n, draft_cache.n_tokens()))) + [n + i for i in path if i < n_fed])
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        details = None
        if stats.trace is not None:
            details = explain_round(nodes, path, visits, last, new_tokens, width, siblings)
            details.n_draft, details.k = n_draft, k
        stats.add_round(new_tokens, [node.token for node in nodes], len(path), context_length=n, positions=tree_depth(nodes),
                        oracle=chosen_after(nodes, path, new_tokens), cached=cache_lengths(draft_cache, oracle_cache),
                        details=details)
        yield from new_tokens


# ---------------------------------------------------------------------------
# Steps 1 and 2: the sampled tree, and the oracle's q at every node
# ---------------------------------------------------------------------------

def iid_children(p, m, rng):  # [V], m -> m tokens
    """A node's m children: i.i.d. draws from the draft's p there, repeats allowed."""
    return [sample(p, rng) for _ in range(m)]


def sample_tree(draft, draft_cache, tokens, k, width, max_nodes, processor, rng, stats,
                draw_children=iid_children, shape=None):
    """Step 1: (nodes in level order, {node: the draft's p after it} for the root (-1) and every node fed,
    how many nodes the draft's cache holds). draw_children(p, m, rng) gives a node's m children: i.i.d. here.
    shape: a given tree (parents in level order, tree.check_shape; beyond/sequoia.py chooses one) in place of
    width children a node: a node drawn as node j of the shape gets as many children as j has there."""
    p = {-1: processor(feed(draft, draft_cache, tokens, stats, "draft")[-1])}  # the root's children's p
    nodes, frontier, n_fed = [], [-1], 0
    below = None if shape is None else {j: [i for i, parent in enumerate(shape) if parent == j] for j in range(-1, len(shape))}
    where = {-1: -1}  # a node's place in the shape
    for depth in range(1, k + 1):
        level = []
        for parent in frontier:
            if below is not None:  # a shape: this node has as many children as its place there
                width, rank = len(below[where[parent]]), 0
            for token in draw_children(p[parent], min(width, max_nodes - len(nodes)), rng):
                nodes.append(Node(token, parent, depth, float(p[parent][token])))
                level.append(len(nodes) - 1)
                if below is not None:  # the rank-th child drawn takes the place of its parent's rank-th in the shape
                    where[len(nodes) - 1], rank = below[where[parent]][rank], rank + 1
        if depth == k or len(nodes) >= max_nodes:  # the last level needs no p: it has no children
            break
        # One draft pass for the whole level gives each node's p, for the next level's draws.
        logits = timed_forward(draft, draft_cache, [nodes[i].token for i in level], stats, "draft", n_logits=len(level),
                               positions=[len(tokens) - 1 + depth] * len(level),
                               mask=tree_mask(nodes, level, len(tokens), n_fed))
        n_fed += len(level)
        p.update(zip(level, processor(logits)))
        # A repeat of an earlier sibling is never accepted (see the docstring): it gets no children.
        frontier = [i for i in level if not any(nodes[j].parent == nodes[i].parent and nodes[j].token == nodes[i].token
                                                for j in level if j < i)]
    return nodes, p, n_fed


def oracle_pass(oracle, oracle_cache, tokens, nodes, processor, stats):  # -> [1 + len(nodes), V]
    """Step 2: the oracle's q after the root (row 0) and after each node (row i + 1), in one tree-masked pass,
    tree.py's pass, whose logits tree.verify_tree reduces to the argmax."""
    return processor(tree_logits(oracle, oracle_cache, tokens, nodes, stats))


# ---------------------------------------------------------------------------
# Step 3: VerifyStochastic, as pure functions of the distributions and the uniforms
# ---------------------------------------------------------------------------

def accept_at_node(q, p, children, uniforms):
    """Lines 27-40 at one node: the target q and the draft p there ([V] each), the children's tokens (i.i.d.
    draws from p) and one r ~ U[0, 1) per child. Returns (the index of the accepted child, or None if all
    were rejected; the target after the rejections, which the last token is drawn from then; one record
    per child checked, with the target's probability of it at that moment)."""
    checks = []
    for i, (x, r) in enumerate(zip(children, uniforms)):
        a = acceptance_probability(q, p, x)  # min(1, q(x) / p(x)); p(x) > 0, since x was drawn from p
        checks.append({"token": int(x), "p": float(p[x]), "q": float(q[x]), "accept_prob": a, "r": float(r),
                       "accepted": bool(r < a)})
        if r < a:
            return i, q, checks
        # Rejected: the residual (q - p)+, normalised, is the target for the next child and the last draw.
        # It is never NaN: where (q - p)+ has no mass, residual() returns q itself. A rejection of x means
        # q(x) < p(x), and as q and p both sum to 1, sum (q - p)+ = sum (p - q)+ >= p(x) - q(x) > 0: in exact
        # arithmetic the case cannot happen. In float32 it happens only when q equals p up to rounding (a
        # ratio q/p that rounded below 1), and then q, which the remaining children and the last draw must
        # follow, is exactly what to keep.
        q = residual(q, p)
    return None, q, checks


def walk_tree(nodes, q, p, uniforms, accept=accept_at_node):
    """Lines 25-43 over the whole tree. nodes: level order (tree.Node); q: [1 + len(nodes), V], row i + 1 after
    node i; p: {node: the draft's p after it} (-1: the root) for every node that has children;
    uniforms(m): m draws of U[0, 1) (the generator passes rng.random); accept: the check at one node
    (accept_at_node's signature). Returns (the accepted path, the distribution the round's last token is
    drawn from, one record per node whose children were checked)."""
    path, at, visits = [], -1, []
    while True:
        children = [i for i, node in enumerate(nodes) if node.parent == at]
        if not children:  # an accepted leaf (or nothing drafted): the bonus comes from the oracle's own q
            return path, q[at + 1], visits
        i, target, checks = accept(q[at + 1], p[at], [nodes[c].token for c in children], uniforms(len(children)))
        visits.append({"node": at, "children": children, "checks": checks})
        if i is None:  # every child rejected: the last token comes from the final residual
            return path, target, visits
        at = children[i]
        path.append(at)


# ---------------------------------------------------------------------------
# The round's record, for --trace and --html
# ---------------------------------------------------------------------------

def chosen_after(nodes, path, new_tokens):
    """Round.oracle in tree.py's layout: entry i + 1 is the token the round kept after node i (entry 0: after
    the root), on the accepted path; None where the walk never stood."""
    chosen = [None] * (len(nodes) + 1)
    for at, token in zip([-1] + path, new_tokens):
        chosen[at + 1] = token
    return chosen


def explain_round(nodes, path, visits, last, new_tokens, width, siblings="i.i.d."):
    """The tree (tree.py's TreeDetails), every check made (visits) and where the last token came from;
    siblings: how the children were drawn ("i.i.d." or "without replacement")."""
    token = new_tokens[-1]
    rejected_all = bool(visits) and not visits[-1]["checks"][-1]["accepted"]
    return SampledTreeDetails([node.parent for node in nodes], path, [node.p for node in nodes], width=width,
                              visits=visits, last={"token": token, "from": "residual" if rejected_all else "bonus",
                                                   "prob": float(last[token])}, siblings=siblings)
