"""beyond/suffix.py: the suffix automaton, its matcher and drafts against brute force, and suffix
decoding's output against greedy decoding.

"Most recent earlier occurrence", as tested here: after the text t[0..i], the
longest suffix of it that also ends at some position j < i; among those j, the
largest. The proposal is the k tokens after j, continuing to copy from the
proposal itself where the text runs out (t + proposal, from j + 1 on).
"""

import itertools
import random

import pytest

from beyond.suffix import Matcher, SuffixAutomaton, SuffixDrafter, suffix_generate
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt
from test_ngram import greedy, repetitive_prompt

ALPHABETS = (2, 3, 5)


def random_texts(n_texts, max_length, seed):
    rng = random.Random(seed)
    for size in ALPHABETS:
        for i in range(n_texts):  # the first as long as allowed, the others of any length
            yield [rng.randrange(size) for _ in range(max_length if i == 0 else rng.randint(1, max_length))]


# ---------------------------------------------------------------------------
# Brute force: what the automaton must find
# ---------------------------------------------------------------------------

def naive_earlier_match(t, i):
    """(L, ends): the longest suffix of t[:i + 1] that also ends at a j < i, and every such j; by slicing."""
    for length in range(i, 0, -1):
        tail = t[i - length + 1:i + 1]
        ends = [j for j in range(length - 1, i) if t[j - length + 1:j + 1] == tail]
        if ends:
            return length, ends
    return 0, []


def earlier_matches(t):
    """naive_earlier_match(t, i) for every i, in O(n^2): common[j] = how many tokens ending at j and at i agree."""
    common, out = [0] * len(t), []
    for i, token in enumerate(t):
        common = [common[j - 1] + 1 if j > 0 and t[j] == token else int(t[j] == token) for j in range(i)] + [0]
        length = max(common[:i], default=0)
        out.append((length, [j for j in range(i) if common[j] >= length] if length else []))
    return out


def brute_proposal(t, end, k):
    out = list(t)
    for i in range(end + 1, end + 1 + k):
        out.append(out[i])
    return out[len(t):]


def test_the_fast_brute_force_is_the_naive_one():
    for t in random_texts(15, 40, seed=10):
        assert earlier_matches(t) == [naive_earlier_match(t, i) for i in range(len(t))]


def test_the_longest_earlier_match_and_its_occurrences_are_brute_forces():
    for t in random_texts(8, 300, seed=11):
        drafter, automaton = SuffixDrafter(), SuffixAutomaton()
        for i, expected in enumerate(earlier_matches(t)):
            drafter.update(t[:i + 1])
            assert drafter.match() == expected, (t[:i + 1], drafter.match(), expected)
            # the automaton alone knows it too: the link of the whole text is its longest repeated suffix
            automaton.extend(t[i])
            assert automaton.states[automaton.states[automaton.last].link].length == expected[0]


def test_proposals_continue_the_most_recent_earlier_occurrence():
    for t in random_texts(8, 120, seed=12):
        drafter = SuffixDrafter()
        for i, (length, ends) in enumerate(earlier_matches(t)):
            drafter.update(t[:i + 1])
            for k in (1, 4):
                assert drafter.propose(k) == (brute_proposal(t[:i + 1], max(ends), k) if length else [])
                assert drafter.source.get("end") == (max(ends) if length else None)


def test_min_match():
    t = [random.Random(13).randrange(3) for _ in range(200)]
    for min_match in (1, 2, 4):
        drafter = SuffixDrafter(min_match=min_match)
        for i, (length, ends) in enumerate(earlier_matches(t)):
            drafter.update(t[:i + 1])
            proposed = drafter.propose(3)
            assert proposed == (brute_proposal(t[:i + 1], max(ends), 3) if length >= min_match else [])


def test_proposals_by_hand():
    def proposal(t, k, **options):
        drafter = SuffixDrafter(**options)
        drafter.start(t)
        return drafter.propose(k)

    assert proposal([1, 2, 7, 1, 2, 8, 1, 2], 3) == [8, 1, 2]     # "1 2" ends at 1 and 4: the latest, 4
    assert proposal([1, 2, 7, 1, 2, 8, 1, 2], 3, min_match=3) == []
    assert proposal([1, 2, 3], 3) == []                           # nothing repeats
    assert proposal([3, 1, 2, 4, 1, 2], 2) == [4, 1]              # the text's own end "1 2" is not an earlier one
    assert proposal([5, 5], 4) == [5, 5, 5, 5]                    # "5" ends at 0; copying runs on past the end
    assert proposal([1, 2, 1, 2, 1], 5) == [2, 1, 2, 1, 2]        # "1 2 1" ends at 2: the period continues
    assert proposal([0, 0, 0], 0) == []                           # token 0 is a token; k = 0 drafts nothing
    drafter = SuffixDrafter()
    drafter.start([9, 1, 2, 3, 9, 1, 2])
    # where each proposal came from (the workbench's trace words it: workbench/tests/test_shown_text.py)
    assert drafter.propose(2) == [3, 9]
    assert drafter.source == {"length": 3, "end": 2, "occurrences": 1}
    drafter.start([1, 2, 7, 1, 2, 8, 1, 2])
    assert drafter.propose(1) == [8]
    assert drafter.source == {"length": 2, "end": 4, "occurrences": 2}  # the latest of 2 earlier occurrences
    drafter.start([1, 2, 3])
    assert drafter.propose(2) == [] and drafter.source == {"length": 0}  # the last token never occurred before
    assert drafter.propose(0) == [] and drafter.source == {}  # no room: nothing looked for
    drafter = SuffixDrafter(min_match=2)
    drafter.start([1, 2, 3, 1])
    assert drafter.propose(2) == []
    assert drafter.source == {"length": 1} and drafter.min_match == 2  # a match below min_match


