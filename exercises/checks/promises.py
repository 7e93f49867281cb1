"""What each exercise's text promises, as contract.py holds it: the type it returns, the arguments it leaves as they
came, its randomness, its forward passes where it is about them, and the boundaries its text names. Each exercise
file's docstring says the same under "Held to" (Contract.describe writes it; tests/test_exercises.py compares).

CONTRACTS maps an exercise's number to its contract. The boundaries are inputs only: what the answer must give
there is what the reference gives (`pytest exercises/ --reference` checks the project's own functions)."""

import copy

import numpy as np

from tree import Node

from .contract import (Array32, Bool, Boundary, Bytes, Contract, Dict, Float, Int, List, Nothing, Sized, Tuple,
                       Yields, shown)
from .models import TableModel, held_out_prompts, learned_pair, short_pair, tiny_pair
from .part1_greedy import FakeCache, cache_problem, explain_generator, explain_prefix, explain_rollback, generated, spied
from .part2_threshold import GUESS, explain_drafting, explain_seed, explain_threshold
from .part3_sampling import explain_alpha, explain_keep, explain_probabilities, explain_residual
from .part3_sps_round import one_target_pass, round_length, sps_boundaries, sps_probes
from .part4_lookup_tree import explain_lookup, explain_mask, mask_rows, same_mask
from .part6_real_text import BY_NAME, explain_draft_length, explain_kinds, nothing_drafted
from .part6_tree_lookup import CHOICE, GuardedTokens, explain_replay, explain_tree_path
from .part7_batch import explain_cut
from .part7_vocab import explain_alignment
from .part8_sequoia import CRASH_HINTS as TOO_DEEP, agree as same_value, sequoia_boundaries, sequoia_probes
from .part8_traversal import CRASH_HINTS as RS_HINTS, agree, display, traversal_boundaries, traversal_probes

ID, IDS = Int("a token id"), List(Int("a token id"), "the token ids")


def call(name, *shown_args):
    return f"{name}({', '.join(shown_args)})"


def plain(name, args):
    """The text of a call whose arguments are shown as they are."""
    return call(name, *(shown(a, 80) for a in args))


def boundary(name, what, args, hint, explain=None):
    """A boundary whose arguments are values (each call gets a deep copy of them); explain(args, got, expected)."""
    return Boundary(what, plain(name, args), lambda: _copy(args), hint,
                    explain and (lambda got, expected, f: explain(args, got, expected, f)))


def _copy(args):
    return copy.deepcopy(args)


def near(tolerance):
    return lambda a, b: abs(a - b) <= tolerance


def arrays_near(tolerance):
    return lambda a, b: a.shape == b.shape and bool(np.allclose(a, b, atol=tolerance, rtol=0))


def probe(name, *args):
    return [(plain(name, args), lambda: _copy(args))]


# --- part 1 -----------------------------------------------------------------------------------------------

def prefix_boundaries():
    name, explain = "accepted_prefix_length", explain_prefix
    return [boundary(name, "every draft accepted: the count runs to the end of drafted", ([5, 7, 9], [5, 7, 9, 4]),
                     "when every draft matches, all len(drafted) of them are accepted: the count stops at the end of "
                     "drafted", explain),
            boundary(name, "no drafts at all, an empty drafted: oracle_choice holds the oracle's own token alone",
                     ([], [3]), "with no drafts the count is 0, and the loop must not read drafted[0]", explain),
            boundary(name, "token id 0, an ordinary token", ([0, 0], [0, 1, 2]),
                     "token id 0 is a token like any other (a test such as `if drafted[n]` treats it as missing)",
                     explain)]


def rollback_case(n_kept, lengths, what, hint):
    text = f"rollback({n_kept}{''.join(f', <cache of {n}>' for n in lengths)})"
    return Boundary(what, text, lambda: (n_kept, *[FakeCache(n) for n in lengths]), hint,
                    lambda got, expected, f: explain_rollback((n_kept, *lengths), got, expected))


def rollback_boundaries():
    return [rollback_case(12, (12, 12), "caches that hold exactly n_kept positions: nothing to cut",
                          "keep n_kept positions, do not drop a count of them from the end: `[:-0]` keeps nothing"),
            rollback_case(9, (8,), "a cache shorter than n_kept (the draft's, after a round that kept every draft)",
                          "a cache shorter than n_kept must be left as it is: KVCache.truncate(n) refuses to lengthen"),
            rollback_case(0, (5,), "n_kept = 0: the cache keeps nothing", "truncate(n) keeps the first n positions: "
                          "n_kept = 0 keeps none"),
            rollback_case(5, (), "no cache at all", "rollback(n_kept, *caches) cuts every cache passed, and there may "
                          "be none"),
            rollback_case(9, (8, 10), "the draft's cache shorter than n_kept, the oracle's longer", "each cache is "
                          "cut to n_kept on its own, not to another cache's length")]


