"""A draft that speaks another vocabulary: speculative decoding across tokenizers.

    Timor, Mamou, Korat, Berchansky, Jain, Pereg, Wasserblat, Harel, "Accelerating LLM Inference
    with Lossless Speculative Decoding Algorithms for Heterogeneous Vocabularies", ICML 2025,
    arXiv 2502.05202 (three algorithms: SLEM, SLRS, TLI; two of them are here).

Everywhere else here the draft and the oracle share one vocabulary, so a draft token is an
oracle token. Here they do not: the draft writes its guesses in its own tokens, and the two
models meet only in the text. Every token of a byte-level BPE is a byte string
(enc.decode_single_token_bytes), so the text is bytes, and this module works in bytes
throughout: a draft's text can end inside a UTF-8 character, and so can an oracle token.
The oracle's tokens are the output and are never re-tokenized; the draft keeps its own
token list, which always spells the text so far (at first the prompt's bytes in its tokens;
its cache holds a prefix of that list).

Greedy: string-level exact match (SLEM), crossvocab_generate. One round:
  1. draft:      the draft proposes k tokens greedily, in its own vocabulary;
  2. translate:  their bytes become the oracle's candidate tokens (encode_bytes on the new
                 bytes only), cut so that the round adds at most the tokens left;
  3. verify:     one oracle pass over the candidates; keep the agreeing prefix plus the
                 oracle's own next token (speculative.verify);
  4. roll back:  the oracle's cache as in speculative.py; the draft's token list back to its
                 longest prefix that spells a prefix of the agreed text (align_suffix), the
                 agreed bytes past it encoded in the draft's tokens and appended (catch_up);
                 its cache, like the oracle's, never keeps the newest token (when the agreed
                 text ends where a kept draft ends, nothing is appended: that draft is fed again).
  The text is exactly the oracle's greedy text: a candidate is kept only when it is the
  oracle's own argmax, whatever the translation made of the drafts.

Sampling: token-level intersection (TLI), crossvocab_sample. One round:
  1. draft:      p' = the draft's distribution restricted to the tokens whose bytes both
                 vocabularies have, renormalised, written in the oracle's ids, zeros elsewhere
                 (intersection_proposal); x̃_t ~ p' for t = 1..k, each x̃_t a token of both;
  2. verify:     q(x | x_1..x_n, x̃_1..x̃_t) for t = 0..k in one oracle pass;
  3. accept:     sps.py's rule (sps.accept_or_resample): keep x̃_t when r < min(1, q/p'), else
                 draw from (q - p')+ and stop; all kept: a bonus token from q;
  4. roll back:  as in the greedy round. After a rejection the oracle's token may be outside
                 the intersection: the draft reads it through the text.
  Why it is exact for any draft: a round is sps.py's Algorithm 2 with the proposal p', and
  sps.py's proof holds for any proposal whose draws x have p'(x) > 0: x comes out as a kept
  draft with probability min(p'(x), q(x)) and through the residual with (q(x) - p'(x))+,
  which add up to q(x). Nothing there asks p' to have mass where q has: outside the
  intersection p' = 0, so those tokens come out through the residual, whose mass there is
  all of q's. p' depends only on what came before (the text, the draft's token list), as a
  proposal may; so every token, given the tokens before it, has exactly q's distribution.
  When p' has no mass at all (every likely draft token outside the intersection, or an
  empty intersection) the draft stops: a round with no draft is the oracle drawing one token
  from q alone (accept_or_resample's bonus).

String-level rejection sampling (SLRS), the paper's third algorithm, is not here. It keeps
an oracle token t with probability min(1, q(t) / p(t)), where p(t) is the probability that
the draft's next text is t's bytes: a sum over every sequence of draft tokens that spells
them, each sequence its own chain of draft passes. In a byte-level BPE every byte is a token,
so n bytes can be spelled in up to 2^(n - 1) ways, and the paper notes the cost is
exponential in the worst case. A search over those spellings, each with a cache of its own,
does not fit in a readable page; TLI is exact at the price of acceptance instead.

Where re-tokenizing at a boundary can split differently, and what the code does about it:
  - The drafts' bytes are encoded alone, not with the text before them: encoding the whole
    text again could merge across the boundary (" th" + "e" into " the") and change tokens
    the oracle has already emitted. The candidates therefore start at the boundary, where the
    oracle's next token starts too.
  - The drafts' text can end inside an oracle token (" th" of " the") or inside a character:
    the last candidate is then a piece the oracle may not choose, and if so it is rejected:
    that costs acceptance, never the text. encode_bytes spells bytes that are no whole
    character with single-byte tokens, so nothing is lost.
  - The agreed text can end inside a draft token: the draft's list rolls back to before it and
    the agreed bytes of it are encoded again (align_suffix, catch_up). The draft may then read
    a split it would not make itself (" t" "h" where it says " the"): acceptance again.
  - "<|endoftext|>" is each side's own special token: the tokenizer (as weights/tokenizer.encode
    does) turns those 13 bytes into it. A model that writes them with ordinary tokens is read
    by the other side as the special token; that changes a proposal or what the draft reads,
    never the oracle's tokens.

transformers has both (generation/candidate_generator.py, "universal assisted generation"):
AssistedCandidateGeneratorDifferentTokenizers re-tokenizes through decoded text, looking back a
few tokens and matching the re-encoded ids against the old ones (this module compares bytes);
UniversalSpeculativeDecodingGenerator maps tokens by their strings and suppresses the draft's
tokens the target lacks (logits -inf, so the softmax renormalises: the same p').

Windows: the oracle needs room for the prompt and n_new tokens (decoding.check_room). The same
text can take more or fewer of the draft's tokens (at most one per byte): the prompt must fit
the draft's window (a GenerationError before any work), and when the draft's token list fills
its window later, the draft stops drafting and the oracle goes on alone, one token a round.
"""

