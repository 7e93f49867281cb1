"""Part 3, speculative sampling, its last exercise: 15, a whole round of Chen et al.'s Algorithm 2, checked by its
output's distribution (chi-square tests against exact enumerations) and, with generators whose every draw is the
same, step by step (the contract's boundaries, promises.py)."""

import itertools
import math
from collections import Counter

import numpy as np

from stats import Stats
from gpt2 import softmax

from .contract import Boundary
from .models import SAMPLING_V, TableModel, close_draft, constant_rng, sampling_pair, three_pair
from .part3_sampling import sps_alpha
from .running import Exercise, attempt, confirmed, show, wrong

# ---------------------------------------------------------------------------
# Rounds with every draw the same (the contract's boundaries): each step of Algorithm 2 is then known, and a
# wrong round shows which step it took otherwise
# ---------------------------------------------------------------------------

# (the text's first token, drafts so far) -> (the draft's p, the target's q), over a vocabulary of 3, exact zeros
# and ones included. Text [1], every r just below 1 (a draw takes the last token with probability > 0): both drafts
# kept (q(x) >= p(x)), then the bonus, which q one row early and the draft's p would draw otherwise. Text [2], every
# r = 0.0 (a draw takes the first): the first draft has q(x) = 0 and is rejected; the residual, q and the next draft
# each give another token. Text [0]: p = q, uniform: min(1, q/p) = 1 exactly, every draft kept.
TABLES = {(1, 0): ([0.2, 0.3, 0.5], [0.1, 0.3, 0.6]), (1, 1): ([0.6, 0.4, 0.0], [0.2, 0.5, 0.3]),
          (1, 2): ([0.5, 0.5, 0.0], [1.0, 0.0, 0.0]),
          (2, 0): ([0.2, 0.5, 0.3], [0.0, 0.3, 0.7]), (2, 1): ([1.0, 0.0, 0.0], [0.5, 0.5, 0.0]),
          (2, 2): ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0])}
TOP = float(np.nextafter(1.0, 0.0))  # what constant_rng(top=True) draws: r = 0.9999999999999999


def certain_pair():
    """(draft, target): table models over 3 tokens whose distributions are TABLES'."""
    def table(which):
        return lambda tokens: np.array(TABLES.get((tokens[0], len(tokens) - 1), ([1 / 3] * 3,) * 2)[which], np.float32)
    return (TableModel(3, table(0), "<a draft of exact probabilities>"),
            TableModel(3, table(1), "<a target of exact probabilities>"))


def simulate(tokens, top, how="right"):
    """The round of Algorithm 2 on certain_pair() with every draw the same, or one of the usual wrong rounds."""
    from sps import residual, sample
    draft, target = certain_pair()
    r = TOP if top else 0.0

    def draw(probs):
        return sample(np.asarray(probs, np.float32), constant_rng(top))
    drafted, p = [], []
    for _ in range(2):
        p.append(softmax(draft.forward(tokens + drafted)[-1]))
        drafted.append(draw(p[-1]))
    q = softmax(target.forward(tokens + drafted)[len(tokens) - 1:])
    out = []
    for t, x in enumerate(drafted):
        ratio = (p[t][x] / q[t][x] if q[t][x] > 0 else math.inf) if how == "inverted" else q[t][x] / p[t][x]
        if r < min(1.0, ratio) or (how == "<=" and r <= min(1.0, ratio)):
            out.append(x)
            continue
        z = draw(q[t] if how == "from q" else residual(q[t], p[t]))
        if how == "no stop":
            out.append(z)
            continue
        return out + {"keeps the rejected": [x, z], "extra token": [z, draw(q[2])]}.get(how, [z])
    if how == "uniform":
        return out + [int(constant_rng(top).integers(3))]
    row = {"no bonus": None, "early": q[1], "p last": p[1],
           "p after": softmax(draft.forward(tokens + drafted)[-1])}.get(how, q[2])
    return out + ([] if row is None else [draw(row)])


