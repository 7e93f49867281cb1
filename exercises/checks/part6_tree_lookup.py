"""Part 6, on real text (the learned pair), continued: exercise 24 (which path a tree round keeps) and 25 (prompt
lookup's acceptance, replayed from the text). The references (at the end, and exercise 25's replay beside its
check): read them after the exercises."""

from stats import Stats

from .models import held_out_prompts, learned_pair
from .running import Endless, Exercise, attempt, confirmed, fresh, wrong


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


CHOICE = ("the indices into choice, which has one entry more than there are nodes: choice[0] after the root (the walk "
          "starts at the root, -1: its children have parents[j] == -1), choice[i + 1] after node i, i a node's index "
          "(0 to n - 1), never its token")


TREES = [([-1, -1, 0, 0, 1, 2], [11, 12, 13, 14, 15, 16], [11, 13, 0, 16, 0, 0, 0]), ([-1, 0, 1], [5, 6, 7], [5, 6, 7, 8]),
         ([-1, 0, 0], [1, 0, 2], [1, 2, 0, 0]),
         ([-1, 0, 1], [1, 2, 3], [1, 2, 3, 9])]  # trees on which a diagnosis must hold too (tokens that are indices)


def path_under_tokens(parents, tokens, choice):
    """The path of a walk that, after keeping node j, goes on under its token tokens[j] as if it were an index."""
    path, at = [], -1
    while (child := next((j for j, p in enumerate(parents) if p == at and 0 <= at + 1 < len(choice)
                          and tokens[j] == choice[at + 1]), None)) is not None:
        path.append(child)
        at = tokens[child]
    return path


def diagnose_tree_path(f, parents, tokens, choice, expected, shift_ruled_out=False):
    call = f"accepted_path(parents={list(parents)}, tokens={list(tokens)}, choice={list(choice)})"
    got = attempt(call, f, list(parents), fresh(tokens), fresh(choice), hints=((IndexError, CHOICE),))
    if got != expected:
        what, hint = explain_tree_path((parents, tokens, choice), got, expected, f, shift_ruled_out=shift_ruled_out)
        raise wrong(f"{call} returned {got}, expected {expected}: {what}", hint)


def explain_tree_path(args, got, expected, f=None, shift_ruled_out=False):
    """(what went wrong, where to look) for accepted_path(*args) = got, where the round keeps expected."""
    parents, tokens, choice = args
    given = (fresh(tokens), fresh(choice))
    if got == expected[::-1]:
        return ("that is the path leaf first", "the path root first: the node after the root, then its child, down to "
                                                "the deepest node kept")
    if tokens and max(tokens) > 256 and got == path_after(parents, given[0], lambda i: given[1][i + 1],
                                                          same=lambda a, b: a is b):
        return ("that is the path with `is` for `==`", "compare token ids with ==, not `is`: `is` asks whether two "
                "ints are the same object, and CPython shares the objects of -5..256 only")
    if got == [i + 1 for i in expected]:
        return ("those are the kept nodes' indices plus one, counted from 1", "node indices count from 0, as parents "
                "and tokens do (node i is tokens[i], after parents[i])")
    if got == [tokens[i] for i in expected] or not all(0 <= i < len(parents) for i in got):
        return ("those are the path tokens" if got == [tokens[i] for i in expected] else "not node indices",
                f"return the nodes' indices (0 to {len(parents) - 1}), root first, not their tokens")
    if got == path_under_tokens(parents, tokens, choice) != expected and confirmed(f, path_under_tokens, TREES):
        return ("that is the path whose walk goes on under the kept node's TOKEN, not its index",
                "after keeping node j, look among j's children (parents[i] == j), for the oracle's choice after j, "
                "choice[j + 1]: j the node's index")
    d = next(d for d in range(len(got) + 1) if d == len(got) or d == len(expected) or got[d] != expected[d])
    at = got[d - 1] if d else -1
    here = "the root" if at == -1 else f"node {at}"
    want = int(choice[at + 1])
    index_hint = ("the oracle's choice after node i is choice[i + 1], after the root choice[0]"
                  if not shift_ruled_out and got in shifted_paths(parents, tokens, choice) else None)
    if d == len(got):
        first_child = min(j for j, p in enumerate(parents) if p == at)
        hints = [h for h in (index_hint, (
            f"every child of the last node kept, not its first only (node {first_child}): siblings carry the draft's "
            "other guesses") if expected[d] != first_child else "keep stepping down while a child of the last node "
                                                                "has the oracle's choice: stop only when none has") if h]
        return (f"after {here} the oracle chose {want} (choice[{at + 1}]), and node {expected[d]}, a child of {here}, "
                "has that token: the path goes on", "; or ".join(hints))
    g = got[d]
    if parents[g] != at:
        return (f"node {g} is not a child of {here} (its parent is "
                f"{'the root' if parents[g] == -1 else f'node {parents[g]}'})",
                index_hint or ("each step goes to a child of the last node kept, the first to a child of the root "
                               "(parents[j] == -1): the walk starts at the root, -1" if d == 0 else
                               "each step goes to a child of the last node kept: parents[j] == that node"))
    if d == len(expected):
        return (f"after {here} the oracle chose {want} (choice[{at + 1}]), and no child of {here} has it (node {g}'s "
                f"token is {tokens[g]}): the round keeps nothing more",
                index_hint or "a node is kept only when its token is the oracle's choice after its parent")
    return (f"after {here} the oracle chose {want} (choice[{at + 1}]): node {expected[d]} has that token, node {g} has "
            f"{tokens[g]}", index_hint or "among the children of the last node kept, the one whose token is the "
                                          "oracle's choice")


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


