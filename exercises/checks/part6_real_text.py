"""Part 6, on real text (the learned pair): exercise 22 (acceptance by kind of text), 23 (the best draft
length), 24 (which path a tree round keeps) and 25 (prompt lookup's acceptance, replayed from the text).
The references (at the end, and exercise 25's replay beside its check): read them after the exercises."""

import functools
import math

import numpy as np

from decoding import Stats

from .models import held_out_prompts, learned_pair
from .running import Endless, Exercise, attempt, fresh, show, wrong


# --- exercise 22: acceptance by kind of text -----------------------------------

@functools.lru_cache(maxsize=None)
def speculative_run(ids, n_new, n_draft):
    """The Stats, rounds traced, of greedy speculative decoding of n_new tokens after ids (a tuple), n_draft
    drafts a round, on the learned pair."""
    from speculative import speculative_generate
    draft, oracle, _ = learned_pair()
    stats = Stats(trace=[])
    list(speculative_generate(draft, oracle, list(ids), n_new, n_draft=n_draft, stats=stats))
    return stats


def speculative_runs(prompts, n_new, n_draft):
    """[(kind, Stats)]: greedy speculative decoding on each (kind, ids) of prompts, on the learned pair."""
    return [(kind, speculative_run(tuple(ids), n_new, n_draft)) for kind, ids in prompts]


def rate(runs, top=lambda s: s.accepted, bottom=lambda s: s.drafted):
    """sum(top) / sum(bottom) over the runs' Stats (None when the bottom is 0)."""
    total = sum(bottom(s) for _, s in runs)
    return sum(top(s) for _, s in runs) / total if total else None


def new_tokens(stats):
    """How many tokens a run made (one flag per token in from_draft: a kept draft or not)."""
    return len(stats.from_draft)


def per_round_mean(runs):
    """The mean over the runs' rounds (those with drafts) of each round's accepted / drafted: not a pooled rate."""
    rates = [r.accepted / len(r.drafted) for _, s in runs for r in s.trace if r.drafted]
    return sum(rates) / len(rates) if rates else None


def default_draft_length():
    import inspect
    from speculative import speculative_generate
    return inspect.signature(speculative_generate).parameters["n_draft"].default


def check_acceptance_by_kind(f):
    for n_new, n_draft in ((16, 4), (12, 3)):  # every argument varies: one ignored fails the second
        check_kinds(f, n_new, n_draft)


def check_kinds(f, n_new, n_draft):
    draft, oracle, _ = learned_pair()
    prompts = list(held_out_prompts())
    # One kind gets a second prompt whose drafts differ from the first prompt's in number and in rate: then
    # pooling the kind's counts and averaging its prompts' rates give different figures.
    first = speculative_run(prompts[0][1], n_new, n_draft)

    def differs(ids):
        other = speculative_run(ids, n_new, n_draft)
        return other.drafted != first.drafted and other.accepted * first.drafted != first.accepted * other.drafted
    second = next((ids for _, ids in prompts[1:] if differs(ids)), prompts[1][1])
    cases = prompts + [(prompts[0][0], second)]
    kinds = list(dict.fromkeys(kind for kind, _ in cases))
    call = (f"acceptance_by_kind(draft, oracle, <{len(cases)} prompts of the kinds "
            f"{', '.join(kind for kind, _ in cases)}>, n_new={n_new}, n_draft={n_draft})")
    got = attempt(call, f, draft, oracle, [(kind, list(ids)) for kind, ids in cases], n_new, n_draft, hints=(
        (ZeroDivisionError, "speculative_generate is a generator: it decodes, and fills its Stats, only as you "
                            "iterate over it (list(...) or a for loop); until then stats.drafted is 0"),))
    if set(got) != set(kinds):
        raise wrong(f"{call} returned {got!r}; expected a dict with one entry per kind: {kinds}",
                    "the kinds are the keys, one entry per kind however many prompts it has")
    runs = speculative_runs(cases, n_new, n_draft)
    for kind in kinds:
        mine = [(kd, s) for kd, s in runs if kd == kind]
        expected = rate(mine)
        value = got[kind]
        if math.isclose(value, expected, abs_tol=1e-9):
            continue
        drafted, accepted = sum(s.drafted for _, s in mine), sum(s.accepted for _, s in mine)
        what = (f"{call}: for {kind!r} ({len(mine)} prompt{'s' if len(mine) > 1 else ''}) you gave {value:.4f}, "
                f"expected {expected:.4f}: {accepted} of its {drafted} drafts were kept")
        raise diagnose_kind(value, expected, what, kind, cases, runs, n_new, n_draft)


