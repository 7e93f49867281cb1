"""Tree drafts: guess several continuations at once, check them all in one oracle pass.

A line of k drafts is lost from the first wrong guess on. Where the draft is
unsure, a tree hedges: it branches into the draft's top few tokens, and the
branches share their common prefix. The oracle reads every node of the tree
in ONE forward pass, with a tree attention mask: each node sees the text and
its own ancestors, never its cousins, and sits at the position of its depth,
so each node's logits are exactly what a line of those tokens would give
(Spector and Re 2023; SpecInfer, Miao et al. 2023).

One round:
  1. draft a tree, level by level (one draft pass per level, tree-masked);
  2. one oracle pass over the root (the last token) and all nodes;
  3. walk down from the root: while the oracle's choice at a node is one of
     its children, accept that child; then append the oracle's choice;
  4. keep only the root path in both KV caches (KVCache.keep).
Greedy: the output is exactly greedy_generate's.
"""

from collections import Counter
from dataclasses import dataclass

import numpy as np

from gpt2 import MASKED, softmax
from kvcache import KVCache
from decoding import GenerationError, cache_lengths, check_args, feed, timed_forward
from stats import Stats
from speculative import rollback


@dataclass
class Node:
    token: int
    parent: int      # index of the parent node; -1 is the root, the last token of the text
    depth: int       # 1 for the root's children
    p: float = 1.0   # the draft's probability of this token after its parent (for the trace)


@dataclass
class TreeDetails:
    """A round's record for --trace and --html: the tree (node i is Round.drafted[i]) and the path kept."""
    parents: list            # parents[i]: node i's parent, -1 the root
    path: list               # the accepted root path, node indices, root first
    probs: list              # probs[i]: Node.p of node i
    confidence: float = None  # tree_generate's branching rule: branch below this probability...
    branch: int = None        # ... into the draft's top `branch` (None: another rule drew the tree, beyond/suffix.py)
    n_draft: int = None       # the greatest depth asked for
    k: int = None             # this round's greatest depth: n_draft, or less where fewer tokens were left to make


def tree_mask(nodes, new, n_text, n_fed):  # -> [len(new), n_text + n_fed + len(new)]
    """Attention mask for feeding nodes[n_fed : n_fed + len(new)] after the n_text tokens of
    the text and the n_fed nodes already fed: each sees the text, its ancestors and itself."""
    mask = np.full((len(new), n_text + n_fed + len(new)), MASKED, dtype=np.float32)
    mask[:, :n_text] = 0
    for row, i in enumerate(new):
        while i != -1:  # node i sits in column n_text + i
            mask[row, n_text + i] = 0
            i = nodes[i].parent
    return mask


def draft_tree(draft, draft_cache, tokens, k, branch, max_nodes, confidence, stats, shape=None):
    """Step 1: (nodes in level order, how many of them the draft's cache holds). shape: a given tree (its parents
    in level order, as beyond/sequoia.py chooses it) in place of the branching rule: node i's children are
    its draft's top len(children) tokens, the most likely first."""
    children = None if shape is None else Counter(shape)  # how many children each node of the shape has
    probs = softmax(feed(draft, draft_cache, tokens, stats, "draft")[-1])  # the root's children
    nodes, frontier, n_fed = [], [(-1, probs)], 0
    for depth in range(1, k + 1):
        level = []
        for parent, p in frontier:
            if children is not None:  # a shape: the node's children there, however confident the draft is
                if not children[parent]:
                    continue
                branch, confidence = children[parent], np.inf
            top = np.argpartition(-p, branch)[:branch]
            top = top[np.argsort(-p[top])]
            # Branch only where the draft is unsure; a confident guess gets one child.
            for token in top[:1 if p[top[0]] >= confidence else branch]:
                if len(nodes) < max_nodes:
                    nodes.append(Node(int(token), parent, depth, float(p[token])))
                    level.append(len(nodes) - 1)
        if not level or depth == k or len(nodes) >= max_nodes:
            break
        # One draft pass for the whole level gives the next level's candidates.
        logits = timed_forward(draft, draft_cache, [nodes[i].token for i in level], stats, "draft", n_logits=len(level),
                               positions=[len(tokens) - 1 + depth] * len(level),
                               mask=tree_mask(nodes, level, len(tokens), n_fed))
        n_fed += len(level)
        frontier = [(i, softmax(row)) for i, row in zip(level, logits)]
    return nodes, n_fed


