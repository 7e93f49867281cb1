"""Greedy speculative decoding: a small draft model guesses, a large oracle checks.

    python speculative.py "The meaning of life is"

Plain greedy decoding runs the big model once per token. Here the small draft
model (gpt2) proposes n_draft tokens one at a time, and the big oracle
(gpt2-large) checks all of them in ONE forward pass: on a machine where that
pass costs about as much as a single-token pass, every accepted draft token is
a big-model pass saved. The output is exactly the oracle's own greedy output:
a draft token is kept only if it is what the oracle would have chosen.

Each round (speculative_generate, then the steps it calls, in order):
  1. draft:     the draft model proposes k tokens greedily;
  2. verify:    the oracle runs once over them and gives its argmax after each prefix;
  3. accept:    keep the longest prefix of drafts that matches, plus the oracle's
                own next token (a correction, or a bonus if all matched);
  4. roll back: truncate both KV caches to the tokens kept.

greedy_generate is the baseline: the oracle alone, one pass per token. main, at the end,
is the command above: the plain models, this loop, the text with the kept drafts marked.
Every other method, the page and the benchmarks: python workbench.py --help.
"""

if __name__ == "__main__":  # first, before NumPy loads: Ctrl-C meanwhile is one line, not a traceback
    import errors
    errors.interrupt_quietly()

import codecs
import os
import sys
import time

import numpy as np

from decoding import cache_lengths, check_args, check_room, feed
from errors import Parser, printable, run
from gpt2 import GPT2
from kvcache import KVCache
from stats import Line, Stats


def speculative_generate(draft, oracle, ids, n_new, n_draft=4, stats=None):
    """Greedy speculative decoding: yields exactly greedy_generate(oracle, ids, n_new)'s tokens."""
    stats = Stats() if stats is None else stats
    check_args(ids, n_new, draft, oracle, n_draft=n_draft)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        # 1. Draft k tokens greedily with the small model. The oracle adds one
        #    more token, so k stops one short of what is left: no overshoot.
        k = min(n_draft, end - len(tokens) - 1)
        drafted = []
        for _ in range(k):
            logits = feed(draft, draft_cache, tokens + drafted, stats, "draft")[-1]
            drafted.append(int(np.argmax(logits)))
        # 2 and 3. One oracle pass checks them all; keep the agreeing prefix + one.
        n_accepted, new_tokens, oracle_choice = verify(oracle, oracle_cache, tokens, drafted, stats)
        context_length = len(tokens)
        tokens += new_tokens
        # 4. Both caches back to the kept tokens.
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, oracle=oracle_choice,
                        cached=cache_lengths(draft_cache, oracle_cache), details=Line(n_draft, k))
        yield from new_tokens


def verify(oracle, oracle_cache, tokens, drafted, stats, role="oracle"):
    """Steps 2 and 3: check the drafts in one pass; (n accepted, new tokens, the oracle's choices).

    role is "draft" when the draft model checks guesses of its own drafter
    (staged decoding, ngram.py): its time then counts as drafting.
    """
    # 2. One pass over [last token, d_1 .. d_k]: row i is the oracle's next-token
    #    logits after d_1 .. d_i, so k drafts give k + 1 choices.
    logits = feed(oracle, oracle_cache, tokens + drafted, stats, role, n_logits=len(drafted) + 1)
    return accept(drafted, logits)


def accept(drafted, logits):  # drafted: k ids, logits [k + 1, vocab_size]
    """Step 3: keep the drafts up to the first disagreement, then the oracle's own token: its
    correction at the disagreement, or a bonus token if all k matched."""
    oracle_choice = np.argmax(logits, axis=-1).tolist()  # [k + 1]
    n = accepted_prefix_length(drafted, oracle_choice)
    return n, drafted[:n] + [oracle_choice[n]], oracle_choice


def accepted_prefix_length(drafted, oracle_choice):
    """How many drafts, from the first, equal the oracle's choice at their position."""
    n = 0
    while n < len(drafted) and drafted[n] == oracle_choice[n]:
        n += 1
    return n


def rollback(n_kept, *caches):
    """Step 4: forget the keys and values of rejected drafts.

    After a round every cache must hold the first n_kept = len(tokens) - 1
    tokens: all but the newest, which has not been fed yet. A cache can also be
    shorter (the draft never feeds its last draft); feed() catches it up.
    """
    for cache in caches:
        cache.truncate(min(cache.n_tokens(), n_kept))


def greedy_generate(model, ids, n_new, stats=None):
    """Plain greedy decoding with a KV cache: yields n_new token ids, each the argmax."""
    stats = Stats() if stats is None else stats
    check_room(ids, n_new, model)
    tokens, cache = list(ids), KVCache()
    for _ in range(n_new):
        logits = feed(model, cache, tokens, stats, "oracle")[-1]
        tokens.append(int(np.argmax(logits)))
        stats.add_tokens(tokens[-1:])
        yield tokens[-1]


