"""Token Recycling: drafts from the oracle's own past logits, no draft model (Luo, Wang, Zhu, Zhang, Zhang, Yang,
Xu, "Turning Trash into Treasure: Accelerating Inference of Large Language Models with Token Recycling",
ACL 2025, arXiv 2408.08696; its code: Luowaterbi/TokenRecycling).

Every oracle pass computes a whole distribution at every position it reads and decoding keeps one token
of it; the runners-up are thrown away. They are good guesses of what follows the same token next time.
Token Recycling keeps them in an adjacency matrix M, one row per token of the vocabulary: M[t] holds the
top k tokens the oracle put after t the last time it read t. Drafting is a breadth-first walk of M along a
fixed tree template from the text's last token; the oracle checks the whole tree in one tree-masked pass,
and the logits of that same pass rewrite the rows of every token in the tree. No training, no second
model, and the matrix (8,192 x 8 ids here) is a quarter of a megabyte.

One round (recycling_generate), the paper's steps:
  1  draft: the template's node at path (r_1, .., r_d) is M[its parent's token][r_d], its parent's token
     being the root (the text's last token) for d = 1 (draft_from_table). A parent whose row is still
     empty (never read) drafts no children.
  2  verify: one oracle pass over the root and every node, tree-masked (tree.tree_logits); tree.py's greedy
     walk keeps the longest path the oracle's argmax agrees with, and the oracle's token after it.
  3  update: for the root and every node x of the tree, M[x] <- the top k of the oracle's logits after x
     (update_table; the paper's "all the candidate tokens ... are used to update the adjacency matrix"),
     a later node overwriting an earlier one of the same token.
  4  keep the kept path in the oracle's cache (KVCache.keep).
The matrix outlives a run when the caller passes its own (table=): the paper keeps it across questions.
Greedy only, as in the paper's experiments: the text is greedy decoding's.

The template: the paper's (its tree_template_.py, version 2.2.2) has 80 nodes in 6 levels, sized for a GPU
where checking 81 tokens costs about as much as one. On a CPU each token checked costs (PERFORMANCE.md's
check curve), so the default here is a small template of the same kind, TEMPLATE: 15 nodes in 4 levels,
the first candidates' subtrees deepest. A template is a list of paths in the paper's notation, [0] the
root's first candidate, [0, 1] that one's second, and so on; any list of paths closed under prefixes works.

Letters: no draft model, so no p; q is the oracle's distribution (decoding.py's table); the paper's k
(output-id-topk, 8 by default), the successors kept per token, is n_successors here (k is a round's drafts in
this project).
"""

import time
from dataclasses import dataclass

import numpy as np

from decoding import GenerationError, check_lengths, check_room
from stats import Stats
from kvcache import KVCache
from speculative import rollback
from tree import Node, TreeDetails, accepted_path, tree_depth, tree_logits

SUCCESSORS = 8  # successors kept per token (the paper's output-id-topk)
TEMPLATE = ([0], [1], [2], [3],
            [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0],
            [0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0],
            [0, 0, 0, 0])
EMPTY = -1  # a row never written: its token has never been read by the oracle


@dataclass
class RecyclingDetails(TreeDetails):
    """A round's record: the tree (tree.py's fields; probs are 1, the matrix holds no probabilities), each node's
    rank in its parent's row, and what the matrix gave and took."""
    ranks: list = None     # per node: its place in its parent's row (the last number of its template path)
    template: int = None   # nodes in the template
    skipped: int = None    # template nodes not drafted: their parent's row was empty
    updated: int = None    # rows written after the pass (the root's and every node's, each token once)
    n_successors: int = None  # a row's length: the successors kept per token


def new_table(vocab_size, n_successors=SUCCESSORS):
    """An empty adjacency matrix: [vocab_size, n_successors] token ids, EMPTY everywhere."""
    return np.full((vocab_size, n_successors), EMPTY, dtype=np.int32)


