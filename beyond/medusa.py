"""Medusa: extra heads on the oracle's last hidden state guess several tokens ahead at once
(Cai, Li, Geng, Peng, Lee, Chen, Dao, arXiv 2401.10774).

No draft model and no drafting loop. After the oracle reads position t, its LM head gives the next
token x_(t+1); Medusa head k (k = 1..K), one residual block on the same state,

    logits_k = (h_t + SiLU(h_t W_k + b_k)) wte^T        h_t = ln_f(f_t), the LM head's own input

guesses the token k places further, x_(t+1+k). Their top candidates make a tree: the root is the
oracle's own next token, its children head 1's top `widths[0]` tokens, each of those has head 2's
top `widths[1]`, and so on (the Cartesian product of the heads' candidates, as the paper's trees).
One tree-masked oracle pass (tree.py's mask: each node sees the text and its own ancestors) checks
every branch, and the greedy walk of tree.py keeps the longest branch the oracle agrees with, plus
the oracle's own token after it. The hidden state of the last kept node feeds the heads for the next
round, so every round is ONE oracle pass and a few small products.

Greedy verification keeps the oracle's greedy text exactly (tests/test_medusa.py). The paper's
"typical acceptance" (keep a candidate whose probability under the oracle is above a threshold set
by its entropy) is faster and not lossless: it changes the output distribution, so it is not here.
workbench/tools/train_heads.py trains the heads on the oracle's own distribution (Medusa-2's self-distillation),
sharing its LM head rather than copying it per head.
"""

import itertools
import time
from dataclasses import dataclass

import numpy as np

from decoding import GenerationError, check_room, timed_states
from stats import Stats
from gpt2 import MASKED, layer_norm, softmax
from kvcache import KVCache
from tree import Node, TreeDetails, accepted_path, tree_depth, tree_mask


@dataclass
class MedusaDetails(TreeDetails):
    """A round's record for --trace and --html: the candidate tree (tree.py's fields; probs are each head's
    probability of its candidate) and the widths it was built with."""
    widths: list = None  # widths[k - 1]: head k's candidates under every node of the level above


class MedusaHeads:
    """The K heads workbench/tools/train_heads.py exports ("medusa.{k}.weight", "medusa.{k}.bias"); weights/heads.py
    reads them (params: gpt2.nest of its tensors)."""

    def __init__(self, params, config, oracle):
        if config.get("head") != "medusa" or config.get("n_embd") != oracle.n_embd:
            raise GenerationError(f"these are not Medusa heads for a model of width {oracle.n_embd}")
        self.heads, self.oracle = params["medusa"], oracle

    def guesses(self, feature):  # the oracle's top state f_t [n_embd] -> logits [K, vocab_size]
        p = self.oracle.params
        h = layer_norm(feature, p["ln_f"]["weight"], p["ln_f"]["bias"], self.oracle.eps)
        z = np.stack([h @ head["weight"] + head["bias"] for head in self.heads])  # [K, n_embd]
        return (h + z / (1 + np.exp(-z))) @ p["wte"].T  # SiLU(z) = z sigmoid(z)


def candidate_tree(logits, widths):
    """Nodes in level order: level k holds, under every node of level k - 1, head k's top widths[k - 1]."""
    nodes, parents = [], [-1]
    for depth, (row, width) in enumerate(zip(logits, widths), start=1):
        top = np.argsort(-row)[:width].tolist()
        probs = softmax(row)  # [vocab_size]: head k's probability of each candidate, for the trace
        level = []
        for parent, token in itertools.product(parents, top):
            nodes.append(Node(int(token), parent, depth, float(probs[token])))
            level.append(len(nodes) - 1)
        parents = level
    return nodes


def draft_tree(heads, feature, widths, stats):
    """Step 1: the heads' guesses from the oracle's state, and the tree of their top candidates (timed as drafting)."""
    start = time.perf_counter()
    nodes = candidate_tree(heads.guesses(feature)[:len(widths)], widths)
    stats.add_pass("draft", time.perf_counter() - start)
    return nodes


