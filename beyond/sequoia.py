"""Sequoia's tree shape: the tree that makes the most tokens per unit of time on the machine it runs on (Chen, May,
Svirschevski, Huang, Ryabinin, Jia, Chen 2024, arXiv 2402.12374, Section 3.1 and 3.3).

Every tree here has had a fixed shape (tree.py's branching rule, tree-sps's width children a node). Sequoia
chooses the shape from two measurements:
  the acceptance per child rank  a_k: the chance that a node's k-th child is the one kept, given that the
                                 node was (measured from runs: acceptance_by_rank);
  the cost of a check            T(n) / T(1): the oracle's time for a pass over n tokens over its time for one
                                 (python bench.py cost measures it; on a CPU it grows with n, on a GPU it is
                                 flat up to a point).
Under its positional assumption (a node's chance depends only on its rank among its siblings), a tree T
gives each node v the chance f(v) = Π_{u on the path to v} a_rank(u) of being kept, and a round makes
F(T) = 1 + Σ_v f(v) tokens in expectation (expected_tokens: the drafts kept plus the oracle's own token).

The dynamic program (the paper's Section 3.1, its c(n, d)): best(n, d), the largest F of a tree of n nodes
(the root included) and depth at most d, is
  best(1, d) = 1
  best(n, d) = 1 + max over the sizes n_1, n_2, ..., n_j >= 1 of the root's subtrees (Σ n_i = n - 1) of
               Σ_i a_i best(n_i, d - 1)
a child of rank i weighs its subtree by a_i, and its subtree is again the best of its size (f multiplies
down a path). The inner maximum is a second program over the ranks (children()): g(i, m), the best way
to spend m nodes on the subtrees of ranks i, i + 1, ...:
  g(i, 0) = 0;  g(i, m) = max over s = 1..m of a_i best(s, d - 1) + g(i + 1, m - s);  past the last rank, -inf
(children come in rank order: a second child exists only beside a first.)
The hardware-aware choice (the paper's Section 3.3): among the best trees of every size n and depth d,
the one with the most tokens per unit of time, best(n, d) / (T(n) / T(1) + d c), where c is the time of
one drafting pass over T(1) (a level of the tree costs one draft pass). tests/test_sequoia.py checks
both against brute force over every tree of up to 7 nodes.

Letters: the paper's p_k is a_k here (p is the draft's distribution in this project); its tree size n counts
the root, as best(n, d) does; shapes are parents lists in level order (tree.check_shape), node i's rank
its place among its siblings. tree.py's tree_generate and beyond/tree_without_replacement.py's
tree_sample_wor_generate draft a given shape (shape=); Sequoia's own rule is the latter's (sampling
without replacement), and its trees suit it: its a_k falls with k, where i.i.d. siblings repeat.
"""

import math


def expected_tokens(parents, acceptance):
    """F(T) = 1 + Σ_v Π_{u on the path to v} a_rank(u): the tokens a round of this shape makes in expectation,
    under the positional assumption (a rank past the measured ones is never kept). This is the suite's
    prediction for a tree of this shape (tree, tree-sps-wor, Token Recycling's template)."""
    value, total, rank, seen = {-1: 1.0}, 1.0, {}, {}
    for i, parent in enumerate(parents):
        rank[i] = seen.get(parent, 0)
        seen[parent] = rank[i] + 1
        value[i] = value[parent] * (acceptance[rank[i]] if rank[i] < len(acceptance) else 0.0)
        total += value[i]
    return total


def best_values(acceptance, max_nodes, max_depth):
    """The dynamic program: (best, choice), best[d][n] the largest F of a tree of n nodes (root included,
    n <= max_nodes) and depth <= d (d <= max_depth), -inf where no such tree exists; choice[d][i][m] the size
    of the subtree of rank i (0-based) in the best way to spend m nodes on ranks i, i + 1, ..."""
    a = list(acceptance)
    best = [[-math.inf] * (max_nodes + 1) for _ in range(max_depth + 1)]
    choice = [None] * (max_depth + 1)
    for d in range(max_depth + 1):
        best[d][1] = 1.0  # the root alone
    for d in range(1, max_depth + 1):
        g, pick = children(a, best[d - 1], max_nodes - 1)
        choice[d] = pick
        for n in range(2, max_nodes + 1):
            best[d][n] = 1.0 + g[0][n - 1]
    return best, choice


