"""Suffix drafts: a suffix automaton of the text proposes what followed the longest earlier match.

Prompt lookup (ngram.py) looks for the last n - 1 tokens earlier in the text by
scanning it, and gives up on longer repeats. A suffix automaton (Blumer et al.
1985) knows every substring of the text at once, grows by one token in
amortised constant time, and so can keep, token by token, the LONGEST suffix of
the text that already occurred earlier, in amortised constant time too, however
long the repeat. The draft is what followed that earlier occurrence.
SuffixDecoding (Oliaro et al. 2024, arXiv 2411.04975) drafts this way from a
suffix tree of the prompt and of earlier outputs, and proposes a tree of the
most frequent continuations, scored by their empirical frequencies; here the
index holds the current text only (prompt and output), and the tree is checked
by tree.py's greedy tree verifier.

  SuffixAutomaton  the automaton: extend(token), states with next, link, length, first_end
  Matcher          walks a token stream over an automaton, falling back along suffix links
  SuffixDrafter    the text's automaton and a matcher; propose(k) and propose_tree(k, width)
  SuffixDetails    a round's record: the match drafted from, and the tree when one was drafted
  suffix_generate  greedy speculative decoding with those drafts; output = greedy_generate's

Words used below. A position is a token's index in the text (prompt and output,
from 0). An occurrence of a string ends at a position; an EARLIER occurrence of
a suffix of the text ends before the text's last position. endpos(v) is the set
of positions where the strings of state v end: the strings of one state are
exactly those that end at the same positions.
"""

import heapq
import time
from dataclasses import dataclass
from numbers import Integral

from decoding import GenerationError, cache_lengths, check_lengths, check_room
from stats import Stats
from kvcache import KVCache
from speculative import rollback, verify
from tree import Node, TreeDetails, tree_depth, verify_tree


class State:
    """A set of substrings that end at the same positions: the suffixes of the longest one down to length(link) + 1."""
    __slots__ = ("length", "link", "next", "first_end", "is_clone", "children")

    def __init__(self, length, link, first_end, is_clone=False, transitions=None):
        self.length = length          # the longest string's length
        self.link = link              # the state of the longest suffix that ends at more positions; -1 for the root
        self.next = dict(transitions or {})  # token -> state: appending the token to any string here lands there
        self.first_end = first_end    # where the strings first end (their first occurrence): -1 for the root
        self.is_clone = is_clone      # made by splitting a state, not by a new token: it owns no position
        self.children = set()         # the states whose link is this one: the suffix-link tree, for endpos


class SuffixAutomaton:
    """The smallest automaton of the text's suffixes, built one token at a time: every path from the root
    spells a substring of the text, every substring has exactly one path, and a substring's path ends
    at the state of all the substrings that end at the same positions."""

    def __init__(self, tokens=()):
        self.states = [State(0, -1, -1)]  # the root: the empty string, which ends everywhere
        self.last = 0                     # the state of the whole text
        self.text_length = 0  # tokens extended so far
        for token in tokens:
            self.extend(token)

    def extend(self, token):
        """Append one token: amortised O(1) (at most 2n - 1 states and 3n - 4 transitions for n tokens)."""
        end = self.text_length
        cur = self._new_state(self.states[self.last].length + 1, end)  # the whole new text
        # Every suffix of the old text that was never followed by the token is now, once:
        # point it at cur. The walk stops at the first suffix already followed by the token.
        state = self._add_transitions(self.last, token, cur)
        if state == -1:  # the token is new: cur's only shorter suffix that ends elsewhere is the empty string
            self._set_link(cur, 0)
        else:
            target = self.states[state].next[token]
            # target holds the longest suffix of the new text that ended earlier, suffix(state) + token.
            # If that is target's longest string, target is the link; otherwise target mixes strings that now
            # end at `end` with longer ones that do not, and must be split (the clone step).
            solid = self.states[target].length == self.states[state].length + 1
            # Either way cur's link is the state of the longest suffix of the text that occurred
            # earlier: what the drafter's Matcher finds too, by its own walk.
            self._set_link(cur, target if solid else self._clone(state, target, token))
        self.last = cur
        self.text_length += 1
        return cur

    def _new_state(self, length, first_end, is_clone=False, transitions=None):
        self.states.append(State(length, -1, first_end, is_clone, transitions))
        return len(self.states) - 1

    def _set_link(self, state, link):
        old = self.states[state].link
        if old != -1:
            self.states[old].children.discard(state)
        self.states[state].link = link
        self.states[link].children.add(state)

    def _add_transitions(self, state, token, cur):
        """Walk up the suffix links from state, adding token -> cur, until a state already has the token."""
        while state != -1 and token not in self.states[state].next:
            self.states[state].next[token] = cur
            state = self.states[state].link
        return state

    def _clone(self, state, target, token):
        """Split target: its strings up to length(state) + 1 now also end at the new position, the longer ones do not.

        The clone takes the short ones: target's transitions (they continue the same
        earlier occurrences), target's first occurrence and target's link; target and cur then
        link to the clone. The suffixes of state that led to target by token lead to the
        clone now; further up, they already lead to a shorter state.
        """
        states = self.states
        clone = self._new_state(states[state].length + 1, states[target].first_end, is_clone=True, transitions=states[target].next)
        self._set_link(clone, states[target].link)
        self._set_link(target, clone)
        while state != -1 and states[state].next.get(token) == target:
            states[state].next[token] = clone
            state = states[state].link
        return clone

    def endpos(self, state):
        """Every position where the state's strings end: the first_end of each non-clone below it in the
        suffix-link tree (each such state was made by the token at that position). O(size of the subtree)."""
        ends, stack = [], [state]
        while stack:
            s = self.states[stack.pop()]
            if not s.is_clone and s.first_end >= 0:
                ends.append(s.first_end)
            stack.extend(s.children)
        return sorted(ends)

    def n_transitions(self):
        return sum(len(s.next) for s in self.states)

    def accepts(self, tokens):
        """Whether tokens is a substring of the text."""
        state = 0
        for token in tokens:
            state = self.states[state].next.get(token)
            if state is None:
                return False
        return True


