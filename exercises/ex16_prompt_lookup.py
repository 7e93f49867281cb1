"""Exercise 16 (warm-up): prompt lookup, drafts without a draft model.   EXERCISES.md, exercise 16

Text repeats itself: names, identifiers, quoted passages. lookup(tokens, k,
max_tail=3) guesses what comes next from the text alone. For n = max_tail
down to 1: take the last n tokens (the tail); if they occur earlier in tokens,
return the (up to) k tokens that followed their LATEST earlier occurrence, not
the tail itself. The first n that matches wins. Nothing matches: [].

    lookup([1, 2, 3, 9, 1, 2, 3], 2) == [9, 1]
    lookup([5, 6, 7, 5, 6, 8, 5, 6], 3, max_tail=2) == [8, 5, 6]

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a list of Python ints (the token ids)
  arguments  tokens comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries an empty text; one token; k = 0; a continuation cut by the end
             of the text; an overlapping match; max_tail longer than the
             text

Check: pytest exercises/ -k ex16
"""


def lookup(tokens, k, max_tail=3):
    raise NotImplementedError("exercise 16: write lookup")