def replay(tokens, n_prompt, n_draft, max_tail=3, step=1, reserve=1, prefix=True, start=None, see=0, empty_rounds=True,
           past_all=False, asked=False, end=0, oracle_counted=False, prompt_only=False, late=0, stop_empty=False):
    """The replay of prompt lookup, and the usual ways to get it wrong: step (how far i moves past the kept
    drafts), reserve (the cut min(n_draft, len(tokens) - i - reserve), None: no cut), prefix (False: count every match),
    start (None: n_prompt), see (tokens past i the lookup reads), empty_rounds (False: a round without drafts
    is not counted), past_all (i moves past every draft, kept or not), asked (drafted counts the drafts asked for),
    end (the replay stops that many tokens before the text's end), oracle_counted (accepted counts the oracle's token
    too), prompt_only (the lookup reads the prompt alone), late (the drafts compared with tokens[i + late:]),
    stop_empty (the replay ends at the first round whose lookup finds nothing)."""
    from ngram import NGramDrafter
    drafter = NGramDrafter(n=max_tail + 1)
    drafted = accepted = rounds = 0
    i = n_prompt if start is None else start
    while i < len(tokens) - end and rounds < 10 * len(tokens):
        k = n_draft if reserve is None else min(n_draft, len(tokens) - i - reserve)
        guesses = drafter.lookup(tokens[:n_prompt] if prompt_only else tokens[:i + see], k)
        if stop_empty and not guesses:
            break
        matches = [g == t for g, t in zip(guesses, tokens[i + late:])]
        n = (matches.index(False) if False in matches else len(matches)) if prefix else sum(matches)
        drafted, accepted = drafted + (max(k, 0) if asked else len(guesses)), accepted + n + oracle_counted
        rounds += 1 if guesses or empty_rounds else 0
        i += max((len(guesses) if past_all else n) + step, 1)
    return drafted, accepted, rounds


REPLAYS = [([1, 2, 3, 4, 5, 6, 1, 2, 3, 9, 5, 6, 7, 8, 2, 3], 6, 2, 2), ([1, 2, 3, 1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2], 3, 3, 3),
           ([5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 8], 4, 4, 1)]  # texts on which a diagnosis must hold too


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
    what, hint = explain_replay((tokens, n_prompt, n_draft, max_tail), got, measured, f)
    raise wrong(f"{call} returned {got} (drafted, accepted, rounds); {source}" + (f"; {what}" if what else ""), hint)