def diagnose_kind(value, expected, what, kind, cases, runs, n_new, n_draft):
    """The failure for one kind's wrong figure: the first of the usual mistakes that gives exactly that figure."""
    mine = [(kd, s) for kd, s in runs if kd == kind]
    last = max(i for i, (kd, _) in enumerate(runs) if kd == kind)
    n_default = default_draft_length()
    suspects = [
        (len(mine) > 1 and sum(rate([r]) for r in mine) / len(mine),
         f"that is the mean of its prompts' rates, {show([rate([r]) for r in mine], 4)}, which weighs a prompt "
         "with few drafts like one with many", "pool the kind's counts (its accepted, its drafted), then divide once"),
        (per_round_mean(mine), f"that is the mean of its {sum(len(s.trace) for _, s in mine)} rounds' rates, "
         "which weighs a round of 1 draft like a round of n_draft", "pool the counts of all its rounds and prompts "
         "(stats.accepted, stats.drafted), then divide once"),
        (len(mine) > 1 and rate(mine[-1:]), "that is its last prompt's rate alone: the earlier prompt's counts were "
         "replaced, not added to", "add each prompt's counts to its kind's running totals"),
        (len(mine) > 1 and rate(mine[:1]), "that is its first prompt's rate alone: the later prompt's counts were "
         "dropped", "add each prompt's counts to its kind's running totals"),
        (rate(runs[:last + 1]), f"that is the acceptance of the first {last + 1} prompts together, up to this kind's "
         "last one: one Stats carried over from prompt to prompt mixes the kinds",
         "a fresh decoding.Stats() for each prompt"),
        (rate(mine, bottom=new_tokens), f"that is the share of its {sum(new_tokens(s) for _, s in mine)} new "
         "tokens that were drafts", "divide by the drafts proposed (stats.drafted): every round adds one token of "
         "the oracle's own, whether its drafts were kept or not"),
        (rate(mine, bottom=lambda s: s.accepted + s.rejections), "that is accepted / (accepted + rejections), "
         "Leviathan et al.'s alpha (exercise 23's)", "the drafts kept over ALL the drafts proposed: stats.drafted"),
        (100 * expected, "that is a percentage", "the acceptance as a fraction of 1, as the other rates here"),
        (n_draft != n_default and rate(speculative_runs([case for case in cases if case[0] == kind], n_new,
                                                          n_default)),
         f"that is its acceptance with {n_default} drafts per round, speculative_generate's default, not n_draft = "
         f"{n_draft}", "pass the draft length on: n_draft=n_draft"),
    ]
    matches = [(said, hint) for candidate, said, hint in suspects if candidate is not False and candidate is not None
               and not math.isclose(candidate, expected, abs_tol=1e-9) and math.isclose(value, candidate, abs_tol=1e-9)]
    if matches:  # two mistakes can give the same figure: name them all
        return wrong(f"{what}; " + "; or ".join(said for said, _ in matches), "; or ".join(hint for _, hint in matches))
    return wrong(what, "a kind's acceptance is stats.accepted over stats.drafted, added up over its prompts, each "
                       "decoded with n_new tokens and n_draft=n_draft (both arguments: the checker varies them)")


# --- exercise 23: the best draft length ------------------------------------------