def generate_case(what, pair, ids, n_new, n_draft, hint):
    """A boundary of exercise 5, run with Spies: a wrong run says what the oracle's cache held, round by round."""
    text, last = f"speculative_generate(draft, oracle, {ids}, n_new={n_new}, n_draft={n_draft})", {}

    def args():
        made, last["spies"] = spied(pair, ids, n_new, n_draft)
        return made

    def explain(got, expected, f):
        return explain_generator(ids, n_new, got, None, last["spies"][1].calls)

    def crashed(f):  # what the oracle's cache held before the crash, where it held something else than the text
        calls = last["spies"][1].calls
        return explain_generator(ids, n_new, [], None, calls) if any(map(cache_problem, calls)) else None
    return Boundary(what, text, args, hint, explain, crashed)


def generate_boundaries():
    ids = np.random.default_rng(7).integers(0, 272, 5).tolist()
    hint = ("step 1: a round drafts k = min(n_draft, tokens left - 1), which is 0 when one token is left: then the "
            "oracle reads the last token alone and adds its own")
    return [generate_case("a run of one token: its only round drafts nothing", tiny_pair, ids, 1, 4, hint),
            generate_case("a prompt of one token: there is no prompt pass, both caches start empty", tiny_pair, [7],
                          12, 3, "the prompt's pass feeds all the prompt but its last token: for a one-token prompt "
                                 "that is nothing, and a forward of no tokens is an error"),
            generate_case("one draft a round", tiny_pair, ids, 10, 1, "step 3 and step 4 when k = 1"),
            generate_case("the end of the context: the prompt and the new tokens fill the model's 24 positions",
                          short_pair, [i % 64 for i in ids[:4] * 2], 16, 4,
                          "each cache holds the text but its newest token, and a round drafts at most the tokens left "
                          "but one: a cache never cut, or a round that drafts past the end, asks for positions the "
                          "model does not have")]


# --- part 2 -----------------------------------------------------------------------------------------------

def one_hot(v, i):
    p = np.zeros(v, np.float32)
    p[i % v] = 1
    return p


def certain(tokens):  # the draft is sure of its next token: probability exactly 1.0
    return one_hot(8, tokens[-1] + 1)


def halves(tokens):  # two tokens of probability exactly 0.5 each: a cumulative probability of 0.5, 0.25, ...
    p = np.zeros(8, np.float32)
    p[[(tokens[-1] + 1) % 8, (tokens[-1] + 2) % 8]] = 0.5
    return p


def drafting_case(what, model, tokens, k, threshold, hint):
    text = f"draft_while_confident({model().name}, {tokens}, k={k}, threshold={threshold})"
    return Boundary(what, text, lambda: (model(), list(tokens), k, threshold), hint,
                    lambda got, expected, f: explain_drafting((model(), tokens, k, threshold), got, expected))


def drafting_boundaries():
    at_least = "drafting goes on while the cumulative probability is AT LEAST the threshold: `>=`, not `>`"
    return [drafting_case("threshold 1.0: the first guess is tested with the probability of no guess at all, 1.0, "
                          "which is at least 1.0", lambda: tiny_pair()[0], [5, 9, 2], 4, 1.0, at_least),
            drafting_case("threshold 1.0 and a draft certain of every guess (probability exactly 1.0)",
                          lambda: TableModel(8, certain, "<a draft certain of every guess>"), [3], 3, 1.0, at_least),
            drafting_case("a cumulative probability exactly equal to the threshold (guesses of probability 0.5 each: "
                          "0.5, then 0.25)", lambda: TableModel(8, halves, "<a draft of two tokens at 0.5 each>"),
                          [3], 5, 0.25, at_least),
            drafting_case("k = 0: no room for a guess", lambda: tiny_pair()[0], [5, 9, 2], 0, 0.4,
                          "the loop's limit: at most k guesses, and none at all when k is 0"),
            drafting_case("threshold 0: drafting stops only at k", lambda: tiny_pair()[0], [5, 9, 2], 3, 0.0,
                          "with threshold 0 every cumulative probability is at least the threshold")]


def one_pass_per_guess(args, guesses, passes):
    if passes["draft"] != len(guesses):
        return (f"the draft ran {passes['draft']} forward passes for {len(guesses)} guesses: one per guess, and none "
                "for a guess it does not make",
                "where the loop tests the cumulative probability: before the forward of the next guess, so that "
                "drafting stops without a pass it throws away (the guess that takes the probability below the "
                "threshold is proposed: it was computed already)")
    return None


