"""One path from settings + prompt to text shown + statistics, for the command line and the session alike.

    loaded = prepare(load, settings.method, prompt, settings.max_new_tokens)   # models, tokenizer, prompt ids
    result = run(settings, loaded, prompt, view)                                 # the text as it comes, then the rest

prepare() loads what the method needs (load(role) -> (model, directory)) and
checks that the pair and the prompt fit; a draft whose tokenizer is not the
oracle's runs the method's way across vocabularies (methods.variant) or is
refused in one line. run() makes the method's generator
(its checks come before any output), streams the text, then shows what the
View asks for: the trace, the statistics line, the oracle alone beside it
(--compare), the page (--html).
"""

import filecmp
import os
import re
import sys
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from workbench import display, methods
from workbench.program import UsageError
from decoding import GenerationError, check_room
from stats import Stats
from errors import UserError, printable
from gpt2 import GPT2
from weights import reading
from weights.models import resolve_model_dir, shown_dir
from weights.tokenizer import TokenizerError, check_vocabulary, load_tokenizer, prompt_ids


def check_sampling(method, what, command="--method "):
    """One rule for the command line and the session: the sampling settings (what: "--temperature", "the
    processor (multinomial, temperature 0.8)") apply to the methods that sample, and any other method refuses
    them. So `--method speculative --temperature 0.8` and the session's /speculative at temperature 0.8 are
    refused alike: speculative sampling is a method of its own, sps."""
    if not methods.get(method).samples:
        *others, last = [m.name for m in methods.METHODS.values() if m.samples]
        sampling = f"{', '.join(others)} or {last}" if others else last
        raise UsageError(f"{what} applies to {command}{sampling}, not {method}")


# ---------------------------------------------------------------------------
# Loading: the models, their shared tokenizer, the prompt
# ---------------------------------------------------------------------------

def shape(model):  # "8 layers of width 288", "1 layer of width 128"
    return f"{model.n_layer} layer{'s' if model.n_layer != 1 else ''} of width {model.n_embd}"


def load_model(name_or_path, models_dir=None, log=sys.stderr, plain=False, warm=False):
    """(model, its directory): the model as the machine's plan runs it (workbench/speed/planned.py: each forward
    the way measured fastest here for its rows, NumPy's own product unless another is faster), or with plain=True
    the model exactly as gpt2.GPT2.from_pretrained gives it, NumPy's own `@` on the BLAS's own threads (--plain:
    logits within about 1e-5, and a debugger's steps stay in the project's files and NumPy). A first forward
    pages the weights in; the fast model, where the plan uses it, is mapped at its first forward, or here with
    warm=True (the benchmarks: so that their timings measure decoding)."""
    model_dir = resolve_model_dir(name_or_path, models_dir)
    start = time.perf_counter()
    if plain:
        model = GPT2.from_pretrained(model_dir)
    else:
        from workbench.speed.planned import load_planned  # imported here: a --plain run imports nothing of speed/
        model = load_planned(model_dir)
    model.forward([0])
    if warm and hasattr(model, "fast_model"):
        model.fast_model()
    where = "" if os.path.abspath(name_or_path) == os.path.abspath(model_dir) else f" from {shown_dir(model_dir)}"
    print(printable(f"loaded {name_or_path}{where} ({shape(model)}) in "
                    f"{time.perf_counter() - start:.1f} s"), file=log)
    return model, os.path.abspath(model_dir)