@functools.lru_cache(maxsize=1)
def learned_alpha():
    """The learned pair's alpha on the held-out prompts, as Leviathan et al. define it (each draft kept with
    probability alpha once the ones before it were): accepted / (accepted + rejections), a rejection ending a round."""
    runs = speculative_runs(held_out_prompts(), 16, 4)
    return rate(runs, bottom=lambda s: s.accepted + s.rejections)


def best_by(score, n_drafts):
    """The n_draft with the highest score, the smallest on a tie."""
    return max(n_drafts, key=lambda n_draft: (score(n_draft), -n_draft))


def curves():
    """(alpha, c, T) cases: hand-made ones, the learned pair's alpha, a curve on which the speedup falls and rises
    again, then 400 random ones (seeded): concave curves (each token costs less than the last, as a forward bound
    by its weight traffic) and uneven ones (kernels that change at a row count, noise), alpha and c over their range."""
    flat = {k: 10.0 for k in range(1, 12)}
    steep = {k: 10.0 * (1 + 0.25 * (k - 1)) for k in range(1, 12)}
    cpu = {1: 4.0, 2: 4.3, 3: 4.6, 4: 5.1, 5: 5.4, 6: 6.0, 7: 6.3, 8: 6.9, 9: 7.4}  # a small model's, uneven
    step = {1: 10.0, 2: 10.0, 3: 20.0, 4: 20.0}  # a kernel that changes at 3 rows
    dip = {1: 4.0, 2: 4.5, 3: 5.0, 4: 5.4, 5: 8.0, 6: 8.1, 7: 8.2, 8: 8.3, 9: 8.4, 10: 14.0}  # slower from 5 rows on
    cases = [(0.8, 0.1, {1: 10.0, 2: 12.0, 3: 13.0}), (0.5, 0.2, steep), (0.9, 0.05, flat), (0.7, 0.25, cpu),
             (0.8, 0.1, step), (0.83, 0.265, cpu), (0.95, 0.03, dip),
             (1.0, 0.1, steep), (1.0, 0.1, step), (0.0, 0.1, flat), (0.0, 0.0, flat),
             (learned_alpha(), 0.3, cpu), (learned_alpha(), 0.1, flat)]
    rng = np.random.default_rng(23)
    for i in range(400):
        n, t1 = int(rng.integers(3, 17)), float(rng.uniform(2, 60))
        if i % 2:
            steps = rng.uniform(0, 0.3, n - 1) * (rng.random(n - 1) < 0.7) + rng.uniform(0, 1.2, n - 1) * (
                rng.random(n - 1) < 0.15) - rng.uniform(0, 0.15, n - 1) * (rng.random(n - 1) < 0.2)
            ratios = np.concatenate([[1.0], 1.0 + np.cumsum(steps)])
        else:
            ratios = np.arange(1, n + 1) ** rng.uniform(0.05, 0.9)
        alpha = float(rng.choice([rng.uniform(0, 1), rng.uniform(0.85, 1)]))
        cases.append((round(alpha, 4), round(float(rng.uniform(0, 0.5)), 3),
                      {k: round(t1 * float(max(r, 0.2)), 3) for k, r in enumerate(ratios, 1)}))
    return cases


def check_best_draft_length(f):
    from decoding import predicted_speedup
    for alpha, c, T in curves():
        n_drafts = range(1, max(T))
        call = f"best_draft_length(alpha={alpha:.4g}, c={c}, T={{{', '.join(f'{k}: {v:g}' for k, v in T.items())}}})"
        got = attempt(call, f, alpha, c, dict(T), hints=(
            (ZeroDivisionError, "with alpha = 1 every draft is kept: a round yields n_draft + 1 tokens, and the "
                                "formula's (1 - alpha^(n_draft+1)) / (1 - alpha) is 0 / 0 there"),
            (KeyError, f"n_draft runs from 1 to max(T) - 1 = {max(T) - 1}: the check of n_draft drafts reads n_draft "
                       "+ 1 tokens, and T[n_draft + 1] must be measured")))
        speed = {n_draft: predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]) for n_draft in n_drafts}
        best = best_by(speed.get, n_drafts)
        if got != best:
            raise diagnose_draft_length(call, alpha, c, T, speed, best, got)


