"""Part 4, drafts that are not a line (the staged-decoding notes): exercise 16 (prompt lookup) and 18 (the tree attention mask)."""

import copy

import numpy as np

from gpt2 import MASKED

from .running import Exercise, attempt, confirmed, project, wrong


# ---------------------------------------------------------------------------
# Exercise 16: prompt lookup
# ---------------------------------------------------------------------------

def occurrences(tokens, n):
    """Start positions of earlier occurrences of the last n tokens (not the tail itself)."""
    return [s for s in range(len(tokens) - n) if tokens[s:s + n] == tokens[-n:]]


def text_match(tokens, n):
    """Where the decimal text of the last n tokens occurs earlier in ",".join(...) of the text, as (the joined
    string, the position), or None. Where the tokens themselves occur nowhere earlier, such a match lies inside
    other ids ("1,2" inside "11,2")."""
    joined, tail = ",".join(map(str, tokens)), ",".join(map(str, tokens[-n:]))
    at = joined.rfind(tail, 0, len(joined) - len(tail) - 1)
    return None if at < 0 else (joined, at)


def check_lookup(f):
    cases = [([1, 2, 3, 9, 1, 2, 3], 3, 3), ([5, 6, 7, 5, 6, 8, 5, 6], 2, 3), ([2, 3, 4, 9, 9, 3, 4, 7, 2, 3, 4], 2, 3),
             ([1, 2, 3, 4], 3, 3), ([7], 2, 3), ([0, 4, 0, 5, 0], 2, 3), ([1, 2, 1, 2], 5, 3),
             ([3, 1, 2, 8, 1, 2], 4, 1), ([4, 5, 6, 4, 5, 6, 4, 5, 6], 2, 3),
             ([1, 2, 3, 7, 8, 3, 9, 1, 2, 3], 2, 1), ([1, 2, 3, 7, 8, 2, 3, 9, 1, 2, 3], 3, 2),  # max_tail matters
             # "1,2" occurs inside "11,2" of the joined ids, [1, 2] nowhere earlier as tokens
             ([11, 2, 5, 6, 2, 8, 1, 2], 2, 2),
             # real-size ids (GPT-2's): " Python" is 11361, <|endoftext|> 50256
             ([2393, 50256, 7, 8, 50256, 9, 393, 50256], 2, 2), ([11361, 318, 257, 3303, 13, 11361, 318], 3, 3),
             ([7, 7, 7, 7], 2, 3),  # the earlier occurrence of [7, 7, 7] overlaps the tail
             ([1, 2, 7, 1, 2, 8, 1, 2, 9, 1, 2], 2, 2)]  # three earlier occurrences, each followed otherwise
    reference = reference_lookup()
    for tokens, k, max_tail in cases:
        call = f"lookup({tokens}, k={k}, max_tail={max_tail})"
        got = attempt(call, f, list(tokens), k, max_tail)
        expected = reference(list(tokens), k, max_tail)
        if got == expected:
            continue
        what, hint = explain_lookup((tokens, k, max_tail), got, expected, f)
        raise wrong(f"{call} returned {got}, expected {expected}" + (f": {what}" if what else ""), hint)


def variant(tokens, k, max_tail=3, zero=True, late=0, shift=0, longest_only=False, cut_at_tail=False):
    """lookup with one thing done otherwise: start 0 left out of the search, the guesses `late` tokens after the
    match, the tail `shift` tokens before the end, only the longest tail tried, the guesses cut where the tail begins."""
    top = min(max_tail, len(tokens) - 1)
    for n in range(top, 0, -1):
        tail = tokens[len(tokens) - n - shift:len(tokens) - shift]
        for s in range(len(tokens) - n - 1, -1 if zero else 0, -1):
            if tokens[s:s + n] == tail:
                return tokens[s + n + late:min(s + n + late + k, len(tokens) - n if cut_at_tail else len(tokens))]
        if longest_only:
            break
    return []


LOOKUPS = [([5, 6, 7, 5], 2, 1), ([5, 6, 9, 7, 6], 2, 2), ([1, 2, 3, 1, 2], 5, 2), ([4, 8, 5, 6, 4, 8, 7, 5, 6], 2, 3),
           ([9, 5, 6, 7, 5], 2, 1)]  # texts on which a diagnosis must hold too
VARIANTS = [  # (how lookup does otherwise, what it is, where to look)
    ({"zero": False}, "your search never tries start 0, the text's first token",
     "the search range: every start before the tail's own, down to 0 (range(..., -1, -1): a stop of 0 leaves 0 out)"),
    ({"late": 1}, "your guesses start one token late, skipping the token right after the match",
     "what follows the match starts at tokens[s + n], s the match's start and n its length"),
    ({"shift": 1}, "the tail you looked for is tokens[-n - 1:-1], not the last n tokens",
     "the tail is the last n tokens: tokens[-n:]"),
    ({"longest_only": True}, "only the longest tail was tried: no longer tail occurs earlier here, and a shorter one does",
     "for n = max_tail down to 1, each tail in turn: the first n that matches wins"),
    ({"cut_at_tail": True}, "your guesses stop where the tail begins; what followed the match may run into the tail "
     "itself", "propose up to k tokens after the match, whatever they are: tokens[s + n:s + n + k]"),
]