class Matcher:
    """The longest suffix of a token stream that is a substring of an automaton's text: its state and length.

    step(token) is the classic walk: follow the token if the match can be
    extended by it; otherwise fall back along suffix links. A state's link holds
    the longest suffix of its strings that ends at more positions, so the first
    link whose state is followed by the token gives the longest shorter suffix
    that can be extended: the match shrinks by as little as possible. The
    length grows by at most one per token and every fallback shrinks it (but
    one, through a clone: see below), so step is amortised O(1).
    """

    def __init__(self, automaton):
        self.automaton, self.state, self.length = automaton, 0, 0

    def step(self, token):
        states = self.automaton.states
        while self.state != 0 and token not in states[self.state].next:
            # If the text's extend split our state since the last step, our match went to the
            # clone, now our state's link. The clone has our state's transitions, so the walk
            # passes through it and on to the clone's link: the length comes out right.
            self.state = states[self.state].link
            self.length = states[self.state].length
        if token in states[self.state].next:
            self.state, self.length = states[self.state].next[token], self.length + 1
        else:  # not even the token alone is in the text
            self.state, self.length = 0, 0
        return self.length


def continuation(tokens, end, k):
    """The k tokens after position `end` of tokens. Near the text's end they run out: continue copying from
    what was just copied (as LZ77 does), so a text repeating with a short period gets a full draft."""
    out = []
    for i in range(end + 1, end + 1 + k):
        out.append(tokens[i] if i < len(tokens) else out[i - len(tokens)])
    return out


class SuffixDrafter:
    """Drafts from the text itself: what followed the earlier occurrences of the text's longest repeated suffix.

    min_match: draft nothing when that suffix is shorter (a one-token match is
    often a coincidence). source says where the last proposal came from.
    """

    def __init__(self, min_match=1):
        if not (isinstance(min_match, Integral) and min_match >= 1):
            raise GenerationError(f"min_match must be a whole number >= 1, got {min_match!r}")
        self.min_match = min_match
        self.start([])

    def start(self, ids):
        """A new text: forget the old one, then learn the prompt."""
        self.automaton = SuffixAutomaton()
        self.matcher = Matcher(self.automaton)
        self.tokens = []
        self.source = {}
        self.update(ids)

    def update(self, tokens):
        """Learn the tokens of `tokens` not seen yet (the text accepted so far)."""
        for token in tokens[len(self.tokens):]:
            # Match first, against the text BEFORE this token: whatever the matcher
            # finds is then an earlier occurrence, never the text's own end.
            self.matcher.step(token)
            self.automaton.extend(token)
            self.tokens.append(token)

    def match(self):
        """(length of the longest suffix of the text that occurred earlier, the positions where it did end).

        Read once a round, not once a token: O(occurrences) through the suffix-link tree. A latest end kept
        up to date in every state would cost more: each token ends in every state on its suffix-link path,
        and in a periodic text ("abab...") that path grows with the text.
        """
        length = self.matcher.length
        if length == 0:
            return 0, []
        # The matcher's state was read before the last token was added, and the
        # last position is excluded: every end returned is an earlier one.
        ends = [e for e in self.automaton.endpos(self.matcher.state) if e < len(self.tokens) - 1]
        return length, ends

    def _match_to_draft(self, k):
        """(length, ends) of the longest match to draft from; (0, []) when there is none, or no room (k <= 0).
        Clears the round's source first ({} when there was no room): a proposal sets its own."""
        self.source = {}
        if k <= 0:
            return 0, []
        length, ends = self.match()
        return (length, ends) if self._long_enough(length) else (0, [])

    def propose(self, k):
        """Up to k tokens: what followed the most recent earlier occurrence of the longest match."""
        length, ends = self._match_to_draft(k)
        if not ends:
            return []
        latest = max(ends)
        drafted = continuation(self.tokens, latest, k)
        self.source = {"length": length, "end": latest, "occurrences": len(ends)}
        return drafted

    def propose_tree(self, k, width, max_nodes=16):
        """tree.py Nodes of the most frequent continuations of the longest match, at most k deep.

        Each earlier occurrence of the match gives one continuation of k tokens. A node's p is the
        share of its parent's continuations that go on with its token, its score the product of
        the p on its path: the continuation's empirical probability. Best first (SuffixDecoding's
        greedy expansion): add the candidate with the highest score, then offer its own `width`
        most frequent children, until max_nodes. A parent always comes before its children.
        """
        length, ends = self._match_to_draft(k)
        if not ends:
            return []
        ends = sorted(ends, reverse=True)  # most recent first: ties go to recent evidence
        continuations = [continuation(self.tokens, e, k) for e in ends]
        nodes, heap, order = [], [], 0

        def offer(parent, depth, members, score):  # push the `width` most frequent next tokens of members
            nonlocal order
            groups = {}
            for m in members:  # members are in recency order, so each group's first member is its latest
                groups.setdefault(continuations[m][depth], []).append(m)
            best = sorted(groups.items(), key=lambda g: (-len(g[1]), g[1][0]))[:width]
            for token, group in best:
                p = len(group) / len(members)
                heapq.heappush(heap, (-score * p, order, parent, depth + 1, token, p, group))
                order += 1

        offer(-1, 0, range(len(continuations)), 1.0)
        while heap and len(nodes) < max_nodes:
            neg_score, _, parent, depth, token, p, group = heapq.heappop(heap)
            nodes.append(Node(token, parent, depth, p))
            if depth < k:
                offer(len(nodes) - 1, depth, group, -neg_score)
        self.source = {"length": length, "end": ends[0], "occurrences": len(ends)}
        return nodes

    def _long_enough(self, length):
        self.source = {"length": length}  # a match too short (or none) to draft from: its length alone
        return length >= self.min_match