def climbed(score, n_drafts):
    """Where a climb from n_draft = 1 stops: the first n_draft whose next one scores no higher."""
    n_draft = 1
    while n_draft + 1 in n_drafts and score(n_draft + 1) > score(n_draft):
        n_draft += 1
    return n_draft


def diagnose_draft_length(call, alpha, c, T, speed, best, got):
    from decoding import expected_tokens_per_round, predicted_speedup
    n_drafts = range(1, max(T))
    what = f"{call} returned {got!r}, expected n_draft = {best} (predicted speedup {speed[best]:.4f})"
    if got not in speed:
        index = (", one less than the best n_draft: the index of the best score in a list that starts at n_draft = 1"
                 if got == best - 1 else "")
        return wrong(f"{what}: {got} is outside 1..{max(T) - 1}{index}",
                     "the n_draft of the best score, not its index (scores[i] is n_draft = i + 1)" if index else
                     "n_draft runs from 1 to max(T) - 1: the check of n_draft drafts reads n_draft + 1 tokens, so "
                     "T[n_draft + 1] must exist")
    what = what[:-1] + f", {speed[got]:.4f} at n_draft = {got})"
    if speed[got] == speed[best]:
        return wrong(f"{what}: the two tie", "on a tie, the smallest n_draft")
    if alpha == 1 and got == max(T) - 1:
        return wrong(f"{what}: at alpha = 1 every round yields n_draft + 1 tokens, but the longest n_draft is not the "
                     f"best when checking n_draft + 1 tokens costs T[n_draft + 1] / T[1] = {T[got + 1] / T[1]:g} "
                     "single-token passes", "alpha = 1 needs its own tokens per round, n_draft + 1, not its own "
                     "answer: score every n_draft as for any alpha")
    tokens = lambda n_draft: expected_tokens_per_round(alpha, n_draft)  # noqa: E731
    last = max(T) - 1
    variants = [
        (lambda n: predicted_speedup(alpha, n, c), "that is the best n_draft if checking were free, "
         "T[n_draft + 1] = T[1]", "the cost of the check, T[n_draft + 1] / T[1], grows with n_draft"),
        (lambda n: tokens(n) / (n * c + T[n] / T[1]), "that is the best n_draft with the check of n_draft drafts costed "
         "at T[n_draft]", "the oracle's pass over n_draft drafts reads n_draft + 1 tokens (the last kept token, then "
                          "the drafts): T[n_draft + 1]"),
        (lambda n: tokens(n) / (T[n + 1] / T[1]), "that is the best n_draft with the drafting free",
         "a round also runs the draft n_draft times: n_draft * c, in oracle passes"),
        (lambda n: tokens(n) / ((n + 1) * c + T[n + 1] / T[1]), "that is the best n_draft with n_draft + 1 draft "
         "passes a round", "a round runs the draft n_draft times, once per draft: the oracle's own token needs no "
                           "draft pass"),
        (lambda n: (n if alpha == 1 else (1 - alpha ** n) / (1 - alpha)) / (n * c + T[n + 1] / T[1]),
         "that is the best n_draft with (1 - alpha^n_draft) / (1 - alpha) tokens a round, the drafts kept alone",
         "a round yields the drafts it keeps AND the oracle's own token: 1 + alpha + ... + alpha^n_draft"),
        (lambda n: tokens(n) / (n * c + T[n + 1]), "that is the best n_draft with T[n_draft + 1] in milliseconds next "
         "to n_draft * c, in oracle passes", "T[n_draft + 1] / T[1]: the check in single-token oracle passes, the "
                                             "unit of c"),
        (lambda n: speed[n] if n < last else -1, f"that is the best n_draft below {last}: the range stopped one "
         "short", f"n_draft runs up to max(T) - 1 = {last} inclusive"),
    ]
    matches = [(said, hint) for score, said, hint in variants if best_by(score, n_drafts) == got]
    if got == climbed(speed.get, n_drafts) and got < best:
        matches.append((f"that is where a climb from n_draft = 1 stops, at the first n_draft whose next one scores "
                        f"lower; on this curve the speedup falls after n_draft = {got} and rises again, to its best at "
                        f"n_draft = {best}", "score every n_draft from 1 to max(T) - 1: a measured cost curve is uneven "
                                             "(exercise 21), so the speedup can fall and rise again"))
    if got == best - 1:
        matches.append((f"{got} is one less than the best n_draft: the index of the best score in a list that starts "
                        "at n_draft = 1", "the n_draft of the best score, not its index (scores[i] is n_draft = i + 1)"))
    if matches:  # several mistakes can give the same n_draft: name them all
        return wrong(f"{what}; " + "; or ".join(said for said, _ in matches), "; or ".join(hint for _, hint in matches))
    return wrong(what, "score each n_draft by tokens per round, (1 - alpha^(n_draft+1)) / (1 - alpha), over the "
                       "round's cost in oracle passes, n_draft * c + T[n_draft + 1] / T[1]")