def explain_lookup(args, got, expected, f=None):
    """(what went wrong, where to look) for lookup(*args) = got, where the reference proposes expected."""
    tokens, k, max_tail = (list(args) + [3])[:3]
    n = next((n for n in range(min(max_tail, len(tokens) - 1), 0, -1) if occurrences(tokens, n)), None)
    if n is not None:
        found = f"the last {n} token(s) {tokens[-n:]} occur earlier at position(s) {occurrences(tokens, n)}"
        said = [(what, hint) for how, what, hint in VARIANTS if variant(list(tokens), k, max_tail, **how) == got
                and confirmed(f, lambda *a, how=how: variant(*a, **how), LOOKUPS)]
        if said:
            return f"{found}; " + "; or ".join(what for what, _ in said), "; or ".join(hint for _, hint in said)
    return explain_lookup_otherwise(tokens, k, max_tail, got, expected)


def explain_lookup_otherwise(tokens, k, max_tail, got, expected):
    reference = reference_lookup()
    tails = next((other for other in (3, max_tail - 1, max_tail + 1)
                  if other != max_tail and other > 0 and got == reference(list(tokens), k, other)), None)
    tails_said = (f"that is the answer with max_tail = {tails}{', the default' if tails == 3 else ''}; tails here "
                  f"are at most {max_tail} token(s) long")
    tails_hint = ("the argument max_tail: the longest tail tried is max_tail tokens long, and the checker calls "
                  "with other values")
    n = next((n for n in range(min(max_tail, len(tokens) - 1), 0, -1) if occurrences(tokens, n)), None)
    fake = next(((m, match) for m in range(min(max_tail, len(tokens) - 1), n or 0, -1)
                 if (match := text_match(tokens, m))), None)
    if fake:
        m, (joined, at) = fake
        return (f"the last {m} tokens {tokens[-m:]} occur nowhere earlier as tokens, but their text "
                f"{','.join(map(str, tokens[-m:]))!r} occurs at character {at} of {joined!r}, inside other ids",
                "compare lists of token ids (tokens[s:s + n] == tail), not their decimal text: a search in a joined "
                "string finds \"1,2\" inside \"11,2\"")
    shorter = n is not None and n > 1 and any(got == tokens[s + m:s + m + k] for m in range(1, n)
                                                for s in occurrences(tokens, m))
    if tails and not shorter:
        return tails_said, tails_hint
    if n is None:
        return ("no earlier occurrence of even the last token, so there is nothing to propose",
                "what lookup returns when nothing matches")
    starts = occurrences(tokens, n)
    found = f"the last {n} token(s) {tokens[-n:]} occur earlier at position(s) {starts}"
    if len(got) > k:
        return f"more than k = {k} guesses", "the cut at k"
    if got == expected[:-1] and len(expected) == k:
        return f"{found}; one guess short of k = {k}", "the end of the slice: k tokens after the match"
    if got == tokens[starts[0] + n:starts[0] + n + k] and len(starts) > 1:
        return (f"{found}; this lookup takes the LATEST of them (the most recent evidence), you took the first, "
                "scanning left to right (as transformers' PromptLookupCandidateGenerator does)",
                "the direction of the search")
    other = next((s for s in starts[:-1] if got == tokens[s + n:s + n + k]), None)
    if other is not None and got != expected:
        return (f"{found}; you took the one at {other}, not the latest, at {starts[-1]} (the most recent evidence)",
                "which of the earlier occurrences the search keeps: the latest")
    overlapping = [s for s in starts if s + n > len(tokens) - n]
    if overlapping and not any(got == tokens[s + n:s + n + k] for s in starts):
        return (f"{found}; the one at {overlapping[-1]} overlaps the tail itself, and is an earlier occurrence all "
                "the same", "the search range: every start before the tail's own, overlapping or not")
    if shorter:  # the longest tail never tried: in the wrong order, or with too small a max_tail
        return (f"{found}; the longest matching tail (up to max_tail) wins over shorter ones"
                + (f"; or {tails_said}" if tails else ""),
                "the order in which n is tried" + (f"; or {tails_hint}" if tails else ""))
    if not got:
        return (f"{found}; your lookup found none of them", "compare tokens[s:s + n] == tail for every start s before "
                "the tail's own: whether the search range excludes the tail itself (it always matches, and nothing "
                "follows it); a list is never `in` a list of ints (tail in tokens is False)")
    if len(got) < min(k, len(expected)):
        return f"{found}; {len(got)} guess(es), where {len(expected)} tokens follow the latest", "the end of the slice"
    return f"{found}; propose up to k tokens that followed the latest one", "the slice after the match"