WRONG_ROUNDS = {  # how -> (what the round did, where to look)
    "inverted": ("that is the round with the ratio inverted, min(1, p(x)/q(x)): it rejects what the target wants "
                 "more than the draft proposes it", "step 3's test r < min(1, q(x)/p(x)): q is the target (the "
                 "oracle), p the draft"),
    "<=": ("that is the round with `<=` for `<`: at r = 0.0 it keeps a draft the target never emits (q(x) = 0), as "
           "0 <= 0", "step 3's test is strict, r < min(1, q(x)/p(x)): r can be exactly 0.0 (U[0, 1) includes 0)"),
    "keeps the rejected": ("that is a round that keeps the rejected draft and then the residual's token after it",
                           "step 3: at the first rejection the round is the drafts before it, then one token from the "
                           "residual: the rejected draft goes"),
    "from q": ("that is a round that draws the replacement of a rejected draft from q", "step 3: the replacement "
               "comes from the residual (q - p)+ renormalised (residual(q[t], p[t])), not from q"),
    "no stop": ("that is a round that goes on testing the drafts after a rejection", "step 3, '... and stop the "
                "round': the drafts after a rejected one were drawn after it, and go with it"),
    "extra token": ("that is a round that adds a token after the residual's", "a round ends with exactly one token of "
                    "the target's: the residual's draw after a rejection, the bonus (step 4) only when every draft "
                    "was kept"),
    "no bonus": ("that is a round without its bonus token", "step 4: when all n_draft drafts are kept, one more token "
                 "from q after the text and all the drafts"),
    "early": ("that is a round whose bonus comes from q one row early, after the text and the first draft only",
              "step 4: q after the text and ALL n_draft drafts, the last of the n_draft + 1 rows of step 2"),
    "p last": ("that is a round whose bonus comes from the draft's p of the last draft", "step 4: the bonus comes "
               "from the target's q after the text and all n_draft drafts, the last row of step 2"),
    "p after": ("that is a round whose bonus comes from the draft's p after all the drafts", "step 4: the bonus "
                "comes from the target's q, not the draft's p"),
    "uniform": ("that is a round whose bonus is drawn uniformly over the vocabulary", "step 4: the bonus comes from "
                "q after the text and all n_draft drafts"),
}


CONSTANT_ROUNDS = (([1], True), ([2], False), ([0], True))  # the contract's boundaries, in their order


def explain_constant_round(tokens, top, got, expected, f=None, models=None):
    """(what, where to look) for a wrong round with every draw the same: the usual wrong rounds that give got, and
    that give what the answer gives on the other such rounds too (f given; else the rounds before this one, which
    it passed); else the first step at which it parts from Algorithm 2 (models: what the round's models read)."""
    before = CONSTANT_ROUNDS[:CONSTANT_ROUNDS.index((list(tokens), top))]
    others = [(t, u) for t, u in CONSTANT_ROUNDS if (t, u) != (list(tokens), top)]

    def answers(t, u):
        return list(f(*certain_pair(), list(t), 2, constant_rng(u)))
    matches = [WRONG_ROUNDS[how] for how in WRONG_ROUNDS if simulate(list(tokens), top, how) == got
               and all(simulate(t, u, how) == simulate(t, u) for t, u in before)
               and confirmed(f, lambda t, u, how=how: simulate(t, u, how), others, lambda a, b: a == b, answers)]
    if matches:
        return "; or ".join(what for what, _ in matches), "; or ".join(hint for _, hint in matches)
    what, hint = first_step_apart(list(tokens), top, list(got), models)
    return f"{story(tokens, top)}; {what}", hint