def threshold_boundaries():
    name, explain = "next_threshold", explain_threshold
    return [boundary(name, "nothing accepted: the accepted prefix is empty, and its probability is 1.0",
                     (0.4, [0.9, 0.6], 0, 0.1), "what cumulative[n_accepted - 1] means when n_accepted is 0 (Python's "
                     "cumulative[-1] is the LAST element)", explain),
            boundary(name, "every draft accepted", (0.4, [0.9, 0.6], 2, 0.1),
                     "when every draft was accepted, lower the threshold by boost", explain),
            boundary(name, "a round of no drafts (an empty cumulative): none was rejected", (0.4, [], 0, 0.1),
                     "n_accepted == len(cumulative): every draft the round made was accepted, so lower by boost",
                     explain),
            boundary(name, "the lower clamp: 0.1 - 0.1 is below 0.05", (0.1, [0.9], 1, 0.1),
                     "the threshold must stay within [0.05, 0.95]", explain),
            boundary(name, "the upper clamp: halfway to 1.0 from 0.95 is above 0.95", (0.95, [0.99], 0, 0.1),
                     "the threshold must stay within [0.05, 0.95]", explain),
            boundary(name, "the lower clamp after a rejection: halfway from 0.06 toward 0.02 is below 0.05",
                     (0.06, [0.02, 0.01], 1, 0.1), "the threshold must stay within [0.05, 0.95], after either branch",
                     explain)]


def seed_boundaries():
    name, explain = "update_threshold", explain_seed
    return [boundary(name, "no draft accepted (the notes' n_accepted = 1, the oracle's token alone): the accepted "
                     "prefix is empty, probability 1.0", (0.4, [0.9, 0.6], 1, 2, 0.1),
                     "the index when n_accepted is 1: drafted_probs[-1] is Python's LAST element", explain),
            boundary(name, "every draft accepted (n_accepted = n_draft + 1)", (0.4, [0.9, 0.6], 3, 2, 0.1),
                     "the branch taken when all drafts were accepted", explain),
            boundary(name, "n_draft = 1, its draft rejected", (0.5, [0.8], 1, 1, 0.1),
                     "which draft's cumulative probability the update moves toward, in the notes' counting", explain),
            boundary(name, "n_draft = 1, its draft accepted", (0.3, [0.8], 2, 1, 0.1),
                     "the branch's test: which values of the notes' n_accepted mean a rejection", explain)]


# --- part 3 -----------------------------------------------------------------------------------------------

LOGITS = np.array([1.0, 3.0, 2.0, 0.0, -1.0, 2.5], np.float32)


def cases(name, explain):
    """boundary(name, what, args, hint, explain), for boundaries of one function that share their explain."""
    return lambda what, args, hint: boundary(name, what, args, hint, explain)


def f32(*values):
    return np.array(values, np.float32)


def probabilities_boundaries():
    case = cases("probabilities", explain_probabilities)
    tiny = f32(0.0, 5e-4, -2e-3)
    units = f32(0, 3, -2) * np.finfo(np.float32).smallest_subnormal
    floor = ("divide by the temperature itself: a floor such as max(temperature, 1e-3) changes every temperature "
             "below it; only below the smallest float32, about 1.4e-45, is there nothing left to divide by")
    return [case("temperature 0 on a tie: all the mass on the first argmax", (f32(1, 3, 3, 0), 0, None),
                 "np.argmax, the first on a tie"),
            case("a tiny temperature over logits as close together as it: softmax(logits / 1e-4) is softmax([0, 5, "
                 "-20]), far from uniform", (tiny, 1e-4, None), floor),
            case("a tiny temperature over ordinary logits: logits / 1e-40 overflow float32", (LOGITS * 30, 1e-40, None),
                 "softmax does not change when you subtract the largest logit: do that before dividing"),
            case("the smallest temperature float32 carries, 1.4e-45, over logits a few of its units apart",
                 (units, 1e-45, None), floor),
            case("a temperature below the smallest float32: np.float32(1e-50) is 0", (LOGITS, 1e-50, None),
                 "divide by at least np.finfo(np.float32).smallest_subnormal: 0 / 0 is NaN, and logits / 0 is inf"),
            case("top_k = V keeps every token", (LOGITS, 1.0, 6), "k >= V keeps everything"),
            case("top_k larger than the vocabulary", (LOGITS, 1.0, 10),
                 "top_k can be larger than the vocabulary: then every token keeps its probability"),
            case("top_k = 1: all the mass on the largest logit", (LOGITS, 0.7, 1),
                 "everything below the k-th largest logit gets probability 0")]


def residual_boundaries():
    case = cases("residual", explain_residual)
    return [case("zero probabilities in both", (f32(0, 0.5, 0.5), f32(0.5, 0.5, 0)),
                 "the residual is the mass the target q has and the draft p lacks: max(q - p, 0)"),
            case("the target certain of one token", (f32(1, 0, 0), f32(0.5, 0.5, 0)),
                 "max(q - p, 0), renormalised to sum to 1"),
            case("q and p certain of different tokens: the residual is q itself", (f32(0, 1, 0), f32(1, 0, 0)),
                 "max(q - p, 0), renormalised"),
            case("q = p: (q - p)+ is all zeros, and q is the answer", (f32(0.2, 0.5, 0.3), f32(0.2, 0.5, 0.3)),
                 "the case where max(q - p, 0) sums to 0: return q (exercise 11's answer says why)")]