# --- exercise 24: which path a tree round keeps --------------------------------------

def check_tree_path(f):
    from tree import Node, accepted_path, tree_generate
    #   root ─┬─ 0 (11) ─┬─ 2 (13) ── 5 (16)
    #         │          └─ 3 (14)
    #         └─ 1 (12) ── 4 (15)
    parents, tokens = [-1, -1, 0, 0, 1, 2], [11, 12, 13, 14, 15, 16]
    cases = [(parents, tokens, [12, 15, 0, 0, 0, 0, 0]),  # choice[i] read after node i would go on to node 4
             (parents, tokens, [12, 0, 15, 0, 0, 0, 0]), (parents, tokens, [11, 13, 0, 16, 0, 0, 0]),
             (parents, tokens, [11, 14, 0, 0, 0, 0, 0]), (parents, tokens, [11, 15, 0, 0, 0, 0, 0]),
             ([-1, 0, 1], [5, 6, 7], [5, 6, 7, 8]), ([-1, 0, 1], [5, 6, 7], [9, 6, 7, 8]), ([], [], [3]),
             # real-size ids: GPT-2's " The", " Python", <|endoftext|>, " a", "."
             (parents, [464, 11361, 50256, 3290, 257, 13], [11361, 0, 257, 0, 0, 0, 0]),
             "learned"]
    shift_ruled_out = False
    for case in cases:
        if case == "learned":  # the rounds of two tree runs on the learned pair, each with the path it kept
            draft, oracle, _ = learned_pair()
            stats = Stats(trace=[])
            for _, ids in held_out_prompts()[:2]:
                list(tree_generate(draft, oracle, list(ids), 12, n_draft=4, branch=2, confidence=0.6, stats=stats))
            rounds = [(r.details.parents, r.drafted, r.oracle, r.details.path) for r in stats.trace]
        else:
            rounds = [case]
        for parents, tokens, choice, *kept in rounds:
            expected = accepted_path([Node(t, p, 0) for t, p in zip(tokens, parents)], choice)
            assert not kept or kept[0] == expected  # the reference is the round's own path
            diagnose_tree_path(f, parents, tokens, choice, expected, shift_ruled_out)
            # passed: if reading choice[i] after node i gives another path here, that was not the mistake
            shift_ruled_out = shift_ruled_out or expected not in shifted_paths(parents, tokens, choice)


def shifted_paths(parents, tokens, choice):
    """The paths of two misreadings of choice: choice[i] after node i (choice[0] or choice[-1] after the root)."""
    return [path_after(parents, tokens, lambda i: choice[max(i, 0)]), path_after(parents, tokens, lambda i: choice[i])]


def path_after(parents, tokens, choice_after, same=lambda a, b: a == b):
    """The root path that follows choice_after(i), the token wanted after node i (-1: the root)."""
    path, at = [], -1
    while (child := next((j for j, p in enumerate(parents) if p == at and same(tokens[j], choice_after(at))),
                         None)) is not None:
        path.append(child)
        at = child
    return path