# ---------------------------------------------------------------------------
# The automaton itself
# ---------------------------------------------------------------------------

def test_the_automaton_accepts_exactly_the_substrings():
    for t in random_texts(10, 30, seed=14):
        automaton = SuffixAutomaton(t)
        substrings = {tuple(t[i:j]) for i in range(len(t)) for j in range(i + 1, len(t) + 1)}
        # each state holds the lengths length(link) + 1 .. length: together, every distinct substring once
        states = automaton.states
        assert sum(s.length - states[s.link].length for s in states[1:]) == len(substrings)
        assert all(automaton.accepts(s) for s in substrings)
        size = max(t) + 2  # one token the text never has
        others = {s for n in range(1, 5) for s in itertools.product(range(size), repeat=n)} - substrings
        assert not any(automaton.accepts(s) for s in others)


def test_states_and_transitions_stay_within_the_classic_bounds():
    # At most 2n - 1 states and 3n - 4 transitions: linear size, so extend's total work is O(n).
    def within(automaton, n):
        return (n < 2 or len(automaton.states) <= 2 * n - 1) and (n < 3 or automaton.n_transitions() <= 3 * n - 4)

    for t in random_texts(20, 300, seed=15):
        assert within(SuffixAutomaton(t), len(t)), t
    for t in list(random_texts(10, 40, seed=16)) + [[0] + [1] * 50, [0] + [1] * 49 + [2], [0] * 60]:
        automaton = SuffixAutomaton()
        for n, token in enumerate(t, 1):  # and after every token
            automaton.extend(token)
            assert within(automaton, n), t[:n]
    # both bounds are reached: "abbb..b" has 2n - 1 states, "abb..bc" 3n - 4 transitions
    assert len(SuffixAutomaton([0] + [1] * 50).states) == 2 * 51 - 1
    assert SuffixAutomaton([0] + [1] * 49 + [2]).n_transitions() == 3 * 51 - 4


def test_endpos_and_first_end():
    t = [1, 2, 1, 2, 3, 1, 2]
    automaton = SuffixAutomaton(t)
    for index, s in enumerate(automaton.states[1:], 1):
        ends = automaton.endpos(index)
        assert s.first_end == ends[0]
        # the state's strings are exactly those that end at these positions
        longest = None
        for end in ends:
            piece = tuple(t[end - s.length + 1:end + 1])
            assert longest in (None, piece)
            longest = piece
        assert ends == [j for j in range(len(t)) if tuple(t[j - s.length + 1:j + 1]) == longest and j >= s.length - 1]


def test_the_matcher_walks_another_text():
    # Over a fixed automaton the matcher gives the longest suffix of the stream that is a substring of the text.
    rng = random.Random(16)
    for size in ALPHABETS:
        text = [rng.randrange(size) for _ in range(60)]
        automaton = SuffixAutomaton(text)
        matcher = Matcher(automaton)
        stream = [rng.randrange(size + 1) for _ in range(200)]
        for i, token in enumerate(stream):
            length = matcher.step(token)
            assert automaton.accepts(stream[i - length + 1:i + 1]) if length else True
            assert i - length < 0 or not automaton.accepts(stream[i - length:i + 1])


# ---------------------------------------------------------------------------
# Trees of the most frequent continuations
# ---------------------------------------------------------------------------

def test_the_tree_counts_what_followed():
    drafter = SuffixDrafter()
    drafter.start([1, 2, 8, 3, 1, 2, 8, 4, 1, 2, 7, 5, 1, 2])  # "1 2" ended at 1, 5, 9: then 8 3, 8 4, 7 5
    nodes = drafter.propose_tree(2, width=2, max_nodes=4)
    # best first: 8 (2/3), then 7 (1/3) and 8's children (1/3 each) tie: the one offered first wins
    assert [(n.token, n.parent, n.depth) for n in nodes] == [(8, -1, 1), (7, -1, 1), (4, 0, 2), (3, 0, 2)]
    assert [n.p for n in nodes] == [2 / 3, 1 / 3, 1 / 2, 1 / 2]
    assert [n.token for n in drafter.propose_tree(2, width=1, max_nodes=16)] == [8, 4]  # frequent, then recent
    assert drafter.propose(2) == [7, 5]  # a line follows the latest occurrence instead
    assert len(drafter.propose_tree(2, width=2, max_nodes=16)) == 5 and drafter.propose_tree(0, 2) == []