def keep_boundaries():
    case = cases("keep_draft", explain_keep)
    strict = ("r can be exactly 0.0 (rng.random() draws from [0, 1)): a token the target never emits, q(x) = 0, must "
              "not be kept even then. The test is strict, r < min(1, q(x)/p(x)), and 0 < 0 is False (`not r > ...` "
              "and `<=` keep it)")
    ones = "min(1, q(x)/p(x)) is 1 here, and every r in [0, 1) is below it"
    return [case("r = 0.0 and q(x) = 0: the target never emits x", (f32(0, 0.2, 0.8), f32(0.5, 0.5, 0), 0, 0.0),
                 strict),
            case("r = 0.0 and the target certain of another token", (f32(1, 0), f32(0.5, 0.5), 1, 0.0), strict),
            case("r = 0.0 and q(x) small but not 0", (f32(0.001, 0.5, 0.499), f32(0.5, 0.5, 0), 0, 0.0),
                 "min(1, q(x)/p(x)) is above 0 here, and r = 0.0 is below it: keep"),
            case("q(x) = p(x), r just below 1: min(1, q/p) = 1 keeps every r",
                 (f32(0.3, 0.7), f32(0.3, 0.7), 1, float(np.nextafter(1.0, 0.0))), ones),
            case("both certain of x (q(x) = p(x) = 1)", (f32(0, 1), f32(0, 1), 1, 0.999), ones)]


def alpha_boundaries():
    case = cases("alpha", explain_alpha)
    keep = "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)"
    return [case("p = q: every draft is kept", (f32(0.2, 0.5, 0.3), f32(0.2, 0.5, 0.3)), keep),
            case("p and q certain of different tokens: no draft is ever kept", (f32(1, 0), f32(0, 1)),
                 "a draft x ~ p with q(x) = 0 is never kept"),
            case("after top-k: tokens with p(x) = q(x) = 0", (f32(0.3, 0.7, 0, 0, 0), f32(0.6, 0.4, 0, 0, 0)),
                 "a token neither model gives any probability adds nothing to alpha: sum_x min(p(x), q(x)) needs "
                 "no division"),
            case("both certain of the same token", (f32(0, 0, 1), f32(0, 0, 1)), keep)]


# --- part 4 -----------------------------------------------------------------------------------------------

def lookup_boundaries():
    case = cases("lookup", explain_lookup)
    return [case("an empty text", ([], 2), "what lookup returns when nothing matches"),
            case("a text of one token: nothing comes before its tail", ([5], 2),
                 "the search range: the starts before the tail's own"),
            case("k = 0", ([1, 2, 3, 1, 2, 3], 0), "the cut at k"),
            case("a match whose continuation runs into the end of the text: fewer than k follow", ([1, 2, 1, 2], 5),
                 "propose up to k tokens: those that follow, as many as there are"),
            case("an earlier occurrence that overlaps the tail", ([7, 7, 7, 7], 2),
                 "the search range: every start before the tail's own, overlapping or not"),
            case("max_tail longer than the text", ([4, 5, 4], 2, 5),
                 "the longest tail tried is min(max_tail, len(tokens) - 1) tokens long")]


def mask_boundaries():
    line = [Node(21, -1, 1), Node(22, 0, 2), Node(23, 1, 3)]
    tree = [Node(11, -1, 1), Node(12, -1, 1), Node(13, 0, 2), Node(14, 0, 2), Node(15, 1, 2), Node(16, 2, 3)]

    def case(what, nodes, new, n_text, n_fed, hint):
        text = f"tree_mask(<{len(nodes)} nodes>, new={new}, n_text={n_text}, n_fed={n_fed})"
        return Boundary(what, text, lambda: (copy.deepcopy(nodes), list(new), n_text, n_fed), hint,
                        lambda got, expected, f: (explain_mask((nodes, new, n_text, n_fed), got, expected)
                                                  if got.shape == expected.shape else None))
    width = "one row per new node, one column per position: the text, the nodes fed before, then the new ones"
    return [case("no node to feed (new = [])", tree, [], 4, 2, width),
            case("one node after a text of one token (the root alone)", line[:1], [0], 1, 0, width),
            case("a tree that is a line: the ordinary causal mask", line, [0, 1, 2], 2, 0,
                 "a node sees the text, its ancestors and itself"),
            case("the last node, every other fed before", tree, [5], 3, 5, "node i's keys sit in column n_text + i")]


# --- part 6 -----------------------------------------------------------------------------------------------

