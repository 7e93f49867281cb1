"""EAGLE-2: a draft tree that grows where the drafter is confident (Li, Wei, Zhang, Zhang, EMNLP 2024,
arXiv 2406.16858; its code: SafeAILab/EAGLE, eagle/model/cnets.py, Model.topK_genrate).

beyond/eagle.py drafts one chain a round with an EAGLE head; a fixed tree (Medusa's, EAGLE-1's) branches
the same way whatever the text. EAGLE-2 observes that the head's own confidence is well calibrated: the
product of its probabilities along a path, the path's confidence, is close to the chance that the
oracle keeps the whole path. So it grows the tree where that product is high, and keeps the best nodes:

  paper (Section 4, "expansion" and "reranking")    here (draft_dynamic_tree)      topK_genrate
  1  the root's children: the head's top-k           level 1: top_k children          top = topk(last_p, top_k)
  2  expand: the k nodes of the newest layer with    expand = the top_k of the        topk_cs = topk(cu_scores, top_k)
     the highest value V = Π confidences              level by score
  3  one head pass over them (tree-masked) gives      head.forward(..., mask=)         self(input_hidden, ..., tree_mask)
     each its top-k children, their values            score = parent's + log p         cu_scores = topk_p + scores
     V_child = V_parent * c_child
  4  repeat 2-3 up to the depth                       for level in 2..n_draft          for i in range(depth)
  5  rerank: the m nodes of highest value among all   rerank(): the total_tokens best  topk(scores_list, total_tokens)
     drafted, a set closed under ancestors            (ties: shallower first)
  6  verify the tree in one tree-masked oracle pass   medusa.tree_pass, as EAGLE's     (ea_model: tree_decoding)
Values are kept as logs (sums of log-probabilities), as the code does. A child's value is at most its
parent's (a probability is at most 1), so the best m nodes always hold each node's parent: the rerank
keeps a tree, and ties go to the shallower node so that it holds even then.

Letters: Chen et al.'s (sps.py): q the oracle's distribution, p the drafter's (here the head's). The paper
writes c for the head's confidence in a token and V for a node's value; total_tokens is its m, top_k its
k, and n_draft the tree's greatest depth (the code's depth + 1: its first level is the root's top-k).

Greedy (eagle2_generate): the oracle's argmax after the root and each node, and tree.py's walk keeps the
longest path it agrees with: exactly greedy decoding's text.
Sampling (eagle2_sample): the tree is a deterministic function of the text (top-k of the head's raw
logits, as topK_genrate builds it whatever the sampling settings), so each child is a draft the drafter
proposes with chance 1. Speculative sampling with p = 1 is: keep child c with chance q(c); after a
rejection the target becomes q without c, renormalised (the residual (q - p)+ with p one-hot at c); after
every child is rejected, draw from what is left. That is beyond/tree_without_replacement.py's rule with
the draft's chance 1 (EAGLE's code: ratio = q(x) / 1, and the rejected token's mass set to 0), and at one
node it emits x with chance q(x) exactly: the first child c_1 is emitted with chance q(c_1); given its
rejection, the next meets q(. | not c_1) = q / (1 - q(c_1)) and so on, so every token x gets
q(x) in all, whether it is a child or drawn from the rest. The walk down the tree is tree-sps's
(tree_sampling.walk_tree), so the text has exactly the oracle's distribution.

Each round (eagle2_rounds): the head catches up on the pairs whose true features came from the last
verification (beyond/eagle.py's step 1), grows and reranks the tree, the oracle checks it in one pass
that also gives the true features of the kept path, and the head's cache goes back to its true pairs.
"""

import time
from dataclasses import dataclass

import numpy as np

from beyond.eagle import check as check_head
from beyond.medusa import tree_pass
from beyond.tree_sampling import SampledTreeDetails, chosen_after, walk_tree
from decoding import check_lengths, timed_states
from stats import Stats
from gpt2 import MASKED
from kvcache import KVCache
from processors import as_processor
from sps import residual, sample
from tree import Node, accepted_path, tree_depth