def first_step_apart(tokens, top, got, models=None):
    """(what, where to look): the first step of the round at which got parts from Algorithm 2's, every draw the same
    (models: the draft and the target the round ran, whose reads show its drafts)."""
    right = simulate(tokens, top)
    draft, target = certain_pair()
    drafted = []
    for _ in range(2):
        drafted.append(int(np.flatnonzero(softmax(draft.forward(tokens + drafted)[-1]))[-1 if top else 0]))
    if models is not None and len(models[1].read) == 1:  # the round's drafts, as its target read them
        theirs = models[1].read[0][len(tokens):]
        reads = models[0].read
        wrong_read = next((k for k, read in enumerate(reads) if read != tokens + theirs[:k]), None)
        if wrong_read is not None:
            return (f"your draft pass {wrong_read + 1} read {reads[wrong_read]}, where step 1's pass reads the text and "
                    f"the drafts before it, {tokens + theirs[:wrong_read]}", "step 1: draft t's distribution p is "
                    "the draft's after the text and the t drafts before it: draft.forward(tokens + drafted)[-1]")
        if theirs != drafted:
            k = next((k for k, (a, b) in enumerate(zip(theirs, drafted)) if a != b), min(len(theirs), len(drafted)))
            return (f"your round's drafts are {theirs} (what its target pass read after the text), where the draws from "
                    f"p give {drafted}", "step 1: each draft is sample(p, rng), p the draft's distribution after the "
                    "text and the drafts before it, drawn with the rng given" if k < len(drafted) else
                    "step 1: a round drafts n_draft tokens, then step 2 reads the text and all of them")
    kept = len(right) - 1  # the drafts the round keeps; the last token is the residual's or the bonus
    clean = kept == len(drafted)
    last = "the bonus, from q after the text and both drafts," if clean else \
        f"the replacement of draft {kept + 1}, from the residual (q - p)+ of its row,"
    if not got:
        return ("your round returned no token", "a round ends with exactly one token of the target's: after a "
                "rejection one from the residual (q - p)+, after a clean sweep the bonus: 1 to n_draft + 1 tokens")
    i = next((i for i, (a, b) in enumerate(zip(got, right)) if a != b), min(len(got), len(right)))
    if i < kept and len(got) == i + 1:
        return (f"your round ended with {got[i]} after {i} draft(s): it rejected draft {i + 1}, {drafted[i]}, which "
                "Algorithm 2 keeps here", "step 3 tests draft t with row t of step 2, q[t] and p[t]: the target's and "
                "the draft's distributions after the text and the t drafts before it")
    if i < kept:
        return (f"your round's draft {i + 1} is {got[i]}, where the draw from p gives {drafted[i]}",
                "step 1: each draft is sample(p, rng), p the draft's distribution after the text and the drafts "
                "before it")
    if i == kept and len(got) > kept:
        return (f"your round's token after {kept} kept draft(s) is {got[i]}, where {last} gives {right[-1]}",
                "step 4: the bonus is sample(q[n_draft], rng), the last row of step 2" if clean else
                "step 3's replacement: sample(residual(q[t], p[t]), rng), with q[t] and p[t] the rows of the rejected "
                "draft t")
    if len(got) < len(right):
        return (f"your round ended after {len(got)} token(s), without {last.rstrip(',')}",
                "a round ends with exactly one token of the target's: the residual's after a rejection, the bonus "
                "after a clean sweep")
    return (f"your round adds {len(got) - len(right)} token(s) after {last.rstrip(',')}", "a round ends with exactly "
            "one token of the target's: nothing comes after the residual's token or the bonus")