def kinds_case(what, n_new, n_draft, hint):
    def args():
        draft, oracle, _ = learned_pair()
        return draft, oracle, [(kind, list(ids)) for kind, ids in held_out_prompts()], n_new, n_draft
    text = f"acceptance_by_kind(draft, oracle, <the first prompt of each kind>, n_new={n_new}, n_draft={n_draft})"
    return Boundary(what, text, args, hint, lambda got, expected, f: explain_kinds(args(), got, expected))


def kinds_probe():
    case = kinds_case("", 4, 2, "")
    return [(case.call, case.args)]


def same_rates(a, b):
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-9 for k in a)


def best_boundaries():
    case = cases("best_draft_length", explain_draft_length)
    flat, step = {k: 10.0 for k in range(1, 8)}, {1: 10.0, 2: 10.0, 3: 20.0, 4: 20.0}
    return [case("a curve of two points: n_draft = 1 is the only choice", (0.8, 0.1, {1: 10.0, 2: 12.0}),
                 "n_draft runs from 1 to max(T) - 1, inclusive"),
            case("every score equal (alpha = 0, c = 0, a flat curve): the smallest n_draft", (0.0, 0.0, flat),
                 "on a tie, the smallest n_draft"),
            case("drafting and checking both free (c = 0, a flat curve): the longest n_draft", (0.9, 0.0, flat),
                 "n_draft runs up to max(T) - 1 inclusive"),
            case("alpha = 0: no draft is ever kept", (0.0, 0.1, flat), "score every n_draft as for any alpha"),
            case("alpha = 1: every draft kept, and (1 - alpha^(n_draft+1)) / (1 - alpha) is 0 / 0", (1.0, 0.1, step),
                 "alpha = 1 needs its own tokens per round, n_draft + 1: decoding.py's expected_tokens_per_round has "
                 "both cases"),
            case("alpha = 1, where n_draft = 2 scores above n_draft = 1 by one part in ten million: 3 tokens for "
                 "1.4999999 passes against 2 for 1", (1.0, 0.0, {1: 1.0, 2: 1.0, 3: 1.4999999}),
                 "at alpha = 1 a round yields n_draft + 1 tokens exactly: an alpha a hair below 1, or a formula's "
                 "limit, scores the longer rounds lower")]


def path_boundaries():
    name, explain = "accepted_path", explain_tree_path
    return [boundary(name, "an empty tree", ([], [], [3]), "with no node, the path is empty", explain),
            boundary(name, "no child of the root has the oracle's choice: nothing kept", ([-1, -1], [5, 6], [7, 0, 0]),
                     "a node is kept only when its token is the oracle's choice after its parent", explain),
            boundary(name, "a line kept to its leaf", ([-1, 0, 1], [5, 6, 7], [5, 6, 7, 8]),
                     "keep stepping down while a child of the last node has the oracle's choice", explain),
            boundary(name, "the oracle's choice after the root is a grandchild's token", ([-1, 0], [5, 6], [6, 0, 0]),
                     "the path starts at a child of the root: parents[j] == -1", explain)]


HAND_MADE = [1, 2, 3, 4, 5, 6, 1, 2, 3, 9, 5, 6, 7, 8, 2, 3]


def guarded(name, what, args, hint):
    """A boundary of replay_lookup whose text gives up when read without end (an endless replay)."""
    return Boundary(what, plain(name, args), lambda: (GuardedTokens(args[0]), *args[1:]), hint,
                    lambda got, expected, f: explain_replay(args, got, expected, f))


def replay_probe():
    case = guarded("replay_lookup", "", (HAND_MADE, 8, 4), "")
    return [(case.call, case.args)]


def replay_boundaries():
    name, t, boundary = "replay_lookup", HAND_MADE, guarded
    return [boundary(name, "nothing to replay: n_prompt = len(tokens)", (t, len(t), 4),
                     "from i = n_prompt, while i < len(tokens): no round at all"),
            boundary(name, "one token left: one round, which drafts min(n_draft, 0) = 0 tokens and adds the oracle's",
                     (t, len(t) - 1, 4), "a round without drafts is still a round: one oracle pass, one token"),
            boundary(name, "n_draft = 1", (t, 8, 1), "draft up to min(n_draft, len(tokens) - i - 1) tokens a round"),
            boundary(name, "max_tail = 1", (t, 8, 4, 1), "pass max_tail on to the lookup"),
            boundary(name, "a text that never repeats itself: every round drafts nothing", (list(range(20)), 5, 3),
                     "a round whose lookup finds nothing adds the oracle's one token, and counts")]


# --- part 7 -----------------------------------------------------------------------------------------------

