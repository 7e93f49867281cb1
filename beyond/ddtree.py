"""DDTree: the best-first draft tree from per-position marginals (Ringel, Romano, "Accelerating Speculative
Decoding with Block Diffusion Draft Trees", arXiv 2604.12989), on this project's Medusa heads.

A drafter that guesses every position of the block at once (DDTree's block diffusion drafter, DFlash; here
beyond/medusa.py's heads, head k guessing the token k places after the oracle's own next one) gives one
distribution per position, q_1 .. q_K, and no joint one. Medusa's tree is their Cartesian product at fixed
widths. DDTree asks instead which B prefixes to draft: under the surrogate that the marginals are
independent, a prefix x_1 .. x_d is kept with chance about Π_{k<=d} q_k(x_k), and a tree's expected number of
kept drafts is the sum of that over its nodes. The B prefixes of highest surrogate chance are the best
tree of B nodes, and they form a tree (a prefix's chance is at least its extension's). A heap finds them
best first without looking at the others:

  1  sort each position's tokens by q_k (rank 1 the likeliest)
  2  push the first child of the root: position 1's rank 1
  3  repeat B times: pop the prefix of highest surrogate chance; it is a node of the tree;
  4    push its next sibling (the same parent, the next rank at its position) and
  5    its first child (itself extended by the next position's rank 1)
Every prefix other than the root's first child has exactly one predecessor that pushes it (its previous
sibling when its last rank is above 1, else its parent), and both have at least its chance, so prefixes
leave the heap in order of their chance: the first B popped are the B best (tests/test_ddtree.py checks it
against brute force). Chances are kept as sums of logs.

Letters: the paper's q_k for the drafter's marginals is p_k in this project's letters (p the drafter, q the
oracle, Chen et al.'s; decoding.py); its node budget B is `budget`. One oracle pass checks the tree
(medusa.tree_pass: the ancestor-only mask), and tree.py's greedy walk keeps the longest path the oracle's
argmax agrees with, so the text is greedy decoding's (the paper's greedy setting; its sampling setting
needs a rule for a tree of deterministic drafts, beyond/eagle2.py's, not taken here).
"""

import heapq
import time
from dataclasses import dataclass

import numpy as np

from beyond.medusa import MedusaDetails, heads_rounds
from decoding import GenerationError, check_lengths, check_room
from stats import Stats
from tree import Node


@dataclass
class DDTreeDetails(MedusaDetails):
    """A round's record: the tree (tree.py's fields; probs are each node's marginal p_k(x)) and each node's surrogate
    chance Π p_k along its path, the order the heap took them in (best first)."""
    budget: int = None
    chances: list = None


def ddtree_generate(heads, oracle, ids, n_new, budget=8, stats=None):
    """Greedy decoding with DDTree's best-first tree of budget nodes from the Medusa heads' marginals: yields exactly
    greedy_generate(oracle, ids, n_new)'s tokens. The tree is at most as deep as there are heads."""
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    check_lengths(budget=budget)
    if heads.oracle is not oracle:
        raise GenerationError("the Medusa heads were loaded for another oracle")
    n_heads = len(heads.heads)
    last = {}  # the round's surrogate chances, for its record

    def draft(feature, k, stats):
        start = time.perf_counter()
        nodes, last["chances"] = best_first_tree(heads.guesses(feature)[:k], budget)
        stats.add_pass("draft", time.perf_counter() - start)
        return nodes

    def describe(nodes, path, k):
        chances = last.get("chances", []) if k else []
        return DDTreeDetails([node.parent for node in nodes], path, [node.p for node in nodes], n_draft=n_heads, k=k,
                             budget=budget, chances=chances)

    yield from heads_rounds(heads, oracle, ids, n_new, n_heads, draft, describe, stats)


def best_first_tree(logits, budget):  # logits [K, V] -> (nodes in level order, each node's surrogate chance)
    """Steps 1-5: the budget prefixes of highest Π_k p_k(x_k), p_k = softmax(logits[k]), as a tree."""
    log_p = logits - logits.max(axis=-1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(axis=-1, keepdims=True))  # [K, V]
    ranked = np.argsort(-log_p, axis=-1, kind="stable")  # 1. ranked[k, r]: position k + 1's token of rank r + 1
    n_positions, V = log_p.shape
    # A heap entry: (minus the prefix's log chance, its position k, its rank r there, its parent's index).
    heap = [(-float(log_p[0, ranked[0, 0]]), 0, 0, -1)]  # 2.
    popped, scores = [], []
    while heap and len(popped) < budget:
        minus, k, r, parent = heapq.heappop(heap)  # 3. the likeliest prefix left
        popped.append((int(ranked[k, r]), parent, k + 1, float(np.exp(log_p[k, ranked[k, r]]))))
        scores.append(-minus)
        above = scores[parent] if parent != -1 else 0.0
        if r + 1 < V:  # 4. its next sibling
            heapq.heappush(heap, (-(above + float(log_p[k, ranked[k, r + 1]])), k, r + 1, parent))
        if k + 1 < n_positions:  # 5. its first child
            heapq.heappush(heap, (-(-minus + float(log_p[k + 1, ranked[k + 1, 0]])), k + 1, 0, len(popped) - 1))
    order = sorted(range(len(popped)), key=lambda i: (popped[i][2], i))  # level order, best first within a level
    index = {i: j for j, i in enumerate(order)}
    nodes = [Node(popped[i][0], index.get(popped[i][1], -1), popped[i][2], popped[i][3]) for i in order]
    return nodes, [float(np.exp(scores[i])) for i in order]


def predicted_tokens(chances):
    """The paper's surrogate for a round's tokens: 1 + the sum of the nodes' chances (each node kept with about
    its prefix's chance; the oracle adds its own token)."""
    return 1.0 + float(sum(chances))