# ---------------------------------------------------------------------------
# python speculative.py "prompt": the plain models, the loop above, the text as it comes
# ---------------------------------------------------------------------------

def main(argv=None):
    parser = Parser(prog="speculative.py", description=__doc__.split("\n\n")[0],
                    epilog="Named models are downloaded into models/ on first use (gpt2 548 MB, gpt2-large 3.2 GB); "
                           "python demo.py writes a small pair offline. Every other method: python workbench.py --help.")
    parser.add_argument("prompt", nargs="?", default="", help='the text to continue (default "": from <|endoftext|>)')
    parser.add_argument("--draft", default="gpt2", help="the draft model: a name or a checkpoint directory (default: gpt2)")
    parser.add_argument("--oracle", default="gpt2-large", help="the oracle: a name or a directory (default: gpt2-large)")
    parser.add_argument("-n", type=int, default=64, help="tokens to generate (default: 64)")
    parser.add_argument("--n-draft", type=int, default=4, help="draft tokens per round (default: 4)")
    parser.add_argument("--trace", action="store_true", help="print every round: drafts, the oracle's choices, kept")
    parser.add_argument("--models-dir", default=None, help="where named models live (default: models/)")
    args = parser.parse_args(argv)
    one_blas_thread()
    from weights.tokenizer import load_tokenizer, prompt_ids  # reading files is weights/' job, as from_pretrained's
    draft, oracle = (GPT2.from_pretrained(name, args.models_dir) for name in (args.draft, args.oracle))
    enc = load_tokenizer(oracle.directory)
    ids, stats, text = prompt_ids(enc, args.prompt), Stats(trace=[] if args.trace else None), Text(sys.stdout)
    check_args(ids, args.n, draft, oracle, n_draft=args.n_draft)  # before the prompt is printed: an error is its own line
    text.write_prompt(args.prompt)
    start = time.perf_counter()
    for token in speculative_generate(draft, oracle, ids, args.n, args.n_draft, stats):
        text.write(enc.decode_single_token_bytes(token), kept=stats.from_draft[-1])
    text.end()
    for line in trace_lines(stats.trace or [], enc.decode_single_token_bytes):
        print(printable(line), file=sys.stderr)
    print(summary(stats, time.perf_counter() - start), file=sys.stderr)


def one_blas_thread():
    """NumPy's BLAS on one thread. Its threads wait on each other at every product: beside a busy program (a
    browser, a build) each small product then waits for the scheduler, and a run takes several times as long
    (workbench/PERFORMANCE.md, "The reading house beside busy programs"). One thread never waits."""
    from threadpoolctl import threadpool_limits  # imported here: `import speculative` loads NumPy alone
    threadpool_limits(1, user_api="blas")


class Text:
    """The text as it comes: whole UTF-8 characters only (a character can span tokens), control characters
    shown as escapes on a terminal, the drafts the oracle kept in green there (unless NO_COLOR is set)."""
    GREEN, RESET = "\x1b[32m", "\x1b[0m"

    def __init__(self, out):
        self.out, self.terminal = out, out.isatty()
        self.color = self.terminal and not os.environ.get("NO_COLOR") and os.name != "nt"
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write_prompt(self, prompt):
        self.out.write(printable(prompt) if self.terminal else prompt)

    def write(self, token_bytes, kept=False):
        text = self.decoder.decode(token_bytes)
        text = printable(text) if self.terminal else text
        self.out.write(f"{self.GREEN}{text}{self.RESET}" if kept and self.color and text else text)
        self.out.flush()

    def end(self):
        self.out.write(self.decoder.decode(b"", final=True) + "\n")
        self.out.flush()


def trace_lines(trace, token_bytes):
    """--trace: each round's drafts, the oracle's choice after each prefix, and what was kept (stats.Round)."""
    def show(tokens):
        return " ".join(shown_token(token_bytes(t)) for t in tokens)
    for i, r in enumerate(trace, 1):
        yield f"round {i}: context {r.context_length} tokens, {len(r.drafted)} drafted"
        yield f"  drafted  {show(r.drafted) or '(nothing)'}"
        yield f"  oracle   {show(r.oracle)}   (its choice after each draft prefix)"
        yield f"  kept     {r.accepted} draft(s) + {show(r.new[-1:])} from the oracle"


def shown_token(raw):
    """A token's bytes as Python writes them: its text in quotes (' is', '\\n'), or the bytes themselves where
    they are not whole UTF-8 (b'\\xe2', part of a character): a byte token never looks like a text token."""
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(raw)


def summary(stats, elapsed):
    return (f"speculative: {stats.n_generated} new tokens in {elapsed:.2f} s, {stats.n_generated / max(elapsed, 1e-9):.1f} "
            f"tokens/s; {stats.oracle_passes} oracle passes, {stats.tokens_per_round:.2f} tokens per round; acceptance "
            f"{stats.kept_fraction:.1%} ({stats.accepted}/{stats.drafted} drafts)")


if __name__ == "__main__":
    run(main)