import math
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from decoding import GenerationError, cache_lengths, check_lengths, check_room, feed
from stats import Stats
from kvcache import KVCache
from processors import as_processor
from speculative import rollback, verify
from sps import accept_or_resample, sample


@dataclass
class CrossVocabDetails:
    """A round's record for --trace and --html: the round seen in both vocabularies."""
    n_draft: int        # draft tokens per round asked for
    draft_ids: list     # the draft's tokens drafted this round (k of them), its own ids
    text: bytes         # their text
    candidates: list    # the oracle's ids it checked: that text in its tokens, cut to the tokens left (Round.drafted)
    kept: int           # candidates the oracle kept (Round.accepted)
    new: list           # the round's new tokens, the oracle's ids (Round.new)
    draft_kept: int     # how many of draft_ids stay in the draft's token list: they spell a prefix of the agreed text
    reencoded: list     # the agreed text past them, in the draft's tokens, appended to its list (fed next round)
    stopped: str = ""   # why the draft stopped before n_draft, other than the tokens left to make
    tests: list = None  # sampling: per candidate checked, {token, p, q, r, accepted} (p is p', the restricted draft)
    draft_pieces: list = None      # the bytes of each of draft_ids: --trace and --html show the draft's own tokens
    reencoded_pieces: list = None  # the bytes of each of reencoded


# ---------------------------------------------------------------------------
# Greedy: string-level exact match (SLEM)
# ---------------------------------------------------------------------------