def story(tokens, top):
    """What Algorithm 2 does in the round of certain_pair() from tokens with every draw the same, step by step."""
    from sps import residual
    draft, target = certain_pair()
    r = TOP if top else 0.0
    drafted = simulate(list(tokens), top, "no bonus")[:0] or []
    for _ in range(2):
        drafted.append(int(np.flatnonzero(softmax(draft.forward(list(tokens) + drafted)[-1]))[-1 if top else 0]))
    q = softmax(target.forward(list(tokens) + drafted)[len(tokens) - 1:])
    p = [softmax(draft.forward(list(tokens) + drafted[:t])[-1]) for t in range(2)]
    steps = []
    for t, x in enumerate(drafted):
        ratio = min(1.0, float(q[t][x] / p[t][x]))
        if not r < ratio:
            z = int(np.flatnonzero(residual(q[t], p[t]))[-1 if top else 0])
            steps.append(f"draft {t + 1}, {x}, is rejected (min(1, q/p) = {ratio:.3g}, not above r), and the residual "
                         f"gives {z}")
            break
        steps.append(f"draft {t + 1}, {x}, is kept (min(1, q/p) = {ratio:.3g} > r)")
    else:
        steps.append(f"the bonus from q after both drafts is {int(np.flatnonzero(q[2])[-1 if top else 0])}")
    return f"with every draw at r = {r!r} (each token drawn is the {'last' if top else 'first'} of nonzero " \
           f"probability), " + "; ".join(steps)


# The contract's stages for exercise 15 (promises.py): its probes, its boundaries, its passes, its length

def sps_probes():
    def make(seed):
        return lambda: (*sampling_pair(), [1, 4], 2, np.random.default_rng(seed))
    return [(f"sps_round(draft, oracle, [1, 4], n_draft=2, rng=np.random.default_rng({seed}))", make(seed))
            for seed in range(10)]


def sps_case(what, tokens, top, u_said, hint):
    text = f"sps_round(draft, oracle, {tokens}, n_draft=2, rng) with a generator whose every draw is {u_said}"
    last = {}

    def args():  # the models of the last call kept: what they read shows the round's drafts
        last["models"] = certain_pair()
        return (*last["models"], list(tokens), 2, constant_rng(top))
    return Boundary(what, text, args, hint,
                    lambda got, expected, f: explain_constant_round(tokens, top, got, expected, f, last["models"]))


def sps_boundaries():
    said = {  # what each of CONSTANT_ROUNDS is, and where to look when a round goes wrong there
        1: ("a round that keeps both its drafts (q(x) >= p(x) at each)",
            "step 4: after all n_draft drafts are kept, one token from q after the text and ALL the drafts"),
        2: ("a round whose first draft the target never emits (q(x) = 0), at r = 0.0",
            "step 3's test is strict, r < min(1, q(x)/p(x)): at r = 0.0 a draft with q(x) = 0 is rejected (0 < 0 is "
            "False; `<=` keeps it), and the round ends with a token from the residual"),
        0: ("a round whose draft and target are the same (p = q: min(1, q/p) = 1 keeps every draft)",
            "step 3 keeps a draft when r < min(1, q(x)/p(x)), which is 1 here; step 4 then adds the bonus")}
    return [sps_case(*said[tokens[0]][:1], tokens, top, "r = 0.99999999" if top else "r = 0.0", said[tokens[0]][1])
            for tokens, top in CONSTANT_ROUNDS]


def round_length(draft, oracle, tokens, n_draft, rng):
    return (1, n_draft + 1, f"a round adds 1 to n_draft + 1 = {n_draft + 1} tokens",
            "a round ends with exactly one token of the target's: after a rejection one from the residual (q - p)+ "
            "(the drafts after the rejected one go), after a clean sweep the bonus from q")


def one_target_pass(args, out, passes):
    if passes["oracle"] != 1:
        return (f"the oracle ran {passes['oracle']} forward passes in one round: a round of SpS is ONE target pass, "
                "over the text and all n_draft drafts at once",
                "step 2: q for t = 0..n_draft in parallel, one oracle.forward(tokens + drafted), whose last n_draft + 1 "
                "rows are the n_draft + 1 distributions")
    if passes["draft"] != args["n_draft"]:
        return (f"the draft ran {passes['draft']} forward passes in a round of n_draft = {args['n_draft']}: one per "
                "draft", "step 1: a round drafts n_draft tokens, the argument (the checker calls with n_draft = 1, 2 "
                "and 3), each from one draft pass")
    return None