def cut_boundaries():
    case = cases("cut_rows", explain_cut)
    return [case("an empty batch", ([], []), "one length per row, and there are none"),
            case("one row", ([37], [35]), "a batch of one row still needs a list, of one length"),
            case("a row whose cache holds exactly n_kept: nothing to cut there", ([120, 345], [120, 340]),
                 "cut to a length, not by a count from the end: `x[:-0]` is `x[:0]`"),
            case("a draft's cache one short of its n_kept (its last draft never fed)", ([415, 304], [416, 301]),
                 "row b keeps min(cache_lengths[b], n_kept[b]) positions: a cut only shortens (BatchKVCache.truncate "
                 "refuses to lengthen a row)")]


def align_boundaries():
    case = cases("align_suffix", explain_alignment)
    return [case("no drafts (the draft's window was full)", ([], b"the"), "with no drafts, rest is the text"),
            case("an empty agreed text", ([b"the", b" cat"], b""), "no draft fits in an empty text"),
            case("a text that ends exactly where a draft ends: that draft stays", ([b"the", b" cat"], b"the cat"),
                 "a draft stays when it ends at the text's end or before (<=, not <)"),
            case("a text that ends inside a UTF-8 character", ([b"caf", b"\xc3\xa9"], b"caf\xc3"),
                 "compare and slice bytes: the agreed part of the draft the text ends inside goes into rest")]


# --- the contracts ------------------------------------------------------------------------------------------