def crossvocab_generate(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft=4, stats=None):
    """SLEM: yields exactly speculative.greedy_generate(oracle, ids, n_new)'s tokens.

    ids: the oracle's prompt tokens; draft_enc, oracle_enc: each model's tokenizer, a tiktoken
    Encoding of a byte-level BPE (weights/tokenizer.load_tokenizer). n_draft: the draft's tokens per round.
    """
    stats = Stats() if stats is None else stats
    draft_tokens = check_crossvocab_args(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        # 1. Draft k tokens greedily in the draft's vocabulary.
        k, stopped = draft_length(n_draft, end - len(tokens), draft, draft_tokens)
        drafted = []
        for _ in range(k):
            logits = feed(draft, draft_cache, draft_tokens + drafted, stats, "draft")[-1]
            drafted.append(int(np.argmax(logits)))
        # 2. Their bytes in the oracle's tokens. The oracle adds one token of its own: cut to one short of
        #    what is left (the k drafts can make more candidates than k, or fewer).
        text = spell(draft_enc, drafted)
        candidates = as_drafting(stats, encode_bytes, oracle_enc, text)[:end - len(tokens) - 1]
        # 3. One oracle pass checks them; keep the agreeing prefix + one.
        n_kept, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, candidates, stats)
        context_length = len(tokens)
        tokens += new_tokens
        # 4. The oracle's cache back to the kept tokens, the draft's list and cache back to the agreed text.
        draft_kept, reencoded = back_to_the_agreed_text(tokens, new_tokens, drafted, draft_tokens, oracle_cache,
                                                        draft_cache, draft_enc, oracle_enc, stats)
        details = CrossVocabDetails(n_draft, drafted, text, candidates, n_kept, new_tokens, draft_kept, reencoded,
                                    stopped, draft_pieces=pieces(draft_enc, drafted),
                                    reencoded_pieces=pieces(draft_enc, reencoded))
        stats.add_round(new_tokens, candidates, n_kept, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache), details=details)
        yield from new_tokens


# ---------------------------------------------------------------------------
# Sampling: token-level intersection (TLI)
# ---------------------------------------------------------------------------

def crossvocab_sample(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft=4, rng=None, processor=None,
                      stats=None, **flags):
    """TLI: yields n_new ids distributed exactly as sps.autoregressive_sample(oracle, ...).

    The arguments are crossvocab_generate's, and sps.speculative_sample's rng and processor (or
    its flags temperature, top_k, top_p): one processor makes both the draft's p and the oracle's q.
    """
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng
    processor = as_processor(processor, **flags)
    draft_tokens = check_crossvocab_args(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft)
    to_oracle, to_draft = shared_tokens(draft_enc, oracle_enc)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        # 1. Draw up to k drafts from p', the draft's distribution on the shared tokens: each is an oracle
        #    token (a candidate) and a draft token at once, with the same bytes.
        k, stopped = draft_length(n_draft, end - len(tokens), draft, draft_tokens)
        drafted, candidates, p = [], [], []
        for _ in range(k):
            p_draft = processor(feed(draft, draft_cache, draft_tokens + drafted, stats, "draft")[-1])  # [draft V]
            proposal = intersection_proposal(p_draft, to_oracle, len(to_draft))  # [oracle V], or None
            if proposal is None:
                stopped = "the draft's distribution has no mass on the tokens both vocabularies share"
                break
            candidates.append(sample(proposal, rng))  # p'(x) > 0 for the token drawn: q/p' is a finite ratio
            drafted.append(int(to_draft[candidates[-1]]))
            p.append(proposal)
        # 2. The oracle's q for all positions in one pass: q[t] conditions on the first t candidates.
        q = processor(feed(oracle, oracle_cache, tokens + candidates, stats, "oracle", n_logits=len(candidates) + 1))
        # 3. sps.py's rule; with no candidate, the oracle's own token drawn from q[0].
        new_tokens, rs = accept_or_resample(q, p, candidates, rng)
        n_kept = len(new_tokens) - 1
        context_length = len(tokens)
        tokens += new_tokens
        # 4. Both back to the agreed text, as in the greedy round.
        draft_kept, reencoded = back_to_the_agreed_text(tokens, new_tokens, drafted, draft_tokens, oracle_cache,
                                                        draft_cache, draft_enc, oracle_enc, stats)
        tests = [{"token": x, "p": float(p[t][x]), "q": float(q[t][x]), "r": r, "accepted": t < n_kept}
                 for t, (x, r) in enumerate(zip(candidates, rs))]
        details = CrossVocabDetails(n_draft, drafted, spell(draft_enc, drafted), candidates, n_kept, new_tokens,
                                    draft_kept, reencoded, stopped, tests, pieces(draft_enc, drafted),
                                    pieces(draft_enc, reencoded))
        stats.add_round(new_tokens, candidates, n_kept, context_length=context_length,
                        cached=cache_lengths(draft_cache, oracle_cache), details=details)
        yield from new_tokens


