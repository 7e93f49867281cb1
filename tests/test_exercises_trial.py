"""Wrong answers a student trial wrote that the checkers passed, or failed with a message about another mistake: each
now fails with the message written for the rule it breaks (tests/wrong_answers.py). The answers give hints away:
read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from gpt2 import softmax  # noqa: E402
from kvcache import KVCache  # noqa: E402
from sps import residual, sample  # noqa: E402
from test_exercises_part1 import classic_generate, keep_all_but_the_newest
from wrong_answers import fails


def reference(number):
    return checks.EXERCISES[number].reference()


def drafts_and_q(draft, oracle, tokens, n_draft, rng):
    """Steps 1 and 2 of a right round: the drafts, each p, and q over the text and every prefix of the drafts."""
    drafted, p = [], []
    for _ in range(n_draft):
        p.append(softmax(draft.forward(tokens + drafted)[-1]))
        drafted.append(sample(p[-1], rng))
    return drafted, p, softmax(oracle.forward(tokens + drafted)[len(tokens) - 1:])


def sps_round(drafting=drafts_and_q, on_reject=lambda drafted, t, z: drafted[:t] + [z], stop=True, bonus_anyway=False,
              after=lambda q, n_draft, rng: [sample(q[n_draft], rng)], rng_of=lambda rng: rng):
    def answer(draft, oracle, tokens, n_draft, rng):
        rng = rng_of(rng)
        drafted, p, q = drafting(draft, oracle, tokens, n_draft, rng)
        out = []
        for t, x in enumerate(drafted):
            if rng.random() < min(1, q[t][x] / p[t][x]):
                out.append(x)
                continue
            z = sample(residual(q[t], p[t]), rng)
            if bonus_anyway:  # the resample, then on to step 4 all the same
                return on_reject(drafted, t, z) + after(q, n_draft, rng)
            if stop:
                return on_reject(drafted, t, z)
            out.append(z)
        return out + after(q, n_draft, rng)
    return answer


# --- exercise 15, a round of SpS --------------------------------------------------------------------------

def test_a_round_that_runs_the_target_once_per_position():
    def sequential(draft, oracle, tokens, n_draft, rng):
        drafted, p = [], []
        for _ in range(n_draft):
            p.append(softmax(draft.forward(tokens + drafted)[-1]))
            drafted.append(sample(p[-1], rng))
        q = np.array([softmax(oracle.forward(tokens + drafted[:t])[-1]) for t in range(n_draft + 1)])
        return drafted, p, q
    fails("15", sps_round(drafting=sequential), r"returned \[.*\], but the oracle ran 3 forward passes in one round: a "
          "round of SpS is ONE target pass, over the text and all n_draft drafts at once", r"step 2: q for t = 0..n_draft "
          "in parallel")


def test_a_round_that_makes_two_target_passes():
    def twice(draft, oracle, tokens, n_draft, rng):
        drafted, p, q = drafts_and_q(draft, oracle, tokens, n_draft, rng)
        q_last = softmax(oracle.forward(tokens + drafted)[-1])  # the bonus row, once more
        return drafted, p, np.vstack([q[:-1], q_last])
    fails("15", sps_round(drafting=twice), "but the oracle ran 2 forward passes in one round", "step 2")


def test_a_round_with_a_generator_of_its_own():
    fails("15", sps_round(rng_of=lambda rng: np.random.default_rng()), r"called twice with the same arguments and a "
          r"generator of the same seed, sps_round\(.*\) returned .*, then .*: the rng given is the only source of "
          r"randomness", r"a generator of its own, made inside the function \(np.random.default_rng\(\) without a seed\)")


def test_a_round_that_keeps_the_rejected_draft():
    fails("15", sps_round(on_reject=lambda drafted, t, z: drafted[:t + 1] + [z]), r"sps_round\(draft, oracle, \[2\], "
          r"n_draft=2, rng\) with a generator whose every draw is r = 0.0 returned \[0, 2\], expected \[2\]: .*; that is a "
          "round that keeps the rejected draft and then the residual's token after it", "the rejected draft goes")


def test_a_round_that_does_not_stop_after_a_rejection():
    fails("15", sps_round(stop=False), r"with a generator whose every draw is r = 0.0 returned \[2, 0, 1\], expected \[2\]: "
          ".*; that is a round that goes on testing the drafts after a rejection", "and stop the round")


def test_a_round_that_adds_an_extra_token():
    fails("15", sps_round(bonus_anyway=True), r"returned \[2, 1\], expected \[2\]: .*; that is a round that adds a token "
          "after the residual's", "exactly one token of the target's")


def test_a_round_that_builds_its_text_in_the_callers_list():
    def in_place(draft, oracle, tokens, n_draft, rng):
        start, p = len(tokens), []
        for _ in range(n_draft):  # each draft appended to the caller's tokens as it comes
            p.append(softmax(draft.forward(tokens)[-1]))
            tokens.append(sample(p[-1], rng))
        return tokens[start:], p, softmax(oracle.forward(tokens)[start - 1:])
    fails("15", sps_round(drafting=in_place), r"sps_round\(draft, oracle, \[1, 4\], n_draft=2, "
          r"rng=np.random.default_rng\(0\)\) changed its argument tokens: \[1, 4\] became \[1, 4, \d, \d\]",
          "the decoder goes on with its text")


# --- exercises 12, 6 and 9: the boundaries their texts name -------------------------------------------------

def test_keep_draft_with_at_most():
    fails("12", lambda q, p, x, r: r <= min(1, q[x] / p[x]), r"keep_draft\(\[0, 0.2, 0.8\], \[0.5, 0.5, 0\], 0, 0.0\) "
          "returned True, expected False: r = 0.0 and q\\(x\\) = 0: the target never emits x; that is the test with `<=` "
          "for `<`", "the test is strict")


def test_keep_draft_with_not_greater():
    fails("12", lambda q, p, x, r: not r > q[x] / p[x], r"keep_draft\(\[0, 0.2, 0.8\], \[0.5, 0.5, 0\], 0, 0.0\) returned "
          "True, expected False: .*that is the test with `<=` for `<`", r"`not r > \.\.\.` is `<=`")


def test_drafting_while_above_the_threshold():
    def answer(draft, tokens, k, threshold):
        guesses, p = [], 1.0
        while len(guesses) < k and p > threshold:  # "above", where the text says "at least"
            probs = softmax(draft.forward(tokens + guesses)[-1])
            guesses.append(int(np.argmax(probs)))
            p *= probs[guesses[-1]]
        return guesses
    fails("06", answer, r"draft_while_confident\(draft, \[5, 9, 2\], k=4, threshold=1.0\) returned \[\], expected "
          r"\[\d+\]: threshold 1.0: the first guess is tested with the probability of no guess at all, 1.0, which is at "
          "least 1.0; that is drafting while the cumulative probability is ABOVE the threshold", "`>=`, not `>`")


def floored(floor):
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return reference("09")(logits, 0)
        return reference("09")(logits, max(temperature, floor), top_k)
    return answer


def test_temperature_floored_at_1e_3():
    fails("09", floored(1e-3), r"probabilities\(\[0, 0.0005, -0.002\], 0.0001, None\) returned \[0.359, 0.592, 0.0486\], "
          r"expected \[0.00669, 0.993, 1.38e-11\]: .*; that is the answer at temperature 0.001, not at 0.0001: the "
          "temperature is floored", "divide by the temperature itself")


def test_temperature_floored_at_1e_6():
    fails("09", floored(1e-6), r"probabilities\(\[0, 4.2e-45, -2.8e-45\], 1e-45, None\) returned \[0.333, 0.333, 0.333\], "
          r".*: the smallest temperature float32 carries, .*; that is the answer at any temperature from "
          "1e-39 to 0.1, not at 1e-45: the temperature is floored",
          "divide by the temperature itself")


# --- the arguments the caller keeps ------------------------------------------------------------------------

def test_next_threshold_with_the_empty_prefix_inserted():
    def answer(threshold, cumulative, n_accepted, boost):
        cumulative.insert(0, 1.0)  # the empty prefix's probability, so that cumulative[n_accepted] is the last kept
        if n_accepted == len(cumulative) - 1:
            return min(max(threshold - boost, 0.05), 0.95)
        return min(max((threshold + cumulative[n_accepted]) / 2, 0.05), 0.95)
    fails("07", answer, r"next_threshold\(0.4, \[0.9, 0.6, 0.3\], 2, 0.1\) changed its argument cumulative: \[0.9, 0.6, "
          r"0.3\] became \[1.0, 0.9, 0.6, 0.3\]", "threshold.py's trace prints the round's cumulative probabilities")


def test_acceptance_by_kind_that_sorts_the_callers_prompts():
    def answer(draft, oracle, prompts, n_new, n_draft):
        prompts.sort(key=lambda entry: entry[0])  # by kind, to pool each kind's prompts in a row
        return reference("22")(draft, oracle, prompts, n_new, n_draft)
    fails("22", answer, r"changed its argument prompts: prompts\[0\] was \('prose', \[.*\]\), and became \('code', ",
          "the caller goes on with its prompts")


def test_accepted_path_that_pops_the_oracles_first_choice():
    def answer(parents, tokens, choice):
        after_root = choice.pop(0)  # then choice[i] is the oracle's token after node i
        path, at, want = [], -1, after_root
        while (child := next((j for j, p in enumerate(parents) if p == at and tokens[j] == want), None)) is not None:
            path.append(child)
            at, want = child, choice[child]
        return path
    fails("24", answer, r"accepted_path\(\[-1, -1, 0\], \[11, 12, 13\], \[12, 0, 0, 0\]\) changed its argument choice: "
          r"\[12, 0, 0, 0\] became \[0, 0, 0\]", "the oracle's choices")


# --- NumPy scalars and arrays where the text promises Python's numbers and lists ---------------------------

def test_next_threshold_clipped_by_numpy():
    def answer(threshold, cumulative, n_accepted, boost):
        return np.clip(reference("07")(threshold, cumulative, n_accepted, boost), 0.05, 0.95)
    fails("07", answer, r"next_threshold\(0.4, \[0.9, 0.6, 0.3\], 2, 0.1\) returned np.float64\(0.5\), a NumPy float "
          r"\(np.float64\); the threshold is a Python float", r"float\(\.\.\.\)")


def test_alpha_as_numpys_sum():
    fails("13", lambda q, p: np.minimum(p, q).sum(), r"alpha\(\[0.2, 0.3, 0.5\], \[0.5, 0.3, 0.2\]\) returned "
          r"np.float32\(0.7\d*\), a NumPy float \(np.float32\); alpha is a Python float", "float32's 7 digits")


def test_cut_rows_of_numpy_minimums():
    fails("26", lambda cache_lengths, n_kept: [np.minimum(c, n) for c, n in zip(cache_lengths, n_kept)],
          r"cut_rows\(\[416, 305, 292\], \[416, 301, 290\]\) returned \[np.int64\(416\), .*\], whose entry 0 is "
          r"np.int64\(416\), a NumPy integer \(np.int64\); a row's new length is a Python int", r"int\(\.\.\.\)")


def test_align_suffix_counted_by_numpy():
    def answer(drafted, text):
        n, rest = reference("27")(drafted, text)
        return np.int64(n), rest
    fails("27", answer, r"align_suffix\(\[b'the', b' cat', b's'\], b'the ca'\) returned \(np.int64\(1\), b' ca'\), whose n "
          r"is np.int64\(1\), a NumPy integer \(np.int64\); n, how many drafts stay, is a Python int", r"int\(\.\.\.\)")


def test_lookup_as_a_numpy_slice():
    def answer(tokens, k, max_tail=3):
        found = reference("16")(tokens, k, max_tail)
        return np.array(tokens)[len(tokens) - len(found):][:0] if not found else np.array(found)
    fails("16", answer, r"lookup\(\[1, 2, 3, 9, 1, 2, 3\], 2\) returned \[9, 1\], a NumPy array of int64; the text promises "
          r"a list \(the token ids\)", r"\.tolist\(\)")


# --- optimisation on one curve; the newest token read twice ---------------------------------------------------

def test_best_draft_length_by_climbing():
    def answer(alpha, c, T):
        from speedup import predicted_speedup
        n_draft = 1  # climb while the next n_draft scores higher
        while n_draft + 1 < max(T) and predicted_speedup(alpha, n_draft + 1, c, T[n_draft + 2] / T[1]) > \
                predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]):
            n_draft += 1
        return n_draft
    fails("23", answer, r"best_draft_length\(alpha=0.95, c=0.03, T=\{1: 4, .*\}\) returned 3, expected n_draft = 8 .*: "
          "that is where a climb from n_draft = 1 stops, at the first n_draft whose next one scores lower",
          "score every n_draft from 1 to max")


def test_a_catch_up_that_reads_the_newest_token_too():
    def generate(draft, oracle, ids, n_new, n_draft):
        tokens, end = list(ids), len(ids) + n_new
        draft_cache, oracle_cache = KVCache(), KVCache()
        if len(tokens) > 1:
            draft.forward(tokens[:-1], draft_cache, n_logits=1)
            oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
        while len(tokens) < end:
            k = min(n_draft, end - len(tokens) - 1)
            drafted, last = [], tokens[-1]
            for _ in range(k):
                last = int(np.argmax(draft.forward([last], draft_cache)[-1]))
                drafted.append(last)
            choice = np.argmax(oracle.forward([tokens[-1]] + drafted, oracle_cache), axis=-1)
            n = reference("03")(drafted, choice.tolist())
            new = drafted[:n] + [int(choice[n])]
            tokens += new
            n_kept = len(tokens) - 1
            if draft_cache.n_tokens() < n_kept:
                draft.forward(tokens[draft_cache.n_tokens():], draft_cache, n_logits=1)  # through the newest token
            draft_cache.truncate(n_kept)
            oracle_cache.truncate(n_kept)
            yield from new
    fails("05", generate, r"with n_draft=2, 30 new tokens .*: your tokens are right, but the draft read the newest token a "
          r"second time \d+ times", r"tokens\[n_tokens\(\):n_kept\]: never the newest")


# --- messages that named another mistake -----------------------------------------------------------------------

def test_seed_000s_update_that_stays_put_when_nothing_is_accepted():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted == 1:
            return threshold  # "nothing to move toward"
        return reference("08")(threshold, drafted_probs, n_accepted, n_draft, boost)
    fails("08", answer, r"update_threshold\(0.4, \[0.9, 0.6\], 1, 2, 0.1\) returned 0.4, expected 0.7: no draft accepted "
          r".*; no draft was accepted \(n_accepted = 1, the oracle's token alone\), so the accepted prefix is empty and its "
          "probability is 1.0: halfway from 0.4 to 1.0 is 0.7", "there is no last accepted draft")


def test_align_suffix_that_drops_the_last_draft():
    def answer(drafted, text):
        return reference("27")(drafted[:-1], text)  # "the last draft is the oracle's to decide"
    fails("27", answer, r"align_suffix\(\[b'the', b' cat'\], b'the cat'\) returned \(1, b' cat'\), expected \(2, b''\): .*"
          "or that is the run of every draft but the last: the loop stops one draft short",
          "the last included")


def test_align_suffix_that_counts_characters():
    def answer(drafted, text):
        n, end = 0, 0
        while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
            end += len(drafted[n].decode("utf-8", errors="replace"))  # a draft's length in characters
            n += 1
        return n, text[end:]
    message = fails("27", answer, "that is the run whose position in the text moves by each draft's length in "
                    "characters, not bytes", "count bytes")
    assert "<=, not <" not in message and "`is` for `==`" not in message