@dataclass
class Eagle2Details(SampledTreeDetails):
    """A round's record: the tree (tree.py's fields; probs are the head's probability of each node's token after its
    parent), each node's confidence, and what grew the tree. A sampled round fills tree-sps's visits and last
    (each child checked with the draft's chance p = 1)."""
    confidences: list = None  # per node: the product of the head's probabilities along its path (its value V)
    top_k: int = None          # children per expanded node, and nodes expanded per level
    total_tokens: int = None   # nodes kept by the rerank (m)
    candidates: int = None     # nodes drafted before the rerank


def eagle2_generate(head, oracle, ids, n_new, n_draft=4, top_k=4, total_tokens=12, stats=None):
    """Greedy decoding with EAGLE-2's dynamic tree on an EAGLE head: yields exactly greedy_generate(oracle, ids,
    n_new)'s tokens. n_draft: the tree's greatest depth; top_k: children of each expanded node, and nodes expanded
    per level; total_tokens: the nodes kept. The checks run at the call, before any token."""
    check(head, oracle, ids, n_new, n_draft, top_k, total_tokens)

    def rule(nodes, logits):  # tree.py's walk: the longest path the oracle's argmax agrees with, and its token after
        choice = np.argmax(logits, axis=-1)
        path = accepted_path(nodes, choice)
        return path, int(choice[(path[-1] if path else -1) + 1]), choice.tolist(), None

    return eagle2_rounds(head, oracle, list(ids), n_new, n_draft, top_k, total_tokens,
                         Stats() if stats is None else stats, rule, choose=lambda logits: int(np.argmax(logits)))


def eagle2_sample(head, oracle, ids, n_new, n_draft=4, top_k=4, total_tokens=12, rng=None, processor=None,
                  stats=None, **flags):
    """Speculative sampling over EAGLE-2's dynamic tree: yields n_new ids distributed exactly as
    sps.autoregressive_sample(oracle, ...)'s (one processor, or its flags, makes the oracle's q)."""
    check(head, oracle, ids, n_new, n_draft, top_k, total_tokens)
    rng = np.random.default_rng() if rng is None else rng
    processor = as_processor(processor, **flags)

    def rule(nodes, logits):  # tree-sps's walk down the tree, each child checked with the draft's chance 1
        q = processor(logits)
        p = {i: None for i in [-1] + [node.parent for node in nodes]}  # the draft's p: 1 for each child, see accept
        path, last, visits = walk_tree(nodes, q, p, rng.random, accept_top_k)
        return path, sample(last, rng), None, (visits, last)

    return eagle2_rounds(head, oracle, list(ids), n_new, n_draft, top_k, total_tokens,
                         Stats() if stats is None else stats, rule, choose=lambda logits: sample(processor(logits), rng))


def check(head, oracle, ids, n_new, n_draft, top_k, total_tokens):
    """beyond/eagle.py's checks, and top_k and total_tokens at least 1."""
    check_head(head, oracle, ids, n_new, n_draft)
    check_lengths(top_k=top_k, total_tokens=total_tokens)