# ---------------------------------------------------------------------------
# Exercise 15: a whole round of Algorithm 2, by its distributions
# ---------------------------------------------------------------------------

def sequence_distribution(model, ids, n_new, probabilities=softmax):
    """{continuation: probability} of n_new tokens sampled from the model, by enumeration.
    probabilities: logits [n, V] -> probabilities [n, V] (softmax, or a processors.Processor)."""
    dist = {}
    for seq in itertools.product(range(model.vocab_size), repeat=n_new):
        probs = probabilities(model.forward(list(ids) + list(seq[:-1]))[len(ids) - 1:])
        dist[seq] = float(np.prod([probs[i, t] for i, t in enumerate(seq)]))
    return dist


def chi_square(counts, dist, n):
    """Pearson's test of n samples (counts) against dist: (chi2, critical value at alpha = 0.001, the
    continuation furthest above its expectation). Continuations expected fewer than 5 times are pooled."""
    seqs = list(dist)
    chi2, df = pearson([counts.get(s, 0) for s in seqs], n * np.array([dist[s] for s in seqs]))
    if any(dist.get(s, 0) == 0 for s in counts):
        chi2 = math.inf
    worst = max(seqs, key=lambda s: (counts.get(s, 0) - n * dist[s]) / math.sqrt(n * dist[s] + 1e-12))
    return chi2, critical_value(df, 0.001), worst


def pearson(observed, expected):
    """(chi2, degrees of freedom) of observed counts against expected ones; cells expected fewer than 5 times
    are pooled into one."""
    observed, expected = np.asarray(observed, np.float64), np.asarray(expected, np.float64)
    rare = expected < 5
    if rare.any():
        expected = np.append(expected[~rare], expected[rare].sum())
        observed = np.append(observed[~rare], observed[rare].sum())
    return float(np.sum((observed - expected) ** 2 / np.maximum(expected, 1e-12))), len(expected) - 1


def critical_value(df, alpha):
    """The chi-square quantile 1 - alpha with df degrees of freedom (Wilson-Hilferty's approximation)."""
    z = {0.001: 3.0902, 1e-4: 3.7190}[alpha]
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def sps_rounds(f, p_model, q_model, ids, n_draft):
    """f's round from ids, checked for its shape: 1 to n_draft + 1 token ids."""
    call = f"sps_round(draft, oracle, {ids}, n_draft={n_draft}, rng)"

    def run(rng):
        out = attempt(call, f, p_model, q_model, list(ids), n_draft, rng)
        if not 1 <= len(out) <= n_draft + 1 or not all(0 <= x < p_model.vocab_size for x in out):
            raise wrong(f"{call} returned {out}: a round adds 1 to n_draft + 1 = {n_draft + 1} token ids in "
                        f"[0, {p_model.vocab_size})",
                        "a round drafts n_draft tokens, the argument (the checker calls with n_draft = 1, 2 and 3), and ends "
                        "with exactly one token of the target's: a resample, or the bonus" if len(out) > n_draft + 1 else
                        "a round ends with exactly one token of the target's: a resample, or the bonus")
        return out
    return run


def all_kept(p_model, q_model, ids, n_draft):
    """P(a round from ids keeps all n_draft drafts), exactly: sum over x of min(p(x), q(x)) times the same one token on."""
    if n_draft == 0:
        return 1.0
    p, q = softmax(p_model.forward(ids)[-1]), softmax(q_model.forward(ids)[-1])
    return sum(float(min(p[x], q[x])) * all_kept(p_model, q_model, ids + [x], n_draft - 1) for x in range(len(p)))