CONTRACTS = {
    "03": Contract(("drafted", "oracle_choice"), Int("n, the number of drafts accepted,"),
                   {"drafted": "speculative.py goes on with drafted[:n]", "oracle_choice": "speculative.py goes on with oracle_choice[n]"},
                   lambda: probe("accepted_prefix_length", [5, 7, 9], [5, 7, 2, 4]), prefix_boundaries,
                   "an empty drafted; every draft accepted; token id 0"),
    "04": Contract(("n_kept", "*caches"), Nothing(), {"n_kept": "every cache is cut to it"},
                   lambda: [("rollback(7, <cache of 10>, <cache of 9>)", lambda: (7, FakeCache(10), FakeCache(9)))],
                   rollback_boundaries, "caches that hold exactly n_kept; a cache shorter than n_kept; n_kept = 0; "
                   "no cache at all; a shorter cache, then a longer one", observe=lambda args, result: [c.n_tokens() for c in args[1:]],
                   verb="left its caches at",
                   notes=(("caches", "each holds min(its length, n_kept) positions after the call"),)),
    "05": Contract(("draft", "oracle", "ids", "n_new", "n_draft"), Yields(Int("a token id"), "n_new of them"),
                   {"ids": "the caller goes on with its prompt"},
                   lambda: [("speculative_generate(draft, oracle, [3, 1, 4, 1, 5], n_new=12, n_draft=3)",
                             lambda: spied(tiny_pair, [3, 1, 4, 1, 5], 12, 3)[0])],
                   generate_boundaries, "a run of one token; a prompt of one token; n_draft = 1; the end of the context",
                   passes="against speculative.py's own run: the oracle's passes that check drafts, and the tokens "
                          "each model reads a second time (the newest token included)",
                   observe=generated),
    "06": Contract(("draft", "tokens", "k", "threshold"), List(ID, "the guesses"),
                   {"tokens": "threshold.py goes on with its tokens"},
                   lambda: [("draft_while_confident(draft, [5, 9, 2, 7], k=4, threshold=0.3)",
                             lambda: (tiny_pair()[0], [5, 9, 2, 7], 4, 0.3))],
                   drafting_boundaries, "threshold 1.0 (with an unsure draft, and with one certain of every guess); a "
                   "cumulative probability exactly equal to the threshold; k = 0; threshold 0",
                   randomness_hint="each guess is the draft's argmax, never a draw",
                   passes="one draft forward per guess, and none for a guess it does not make",
                   models=("draft",), counted=one_pass_per_guess, hints=((IndexError, GUESS),)),
    "07": Contract(("threshold", "cumulative", "n_accepted", "boost"), Float("the threshold"),
                   {"cumulative": "threshold.py's trace prints the round's cumulative probabilities after the update"},
                   lambda: probe("next_threshold", 0.4, [0.9, 0.6, 0.3], 2, 0.1), threshold_boundaries,
                   "nothing accepted; every draft accepted; no drafts at all; the clamps 0.05 and 0.95",
                   close=near(1e-9)),
    "08": Contract(("threshold", "drafted_probs", "n_accepted", "n_draft", "boost"), Float("the threshold"),
                   {"drafted_probs": "the notes' loop goes on with it"},
                   lambda: probe("update_threshold", 0.4, [0.9, 0.6, 0.3], 3, 3, 0.1), seed_boundaries,
                   "no draft accepted (n_accepted = 1); every draft accepted (n_accepted = n_draft + 1); n_draft = 1",
                   close=near(1e-9)),
    "09": Contract(("logits", "temperature", "top_k"),
                   Array32(lambda logits, *rest: np.shape(logits), "a float32 array [V]: one probability per token",
                           "the probabilities", "one probability per token, in a float32 array as long as logits"),
                   {"logits": "a sampler goes on using its logits (the trace shows them)"},
                   lambda: probe("probabilities", LOGITS, 0.7, 3), probabilities_boundaries,
                   "temperature 0 on a tie; temperatures down to the smallest float32 (1.4e-45) and below it (1e-50); "
                   "top_k = 1, = V and > V", close=arrays_near(1e-5)),
    "11": Contract(("q", "p"), Array32(lambda q, p: np.shape(q), "a float32 array as long as q", "the residual",
                                       "one probability per token"),
                   {"q": "SpS still needs q after a rejection", "p": "SpS still needs p after a rejection"},
                   lambda: probe("residual", np.array([0.2, 0.5, 0.3], np.float32), np.array([0.4, 0.2, 0.4], np.float32)),
                   residual_boundaries, "q = p; q and p certain of different tokens; zero probabilities",
                   close=arrays_near(1e-6)),
    "12": Contract(("q", "p", "x", "r"), Bool(), {"q": "the round tests its next draft with q", "p": "the round tests its next draft with p"},
                   lambda: probe("keep_draft", np.array([0.3, 0.3, 0.4], np.float32),
                                 np.array([0.6, 0.3, 0.1], np.float32), 0, 0.4), keep_boundaries,
                   "r = 0.0 with q(x) = 0; r just below 1; exact zero and one probabilities",
                   close=lambda a, b: bool(a) == bool(b), draws=10),
    "13": Contract(("q", "p"), Float("alpha"), {"q": "the caller samples from q", "p": "the caller samples from p"},
                   lambda: probe("alpha", np.array([0.2, 0.3, 0.5], np.float32), np.array([0.5, 0.3, 0.2], np.float32)),
                   alpha_boundaries, "p = q; disjoint p and q; p(x) = q(x) = 0 after top-k; exact ones",
                   close=near(1e-6)),
    "15": Contract(("draft", "oracle", "tokens", "n_draft", "rng"), Sized(Int("a token id"), "the token ids", round_length),
                   {"tokens": "the decoder goes on with its text"}, sps_probes,
                   sps_boundaries, "rounds with generators whose every draw is the same, on models with exact zero "
                   "and one probabilities: both drafts kept (r just below 1), a first draft the target never emits "
                   "(r = 0.0), a draft model equal to the target (p = q)", rng="rng",
                   passes="ONE oracle (target) pass a round, and one draft pass per draft: n_draft",
                   models=("draft", "oracle"), counted=one_target_pass),
    "16": Contract(("tokens", "k", "max_tail"), IDS, {"tokens": "the decoder's text: a lookup only reads it"},
                   lambda: probe("lookup", [1, 2, 3, 9, 1, 2, 3], 2), lookup_boundaries,
                   "an empty text; one token; k = 0; a continuation cut by the end of the text; an overlapping match; "
                   "max_tail longer than the text"),
    "18": Contract(("nodes", "new", "n_text", "n_fed"),
                   Array32(lambda nodes, new, n_text, n_fed: (len(new), n_text + n_fed + len(new)),
                           "a float32 array [len(new), n_text + n_fed + len(new)]", "the mask",
                           "one row per new node; one column per position its keys can come from: the n_text tokens of "
                           "the text, the n_fed nodes already in the cache, then the new nodes"),
                   {"nodes": "tree.py goes on with its tree", "new": "tree.py goes on with the nodes it feeds"},
                   lambda: [("tree_mask(<2 nodes>, new=[0, 1], n_text=3, n_fed=0)",
                             lambda: ([Node(11, -1, 1), Node(12, 0, 2)], [0, 1], 3, 0))],
                   mask_boundaries, "no node to feed (new = []); one node after a one-token text; a line; the last node "
                   "alone", close=same_mask, display=mask_rows),
    "22": Contract(("draft", "oracle", "prompts", "n_new", "n_draft"), Dict(Float("a kind's acceptance"),
                                                                             "{kind: acceptance}, one entry per kind"),
                   {"prompts": "the caller goes on with its prompts"},
                   kinds_probe,
                   lambda: [kinds_case("one draft a round", 6, 1, "pass the draft length on: n_draft=n_draft"),
                            kinds_case("the shortest run that drafts: 2 new tokens, one round of one draft, then the "
                                       "oracle's last token", 2, 4, "a kind's acceptance is stats.accepted over "
                                       "stats.drafted, added up over its prompts")],
                   "one draft a round; 2 new tokens", close=same_rates, hints=(
                       (ZeroDivisionError, nothing_drafted), (TypeError, BY_NAME))),
    "23": Contract(("alpha", "c", "T"), Int("a draft length"), {"T": "the caller goes on with its measured curve"},
                   lambda: probe("best_draft_length", 0.8, 0.1, {1: 10.0, 2: 12.0, 3: 13.0}), best_boundaries,
                   "a curve of two points; a tie; c = 0 with a flat curve; alpha = 0 and 1", hints=(
                       (ZeroDivisionError, "with alpha = 1 every draft is kept: a round yields n_draft + 1 tokens, and "
                                           "the formula's (1 - alpha^(n_draft+1)) / (1 - alpha) is 0 / 0 there"),
                       (KeyError, "n_draft runs from 1 to max(T) - 1: the check of n_draft drafts reads n_draft + 1 "
                                  "tokens, and T[n_draft + 1] must be measured"))),
    "24": Contract(("parents", "tokens", "choice"), List(Int("a node index"), "the node indices"),
                   {"parents": "the trace shows the round's tree", "tokens": "the trace shows the round's drafts",
                    "choice": "the trace shows the oracle's choices"},
                   lambda: probe("accepted_path", [-1, -1, 0], [11, 12, 13], [12, 0, 0, 0]), path_boundaries,
                   "an empty tree; nothing kept; a line kept to its leaf; a choice that only a grandchild has", hints=(
                       (IndexError, CHOICE),)),
    "25": Contract(("tokens", "n_prompt", "n_draft", "max_tail"),
                   Tuple(("drafted", "accepted", "rounds"), (Int(), Int(), Int()), "three counts"),
                   {"tokens": "the caller replays other settings on the same text"}, replay_probe,
                   replay_boundaries, "nothing to replay; one token left; n_draft = 1; max_tail = 1; a text that never "
                   "repeats itself"),
    "26": Contract(("cache_lengths", "n_kept"), List(Int("a row's new length"), "the new lengths", hint=(
                       "return a list with one int per row, even for a batch of one row (np.squeeze and [0] turn a "
                       "one-row list into a number)")),
                   {"cache_lengths": "the caches still hold them",
                    "n_kept": "batch.rollback_rows cuts the draft's cache, then the oracle's, with one n_kept: written "
                              "into, it would cut the oracle's cache to the draft's lengths (one short where every "
                              "draft was kept)"},
                   lambda: probe("cut_rows", [416, 305, 292], [416, 301, 290]), cut_boundaries,
                   "an empty batch; one row; a cache that holds exactly n_kept; a cache one short of n_kept", hints=(
                       (ValueError, "one length per row, from its own cache_lengths[b] and n_kept[b]: a batch can have "
                                    "no rows, and min() or max() over them all has nothing to take"),)),
    "27": Contract(("drafted", "text"), Tuple(("n", "rest"), (Int("n, how many drafts stay,"), Bytes("rest")),
                                              "n, an int, and rest, bytes"),
                   {"drafted": "crossvocab.py goes on with the drafts it keeps"},
                   lambda: probe("align_suffix", [b"the", b" cat", b"s"], b"the ca"), align_boundaries,
                   "no drafts; an empty text; a text that ends exactly at a draft's end; a text that ends inside a "
                   "UTF-8 character", hints=(
                       (UnicodeDecodeError, "the drafts and the text are bytes and can end inside a UTF-8 character: "
                                            "compare and slice bytes, never decode them to str"),)),
    "28": Contract(("parents", "tokens", "q", "p", "rs"), Tuple(("path", "last"), (
                       List(Int("a node index"), "the nodes kept, root first"),
                       Array32(lambda parents, tokens, q, p, rs: np.shape(q)[1:], "a float32 array [V]", "the last "
                               "token's distribution", "one probability per token: the kept node's target")),
                       "the nodes kept, root first, a list of Python ints; the last token's distribution, a float32 "
                       "array [V]"),
                   {"parents": "the trace shows the round's tree", "tokens": "the trace shows the round's drafts",
                    "q": "the round goes on with the oracle's rows", "p": "the trace shows each draft's p",
                    "rs": "the trace shows each node's r"},
                   traversal_probes, traversal_boundaries, "a tree of the root alone; one node of weight 1 at r just "
                   "below 1; r = 0.0 where q(x) = 0; a line whose shortfall is made up below; a node kept after its "
                   "child was rejected; a weight that falls to 0 (Z = 0); every node rejected",
                   randomness_hint="every r comes from rs, in the walk's order: the walk draws none of its own",
                   close=agree, display=display, hints=RS_HINTS, notes=(("uniforms", "rs holds exactly the r's the "
                   "walk uses, one per node tested, in the walk's order, none for the root: one more asked for is "
                   "an error"),)),
    "29": Contract(("acceptance", "n_nodes", "max_depth"), Float("the best F"),
                   {"acceptance": "sequoia_shape reads the same measured rates for every size and depth"},
                   sequoia_probes, sequoia_boundaries,
                   "no drafted node (n_nodes = 0); max_depth = 1; more nodes than max_depth = 1 holds (-inf); a single "
                   "rank, a line that fits and one longer than max_depth (-inf); a rank of acceptance 0",
                   close=same_value, hints=TOO_DEEP),
}
