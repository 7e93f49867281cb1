"""Part 6, on real text (the learned pair): exercise 22 (acceptance by kind of text) and 23 (the best draft
length); 24 and 25 are part6_tree_lookup.py. The references are at the end: read them after the exercises."""

import functools
import math

import numpy as np

from stats import Stats

from .models import held_out_prompts, learned_pair
from .running import Exercise, attempt, confirmed, show, wrong


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


NEVER_RUN = ("speculative_generate is a generator: it decodes, and fills its Stats, only as you iterate over it "
             "(list(...) or a for loop); until then stats.drafted is 0")
BY_NAME = ("pass n_draft and stats by name: speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft, "
           "stats=stats) (its fifth argument is n_draft)")


def nothing_drafted(f, given):
    """(what more, where to look) for an answer that divided by zero: the same call again, each model's passes
    counted."""
    from .contract import Counted
    draft, oracle, prompts, n_new, n_draft = given
    counted = Counted(draft), Counted(oracle)
    try:
        f(*counted, [(kind, list(ids)) for kind, ids in prompts], n_new, n_draft)
    except Exception:
        pass
    if counted[1].passes == 0:
        return "the oracle ran no forward pass: nothing was decoded", NEVER_RUN
    if counted[0].passes == 0:
        return ("the oracle ran, but the draft never did: the runs drafted nothing", "the arguments you pass on: "
                "speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft, stats=stats), n_new new tokens and "
                "n_draft drafts a round (n_new and n_draft in each other's places leave no room for a draft)")
    return ("the models ran and drafted, but the Stats you divided by counted nothing", "read the Stats you passed to "
            "speculative_generate(..., stats=stats), after the run: a Stats made afresh counts nothing")


nothing_drafted.needs_args = "as they are"  # the call's arguments, the models not copied


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
        (ZeroDivisionError, nothing_drafted), (TypeError, BY_NAME)))
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
        said, hint = diagnose_kind(value, expected, kind, cases, runs, n_new, n_draft, got)
        raise wrong(f"{call}: for {kind!r} ({len(mine)} prompt{'s' if len(mine) > 1 else ''}) you gave {value:.4f}, "
                    f"expected {expected:.4f}: {accepted} of its {drafted} drafts were kept"
                    + (f"; {said}" if said else ""), hint)


def explain_kinds(args, got, expected, f=None):
    """(what went wrong, where to look) for acceptance_by_kind(*args) = got: the first kind whose figure is wrong,
    and the usual mistake that gives it, on every kind."""
    _, _, prompts, n_new, n_draft = args
    if set(got) != set(expected):
        return (f"the kinds are {sorted(expected)}", "the kinds are the keys, one entry per kind however many prompts "
                                                     "it has")
    runs = speculative_runs(prompts, n_new, n_draft)
    kind = next(k for k in expected if abs(got[k] - expected[k]) > 1e-9)
    said, hint = diagnose_kind(got[kind], expected[kind], kind, prompts, runs, n_new, n_draft, got)
    return f"{kind!r} is {got[kind]:.4f}, not {expected[kind]:.4f}" + (f"; {said}" if said else ""), hint


def unknown(value):
    """Whether a suspect has no figure for a kind (None, or False where it does not apply): 0.0 is a figure."""
    return value is None or value is False


@functools.lru_cache(maxsize=None)
def swapped_run(ids, n_new, n_draft):
    """The Stats of speculative_generate with the learned pair's models in each other's places."""
    from speculative import speculative_generate
    draft, oracle, _ = learned_pair()
    stats = Stats()
    list(speculative_generate(oracle, draft, list(ids), n_new, n_draft=n_draft, stats=stats))
    return stats