def diagnose_tree_path(f, parents, tokens, choice, expected, shift_ruled_out=False):
    call = f"accepted_path(parents={list(parents)}, tokens={list(tokens)}, choice={list(choice)})"
    given = (fresh(tokens), fresh(choice))
    got = attempt(call, f, list(parents), *given, hints=(
        (IndexError, "choice has one entry more than there are nodes: choice[0] after the root, choice[i + 1] after "
                     "node i"),))
    if got == expected:
        return
    what = f"{call} returned {got}, expected {expected}"
    if got == expected[::-1]:
        raise wrong(f"{what}: that is the path leaf first", "the path root first: the node after the root, then its "
                                                             "child, down to the deepest node kept")
    if tokens and max(tokens) > 256 and got == path_after(parents, given[0], lambda i: given[1][i + 1],
                                                          same=lambda a, b: a is b):
        raise wrong(f"{what}: that is the path with `is` for `==`", "compare token ids with ==, not `is`: `is` asks whether two ints are "
                                                 "the same object, and CPython shares the objects of -5..256 only")
    if got == [tokens[i] for i in expected] or not all(0 <= i < len(parents) for i in got):
        raise wrong(f"{what}: {'those are the path tokens' if got == [tokens[i] for i in expected] else 'not node indices'}",
                    f"return the nodes' indices (0 to {len(parents) - 1}), root first, not their tokens")
    d = next(d for d in range(len(got) + 1) if d == len(got) or d == len(expected) or got[d] != expected[d])
    at = got[d - 1] if d else -1
    here = "the root" if at == -1 else f"node {at}"
    want = int(choice[at + 1])
    index_hint = ("the oracle's choice after node i is choice[i + 1], after the root choice[0]"
                  if not shift_ruled_out and got in shifted_paths(parents, tokens, choice) else None)
    if d == len(got):
        first_child = min(j for j, p in enumerate(parents) if p == at)
        hints = [h for h in (index_hint, expected[d] != first_child and (
            f"every child of the last node kept, not its first only (node {first_child}): siblings carry the draft's "
            "other guesses")) if h]
        raise wrong(f"{what}: after {here} the oracle chose {want} (choice[{at + 1}]), and node {expected[d]}, a child of "
                    f"{here}, has that token: the path goes on", "; or ".join(hints) or
                    "keep stepping down while a child of the last node has the oracle's choice: stop only when none has")
    g = got[d]
    if parents[g] != at:
        raise wrong(f"{what}: node {g} is not a child of {here} (its parent is "
                    f"{'the root' if parents[g] == -1 else f'node {parents[g]}'})",
                    index_hint or "each step goes to a child of the last node kept: parents[j] == that node")
    if d == len(expected):
        raise wrong(f"{what}: after {here} the oracle chose {want} (choice[{at + 1}]), and no child of {here} has it "
                    f"(node {g}'s token is {tokens[g]}): the round keeps nothing more",
                    index_hint or "a node is kept only when its token is the oracle's choice after its parent")
    raise wrong(f"{what}: after {here} the oracle chose {want} (choice[{at + 1}]): node {expected[d]} has that token, "
                f"node {g} has {tokens[g]}",
                index_hint or "among the children of the last node kept, the one whose token is the oracle's choice")


# --- exercise 25: prompt lookup, replayed from the text ------------------------------

class GuardedTokens(list):
    """A list of token ids that gives up when read far more often than a replay of it needs (an endless loop)."""

    def __init__(self, tokens):
        super().__init__(tokens)
        self.reads, self.limit = 0, 200 * len(tokens) + 10000

    def read(self):
        self.reads += 1
        if self.reads > self.limit:
            raise Endless(f"it read the text {self.limit} times, and the replay of a text of {super().__len__()} "
                          f"tokens takes at most one round per token", "a round moves i past the accepted drafts AND "
                          "the oracle's own token: at least one token a round")

    def __len__(self):
        self.read()
        return super().__len__()

    def __getitem__(self, index):
        self.read()
        return super().__getitem__(index)