def test_tree_paths_are_earlier_continuations_with_their_frequencies():
    for t in random_texts(4, 150, seed=17):
        drafter = SuffixDrafter()
        for i, (length, ends) in enumerate(earlier_matches(t)):
            drafter.update(t[:i + 1])
            nodes = drafter.propose_tree(3, width=2, max_nodes=8)
            if not length:
                assert nodes == []
                continue
            continuations = [brute_proposal(t[:i + 1], e, 3) for e in ends]
            assert len(nodes) <= 8
            for index, node in enumerate(nodes):
                path, at = [], index
                while at != -1:
                    path.insert(0, nodes[at].token)
                    assert nodes[at].parent < at  # a parent before its children
                    at = nodes[at].parent
                assert node.depth == len(path)
                below = [c for c in continuations if c[:len(path)] == path]
                above = [c for c in continuations if c[:len(path) - 1] == path[:-1]]
                assert below and node.p == len(below) / len(above)
            for parent in range(-1, len(nodes)):
                assert sum(n.parent == parent for n in nodes) <= 2


# ---------------------------------------------------------------------------
# Suffix decoding gives greedy decoding's tokens
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("k", [1, 4])
def test_suffix_equals_greedy(oracle, k, width):
    for ids in (prompt(oracle, 6, 0), repetitive_prompt(oracle, 0), repetitive_prompt(oracle, 1)):
        stats = Stats(trace=[])
        got = list(suffix_generate(oracle, ids, 30, n_draft=k, width=width, stats=stats))
        assert_same_greedy(greedy(oracle, tuple(ids), 30), got, oracle, ids)
        assert stats.n_generated == 30 and stats.accepted <= stats.drafted
        # every round's record: the oracle's cache holds all but the newest token
        length = len(ids)
        for record in stats.trace:
            length += len(record.new)
            assert record.cached == {"draft": None, "oracle": length - 1}
            assert record.context_length + len(record.new) == length
            assert len(record.drafted) <= (k if width == 1 else 16)
        assert length == len(ids) + 30


def test_drafts_are_accepted_on_repetitive_text(oracle):
    for k in (1, 4):
        stats = Stats(trace=[])
        ids = repetitive_prompt(oracle, 0)
        got = list(suffix_generate(oracle, ids, 30, n_draft=k, stats=stats))
        assert_same_greedy(greedy(oracle, tuple(ids), 30), got, oracle, ids)
        assert stats.accepted > 0 and stats.rounds < 30
        kept = next(r for r in stats.trace if r.accepted)
        assert kept.details.match["length"] >= 1 and kept.details.match["occurrences"] >= 1
        assert kept.details.match["end"] < kept.context_length - 1


def test_a_line_drafts_from_the_latest_occurrence_in_every_round(oracle):
    ids = repetitive_prompt(oracle, 1)
    stats = Stats(trace=[])
    out = ids + list(suffix_generate(oracle, ids, 20, n_draft=4, stats=stats))
    for r in stats.trace:
        text = out[:r.context_length]
        length, ends = earlier_matches(text)[-1]
        k = min(4, len(out) - r.context_length - 1)
        assert r.drafted == (brute_proposal(text, max(ends), k) if length else [])


@pytest.mark.parametrize("n_new", range(0, 6))
def test_exactly_n_new_tokens(oracle, n_new):
    ids = prompt(oracle, 3, 0) * 3
    for width in (1, 2):
        assert len(list(suffix_generate(oracle, ids, n_new, n_draft=4, width=width))) == n_new


def test_greedy_with_min_match_and_a_drafter_reused(oracle):
    drafter = SuffixDrafter(min_match=2)
    for seed in SEEDS:
        ids = repetitive_prompt(oracle, seed)
        got = list(suffix_generate(oracle, ids, 20, n_draft=4, drafter=drafter))
        assert_same_greedy(greedy(oracle, tuple(ids), 20), got, oracle, ids)
    got = list(suffix_generate(oracle, [0, 0, 0], 10, width=2))
    assert_same_greedy(list(greedy_generate(oracle, [0, 0, 0], 10)), got, oracle, [0, 0, 0])


def test_bad_arguments(oracle):
    for bad in (0, 1.5):
        with pytest.raises(GenerationError, match="min_match must be a whole number >= 1"):
            SuffixDrafter(min_match=bad)
    for name in ("n_draft", "width", "max_nodes"):
        with pytest.raises(GenerationError, match=f"{name} must be at least 1"):
            list(suffix_generate(oracle, [1], 3, **{name: 0}))
    with pytest.raises(GenerationError, match="context window"):
        list(suffix_generate(oracle, [1], oracle.n_positions))