def eagle2_rounds(head, oracle, tokens, n_new, n_draft, top_k, total_tokens, stats, rule, choose):
    """The rounds of both decoders: rule(nodes, the oracle's logits after the root and each node) -> (the kept path,
    the token after it, the oracle's greedy choices or None, (visits, last) of a sampled walk or None);
    choose(logits) picks the prompt's first token."""
    end = len(tokens) + n_new
    if n_new == 0:
        return
    oracle_cache, head_cache = KVCache(), KVCache()
    top_k = min(top_k, oracle.vocab_size)
    # The prompt: the oracle's features for it, and its first token (no draft: nothing to read yet).
    features, logits = timed_states(oracle, oracle_cache, tokens, stats, "oracle", n_logits=1)
    tokens.append(choose(logits[-1]))
    stats.add_round(tokens[-1:], context_length=end - n_new, cached={"draft": 0, "oracle": oracle_cache.n_tokens()})
    yield tokens[-1]
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)  # a path plus the oracle's token: no overshoot
        nodes, confidences, n_candidates = draft_dynamic_tree(head, head_cache, tokens, features, k, top_k,
                                                              total_tokens, stats) if k else ([], [], 0)
        # One oracle pass over the root and every node: its logits after each, and their true features.
        fresh, logits = tree_pass(oracle, oracle_cache, tokens[-1], nodes, stats)
        path, last_token, choice, walked = rule(nodes, logits)
        new_tokens = [nodes[i].token for i in path] + [last_token]
        features = np.concatenate([features, fresh[[0] + [i + 1 for i in path]]])  # the kept rows' true features
        n = len(tokens)
        oracle_cache.keep(list(range(n)) + [n + i for i in path])  # the text, the root and the kept path
        head_cache.truncate(min(head_cache.n_tokens(), n - 1))  # the pairs whose features were true
        tokens += new_tokens
        details = explain_round(nodes, path, confidences, new_tokens, walked, top_k, total_tokens, n_candidates,
                                n_draft, k) if stats.trace is not None else None
        stats.add_round(new_tokens, [node.token for node in nodes], len(path), context_length=n,
                        oracle=choice if choice is not None else chosen_after(nodes, path, new_tokens),
                        cached={"draft": head_cache.n_tokens(), "oracle": oracle_cache.n_tokens()}, details=details,
                        positions=tree_depth(nodes))
        yield from new_tokens


# ---------------------------------------------------------------------------
# Steps 1-5: the dynamic tree
# ---------------------------------------------------------------------------

def draft_dynamic_tree(head, head_cache, tokens, features, k, top_k, total_tokens, stats):
    """Steps 1-5: (the kept nodes in level order, each one's confidence, how many nodes were drafted).
    features[t] is the oracle's true f_t for every token it has been fed (all but the newest), as in
    beyond/eagle.py's draft_chain."""
    start = time.perf_counter()
    oracle = head.oracle
    first = head_cache.n_tokens()  # pairs 0..first-1 are in the head's cache already
    root_guess = head.forward(tokens[first + 1:], features[first:], head_cache)[-1]  # f^ of the newest token
    n_text = head_cache.n_tokens()  # the true pairs; the tree's expanded nodes are fed after them
    candidates, scores, fed = [], [], []  # every node drafted, its value (a log), the nodes fed to the head in order
    frontier = [(-1, root_guess)]  # (node, its guessed feature): the nodes whose children the head proposes next
    for depth in range(1, k + 1):
        log_p = log_softmax(oracle.logits(np.stack([guess for _, guess in frontier])))  # [n_frontier, V]
        level = []
        for (parent, _), row in zip(frontier, log_p):  # steps 1 and 3: each frontier node's top_k children
            for token in top(row, top_k):
                candidates.append(Node(int(token), parent, depth, float(np.exp(row[token]))))
                scores.append((scores[parent] if parent != -1 else 0.0) + float(row[token]))
                level.append(len(candidates) - 1)
        if depth == k:
            break
        expand = sorted(level, key=lambda i: -scores[i])[:top_k]  # step 2: the newest level's best
        guesses = {i: g for i, g in frontier}
        out = head.forward([candidates[i].token for i in expand], np.stack([guesses[candidates[i].parent]
                                                                             for i in expand]),
                           head_cache, mask=fed_mask(candidates, expand, fed, n_text))
        fed += expand
        frontier = list(zip(expand, out))
    stats.add_pass("draft", time.perf_counter() - start)
    kept = rerank(candidates, scores, total_tokens)  # step 5
    return renumber(candidates, kept), [float(np.exp(scores[i])) for i in kept], len(candidates)