def load_tokenizers(draft_dir, oracle_dir, draft=None, oracle=None, names=None):
    """(the oracle's tokenizer, the draft's own or None), each checked against its model's vocab_size.

    None: the draft shares the oracle's tokenizer (the same files, or the same tokens in other files; or
    only one of the two has tokenizer files, and both models read them). A draft with files of its own,
    spelling other tokens, has a vocabulary of its own: speculative decoding across vocabularies
    (crossvocab.py) runs it. weights/tokenizer.py refuses files that are not a byte-level BPE with a token
    for every byte, so any text the oracle writes can be spelled in the draft's tokens.
    """
    names = names or {}
    has = {role: d is not None and os.path.isfile(os.path.join(d, "vocab.json"))
           for role, d in (("draft", draft_dir), ("oracle", oracle_dir))}
    if not any(has.values()):
        raise TokenizerError("neither model directory has vocab.json and merges.txt")
    if not has["oracle"]:  # the draft's files stand for both, as ever
        enc = load_tokenizer(draft_dir)
        check_models(enc, (draft, draft_dir), (oracle, oracle_dir))
        return enc, None
    enc = load_tokenizer(oracle_dir)
    check_models(enc, (oracle, oracle_dir))
    if draft is None:
        return enc, None
    if not has["draft"]:
        if draft.vocab_size != enc.n_vocab:  # a vocabulary of its own, and nothing to read it with
            raise TokenizerError(f"the draft {names.get('draft', draft_dir)} has a vocabulary of {draft.vocab_size} tokens, "
                                 f"the oracle's has {enc.n_vocab}, and {draft_dir} has no vocab.json and merges.txt of "
                                 "its own: a draft with another vocabulary needs its tokenizer files")
        check_models(enc, (draft, draft_dir))
        return enc, None
    if all(filecmp.cmp(os.path.join(draft_dir, f), os.path.join(oracle_dir, f), shallow=False)
           for f in ("vocab.json", "merges.txt")):
        check_models(enc, (draft, draft_dir))
        return enc, None
    draft_enc = load_tokenizer(draft_dir)
    check_models(draft_enc, (draft, draft_dir))
    return enc, (None if same_tokens(draft_enc, enc) else draft_enc)


def check_models(enc, *models):
    """Each (model, directory) given must have enc's vocabulary (weights/tokenizer.check_vocabulary)."""
    for model, model_dir in models:
        if model is not None:
            check_vocabulary(enc, model.vocab_size, model_dir)


def same_tokens(a, b):
    """True when two tokenizers have the same tokens, id for id (files can differ and still say so)."""
    return (a.n_vocab == b.n_vocab and a.special_tokens_set == b.special_tokens_set and
            all(a.decode_single_token_bytes(i) == b.decode_single_token_bytes(i) for i in range(a.n_vocab)))


PROMPT_ESCAPES = "one prompt a line; in a line, \\n is a newline and \\\\ a backslash (C:\\\\new for C:\\new)"