def full_rounds(f, p_model, q_model, ids, n_draft, n_rounds, rng, lengths=None):
    """A failure unless about P(all n_draft kept) of n_rounds rounds add n_draft + 1 tokens (4.5 standard deviations).
    n_draft = 2 comes first (check_sps_round): a round without its bonus fails there, so a failure at another n_draft that
    never reaches n_draft + 1 tokens is a n_draft ignored."""
    lengths = lengths or Counter(len(sps_rounds(f, p_model, q_model, ids, n_draft)(rng)) for _ in range(n_rounds))
    full, expected = lengths[n_draft + 1], all_kept(p_model, q_model, ids, n_draft)
    if abs(full - n_rounds * expected) > 4.5 * math.sqrt(n_rounds * expected * (1 - expected)):
        raise wrong(f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft}, {full} of your rounds added n_draft + 1 = "
                    f"{n_draft + 1} tokens ({full / n_rounds:.1%}); all n_draft drafts are kept with probability {expected:.1%} "
                    f"here, and then the round adds one more token from q",
                    f"your rounds never added more than {max(lengths)} tokens with n_draft = {n_draft}: a round drafts n_draft tokens, "
                    "n_draft the argument" if max(lengths) <= n_draft and n_draft != 2 else
                    "step 3: each draft is kept by a test of its own, with an r of its own (one r for all n_draft tests "
                    "keeps or rejects them together)" if full > n_rounds * expected else
                    "step 4: what a round does when every draft was kept")