def diagnose_kind(value, expected, kind, cases, runs, n_new, n_draft, given=None):
    """(what went wrong, where to look) for one kind's wrong figure: the usual mistakes that give exactly it, on this
    kind and, where the answer's figures for every kind are given, on each of them."""
    n_default = default_draft_length()
    given = given or {kind: value}

    def of(k):
        return [(kd, s) for kd, s in runs if kd == k], [case for case in cases if case[0] == k]

    def last_index(k):
        return max(i for i, (kd, _) in enumerate(runs) if kd == k)
    suspects = [  # (a kind -> what the mistake gives for it, or None; what it is; where to look)
        (lambda k: sum(rate([r]) for r in of(k)[0]) / len(of(k)[0]) if len(of(k)[0]) > 1 else None,
         f"that is the mean of its prompts' rates, {show([rate([r]) for r in of(kind)[0]], 4)}, which weighs a prompt "
         "with few drafts like one with many", "pool the kind's counts (its accepted, its drafted), then divide once"),
        (lambda k: per_round_mean(of(k)[0]), f"that is the mean of its {sum(len(s.trace) for _, s in of(kind)[0])} "
         "rounds' rates, which weighs a round of 1 draft like a round of n_draft", "pool the counts of all its rounds "
         "and prompts (stats.accepted, stats.drafted), then divide once"),
        (lambda k: rate(of(k)[0][-1:]) if len(of(k)[0]) > 1 else None, "that is its last prompt's rate alone: the "
         "earlier prompt's counts were replaced, not added to", "add each prompt's counts to its kind's running totals"),
        (lambda k: rate(of(k)[0][:1]) if len(of(k)[0]) > 1 else None, "that is its first prompt's rate alone: the later "
         "prompt's counts were dropped", "add each prompt's counts to its kind's running totals"),
        (lambda k: rate(runs[:last_index(k) + 1]), f"that is the acceptance of the first {last_index(kind) + 1} prompts "
         "together, up to this kind's last one: one Stats carried over from prompt to prompt mixes the kinds",
         "a fresh decoding.Stats() for each prompt"),
        (lambda k: rate(of(k)[0], bottom=new_tokens), f"that is the share of its "
         f"{sum(new_tokens(s) for _, s in of(kind)[0])} new tokens that were drafts", "divide by the drafts proposed "
         "(stats.drafted): every round adds one token of the oracle's own, whether its drafts were kept or not"),
        (lambda k: rate(of(k)[0], bottom=lambda s: s.accepted + s.rejections), "that is accepted / (accepted + "
         "rejections), Leviathan et al.'s alpha (exercise 23's)", "the drafts kept over ALL the drafts proposed: "
                                                                   "stats.drafted"),
        (lambda k: rate(of(k)[0], bottom=lambda s: s.rounds), "that is the drafts kept per round, accepted / rounds",
         "the drafts kept over the drafts proposed: stats.accepted / stats.drafted"),
        (lambda k: 1 - rate(of(k)[0]), "that is the share of its drafts REJECTED, 1 - the acceptance",
         "the drafts the oracle kept over the drafts proposed"),
        (lambda k: 100 * rate(of(k)[0]), "that is a percentage", "the acceptance as a fraction of 1, as the other rates "
                                                                 "here"),
        (lambda k: rate(speculative_runs(of(k)[1], n_new, n_default)) if n_draft != n_default else None,
         f"that is its acceptance with {n_default} drafts per round, speculative_generate's default, not n_draft = "
         f"{n_draft}", "pass the draft length on: n_draft=n_draft"),
        (lambda k: rate([(kd, speculative_run(tuple(ids), n_new + len(ids), n_draft)) for kd, ids in of(k)[1]]),
         "that is its acceptance with n_new + len(prompt) new tokens a prompt", "n_new counts the new tokens alone: "
                                                                                "speculative_generate's n_new"),
        (lambda k: rate([(kd, swapped_run(tuple(ids), n_new, n_draft)) for kd, ids in of(k)[1]]),
         "that is its acceptance with the draft and the oracle in each other's places",
         "speculative_generate(draft, oracle, ...): the small model drafts, the oracle checks"),
    ]
    matches = []
    for candidate, said, hint in suspects:
        try:
            found = candidate(kind)
            if (unknown(found) or math.isclose(found, expected, abs_tol=1e-9)
                    or not math.isclose(value, found, abs_tol=1e-9)):
                continue
            # on every other kind the answer gives what the mistake gives there (the right rate, where it does not apply)
            if all(math.isclose(given[k], rate(of(k)[0]) if unknown(candidate(k)) else candidate(k), abs_tol=1e-9)
                   for k in given if k != kind):
                matches.append((said, hint))
        except Exception:  # a suspect that does not apply to some kind
            continue
    if matches:  # two mistakes can give the same figure: name them all
        return "; or ".join(said for said, _ in matches), "; or ".join(hint for _, hint in matches)
    digits = next((d for d in range(1, 7) if all(math.isclose(given[k], round(rate(of(k)[0]), d), abs_tol=1e-12)
                                                 for k in given)), None)
    if digits is not None:
        return (f"that is each acceptance rounded to {digits} decimal{'s' if digits != 1 else ''}",
                "return each rate as computed: rounding is for printing")
    return "", ("a kind's acceptance is stats.accepted over stats.drafted, added up over its prompts, each decoded with "
                "n_new tokens and n_draft=n_draft (both arguments: the checker varies them)")


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
    from speedup import predicted_speedup
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
            what, hint = explain_draft_length((alpha, c, T), got, best, f)
            raise wrong(f"{call} returned {got!r}, expected n_draft = {best} (predicted speedup {speed[best]:.4f}"
                        + (f", {speed[got]:.4f} at n_draft = {got})" if got in speed else ")")
                        + (f": {what}" if what else ""), hint)