# ---------------------------------------------------------------------------
# Exercise 18: the tree attention mask
# ---------------------------------------------------------------------------

def ancestors(nodes, i):
    path = []
    while nodes[i].parent != -1:
        i = nodes[i].parent
        path.append(i)
    return path


def check_tree_mask(f):
    from tree import Node
    #        text .. root ─┬─ 0 ─┬─ 2 ── 5
    #                      │     └─ 3
    #                      └─ 1 ── 4
    nodes = [Node(11, -1, 1), Node(12, -1, 1), Node(13, 0, 2), Node(14, 0, 2), Node(15, 1, 2), Node(16, 2, 3)]
    line = [Node(21, -1, 1), Node(22, 0, 2), Node(23, 1, 3)]
    cases = [(nodes, list(range(6)), 4, 0), (nodes, [0, 1], 4, 0), (nodes, [2, 3, 4], 4, 2), (nodes, [5], 3, 5),
             (line, [0, 1, 2], 2, 0)]
    from tree import tree_mask
    for tree, new, n_text, n_fed in cases:
        call = f"tree_mask(<{len(tree)} nodes>, new={new}, n_text={n_text}, n_fed={n_fed})"
        got = attempt(call, f, copy.deepcopy(tree), list(new), n_text, n_fed)  # Node is mutable: a copy of its own
        expected = tree_mask(tree, new, n_text, n_fed)
        if not same_mask(got, expected):
            what, hint = explain_mask((tree, new, n_text, n_fed), got, expected)
            raise wrong(f"{call}: {what}", hint)


def same_mask(a, b):
    """Whether mask a hides and shows what b does, its entries 0 (visible) or gpt2.MASKED (hidden), as the text says."""
    return a.shape == b.shape and bool(np.array_equal(a == 0, b == 0)) and bool(np.all((a == 0) | (a == MASKED)))


def mask_rows(mask):
    """A mask in a line, one row after another: 0 where a row sees, M where it is hidden ("00M0/0000")."""
    if not isinstance(mask, np.ndarray) or mask.ndim != 2:
        return repr(mask)
    return "/".join("".join("0" if v == 0 else "M" if v == MASKED else "?" for v in row) for row in mask) or "(no rows)"


def explain_mask(args, got, expected, f=None):
    """(what went wrong, where to look) for tree_mask(*args) = got: the first entry that is neither 0 nor masked, or
    the first that hides what it should show (or the other way round), with what that column is to that row."""
    tree, new, n_text, n_fed = args
    visible, hidden = got == 0, got == MASKED
    if not np.all(visible | hidden):
        row, col = np.argwhere(~(visible | hidden))[0]
        value = got[row, col]
        return (f"entry [{row}, {col}] is {value}; use 0 (visible) or gpt2.MASKED (hidden)"
                + (" (-inf is not it: a row that hides every column then gives softmax NaN, where MASKED, -1e10, "
                   "gives a number)" if value == -np.inf else ""), "the two values a mask holds: 0 and gpt2.MASKED")
    if got.size and np.array_equal(visible, expected != 0):
        return ("the mask is inverted: it hides every column its row may attend to and shows every other",
                "entry [row, col] is 0 where node new[row] may attend, gpt2.MASKED where it may not")
    row, col = np.argwhere(visible != (expected == 0))[0]
    i = new[row]
    if col < n_text:
        about = f"column {col} is text, which every node sees"
    else:
        j = col - n_text
        relation = ("itself" if j == i else f"its ancestor (node {i}'s path up: {ancestors(tree, i)})"
                    if j in ancestors(tree, i) else
                    f"not on its path to the root (node {i}'s ancestors are {ancestors(tree, i)})")
        about = f"column {col} is node {j}, {relation}"
    parent = "a child of the root" if tree[i].parent == -1 else f"child of node {tree[i].parent}"
    return (f"row {row} (node {i}, {parent}, depth {tree[i].depth}) {'hides' if expected[row, col] == 0 else 'sees'} "
            f"column {col}; {about}", "a node sees the text, its ancestors and itself, never a sibling, a cousin or a "
                                      "descendant; node i's keys sit in column n_text + i")


def reference_lookup():
    from ngram import NGramDrafter
    # NGramDrafter(n) tries tails of n - 1 tokens down to 1 (an n-gram is a context and its follower)
    return lambda tokens, k, max_tail=3: NGramDrafter(n=max_tail + 1).lookup(tokens, k)


EXERCISES = (
    Exercise("16", "ex16_prompt_lookup", "lookup", check_lookup, reference_lookup),
    Exercise("18", "ex18_tree_mask", "tree_mask", check_tree_mask, project("tree", "tree_mask")),
)