def tree_logits(oracle, oracle_cache, tokens, nodes, stats):  # -> [1 + len(nodes), vocab_size]
    """The oracle's logits after the root (row 0: the text's last token) and after each node (row i + 1),
    in one tree-masked pass; the root row sees the text and itself."""
    n = len(tokens)
    if oracle_cache.n_tokens() < n - 1:  # the prompt: read all but its last token first
        feed(oracle, oracle_cache, tokens[:-1], stats, "oracle")
    root_row = np.where(np.arange(n + len(nodes)) < n, np.float32(0), MASKED)[None, :]
    mask = np.vstack([root_row, tree_mask(nodes, range(len(nodes)), n, 0)])
    positions = [n - 1] + [n - 1 + node.depth for node in nodes]
    return timed_forward(oracle, oracle_cache, [tokens[-1]] + [node.token for node in nodes], stats, "oracle",
                         n_logits=1 + len(nodes), positions=positions, mask=mask)


def verify_tree(oracle, oracle_cache, tokens, nodes, stats):
    """Steps 2 and 3: (indices of the accepted root path, new tokens, the oracle's choice after the root and each node)."""
    logits = tree_logits(oracle, oracle_cache, tokens, nodes, stats)  # 2. the root and every node, one pass
    choice = np.argmax(logits, axis=-1)  # choice[0]: after the root; choice[i + 1]: after node i
    path = accepted_path(nodes, choice)
    at = path[-1] if path else -1
    return path, [nodes[i].token for i in path] + [int(choice[at + 1])], choice.tolist()


def accepted_path(nodes, choice):
    """Step 3: follow the oracle's choices down the tree as far as the tree guessed them.
    choice[0] is the oracle's token after the root, choice[i + 1] after node i; -> node indices, root first."""
    path, at = [], -1
    while True:
        child = next((i for i, node in enumerate(nodes) if node.parent == at and node.token == choice[at + 1]), None)
        if child is None:
            return path
        path.append(child)
        at = child


def tree_depth(nodes):
    """How many levels a tree reached: the draft positions its round made (Stats' acceptance per position)."""
    return max((node.depth for node in nodes), default=0)


def tree_generate(draft, oracle, ids, n_new, n_draft=6, branch=2, max_nodes=16, confidence=0.5, stats=None,
                  shape=None):
    """Greedy speculative decoding with tree drafts; yields exactly greedy_generate's tokens.

    n_draft: the tree's greatest depth (a root path is a line of at most n_draft drafts).
    shape: a fixed tree to draft instead of the branching rule (its parents in level order, check_shape), as
    beyond/sequoia.py chooses it: then branch, max_nodes and confidence are its own.
    """
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, n_draft=n_draft, branch=branch, max_nodes=max_nodes)
    if shape is not None:
        check_shape(shape, draft.vocab_size)
        max_nodes, confidence, branch = len(shape), None, None
    else:
        branch = min(branch, draft.vocab_size - 1)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)  # a path plus the oracle's token: no overshoot
        nodes, n_fed = draft_tree(draft, draft_cache, tokens, k, branch, max_nodes, confidence, stats,
                                  shape) if k else ([], 0)
        path, new_tokens, choice = verify_tree(oracle, oracle_cache, tokens, nodes, stats)
        # 4. Keep the text and the accepted path; the draft never fed the last level.
        n = len(tokens)
        oracle_cache.keep(list(range(n)) + [n + i for i in path])
        draft_cache.keep(list(range(min(n, draft_cache.n_tokens()))) + [n + i for i in path if i < n_fed])
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.add_round(new_tokens, [node.token for node in nodes], len(path), context_length=n, oracle=choice,
                        cached=cache_lengths(draft_cache, oracle_cache), positions=tree_depth(nodes),
                        details=TreeDetails([node.parent for node in nodes], path, [node.p for node in nodes],
                                            confidence, branch, n_draft, k))
        yield from new_tokens


def check_shape(shape, vocab_size):
    """A tree's shape as the drafters take it: node i's parent is shape[i] (-1 the root), every parent comes before
    its children and the nodes are in level order (a parent's children follow the children of the nodes before it),
    and no node has more children than the vocabulary has tokens to tell apart. GenerationError otherwise."""
    depth = {-1: 0}
    for i, parent in enumerate(shape):
        if not isinstance(parent, int) or not -1 <= parent < i or (i and (depth[parent], parent) <
                                                                     (depth[shape[i - 1]], shape[i - 1])):
            raise GenerationError(f"the tree's shape is not a list of parents in level order (node {i}: {parent!r})")
        depth[i] = depth[parent] + 1
    if not shape or max(Counter(shape).values()) >= vocab_size:
        raise GenerationError("the tree's shape needs at least one node, and fewer children a node than the vocabulary has tokens")