def top(row, k):  # [V] -> the k largest entries' indices, largest first
    best = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
    return best[np.argsort(-row[best], kind="stable")]


def log_softmax(logits):  # [..., V] -> [..., V]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def fed_mask(candidates, new, fed, n_text):  # -> [len(new), n_text + len(fed) + len(new)]
    """The head's attention mask for feeding the candidates `new` after its n_text true pairs and the candidates
    `fed` before them: each sees the true pairs, its own ancestors among the fed nodes (every ancestor of an
    expanded node was expanded), and itself."""
    column = {i: n_text + j for j, i in enumerate(fed + list(new))}
    mask = np.full((len(new), n_text + len(fed) + len(new)), MASKED, dtype=np.float32)
    mask[:, :n_text] = 0
    for row, i in enumerate(new):
        while i != -1:
            mask[row, column[i]] = 0
            i = candidates[i].parent
    return mask


def rerank(candidates, scores, total_tokens):
    """Step 5: the total_tokens candidates of highest value, in level order. A child's value is at most its
    parent's, and a tie goes to the shallower node, so every kept node's parent is kept too."""
    best = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i].depth, i))[:total_tokens]
    return sorted(best, key=lambda i: (candidates[i].depth, i))


def renumber(candidates, kept):
    """The kept candidates as a tree of their own (tree.Node, parents as indices into it)."""
    index = {i: j for j, i in enumerate(kept)}
    return [Node(candidates[i].token, index.get(candidates[i].parent, -1), candidates[i].depth, candidates[i].p)
            for i in kept]


# ---------------------------------------------------------------------------
# Sampling's check at one node, with the draft's chance 1
# ---------------------------------------------------------------------------

def accept_top_k(q, p, children, uniforms):
    """The check at one node whose children the drafter proposes for sure (p = 1 each; the p given is unused):
    child c is kept with chance min(1, q_i(c) / 1) = q_i(c); rejected, the target becomes q_i without c,
    renormalised (sps.residual with p one-hot at c). Returns tree_sampling.accept_at_node's (the index of the kept
    child or None, the target after the rejections, one record per child checked)."""
    checks = []
    for i, (x, r) in enumerate(zip(children, uniforms)):
        a = min(1.0, float(q[x]))
        checks.append({"token": int(x), "p": 1.0, "q": float(q[x]), "accept_prob": a, "r": float(r),
                       "accepted": bool(r < a)})
        if r < a:
            return i, q, checks
        p_one_hot = np.zeros_like(q)  # the draft's chance: 1 at x (a row of an identity would cost V x V)
        p_one_hot[x] = 1.0
        q = residual(q, p_one_hot)  # q without x; q itself if nothing else is left
    return None, q, checks


# ---------------------------------------------------------------------------
# The round's record, and the suite's prediction
# ---------------------------------------------------------------------------

def explain_round(nodes, path, confidences, new_tokens, walked, top_k, total_tokens, n_candidates, n_draft, k):
    """The round's record: the tree kept, each node's confidence, what grew it; a sampled walk's checks too."""
    details = Eagle2Details([node.parent for node in nodes], path, [node.p for node in nodes], n_draft=n_draft,
                            k=k, width=top_k, siblings="top-k, the draft's chance 1", confidences=confidences,
                            top_k=top_k, total_tokens=total_tokens, candidates=n_candidates)
    if walked is not None:
        visits, last = walked
        rejected_all = bool(visits) and not visits[-1]["checks"][-1]["accepted"]
        details.visits = visits
        details.last = {"token": int(new_tokens[-1]), "from": "residual" if rejected_all else "bonus",
                        "prob": float(last[new_tokens[-1]])}
    return details


def predicted_tokens(confidences):
    """The paper's estimate of a round's tokens: each node is kept with about its confidence (its value V), so
    E[tokens] = 1 + Σ_nodes V (the oracle's own token, plus the drafts expected kept)."""
    return 1.0 + float(sum(confidences))