def climbed(score, n_drafts):
    """Where a climb from n_draft = 1 stops: the first n_draft whose next one scores no higher."""
    n_draft = 1
    while n_draft + 1 in n_drafts and score(n_draft + 1) > score(n_draft):
        n_draft += 1
    return n_draft


CURVES = [(0.7, 0.25, {1: 4.0, 2: 4.3, 3: 4.6, 4: 5.1, 5: 5.4, 6: 6.0, 7: 6.3, 8: 6.9, 9: 7.4}),
          (0.5, 0.2, {k: 10.0 * (1 + 0.25 * (k - 1)) for k in range(1, 12)}),
          (0.95, 0.03, {1: 4.0, 2: 4.5, 3: 5.0, 4: 5.4, 5: 8.0, 6: 8.1, 7: 8.2, 8: 8.3, 9: 8.4, 10: 14.0}),
          (0.9, 0.05, {k: 10.0 for k in range(1, 12)}),
          (0.8679, 0.3, {1: 4.0, 2: 4.3, 3: 4.6, 4: 5.1, 5: 5.4, 6: 6.0, 7: 6.3, 8: 6.9, 9: 7.4})]  # a near tie: 3 and 4
# (the curves on which a diagnosis must hold too)


def explain_draft_length(args, got, best, f=None):
    """(what went wrong, where to look) for best_draft_length(*args) = got, where the best is n_draft = best: the
    usual mistakes that give got here and, f given, on CURVES too (all of them where several do)."""
    from speedup import expected_tokens_per_round, predicted_speedup
    alpha, c, T = args
    n_drafts = range(1, max(T))
    speed = {n_draft: predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]) for n_draft in n_drafts}
    index = got == best - 1 and confirmed(f, lambda a, c_, T_: reference_best(a, c_, T_) - 1, CURVES)
    if got == 0 and not index:
        return ("n_draft = 0 is no speculation at all", "n_draft runs from 1 to max(T) - 1: a round drafts at least "
                                                        "one token")
    if got == best + 1 and confirmed(f, lambda a, c_, T_: reference_best(a, c_, T_) + 1, CURVES):
        return (f"{got} is one more than the best n_draft: n_draft + 1 is what the check reads (the last kept token "
                "and the drafts), not the draft length", "return the n_draft of the best score")
    if got not in speed:
        if got == best - 1:
            return (f"{got} is outside 1..{max(T) - 1}, one less than the best n_draft: the index of the best score in "
                    "a list that starts at n_draft = 1", "the n_draft of the best score, not its index (scores[i] is "
                                                         "n_draft = i + 1)")
        return (f"{got} is outside 1..{max(T) - 1}", "n_draft runs from 1 to max(T) - 1: the check of n_draft drafts "
                                                     "reads n_draft + 1 tokens, so T[n_draft + 1] must exist")
    if speed[got] == speed[best]:
        return "the two tie", "on a tie, the smallest n_draft"

    def tokens(alpha, n_draft):
        return expected_tokens_per_round(alpha, n_draft)
    variants = [  # (a curve -> the score of each n_draft, as the mistake computes it; what it is; where to look)
        (lambda a, c, T: lambda n: predicted_speedup(a, n, c), "that is the best n_draft if checking were free, "
         "T[n_draft + 1] = T[1]", "the cost of the check, T[n_draft + 1] / T[1], grows with n_draft"),
        (lambda a, c, T: lambda n: tokens(a, n) / (n * c + T[n] / T[1]), "that is the best n_draft with the check of "
         "n_draft drafts costed at T[n_draft]", "the oracle's pass over n_draft drafts reads n_draft + 1 tokens (the "
                                                "last kept token, then the drafts): T[n_draft + 1]"),
        (lambda a, c, T: lambda n: tokens(a, n) / (T[n + 1] / T[1]), "that is the best n_draft with the drafting free",
         "a round also runs the draft n_draft times: n_draft * c, in oracle passes"),
        (lambda a, c, T: lambda n: tokens(a, n) / ((n + 1) * c + T[n + 1] / T[1]), "that is the best n_draft with "
         "n_draft + 1 draft passes a round", "a round runs the draft n_draft times, once per draft: the oracle's own "
                                             "token needs no draft pass"),
        (lambda a, c, T: lambda n: (n if a == 1 else (1 - a ** n) / (1 - a)) / (n * c + T[n + 1] / T[1]),
         "that is the best n_draft with (1 - alpha^n_draft) / (1 - alpha) tokens a round, the drafts kept alone",
         "a round yields the drafts it keeps AND the oracle's own token: 1 + alpha + ... + alpha^n_draft"),
        (lambda a, c, T: lambda n: tokens(a, n) / (n * c + T[n + 1]), "that is the best n_draft with T[n_draft + 1] in "
         "milliseconds next to n_draft * c, in oracle passes", "T[n_draft + 1] / T[1]: the check in single-token "
                                                               "oracle passes, the unit of c"),
        (lambda a, c, T: lambda n: predicted_speedup(a, n, c, T[n + 1] / T[1]) if n < max(T) - 1 else -1,
         f"that is the best n_draft below {max(T) - 1}: the range stopped one short",
         f"n_draft runs up to max(T) - 1 = {max(T) - 1} inclusive"),
        (lambda a, c, T: lambda n: tokens(a, n), "that is the n_draft with the most tokens per round, whatever the "
         "round costs", "score tokens per round OVER the round's cost: n_draft * c + T[n_draft + 1] / T[1]"),
        (lambda a, c, T: lambda n: -predicted_speedup(a, n, c, T[n + 1] / T[1]), "that is the n_draft with the LOWEST "
         "predicted speedup", "the most tokens per unit of cost: the largest score"),
        (lambda a, c, T: lambda n: tokens(min(a, 1 - 1e-6), n) / (n * c + T[n + 1] / T[1]), "that is the best n_draft "
         "for an alpha a hair below 1: at alpha = 1 exactly a round yields n_draft + 1 tokens, and an alpha nudged to "
         "dodge 0 / 0 scores the longer rounds a little lower", "alpha = 1 needs its own case, n_draft + 1 tokens a "
                                                                 "round: decoding.py's expected_tokens_per_round has both"),
    ] + [(lambda a, c, T, d=d: lambda n: round(predicted_speedup(a, n, c, T[n + 1] / T[1]), d),
          f"that compares the scores rounded to {d} decimals: here {speed[got]:.6g} at n_draft = {got} and "
          f"{speed[best]:.6g} at {best} round alike", "compare the scores as computed") for d in (1, 2)]
    matches = [(said, hint) for score, said, hint in variants if best_by(score(alpha, c, T), n_drafts) == got
               and confirmed(f, lambda a, c_, T_, score=score: best_by(score(a, c_, T_), range(1, max(T_))), CURVES)]
    if alpha == 1 and got == max(T) - 1:
        matches.insert(0, (f"at alpha = 1 every round yields n_draft + 1 tokens, but the longest n_draft is not the "
                           f"best when checking n_draft + 1 tokens costs T[n_draft + 1] / T[1] = {T[got + 1] / T[1]:g} "
                           "single-token passes", "alpha = 1 needs its own tokens per round, n_draft + 1, not its own "
                                                  "answer: score every n_draft as for any alpha"))
    if got == climbed(speed.get, n_drafts) and got < best:
        matches.append((f"that is where a climb from n_draft = 1 stops, at the first n_draft whose next one scores "
                        f"lower; on this curve the speedup falls after n_draft = {got} and rises again, to its best at "
                        f"n_draft = {best}", "score every n_draft from 1 to max(T) - 1: a measured cost curve is uneven "
                                             "(exercise 21), so the speedup can fall and rise again"))
    if index:
        matches.append((f"{got} is one less than the best n_draft: the index of the best score in a list that starts "
                        "at n_draft = 1", "the n_draft of the best score, not its index (scores[i] is n_draft = i + 1)"))
    if matches:  # several mistakes can give the same n_draft: name them all
        return "; or ".join(said for said, _ in matches), "; or ".join(dict.fromkeys(hint for _, hint in matches))
    return (f"the predicted speedups for n_draft = 1..{max(T) - 1} are {show(list(speed.values()), 4)}",
            "score each n_draft by tokens per round, (1 - alpha^(n_draft+1)) / (1 - alpha) (n_draft + 1 at alpha = 1), "
            "over the round's cost in oracle passes, n_draft * c + T[n_draft + 1] / T[1]")


def reference_best(alpha, c, T):
    from speedup import predicted_speedup
    return best_by(lambda n: predicted_speedup(alpha, n, c, T[n + 1] / T[1]), range(1, max(T)))


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
    from speedup import predicted_speedup
    return lambda alpha, c, T: max(range(1, max(T)), key=lambda n_draft: (predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]), -n_draft))


EXERCISES = (
    Exercise("22", "ex22_acceptance_by_kind", "acceptance_by_kind", check_acceptance_by_kind,
             reference_acceptance_by_kind),
    Exercise("23", "ex23_best_draft_length", "best_draft_length", check_best_draft_length, reference_best_draft_length),
)