def children(a, below, m_max):
    """The inner program: g[i][m] = the best Σ a_j below[n_j] over the subtrees of ranks j >= i sharing m nodes,
    and pick[i][m] the size given to rank i (0: none). below[s] is best(s, d - 1)."""
    n_ranks = len(a)
    g = [[-math.inf] * (m_max + 1) for _ in range(n_ranks + 1)]
    pick = [[0] * (m_max + 1) for _ in range(n_ranks + 1)]
    for i in range(n_ranks, -1, -1):
        g[i][0] = 0.0
        if i == n_ranks:
            continue  # no rank past the last: m > 0 nodes cannot be spent
        for m in range(1, m_max + 1):
            for s in range(1, m + 1):
                value = a[i] * below[s] + g[i + 1][m - s] if below[s] > -math.inf else -math.inf
                if value > g[i][m]:
                    g[i][m], pick[i][m] = value, s
    return g, pick


def tree_of(choice, n, d):
    """The best tree of n nodes and depth <= d the program found, as a parents list in level order."""
    def subtrees(n, d):  # -> the sizes of the root's subtrees, rank order
        sizes, m, i = [], n - 1, 0
        while m > 0:
            sizes.append(choice[d][i][m])
            m, i = m - sizes[-1], i + 1
        return sizes

    parents, level = [], [(-1, n, d)]  # (node, its subtree's size, the depth left below it)
    while level:
        below = []
        for node, size, left in level:
            for s in subtrees(size, left):
                parents.append(node)
                below.append((len(parents) - 1, s, left - 1))
        level = below
    return parents


def best_shape(acceptance, n_nodes, max_depth):
    """(the parents list of a tree of n_nodes drafted nodes and depth <= max_depth with the largest F, its F)."""
    best, choice = best_values(acceptance, n_nodes + 1, max_depth)
    return tree_of(choice, n_nodes + 1, max_depth), best[max_depth][n_nodes + 1]


def sequoia_shape(acceptance, cost, max_depth, draft_cost=0.0):
    """The hardware-aware choice: cost[n - 1] = T(n) / T(1) for a pass of the oracle over n tokens (n = 1 ..
    len(cost); a tree of m drafted nodes is checked in a pass over m + 1), draft_cost = T_draft / T(1) per level.
    Returns (the parents list, F, the tokens per unit of time F / (cost[m] + depth draft_cost)); the empty tree
    (no drafts: one token per pass of cost[0]) when no tree beats it."""
    best, choice = best_values(acceptance, len(cost), max_depth)
    found = ([], 1.0, 1.0 / cost[0], 0, 0)  # (parents, F, speed, n, d)
    for d in range(1, max_depth + 1):
        for n in range(2, len(cost) + 1):
            speed = best[d][n] / (cost[n - 1] + d * draft_cost)
            if speed > found[2] + 1e-12:  # a tie keeps the smaller tree
                found = (None, best[d][n], speed, n, d)
    parents = [] if found[3] == 0 else tree_of(choice, found[3], found[4])
    return parents, found[1], found[2]


def acceptance_by_rank(rounds, max_rank=None):
    """The acceptance per child rank measured from runs: rounds are decoding.Round records whose details have
    tree.py's parents and path (tree, tree-sps, tree-sps-wor, medusa, eagle2, recycling, ...). At every node the
    walk stood on (the root and the kept path) each child of rank k counts as made, and the kept one as kept;
    a_k = kept / made. Returns (a: one rate per rank, 0 where none was made; made; kept)."""
    made, kept = [], []
    for r in rounds:
        d = getattr(r, "details", None)
        if d is None or getattr(d, "parents", None) is None:
            continue
        for at, nxt in zip([-1] + d.path, d.path + [None]):
            ranks = [i for i, parent in enumerate(d.parents) if parent == at]
            while len(made) < len(ranks):
                made.append(0)
                kept.append(0)
            for k, i in enumerate(ranks):
                made[k] += 1
                kept[k] += i == nxt
    if max_rank is not None:
        made, kept = (made + [0] * max_rank)[:max_rank], (kept + [0] * max_rank)[:max_rank]
    return [k / m if m else 0.0 for k, m in zip(kept, made)], made, kept


def depth(parents):
    """The depth of a shape: its n_draft (the root's children are at depth 1)."""
    d = {-1: 0}
    for i, parent in enumerate(parents):
        d[i] = d[parent] + 1
    return max(d.values())