def replay(tokens, n_prompt, n_draft, max_tail=3, step=1, room=1, prefix=True, start=None, see=0, empty_rounds=True):
    """The replay of prompt lookup, and the usual ways to get it wrong: step (how far i moves past the kept
    drafts), room (the cut min(n_draft, len(tokens) - i - room), None: no cut), prefix (False: count every match),
    start (None: n_prompt), see (tokens past i the lookup reads), empty_rounds (False: a round without drafts
    is not counted)."""
    from ngram import NGramDrafter
    drafter = NGramDrafter(n=max_tail + 1)
    drafted = accepted = rounds = 0
    i = n_prompt if start is None else start
    while i < len(tokens) and rounds < 10 * len(tokens):
        guesses = drafter.lookup(tokens[:i + see], n_draft if room is None else min(n_draft, len(tokens) - i - room))
        matches = [g == t for g, t in zip(guesses, tokens[i:])]
        n = (matches.index(False) if False in matches else len(matches)) if prefix else sum(matches)
        drafted, accepted, rounds = drafted + len(guesses), accepted + n, rounds + (1 if guesses or empty_rounds else 0)
        i += max(n + step, 1)
    return drafted, accepted, rounds


def reference_replay_lookup():
    def replay_lookup(tokens, n_prompt, n_draft, max_tail=3):
        return replay(tokens, n_prompt, n_draft, max_tail)
    return replay_lookup


def check_lookup_replay(f):
    from ngram import NGramDrafter, ngram_generate
    from speculative import greedy_generate

    class LookupOnly(NGramDrafter):  # prompt lookup alone: no n-gram table behind it
        def from_table(self, tokens, k):
            return []

    n_new = 20
    # (n_draft, max_tail): the first setting is checked against prompt lookup's own runs, the others vary every argument
    settings = ((4, 3), (2, 3), (3, 1))
    # A hand-made text first: prompt lookup guesses [3, 4, 5, 6] where the text goes on [3, 9, 5, 6].
    hand_made = [1, 2, 3, 4, 5, 6, 1, 2, 3, 9, 5, 6, 7, 8, 2, 3]
    for text in ["hand-made", "import os\nimport sys\nimport json\nimport os\nimport sys\nimport"] + \
            [ids for _, ids in held_out_prompts()]:
        if text == "hand-made":
            ids, tokens = hand_made[:8], hand_made
        else:
            draft, oracle, encode = learned_pair()
            ids = encode(text) if isinstance(text, str) else list(text)  # a text that repeats, then the prompts
            tokens = list(ids) + list(greedy_generate(oracle, list(ids), n_new))
        for n_draft, max_tail in settings:
            measured = replay(tokens, len(ids), n_draft, max_tail)
            if text == "hand-made":
                source = f"the replay of this hand-made text, {tokens}, counts {measured}"
            elif (n_draft, max_tail) == settings[0]:
                stats = Stats()
                list(ngram_generate(oracle, list(ids), n_new, n_draft=n_draft, drafter=LookupOnly(n=max_tail + 1),
                                    stats=stats))
                assert measured == (stats.drafted, stats.accepted, stats.rounds)  # the replay predicts the run
                source = (f"prompt lookup's run on the learned oracle, {n_new} tokens after a prompt of {len(ids)}, "
                          f"counted {measured}")
            else:
                source = (f"on the learned oracle's text, {n_new} tokens after a prompt of {len(ids)}, prompt lookup "
                          f"replayed counts {measured}")
            check_replay(f, tokens, len(ids), n_draft, max_tail, measured, source)


