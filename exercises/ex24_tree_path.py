"""Exercise 24 (core): explain a tree round: which path does the oracle keep?   EXERCISES.md, exercise 24

A tree round drafts nodes 0 .. n-1: node i is token tokens[i] after its parent
parents[i] (-1: the root, the last token of the text). One oracle pass gives
choice[0], its greedy token after the root, and choice[i + 1], its token after
node i. accepted_path(parents, tokens, choice) returns the indices of the nodes
the round keeps, root first: from the root, step to the child whose token is
the oracle's choice there, as long as there is one.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a list of Python ints (the node indices)
  arguments  parents, tokens, choice come back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries an empty tree; nothing kept; a line kept to its leaf; a choice
             that only a grandchild has

Check: pytest exercises/ -k ex24
"""


def accepted_path(parents, tokens, choice):
    raise NotImplementedError("exercise 24: write accepted_path")