def recycling_generate(oracle, ids, n_new, template=TEMPLATE, n_successors=SUCCESSORS, table=None, stats=None):
    """Greedy decoding with Token Recycling's drafts: yields exactly greedy_generate(oracle, ids, n_new)'s tokens.
    table: the adjacency matrix to draft from and update (new_table(vocab_size, n_successors); default a new one, empty);
    template: the tree's paths (TEMPLATE by default; no rank at or past n_successors)."""
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    check_lengths(n_successors=n_successors)
    check_template(template, n_successors)
    table = new_table(oracle.vocab_size, n_successors) if table is None else table
    if table.shape != (oracle.vocab_size, n_successors):
        raise GenerationError(f"the adjacency matrix is {table.shape[0]} x {table.shape[1]}, not "
                              f"{oracle.vocab_size} x {n_successors}")
    paths = sorted((tuple(path) for path in template), key=lambda path: (len(path), path))  # level order
    tokens, end, cache = list(ids), len(ids) + n_new, KVCache()
    while len(tokens) < end:
        k = min(max(len(path) for path in paths), end - len(tokens) - 1)  # the tree's depth this round: no overshoot
        start = time.perf_counter()
        nodes, ranks = draft_from_table(table, tokens[-1], [path for path in paths if len(path) <= k])  # 1.
        stats.add_time("draft", time.perf_counter() - start)
        logits = tree_logits(oracle, cache, tokens, nodes, stats)  # 2. the root and every node, one pass
        choice = np.argmax(logits, axis=-1)
        path = accepted_path(nodes, choice)
        new_tokens = [nodes[i].token for i in path] + [int(choice[(path[-1] if path else -1) + 1])]
        start = time.perf_counter()
        updated = update_table(table, [tokens[-1]] + [node.token for node in nodes], logits)  # 3.
        stats.add_time("draft", time.perf_counter() - start)
        n = len(tokens)
        cache.keep(list(range(n)) + [n + i for i in path])  # 4. the text, the root and the kept path
        tokens += new_tokens
        rollback(len(tokens) - 1, cache)
        stats.add_round(new_tokens, [node.token for node in nodes], len(path), context_length=n,
                        oracle=choice.tolist(), cached={"draft": None, "oracle": cache.n_tokens()},
                        positions=tree_depth(nodes),
                        details=RecyclingDetails([node.parent for node in nodes], path, [1.0] * len(nodes),
                                                 n_draft=max(len(p) for p in paths), k=k, ranks=ranks,
                                                 template=len(paths), skipped=sum(len(p) <= k for p in paths)
                                                 - len(nodes), updated=updated, n_successors=n_successors))
        yield from new_tokens


def draft_from_table(table, root, paths):
    """Step 1: (the nodes, in the paths' level order; each node's rank in its parent's row). paths: the template's,
    sorted by length then lexicographically, so a parent comes before its children."""
    nodes, ranks, at = [], [], {(): -1}  # at: a drafted path's node index (the empty path: the root)
    for path in paths:
        parent = at.get(path[:-1])
        if parent is None:
            continue  # its parent was not drafted
        token = table[root if parent == -1 else nodes[parent].token, path[-1]]
        if token == EMPTY:
            continue  # the parent's token has never been read: no successors yet
        nodes.append(Node(int(token), parent, len(path)))
        ranks.append(path[-1])
        at[path] = len(nodes) - 1
    return nodes, ranks


def update_table(table, fed, logits):  # fed: the tokens read, logits [len(fed), V] after each
    """Step 3: M[t] <- the top k of the logits after t, for every token t read by the pass (in order: a later one
    overwrites an earlier one of the same token). Returns how many distinct rows were written."""
    n_best = table.shape[1]
    top = np.argpartition(-logits, n_best - 1, axis=-1)[:, :n_best]  # [n, n_best], unordered
    order = np.take_along_axis(logits, top, axis=-1).argsort(axis=-1, kind="stable")[:, ::-1]
    top = np.take_along_axis(top, order, axis=-1)  # the n_best best, best first
    for token, row in zip(fed, top):
        table[token] = row
    return len(set(fed))


def check_template(template, n_successors):
    """The template's paths: non-empty tuples of ranks below n_successors, each one's prefixes in it too; GenerationError else."""
    paths = {tuple(path) for path in template}
    if not paths:
        raise GenerationError("the tree template has no nodes")
    for path in paths:
        if not path or any(not isinstance(r, int) or not 0 <= r < n_successors for r in path) or (len(path) > 1 and path[:-1] not in paths):
            raise GenerationError(f"the tree template's path {list(path)} is not a path of ranks below {n_successors} whose "
                                  "prefixes are in the template")


def template_parents(template):
    """The template as a parents list in level order (beyond/sequoia.expected_tokens takes it, with the measured
    acceptance per rank, for the suite's prediction; the ranks are the template's own)."""
    paths = sorted((tuple(p) for p in template), key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(paths)}
    return [index.get(p[:-1], -1) for p in paths]