def tree_pass(oracle, cache, root, nodes, stats):  # -> (features [1 + n, n_embd], logits [1 + n, vocab_size])
    """The oracle over the root (the newest token) and every node, tree-masked, in one pass."""
    n_text = cache.n_tokens() + 1  # the text, the root included
    root_row = np.where(np.arange(n_text + len(nodes)) < n_text, np.float32(0), MASKED)[None, :]
    mask = np.vstack([root_row, tree_mask(nodes, range(len(nodes)), n_text, 0)])
    positions = [n_text - 1] + [n_text - 1 + node.depth for node in nodes]
    return timed_states(oracle, cache, [root] + [node.token for node in nodes], stats, "oracle",
                        positions=positions, mask=mask)


def medusa_generate(heads, oracle, ids, n_new, widths=(2, 1, 1), stats=None):
    """Greedy decoding with Medusa's tree of candidates: yields exactly greedy_generate(oracle, ids, n_new)'s tokens.

    widths: how many candidates each head adds under every node of the level above (its length is the
    tree's depth, at most the number of heads).
    """
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    if heads.oracle is not oracle:
        raise GenerationError("the Medusa heads were loaded for another oracle")
    if not 1 <= len(widths) <= len(heads.heads) or min(widths) < 1:
        raise GenerationError(f"widths needs 1 to {len(heads.heads)} numbers, each at least 1, got {widths}")

    def draft(feature, depth, stats):  # step 1: the product of the heads' top candidates
        return draft_tree(heads, feature, widths[:depth], stats)

    def describe(nodes, path, k):
        return MedusaDetails([node.parent for node in nodes], path, [node.p for node in nodes], n_draft=len(widths),
                             k=k, widths=list(widths))

    yield from heads_rounds(heads, oracle, ids, n_new, len(widths), draft, describe, stats)


def heads_rounds(heads, oracle, ids, n_new, max_depth, draft, describe, stats):
    """The rounds of a tree drafted from the heads' guesses (medusa_generate; beyond/ddtree.py's best-first tree):
    draft(the oracle's state, the round's depth k, stats) -> nodes in level order; describe(nodes, the kept path,
    k) -> the round's details. Greedy: the text is greedy decoding's."""
    tokens, end = list(ids), len(ids) + n_new
    if n_new == 0:
        return
    cache = KVCache()
    # The prompt: the oracle's state after it gives its first token, and the heads' first guesses.
    features, logits = timed_states(oracle, cache, tokens, stats, "oracle", n_logits=1)
    feature = features[-1]
    tokens.append(int(np.argmax(logits[-1])))
    stats.add_round(tokens[-1:], context_length=len(ids), cached={"draft": None, "oracle": cache.n_tokens()})  # the prompt's pass
    yield tokens[-1]
    while len(tokens) < end:
        k = min(max_depth, end - len(tokens) - 1)  # a branch plus the oracle's token: no overshoot
        nodes = draft(feature, k, stats) if k else []
        features, logits = tree_pass(oracle, cache, tokens[-1], nodes, stats)
        choice = np.argmax(logits, axis=-1)  # after the root (row 0) and after each node (row i + 1)
        path = accepted_path(nodes, choice)
        at = path[-1] if path else -1
        new_tokens = [nodes[i].token for i in path] + [int(choice[at + 1])]
        n = len(tokens)
        cache.keep(list(range(n)) + [n + i for i in path])  # the text, the root and the kept branch
        feature = features[at + 1]  # the state the oracle's next token came from: the heads read it next
        stats.add_round(new_tokens, [node.token for node in nodes], len(path), context_length=n, oracle=choice.tolist(),
                        cached={"draft": None, "oracle": cache.n_tokens()}, details=describe(nodes, path, k),
                        positions=tree_depth(nodes))
        tokens += new_tokens
        yield from new_tokens