def back_to_the_agreed_text(tokens, new_tokens, drafted, draft_tokens, oracle_cache, draft_cache, draft_enc,
                            oracle_enc, stats):
    """Step 4 of both rounds, once `tokens` holds the round's new tokens: the oracle's cache cut to the kept
    tokens, the draft's list (draft_tokens, extended in place) and cache to the agreed text. Each cache keeps
    all but its list's newest token, which the next round feeds. -> (draft_kept, reencoded): the drafts that
    stay, spelling the agreed text's start, and the rest of that text in the draft's tokens (catch_up)."""
    rollback(len(tokens) - 1, oracle_cache)
    draft_kept, reencoded = as_drafting(stats, catch_up, drafted, new_tokens, draft_enc, oracle_enc)
    rollback(len(draft_tokens) + draft_kept, draft_cache)
    draft_tokens += drafted[:draft_kept] + reencoded
    rollback(len(draft_tokens) - 1, draft_cache)
    return draft_kept, reencoded


def intersection_proposal(p_draft, to_oracle, oracle_vocab_size):  # [draft V] -> [oracle V], or None
    """Step 1's p': the draft's distribution on the tokens both vocabularies have (to_oracle[d] >= 0),
    renormalised, in the oracle's ids, zeros elsewhere; None when those tokens have no mass.

    None, and not a division by zero: 0/0 would put NaN in p', and sps's min(1, q/p') is 1 for a NaN
    (Python's min keeps its first argument when a comparison with NaN is false): every draft kept.
    """
    shared = to_oracle >= 0
    mass = float(p_draft[shared].sum())
    if not (mass > 0 and math.isfinite(mass)):
        return None
    proposal = np.zeros(oracle_vocab_size, dtype=np.float32)
    proposal[to_oracle[shared]] = p_draft[shared] / mass
    return proposal


@lru_cache(maxsize=8)
def shared_tokens(draft_enc, oracle_enc):  # -> [draft V], [oracle V] (read-only)
    """The intersection of the vocabularies, by bytes: to_oracle[d] is the oracle's id of draft token d's
    bytes, -1 where the oracle has no such token; to_draft the same the other way. <|endoftext|> is shared
    when both have it (its bytes are the same). Made once per pair of tokenizers."""
    to_oracle = np.full(draft_enc.n_vocab, -1, dtype=np.int64)
    to_draft = np.full(oracle_enc.n_vocab, -1, dtype=np.int64)
    for d in range(draft_enc.n_vocab):
        o = token_id(oracle_enc, draft_enc.decode_single_token_bytes(d))
        if o is not None:
            to_oracle[d], to_draft[o] = o, d
    to_oracle.flags.writeable = to_draft.flags.writeable = False  # shared by every call: nobody may change them
    return to_oracle, to_draft


# ---------------------------------------------------------------------------
# Between the vocabularies: bytes, and the draft catching up with the agreed text
# ---------------------------------------------------------------------------

def catch_up(drafted, new_tokens, draft_enc, oracle_enc):
    """Step 4 for the draft: (how many of this round's drafts stay in its token list, the draft's tokens of
    the agreed text past them). The round's agreed text is the oracle's new tokens' bytes."""
    n, rest = align_suffix([draft_enc.decode_single_token_bytes(t) for t in drafted], spell(oracle_enc, new_tokens))
    return n, encode_bytes(draft_enc, rest)


def align_suffix(drafted, text):
    """The draft's tokens rolled back to the agreed text: (n, rest).

    drafted: the bytes of each token the draft proposed this round, in order; text: the bytes the
    round agreed on. The first n drafts are the longest run, from the first, whose bytes together are
    a prefix of text: they stay. rest is the text past them, which the draft has not read in its own
    tokens; it can begin inside a drafted token, and begin or end inside a UTF-8 character.
    """
    n, end = 0, 0
    while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:  # the whole token lies in text
        end += len(drafted[n])
        n += 1
    return n, text[end:]