def check_sps_round(f, n_rounds=300, n_runs=500, n_draft=2, n_new=3):
    p_model, q_model = sampling_pair()
    ids, V = [1, 4], SAMPLING_V
    rng = np.random.default_rng(1234)

    # 1. The shape of a round: P(its first draft is kept) = alpha; P(all n_draft kept), both exact.
    rounds = Counter(tuple(sps_rounds(f, p_model, q_model, ids, n_draft)(rng)) for _ in range(n_rounds))
    lengths = Counter()
    for out, n in rounds.items():
        lengths[len(out)] += n
    p1, q1 = softmax(p_model.forward(ids)[-1]), softmax(q_model.forward(ids)[-1])
    alpha = sps_alpha(q1, p1)
    inverted = float(sum(p1[x] * min(1.0, p1[x] / q1[x]) for x in range(V)))
    setting = f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft} (draft p and target q over {V} tokens)"
    first_kept = n_rounds - lengths[1]
    if abs(first_kept - n_rounds * alpha) > 4.5 * math.sqrt(n_rounds * alpha * (1 - alpha)):
        looks = (f" (with the ratio inverted, min(1, p/q), it would be {inverted:.1%})"
                 if abs(first_kept / n_rounds - inverted) < abs(first_kept / n_rounds - alpha) else "")
        raise wrong(f"{setting}, your round kept its first draft in {first_kept / n_rounds:.1%} of them; Algorithm 2 "
                    f"keeps it with probability sum_x min(p(x), q(x)) = {alpha:.1%} here{looks}",
                    "step 3's test r < min(1, q(x~)/p(x~)), q the target (the oracle), p the draft")
    full_rounds(f, p_model, q_model, ids, n_draft, n_rounds, rng, lengths)
    for other in (1, 3):  # the draft length is an argument: other values of it
        full_rounds(f, p_model, q_model, ids, other, n_rounds // 2, rng)

    # The bonus token of step 4, on its own: with the draft p and n_draft = 1 (a bonus in alpha of the rounds), then
    # with a draft close to q and n_draft = 2 (a bonus in most rounds, and a row early that is not the text's). Each
    # wrong bonus the tests try gives a chi-square many times the critical value here.
    check_bonus(f, p_model, q_model, ids, 1, 1200, rng, "the draft p")
    check_bonus(f, close_draft(), q_model, ids, 2, 800, rng, "a draft close to the target q")
    # The whole output of a round, against its distribution enumerated over a vocabulary of 3.
    check_round_distribution(f, *three_pair(), [2, 0], n_draft, 3000, rng)

    # 2. What comes out: rounds until n_new tokens (any prefix of the output follows q), against q exactly.
    counts = Counter()
    for _ in range(n_runs):
        new = []
        while len(new) < n_new:
            new += sps_rounds(f, p_model, q_model, ids + new, n_draft)(rng)
        counts[tuple(new[:n_new])] += 1
    target = sequence_distribution(q_model, ids, n_new)
    chi2, critical, worst = chi_square(counts, target, n_runs)
    if chi2 > critical:
        first = Counter(seq[0] for seq in counts.elements())
        raise wrong(f"over {n_runs} runs of your rounds from the prompt {ids} (n_draft = {n_draft}), the first {n_new} tokens do "
                    f"not follow the target's distribution: chi-square {chi2:.0f} > {critical:.0f} (alpha = 0.001). "
                    f"The first token came out {show([first[x] / n_runs for x in range(V)], 2)}, q says "
                    f"{show(q1, 2)}; the continuation {list(worst)} came {counts.get(worst, 0)} times, where q "
                    f"expects {n_runs * target[worst]:.0f}",
                    "what each draw samples from: the drafts from p, the resample from (q - p)+ renormalised, the "
                    "bonus from q after all n_draft drafts")


def round_distribution(p_model, q_model, ids, n_draft):
    """{output: probability} of one round of Algorithm 2 from ids, exactly: the drafts x_1..x_m kept (each with
    probability min(p(x), q(x))), then a token z from a rejection ((q - p)+(z): P(reject) times the residual) or,
    after all n_draft, the bonus b from q."""
    dist = Counter()

    def go(kept, weight):
        p = softmax(p_model.forward(ids + list(kept))[-1]).astype(np.float64)
        q = softmax(q_model.forward(ids + list(kept))[-1]).astype(np.float64)
        last = q if len(kept) == n_draft else np.maximum(q - p, 0)
        for z in range(len(q)):
            dist[kept + (z,)] += weight * last[z]
        if len(kept) < n_draft:
            for x in range(len(q)):
                go(kept + (x,), weight * min(p[x], q[x]))
    go((), 1.0)
    return dist


def check_round_distribution(f, p_model, q_model, ids, n_draft, n_rounds, rng):
    """A failure unless n_rounds rounds' outputs follow round_distribution (chi-square, alpha = 0.0001)."""
    expected = round_distribution(p_model, q_model, ids, n_draft)
    counts = Counter(tuple(sps_rounds(f, p_model, q_model, ids, n_draft)(rng)) for _ in range(n_rounds))
    outputs = sorted(set(expected) | set(counts), key=lambda o: (len(o), o))
    chi2, df = pearson([counts[o] for o in outputs], n_rounds * np.array([expected.get(o, 0.0) for o in outputs]))
    critical = critical_value(max(df, 1), 1e-4)
    if chi2 <= critical and all(expected.get(o, 0) > 0 for o in counts):
        return
    worst = max(outputs, key=lambda o: abs(counts[o] - n_rounds * expected.get(o, 0)) / math.sqrt(
        n_rounds * expected.get(o, 0) + 1))
    raise wrong(f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft}, on a draft and a target over 3 "
                f"tokens, your rounds' outputs do not follow Algorithm 2's, enumerated exactly over its "
                f"{len(expected)} possible outputs: chi-square {chi2:.0f} > {critical:.0f} (alpha = 0.0001). The output "
                f"{list(worst)} came {counts[worst]} times, where Algorithm 2 gives it probability "
                f"{expected.get(worst, 0.0):.4f} ({n_rounds * expected.get(worst, 0.0):.0f} expected)",
                "each draw of the round: the drafts from p, each kept with its own r when r < min(1, q(x)/p(x)), the "
                "replacement from (q - p)+, the bonus from q after all n_draft drafts")


