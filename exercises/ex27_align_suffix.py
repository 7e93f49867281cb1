"""Exercise 27 (core): align the draft's tokens with a re-tokenized suffix.   EXERCISES.md, exercise 27

crossvocab.py lets a draft with its own tokenizer draft for the oracle: the two
meet only in the text, as bytes. After a round the draft's token list must
spell the agreed text again. Its drafts of the round stay as long as they spell
a prefix of it; the agreed bytes past them are encoded again in the draft's
tokens (crossvocab.catch_up does that with your answer).

align_suffix(drafted, text): drafted is the bytes of each token the draft
proposed this round, in order; text the bytes the round agreed on. Return
(n, rest): n, the longest run of drafts from the first whose bytes together
are a prefix of text (an int), and rest, the bytes of text past them. The text
can end inside a draft token, and begin or end inside a UTF-8 character.

Held to (exercises/checks/contract.py), before the checker's own cases:
  returns    a tuple (n, rest): n, an int, and rest, bytes
  arguments  drafted comes back unchanged
  randomness none: the same arguments, the same answer
  passes     not counted
  boundaries no drafts; an empty text; a text that ends exactly at a draft's
             end; a text that ends inside a UTF-8 character

Check: pytest exercises/ -k ex27
"""


def align_suffix(drafted, text):
    raise NotImplementedError("exercise 27: write align_suffix")