def encode_bytes(enc, text):  # bytes -> token ids
    """Token ids whose bytes are exactly text, however it begins or ends.

    The tokenizer encodes strings, and text need not be one: it can begin or end inside a UTF-8
    character, or hold bytes of no character. So its longest valid UTF-8 prefix goes through the
    tokenizer (its own split; "<|endoftext|>" the special token), the byte after it becomes that
    byte's own token (a byte-level BPE has one for every byte: check_tokenizer), and the rest is
    encoded the same way.
    """
    ids = []
    while text:
        try:
            return ids + encode_text(enc, text.decode("utf-8"))
        except UnicodeDecodeError as e:  # e.start: the first byte that is no part of a whole character
            valid, stray = text[:e.start].decode("utf-8"), text[e.start:e.start + 1]
            ids += encode_text(enc, valid) + [enc.encode_single_token(stray)]
            text = text[e.start + 1:]
    return ids


def encode_text(enc, text):  # str -> token ids
    """The tokenizer's ids of text, "<|endoftext|>" in it the special token: weights/tokenizer.encode's rule."""
    return enc.encode(text, allowed_special=set(enc.special_tokens_set))


def spell(enc, tokens):  # token ids -> bytes
    """The text of tokens: their bytes, joined (<|endoftext|>'s are its 13 bytes)."""
    return b"".join(enc.decode_single_token_bytes(t) for t in tokens)


def pieces(enc, tokens):  # token ids -> [bytes of each]
    """Each token's bytes, apart: what a round's record keeps to show tokens of the draft's vocabulary."""
    return [enc.decode_single_token_bytes(t) for t in tokens]


def token_id(enc, token_bytes):
    """The id of the token whose bytes are token_bytes (a special token's too), or None if enc has none."""
    try:
        return enc.encode_single_token(token_bytes)
    except KeyError:
        return None


def as_drafting(stats, function, *args):
    """function(*args), its time counted as drafting: translating between vocabularies is the price of the draft."""
    start = time.perf_counter()
    result = function(*args)
    stats.add_time("draft", time.perf_counter() - start)
    return result


# ---------------------------------------------------------------------------
# The draft length, and the checks made before any work
# ---------------------------------------------------------------------------

def draft_length(n_draft, n_left, draft, draft_tokens):
    """This round's k, and how the draft's window cut it short ("" if it did not).

    As speculative.py: at most n_draft, and one short of the n_left tokens left to make (step 2
    cuts the candidates to that too). And at most what the draft's window still holds: drafting k
    tokens reads draft_tokens and k - 1 drafts. A full window gives k = 0: the oracle alone.
    """
    wanted = min(n_draft, n_left - 1)
    window_left = max(0, draft.n_positions + 1 - len(draft_tokens))
    if window_left >= wanted:
        return wanted, ""
    return window_left, f"the draft's window had room for {window_left} more" if window_left else "the draft's window is full"


def check_crossvocab_args(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft):
    """The checks before any work, one line each; returns the prompt in the draft's tokens."""
    check_tokenizer("draft", draft, draft_enc)
    check_tokenizer("oracle", oracle, oracle_enc)
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft)
    bad = [t for t in ids if not 0 <= t < oracle.vocab_size]
    if bad:
        raise GenerationError(f"the prompt's token {bad[0]} is not in the oracle's vocabulary of {oracle.vocab_size}")
    draft_tokens = encode_bytes(draft_enc, spell(oracle_enc, ids))
    if len(draft_tokens) > draft.n_positions:
        raise GenerationError(f"the prompt takes {len(draft_tokens)} of the draft's tokens, more than its window "
                              f"of {draft.n_positions}")
    return draft_tokens


def check_tokenizer(role, model, enc):
    """The tokenizer must be the model's (as many tokens as its vocab_size, weights/tokenizer.check_vocabulary's
    rule) and a byte-level BPE, a token for every byte: then any bytes can be written in it."""
    if enc.n_vocab != model.vocab_size:
        raise GenerationError(f"the {role}'s tokenizer has {enc.n_vocab} tokens but the {role} has a vocabulary of "
                              f"{model.vocab_size}: the tokenizer is not the {role}'s")
    missing = [b for b in range(256) if token_id(enc, bytes([b])) is None]
    if missing:
        raise GenerationError(f"the {role}'s tokenizer has no token for the byte 0x{missing[0]:02x}: crossing "
                              f"vocabularies needs a byte-level BPE, with a token for every byte")