def check_bonus(f, p_model, q_model, ids, n_draft, n_rounds, rng, draft_name):
    """A failure unless the bonus tokens of n_rounds rounds follow q after the n_draft drafts, exactly: for each
    drafts d of the rounds that kept all n_draft, the bonus counts against q(. | ids + d) (chi-square, alpha = 1e-4)."""
    run = sps_rounds(f, p_model, q_model, ids, n_draft)
    bonuses = {}  # the n_draft drafts of a round that kept them all -> Counter of its bonus tokens
    for _ in range(n_rounds):
        out = run(rng)
        if len(out) == n_draft + 1:
            bonuses.setdefault(tuple(out[:n_draft]), Counter())[out[n_draft]] += 1

    def after(model, tokens):  # model's next-token distribution after ids + tokens, float64
        return softmax(model.forward(ids + list(tokens))[-1]).astype(np.float64)

    chi2 = df = 0
    for drafts, counts in bonuses.items():  # drafts: a tuple
        c, d = pearson([counts[b] for b in range(SAMPLING_V)], sum(counts.values()) * after(q_model, drafts))
        chi2, df = chi2 + c, df + d
    critical = critical_value(max(df, 1), 1e-4)
    if chi2 <= critical:
        return
    def drafts_text(n):
        if n == 0:
            return "the text alone"
        if n == 1:
            return "the text and the first draft" if n_draft > 1 else "the text and the draft"
        return f"the text and all {n_draft} drafts" if n == n_draft else f"the text and the first {n} drafts"

    def one_more(d):  # q after the drafts and one more token drawn from q: the row after the right one
        q_K = after(q_model, d)
        return sum(q_K[b] * after(q_model, d + (b,)) for b in range(SAMPLING_V))
    candidates = {  # the usual wrong rows, each a distribution for the drafts d
        f"q one row early, after {drafts_text(n_draft - 1)}": lambda d: after(q_model, d[:-1]),
        "q one row late, after the drafts and one more token": one_more,
        f"the draft's p of the last draft, after {drafts_text(n_draft - 1)}": lambda d: after(p_model, d[:-1]),
        f"the draft's p after {drafts_text(n_draft)}": lambda d: after(p_model, d),
        f"the uniform distribution over the {SAMPLING_V} tokens": lambda d: np.full(SAMPLING_V, 1 / SAMPLING_V),
    }
    fits = {}
    for name, dist in candidates.items():
        tests = [pearson([counts[b] for b in range(SAMPLING_V)], sum(counts.values()) * dist(drafts))
                 for drafts, counts in bonuses.items()]
        fits[name] = sum(c for c, _ in tests)
    best = min(fits, key=fits.get)
    drafts, counts = max(bonuses.items(), key=lambda item: sum(item[1].values()))
    m = sum(counts.values())
    looks = (f"; they follow {best} instead: {show(candidates[best](drafts), 2)} there (chi-square {fits[best]:.0f})"
             if fits[best] <= critical else "")
    raise wrong(f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft} and {draft_name}, "
                f"{sum(sum(c.values()) for c in bonuses.values())} kept all n_draft drafts and added a bonus token, and "
                f"those do not follow q after the n_draft drafts: chi-square {chi2:.0f} > {critical:.0f} (alpha = 0.0001, "
                f"{df} degrees of freedom). After the drafts {list(drafts)} ({m} rounds) the bonus came out "
                f"{show([counts[b] / m for b in range(SAMPLING_V)], 2)}, q there is "
                f"{show(after(q_model, drafts), 2)}{looks}",
                "step 4: the bonus is drawn from q after the text and ALL n_draft drafts, the last of the n_draft + 1 rows of "
                "step 2 (row t is q after the first t drafts)")


def reference_sps_round():
    # sps.py runs rounds inline in speculative_sample; its trace records the first round's new tokens.
    from sps import speculative_sample

    def sps_round(draft, oracle, tokens, n_draft, rng):
        stats = Stats(trace=[])
        next(speculative_sample(draft, oracle, tokens, n_draft + 1, n_draft=n_draft, rng=rng, stats=stats))  # Chen et al.'s n_draft
        return stats.trace[0].new
    return sps_round


EXERCISES = (
    Exercise("15", "ex15_sps_round", "sps_round", check_sps_round, reference_sps_round),
)
