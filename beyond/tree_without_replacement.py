"""Tree speculative sampling with siblings drawn WITHOUT replacement, and the rule that keeps it exact.

beyond/tree_sampling.py (tree-sps) draws a node's children i.i.d. from the draft: at a low temperature
they are mostly the same token, and a repeat of a rejected sibling is rejected again for sure. Here a
node's children are distinct: child 1 ~ p, child 2 ~ p without child 1 (renormalised), and so on, so
every sibling is a new guess. SpecInfer's rule would then be biased (child 2 is no longer a draw from
p), so the check changes with the draw: after a rejection the draft's p loses the rejected token too.
This is the rule of Sequoia (Chen, May, Svirschevski, Huang, Ryabinin, Jia, Chen 2024, arXiv 2402.12374;
its code, Tree/SpecTree.py accept_step: the residual for the target, the rejected token's logit set to
-inf for the draft) and the recursive rejection sampling of Jeon et al. 2024 (arXiv 2402.14160).
SpecTr (Sun et al. 2023, arXiv 2310.15141) and Khisti et al. (ICLR 2025, arXiv 2410.18234) go further,
to the best a rule can do with several drafts (an optimal transport, a linear program); this module
stays with the recursive rule, which needs nothing but sps.py's two functions applied in turn.

Letters: Chen et al.'s, as in sps.py: q is the target (the oracle), p the draft. Sequoia's code, like
Leviathan et al., writes p for the target and q for the draft.

At one node, with the target q and the draft p after the node's text, children c_1..c_m:
  draw     c_i ~ p_i, where p_1 = p and p_{i+1} = p_i without c_i, renormalised (without())
  check    for i = 1..m: r ~ U[0, 1);
             r < min(1, q_i(c_i) / p_i(c_i)): accept c_i (q_1 = q), go down to c_i's children
             else: q_{i+1} = (q_i - p_i)+ renormalised (sps.residual), p_{i+1} = p_i without c_i
  last     every child rejected: draw the last token from q_{m+1}; at an accepted leaf, from its q (the bonus)

Why the output has exactly q's distribution at a node (then the tree, by induction on depth, as in
beyond/tree_sampling.py's step 3). By induction on the number m of children. With none, the token is
drawn from q itself. With m >= 1: child c_1 is a draw from p_1 = p, so step one is sps.py's step 3: it
emits x as an accepted child with probability min(p(x), q(x)), and rejects with probability
b = Σ_y (q(y) - p(y))+. After a rejection of c_1 = x, the remaining m - 1 children are draws without
replacement from p_2 = p without x: exactly the situation of a node with the draft p_2, the target
q_2 = (q - p)+ / b and m - 1 children, so by induction they emit y with probability q_2(y). That
q_2 does not depend on which token was rejected (only p_2 does), so over all rejections the node emits
min(p(y), q(y)) + b (q(y) - p(y))+ / b = q(y). What would break it is keeping p_2 = p (tree-sps's rule):
child 2 would be checked against a distribution it was not drawn from. Note q_2(x) = 0 (x was rejected
because q(x) < p(x)), so removing x from p takes away no mass the target still wants.

A node has at most as many children as its p has tokens with mass: at temperature 0 (p one-hot) one,
and the rule is then sps.py's, so the text is greedy decoding's (beyond/tree_sampling.py says why).

One round is tree-sps's (tree_sampling.tree_sample_generate) with this module's rule: sample the tree
level by level, one draft pass per level, each node's children from sample_children (tree_sampling.sample_tree);
one oracle pass over every node (tree_sampling.oracle_pass); walk down, checking each node's children with
accept_at_node (tree_sampling.walk_tree); keep the accepted path in both caches. The round's record is
tree-sps's (tree_sampling.explain_round) with siblings "without replacement", so --trace and --html draw it
as a tree-sps round; each check records the p and q of its moment, p_i and q_i, which the trace and the page
name p, p', p'', ... and q, q', q'', ...
"""

import numpy as np

from beyond.tree_sampling import tree_sample_generate
from sps import acceptance_probability, residual, sample


def tree_sample_wor_generate(draft, oracle, ids, n_new, n_draft=4, width=2, max_nodes=32, rng=None, processor=None,
                             stats=None, shape=None, **flags):
    """Speculative sampling over a tree of depth n_draft whose nodes have up to width distinct children (at most
    max_nodes nodes): yields n_new ids distributed exactly as sps.autoregressive_sample(oracle, ...).

    One processor makes both p and q (a processors.Processor, or its flags temperature, top_k, top_p).
    The round is tree-sps's (tree_sampling.tree_sample_generate) with this module's rule: children drawn by
    sample_children, checked by accept_at_node. shape: a fixed tree (parents in level order), as
    beyond/sequoia.py chooses it for this rule, in place of width children a node.
    """
    return tree_sample_generate(draft, oracle, ids, n_new, n_draft, width, max_nodes, rng, processor, stats,
                                siblings="without replacement", shape=shape,
                                draw_children=sample_children, accept=accept_at_node, **flags)


# ---------------------------------------------------------------------------
# Step 1: children without replacement
# ---------------------------------------------------------------------------

def without(p, x):  # [V], token -> [V]
    """p with token x removed, renormalised: the distribution the next sibling is drawn from."""
    rest = p.copy()
    rest[x] = 0
    total = rest.sum()
    return rest / total if total > 0 else rest


def sample_children(p, width, rng):
    """Up to width distinct tokens drawn one after another from p, each time without the ones already drawn
    (as many as p has tokens with mass, if fewer). sample() renormalises what is left."""
    children, left = [], p.copy()
    for _ in range(min(width, int(np.count_nonzero(p)))):
        children.append(sample(left, rng))
        left[children[-1]] = 0
    return children


# ---------------------------------------------------------------------------
# Step 3: the recursive rejection, as pure functions of the distributions and the uniforms
# ---------------------------------------------------------------------------

def accept_at_node(q, p, children, uniforms):
    """The check at one node: the target q and the draft p there ([V] each), the children's tokens (drawn
    without replacement from p, in order) and one r ~ U[0, 1) per child. Returns (the index of the accepted
    child, or None if all were rejected; the target after the rejections, which the last token is drawn
    from then; one record per child checked, with q_i(c_i) and p_i(c_i) at that moment)."""
    checks = []
    for i, (x, r) in enumerate(zip(children, uniforms)):
        a = acceptance_probability(q, p, x)  # min(1, q_i(x) / p_i(x)); p_i(x) > 0: x was drawn from p_i
        checks.append({"token": int(x), "p": float(p[x]), "q": float(q[x]), "accept_prob": a, "r": float(r),
                       "accepted": bool(r < a)})
        if r < a:
            return i, q, checks
        # Rejected: the target becomes the residual (sps.residual; never NaN, see there), and the draft
        # loses x, as the next child was drawn without it.
        q, p = residual(q, p), without(p, x)
    return None, q, checks