def check_replay(f, tokens, n_prompt, n_draft, max_tail, measured, source):
    call = f"replay_lookup(<{len(tokens)} tokens>, n_prompt={n_prompt}, n_draft={n_draft}, max_tail={max_tail})"
    got = attempt(call, f, GuardedTokens(tokens), n_prompt, n_draft, max_tail)
    if got == measured:
        return
    what = f"{call} returned {got} (drafted, accepted, rounds); {source}"
    variants = [
        (dict(start=0), "that is a replay from the start of the prompt",
         "the run begins after the prompt: i = n_prompt"),
        (dict(see=1), "that is a replay whose lookup also sees tokens[i], the token the round is about to guess",
         "lookup(tokens[:i], ...): the text so far, never what the oracle has not written yet"),
        (dict(see=len(tokens)), "that is a replay whose lookup reads the whole text, the future included",
         "lookup(tokens[:i], ...): the text so far, never what the oracle has not written yet"),
        (dict(prefix=False), "that is a replay that counts every draft matching its position",
         "the oracle keeps the drafts only up to the first one that differs from tokens[i:]"),
        (dict(room=0), "that is a replay whose last round may draft up to the end of the text",
         "the cut is min(n_draft, len(tokens) - i - 1): the oracle's own token must still fit, as in ngram_generate"),
        (dict(room=None), "that is a replay that always asks for n_draft drafts",
         "the cut is min(n_draft, len(tokens) - i - 1): near the end, fewer drafts fit"),
        (dict(empty_rounds=False), "that is a replay that does not count the rounds whose lookup found nothing",
         "a round without drafts is still an oracle pass, and adds the oracle's one token"),
        (dict(step=2), "that is a replay that moves i two tokens past the kept drafts",
         "i moves past the kept drafts and the oracle's one token: n + 1"),
        (dict(max_tail=3), f"that is the replay with max_tail = 3, the default, not {max_tail}",
         "pass max_tail on to the lookup (NGramDrafter(n=max_tail + 1), or your lookup's max_tail)"),
        (dict(n_draft=4), f"that is the replay with n_draft = 4, not {n_draft}",
         "the argument n_draft: the checker varies it"),
    ]
    for settings, said, hint in variants:
        if replay(tokens, n_prompt, **{"n_draft": n_draft, "max_tail": max_tail, **settings}) == got:
            raise wrong(f"{what}; {said}", hint)
    if got[2] != measured[2]:
        hint = "one round per oracle pass: it keeps the matching drafts, then adds the oracle's own token"
    elif got[0] != measured[0]:
        hint = ("each round drafts lookup(tokens[:i], min(n_draft, len(tokens) - i - 1)) (your own lookup from exercise "
                "16 too: does `pytest exercises/ -k ex16` pass?)")
    else:
        hint = "count the drafts that match tokens[i:] from the first, stopping at the first miss"
    raise wrong(what, hint)


def reference_acceptance_by_kind():
    from speculative import speculative_generate

    def acceptance_by_kind(draft, oracle, prompts, n_new, n_draft):
        counts = {}
        for kind, ids in prompts:
            stats = Stats()
            list(speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft, stats=stats))
            drafted, accepted = counts.get(kind, (0, 0))
            counts[kind] = (drafted + stats.drafted, accepted + stats.accepted)
        return {kind: accepted / drafted for kind, (drafted, accepted) in counts.items()}
    return acceptance_by_kind


def reference_best_draft_length():
    from decoding import predicted_speedup
    return lambda alpha, c, T: max(range(1, max(T)), key=lambda n_draft: (predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]), -n_draft))


def reference_tree_path():
    from tree import Node, accepted_path
    return lambda parents, tokens, choice: accepted_path([Node(t, p, 0) for t, p in zip(tokens, parents)], choice)


EXERCISES = (
    Exercise("22", "ex22_acceptance_by_kind", "acceptance_by_kind", check_acceptance_by_kind,
             reference_acceptance_by_kind),
    Exercise("23", "ex23_best_draft_length", "best_draft_length", check_best_draft_length, reference_best_draft_length),
    Exercise("24", "ex24_tree_path", "accepted_path", check_tree_path, reference_tree_path),
    Exercise("25", "ex25_lookup_replay", "replay_lookup", check_lookup_replay, reference_replay_lookup),
)