@dataclass
class SuffixDetails:
    """A round's record for --trace and --html: where the drafts came from, and the tree when width > 1."""
    match: dict          # SuffixDrafter.source: {"length", "end", "occurrences"} of the match drafted from ({}: no room)
    min_match: int       # the shortest match drafted from
    tree: TreeDetails = None  # the drafted tree (parents, path, probs: a node's share of its parent's continuations)
    n_draft: int = None  # the most drafts (the tree's depth) asked for
    k: int = None        # the most this round: n_draft, or fewer where fewer tokens were left to make


def suffix_generate(oracle, ids, n_new, n_draft=8, min_match=1, width=1, max_nodes=16, drafter=None, stats=None):
    """Greedy speculative decoding with suffix-automaton drafts; yields exactly greedy_generate's tokens.

    n_draft: the most tokens drafted per round (the draft length; the tree's depth).
    width=1: a line of drafts, checked like ngram.py's (speculative.verify);
    width>1: a tree of up to max_nodes nodes, each node at most `width` children,
    checked by tree.py's verify_tree in one oracle pass with a tree mask.
    drafter: a SuffixDrafter (default: SuffixDrafter(min_match)); each call starts it afresh.
    """
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft, width=width, max_nodes=max_nodes)
    drafter = SuffixDrafter(min_match) if drafter is None else drafter
    tokens, end, oracle_cache = list(ids), len(ids) + n_new, KVCache()
    drafter.start(tokens)
    while len(tokens) < end:
        # 1. Draft from the automaton: no model pass. The oracle adds one token: no overshoot.
        start = time.perf_counter()
        k = min(n_draft, end - len(tokens) - 1)
        nodes = drafter.propose_tree(k, width, max_nodes) if width > 1 else None
        drafted = drafter.propose(k) if nodes is None else [node.token for node in nodes]
        stats.add_time("draft", time.perf_counter() - start)
        details = SuffixDetails(drafter.source, drafter.min_match, n_draft=n_draft, k=k)
        context_length = len(tokens)
        # 2-4. Verify, accept, roll back: a line as in speculative_generate, a tree as in tree_generate.
        if nodes is None:
            n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        else:
            path, new_tokens, oracle_choice = verify_tree(oracle, oracle_cache, tokens, nodes, stats)
            oracle_cache.keep(list(range(context_length)) + [context_length + i for i in path])
            n_accepted = len(path)
            details.tree = TreeDetails([node.parent for node in nodes], path, [node.p for node in nodes],
                                       n_draft=n_draft, k=k)
        tokens += new_tokens
        rollback(len(tokens) - 1, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(None, oracle_cache), details=details,
                        positions=None if nodes is None else tree_depth(nodes))
        # 5. The automaton learns the accepted tokens (draft time: it is the drafter's work).
        start = time.perf_counter()
        drafter.update(tokens)
        stats.add_time("draft", time.perf_counter() - start)
        yield from new_tokens