def read_prompt_lines(path):
    """The prompts of a file, one a line (workbench.py --prompts, workbench.py bench ablation --prompts), as PROMPT_ESCAPES
    says: a line writes a newline as \\n and a backslash as \\\\ (any other backslash is itself); a final newline
    ends the last line, and a UTF-8 byte-order mark at the start is not part of the first; an empty file or an
    empty line is one line of error."""
    try:
        text = reading.read_text(path, "prompts")  # bounded, a regular file only: not /dev/zero, not a FIFO
    except UnicodeDecodeError as e:
        raise UserError(f"{printable(path)}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    text = text.removeprefix("\ufeff")  # the byte-order mark some editors write first (Notepad's "UTF-8 with BOM")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as open() reads lines: universal newlines
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if not lines:
        raise UserError(f"{printable(path)}: no prompts in it (one a line)")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise UserError(f"{printable(path)}: line {number} is empty (one prompt a line)")
    return [unescaped(line) for line in lines]


def unescaped(line):
    """A prompts file's line as the prompt it writes: \\n a newline, \\\\ one backslash, left to right."""
    return re.sub(r"\\([\\n])", lambda m: "\n" if m.group(1) == "n" else "\\", line)


@dataclass
class Loaded:
    """Everything a generation needs besides its settings: the models, the tokenizer, the prompt's ids."""
    draft: object       # None for the methods without a draft model
    oracle: object
    enc: object         # the tokenizer of the text: the oracle's (and the draft's, when they share it), or draft-alone's own
    ids: list           # the prompt in enc's tokens
    names: dict = field(default_factory=dict)  # {"draft": name or directory as given, "oracle": ...}
    encs: tuple = None  # (the draft's tokenizer, the oracle's) when the draft's vocabulary is not the oracle's, else None
    oracle_ids: list = None  # the prompt in the oracle's tokens (--compare's): ids, unless the text is the draft's

    def __post_init__(self):
        if self.oracle_ids is None:
            self.oracle_ids = self.ids


def prepare(load, method, prompt, n_new, names=None, command="--method ", by_token_id=False):
    """Load what `method` needs (load(role) -> (model, directory)), check that the pair and the prompt fit.

    A draft with a vocabulary of its own runs the method's way across vocabularies (methods.variant),
    or is refused in one line (command: how the user names a method, "--method " or the session's "/method ").
    by_token_id: the caller compares the draft's tokens with the oracle's by id itself (the benchmarks, the
    ablations, a batch), so such a draft is refused whatever the method.
    """
    m = methods.get(method)
    names = dict(names or {})
    oracle, oracle_dir = load("oracle")
    draft = draft_dir = None
    if m.draft_model:
        draft, draft_dir = load("draft")
    enc, draft_enc = load_tokenizers(draft_dir, oracle_dir, draft, oracle, names)
    if draft_enc is None:  # one vocabulary: load_tokenizers checked both models against it
        ids = prompt_ids(enc, prompt)
        check_room(ids, n_new, *[model for model in (draft, oracle) if model is not None])
        return Loaded(draft, oracle, enc, ids, names)
    check_across(m, names.get("draft", draft_dir), command, by_token_id)
    if m.draft_writes:  # the draft alone: its own tokens read the prompt and write the text
        ids = prompt_ids(draft_enc, prompt)
        check_room(ids, n_new, draft)
        return Loaded(draft, oracle, draft_enc, ids, names, (draft_enc, enc), prompt_ids(enc, prompt))
    ids = prompt_ids(enc, prompt)
    check_room(ids, n_new, oracle)  # the draft's window: crossvocab.py's check, in the draft's tokens
    return Loaded(draft, oracle, enc, ids, names, (draft_enc, enc))


def check_across(method, draft_name, command="--method ", by_token_id=False):
    """Refuse, in one line, a draft of another vocabulary for a method (or a program) that has no way to run it."""
    said = printable(str(draft_name), newlines=False)
    *others, last = [f"{command}{name}" for name in methods.across_vocabularies()]
    ways = f"{', '.join(others)} or {last}" if others else last
    if by_token_id:
        raise GenerationError(f"the draft {said} has a vocabulary of its own (its tokenizer files are not the oracle's), "
                              f"and this program compares drafts with the oracle's tokens by id: give it a draft with "
                              f"the oracle's vocabulary (speculative.py runs {said} with {ways})")
    if methods.variant(method, other_vocabulary=True) is None:
        raise GenerationError(f"{command}{method.name} needs a draft with the oracle's vocabulary; {said} has its own: "
                              f"use {ways}")


# ---------------------------------------------------------------------------
# The generator of a method
# ---------------------------------------------------------------------------

def generator(settings, draft, oracle, ids, stats, rng=None, drafter=None, encs=None):
    """The token generator of settings.method: yields settings.max_new_tokens token ids.

    rng: the sampling methods' generator (default: one seeded with settings.seed); drafter: the
    n-gram drafter to reuse across generations (default: a new one from the settings); encs: (the
    draft's tokenizer, the oracle's) when the draft's vocabulary is not the oracle's (Loaded.encs).
    """
    method = methods.variant(methods.get(settings.method), other_vocabulary=encs is not None)
    if method is None:
        raise GenerationError(f"method {settings.method} needs a draft with the oracle's vocabulary")
    if not settings.cache:  # to feel what the KV cache saves: the same algorithm, recomputing every prefix
        if method.needs_cache:
            raise GenerationError(f"--method {method.name} needs the KV cache (its drafts or beams share prefixes)")
        draft, oracle = (Recompute(m) if m is not None else None for m in (draft, oracle))
    rng = np.random.default_rng(settings.seed) if rng is None else rng
    return method.run(methods.Call(method, draft, oracle, list(ids), settings.max_new_tokens,
                                   methods.n_draft_of(method, settings), settings, stats, rng, drafter, encs))


class Recompute:
    """A model that ignores its KV cache: every forward reruns the whole prefix, as decoding without
    a cache does (the session's /cache off, to feel what the cache saves).

    The generators still hand it a KVCache, and still truncate it after a rejection: here
    the cache holds no keys or values, only its length; the token ids it stands for are kept
    beside it, in self.ids (the KVCache class is used as it is, nothing added to it).
    """

    def __init__(self, model):
        self.model = model
        self.name, self.vocab_size, self.n_positions = model.name, model.vocab_size, model.n_positions
        # {id of a KVCache handed to forward: (a weak reference to it, the token ids it has been fed)}. No
        # WeakKeyDictionary: its callback is Python, run as a cache is freed, where a Ctrl-C would be lost.
        self.ids = {}

    def forward(self, ids, kvcache=None, positions=None, mask=None, n_logits=None):
        if kvcache is None:
            return self.model.forward(ids, positions=positions, mask=mask, n_logits=n_logits)
        if positions is not None or mask is not None:
            raise GenerationError("without the KV cache only plain left-to-right decoding runs")
        ids = list(np.asarray(ids).reshape(-1))
        self.ids = {key: (ref, fed) for key, (ref, fed) in self.ids.items() if ref() is not None}  # caches gone
        ref, fed = self.ids.get(id(kvcache), (None, []))
        prefix = fed[:kvcache.n_tokens()] if ref is not None and ref() is kvcache else []  # truncate() shortened it
        logits = self.model.forward(prefix + ids, n_logits=n_logits or len(ids))  # all of it, again
        self.ids[id(kvcache)] = (weakref.ref(kvcache), prefix + ids)
        kvcache.commit(len(ids))
        return logits


# ---------------------------------------------------------------------------
# One run, shown
# ---------------------------------------------------------------------------

@dataclass
class View:
    """Where a run's text and everything else go, and what is shown besides the text."""
    text: object = sys.stdout     # the prompt and the generated text, as it comes
    info: object = sys.stderr     # the statistics, the trace, the comparison, notes
    color: bool = False           # accepted drafts in green
    trace: bool = False           # every round (--trace)
    html: str = None              # the page to write (--html)
    compare: bool = False         # the oracle alone beside it (--compare)


@dataclass
class Result:
    tokens: list
    stats: Stats
    elapsed: float


class Stopped(KeyboardInterrupt):
    """Ctrl-C during a generation; args[0]: the tokens shown by then."""


def run(settings, loaded, prompt, view, rng=None, drafter=None):
    """Generate and show: the prompt and the text as it comes, then the trace, the statistics,
    the comparison and the page, as the view asks. Returns the Result."""
    method = methods.variant(methods.get(settings.method), other_vocabulary=loaded.encs is not None)
    stats = Stats(trace=[] if (view.trace or view.html) and method.verifies else None)
    tokens = generator(settings, loaded.draft, loaded.oracle, loaded.ids, stats, rng, drafter, loaded.encs)
    if view.compare:
        same_as_checkpoint(loaded.oracle)  # the oracle timed alone is what --plain would load: proven before any output
    token_bytes = loaded.enc.decode_single_token_bytes
    if view.color and method.verifies:
        print(f"{display.GREEN}green{display.RESET}: proposed by the draft and accepted; plain: chosen by the oracle",
              file=view.info, flush=True)
    view.text.write(printable(prompt) if view.text.isatty() else prompt)  # on a terminal, its control characters shown
    start = time.perf_counter()
    try:
        generated = display.stream(tokens, token_bytes, stats.from_draft, view.color, view.text)
    except KeyboardInterrupt:
        print(file=view.text, flush=True)  # what is said next starts on a line of its own
        raise Stopped(stats.n_generated) from None
    except Exception:
        print(file=view.text, flush=True)  # a check a generator makes on its first step: its line starts afresh
        raise
    elapsed = time.perf_counter() - start
    print(file=view.text, flush=True)
    if view.trace and stats.trace is not None:
        print("\n".join(display.format_trace(method.shown, stats.trace, token_bytes, len(loaded.ids))), file=view.info)
    print(display.summary(method.name, stats, elapsed), file=view.info, flush=True)
    if view.compare:
        print(compare(settings, loaded, generated, elapsed), file=view.info, flush=True)
    if view.html is not None:
        if stats.trace is None:
            print(f"no page: method {method.name} has no rounds to show", file=view.info)
        else:
            from workbench.page import report  # imported here: only a page needs it
            report.write_page(view.html, report.Run(
                prompt=prompt, prompt_ids=loaded.ids, tokens=generated, stats=stats, method=method,
                settings=describe_settings(settings), models=describe_models(loaded), elapsed=elapsed,
                token_bytes=token_bytes))
            print(printable(f"wrote {view.html}: open it in a browser", newlines=False), file=view.info)
    return Result(generated, stats, elapsed)


def same_as_checkpoint(model):
    """--compare's oracle is its checkpoint's, every value (speed/accelerate.py's same_as_checkpoint): the fast copy a
    plan uses, bound to the checkpoint by a signed record, is checked against it in full once. A plain model is the
    checkpoint."""
    fast = getattr(model, "fast", None)
    if fast is not None:
        from workbench.speed.accelerate import same_as_checkpoint as check  # imported here: --plain imports no speed/
        check(fast)


def describe_settings(settings):
    """The settings line of a run (the page's, the session's /settings): the draft length, the sampling settings
    where the method samples, and the method's own options."""
    method = methods.get(settings.method)
    shown = {"n_draft": methods.n_draft_of(method, settings)} if method.n_draft else {}
    if method.samples:
        shown.update(processor=str(settings.processor), seed=settings.seed)
    for option in method.options:
        value = settings.options.get(option.name, option.default)
        shown[option.name] = ("on" if value else "off") if option.type is bool else value
    return shown


def describe_models(loaded):
    """{"draft": "NAME (L layers of width D)", "oracle": ...} for the models a run used; a draft's own vocabulary named."""
    own = f", a vocabulary of its own: {loaded.encs[0].n_vocab} tokens" if loaded.encs else ""
    return {role: f"{loaded.names.get(role, model.name)} ({shape(model)}{own if role == 'draft' else ''})"
            for role, model in (("draft", loaded.draft), ("oracle", loaded.oracle)) if model is not None}


def baseline_of(method, settings):
    """What --compare runs beside a method: greedy decoding for a greedy method, and for a sampling one at
    temperature 0 (SpS's test is then "is the draft the argmax?"); sampling at the same settings for one that
    samples (the draft alone at a temperature too)."""
    return "sample" if method.samples and settings.processor.temperature > 0 else "greedy"


def compare(settings, loaded, generated, elapsed):
    """Run the oracle alone (the method's baseline) on the same prompt; the line that reports it: what was
    compared, and for a method whose text must be the oracle's, whether it is. A method that writes a text of
    its own (the draft alone) has no speedup over the oracle to report: its text is not the oracle's."""
    method = methods.get(settings.method)
    baseline = baseline_of(method, settings)
    start = time.perf_counter()
    alone = list(generator(settings.but(method=baseline), None, loaded.oracle, loaded.oracle_ids, Stats()))
    alone_time = time.perf_counter() - start
    ran = "greedy" if baseline == "greedy" else f"{baseline}: {settings.processor}, seed {settings.seed}"
    line = f"oracle alone ({ran}): {len(alone)} tokens in {alone_time:.2f} s, {len(alone) / max(alone_time, 1e-9):.1f} tokens/s"
    if method.draft_writes:
        return line + (f"; {method.name} writes the draft's own text, not the oracle's: no speedup to compare "
                       f"({'the same' if alone == generated else 'another'} text)")
    line += f"; speedup {alone_time / max(elapsed, 1e-9):.2f}x"
    if method.exact or (baseline == "greedy" and method.verifies):  # the text must be greedy decoding's
        return line + ("; identical output" if alone == generated else "; OUTPUT DIFFERS (see README: near-ties)")
    if baseline == "greedy":
        return line + f"; {method.name}'s text need not be greedy decoding's ({'the same' if alone == generated else 'another'} text)"
    return line + "; sampled: each text is a draw from the oracle's distribution, so the two differ"