def explain_replay(args, got, expected, f=None):
    """(what went wrong, where to look) for replay_lookup(*args) = got, where the replay counts expected: the usual
    wrong replays that give got here and, f given, on REPLAYS too (the first of them)."""
    tokens, n_prompt, n_draft, max_tail = (list(args) + [3])[:4]
    tokens = list(tokens)
    if got != expected and sorted(got) == sorted(expected):
        return ("those are the three counts in another order", "return (drafted, accepted, rounds), in that order")
    variants = [  # ((n_prompt, n_draft, max_tail) -> the replay's settings, what it is, where to look)
        (lambda n, d, m: dict(start=0), "that is a replay from the start of the prompt",
         "the run begins after the prompt: i = n_prompt"),
        (lambda n, d, m: dict(start=n - 1), "that is a replay from the prompt's last token, i = n_prompt - 1",
         "the run begins after the prompt: i = n_prompt, the first token the oracle wrote"),
        (lambda n, d, m: dict(late=1), "that is a replay that compares the drafts with tokens[i + 1:], one position "
         "late", "the drafts of a round guess tokens[i], tokens[i + 1], ...: compare them with tokens[i:]"),
        (lambda n, d, m: dict(see=1), "that is a replay whose lookup also sees tokens[i], the token the round is about "
         "to guess", "lookup(tokens[:i], ...): the text so far, never what the oracle has not written yet"),
        (lambda n, d, m: dict(see=len(tokens)), "that is a replay whose lookup reads the whole text, the future "
         "included", "lookup(tokens[:i], ...): the text so far, never what the oracle has not written yet"),
        (lambda n, d, m: dict(prompt_only=True), "that is a replay whose lookup reads the prompt alone",
         "lookup(tokens[:i], ...): the text so far, the prompt and what the oracle has written since"),
        (lambda n, d, m: dict(prefix=False), "that is a replay that counts every draft matching its position",
         "the oracle keeps the drafts only up to the first one that differs from tokens[i:]"),
        (lambda n, d, m: dict(reserve=0), "that is a replay whose last round may draft up to the end of the text",
         "the cut is min(n_draft, len(tokens) - i - 1): the oracle's own token must still fit, as in ngram_generate"),
        (lambda n, d, m: dict(reserve=None), "that is a replay that always asks for n_draft drafts",
         "the cut is min(n_draft, len(tokens) - i - 1): near the end, fewer drafts fit"),
        (lambda n, d, m: dict(empty_rounds=False), "that is a replay that does not count the rounds whose lookup found "
         "nothing", "a round without drafts is still an oracle pass, and adds the oracle's one token"),
        (lambda n, d, m: dict(stop_empty=True), "that is a replay that ends at the first round whose lookup finds "
         "nothing", "a round without drafts still adds the oracle's token, and the replay goes on: while i < "
                    "len(tokens)"),
        (lambda n, d, m: dict(end=1), "that is a replay that stops one token before the end of the text",
         "while i < len(tokens): the last token of the text is a round's too, the oracle's own"),
        (lambda n, d, m: dict(step=2), "that is a replay that moves i two tokens past the kept drafts",
         "i moves past the kept drafts and the oracle's one token: n + 1"),
        (lambda n, d, m: dict(past_all=True), "that is a replay that moves i past every draft of the round, kept or "
         "not", "i moves past the KEPT drafts and the oracle's one token: n + 1, n the drafts kept"),
        (lambda n, d, m: dict(asked=True), "that is a replay that counts the drafts asked for, k, as drafted",
         "drafted counts the drafts the lookup proposed, len(guesses), which can be fewer than k (or none)"),
        (lambda n, d, m: dict(oracle_counted=True), "that is a replay whose accepted counts the oracle's own token too",
         "accepted counts the kept drafts alone: the oracle's token is no draft"),
        (lambda n, d, m: dict(max_tail=3), f"that is the replay with max_tail = 3, the default, not {max_tail}",
         "pass max_tail on to the lookup (NGramDrafter(n=max_tail + 1), or your lookup's max_tail)"),
        (lambda n, d, m: dict(max_tail=m - 1) if m > 1 else {}, f"that is the replay with tails of at most "
         f"{max_tail - 1} token(s), one short of max_tail = {max_tail}", "NGramDrafter(n) tries tails of n - 1 tokens: "
                                                                          "NGramDrafter(n=max_tail + 1)"),
        (lambda n, d, m: dict(n_draft=4), f"that is the replay with n_draft = 4, not {n_draft}",
         "the argument n_draft: the checker varies it"),
    ]

    def replays(settings):
        def replayed(t, n, d, m=3):
            how = settings(n, d, m)
            return None if how is None else replay(list(t), n, **{"n_draft": d, "max_tail": m, **how})
        return replayed
    matches = [(said, hint) for settings, said, hint in variants
               if got == replays(settings)(tokens, n_prompt, n_draft, max_tail) != expected
               and confirmed(f, replays(settings), REPLAYS, call=lambda *a: f(GuardedTokens(a[0]), *a[1:]))]
    if matches:
        return "; or ".join(said for said, _ in matches), "; or ".join(dict.fromkeys(hint for _, hint in matches))
    if got[2] != expected[2]:
        return "", "one round per oracle pass: it keeps the matching drafts, then adds the oracle's own token"
    if got[0] != expected[0]:
        return "", ("each round drafts lookup(tokens[:i], min(n_draft, len(tokens) - i - 1)) (your own lookup from "
                    "exercise 16 too: does `pytest exercises/ -k ex16` pass?)")
    return "", "count the drafts that match tokens[i:] from the first, stopping at the first miss"


def reference_replay_lookup():
    def replay_lookup(tokens, n_prompt, n_draft, max_tail=3):
        return replay(tokens, n_prompt, n_draft, max_tail)
    return replay_lookup


def reference_tree_path():
    from tree import Node, accepted_path
    return lambda parents, tokens, choice: accepted_path([Node(t, p, 0) for t, p in zip(tokens, parents)], choice)


EXERCISES = (
    Exercise("24", "ex24_tree_path", "accepted_path", check_tree_path, reference_tree_path),
    Exercise("25", "ex25_lookup_replay", "replay_lookup", check_lookup_replay, reference_replay_lookup),
)
