"""The session: `python workbench.py --interactive` (or -i).

Load the models once, then type: a line of text is a prompt, generated with
the current settings and streamed with the accepted drafts marked, followed
by the statistics line; a line starting with / changes a setting. /help lists
the commands: every setting and every method's own option (registry.Option),
each beside its name in the project documentation docs/sources.md quotes,
where it has one (its names that are ours too are kept on purpose: /debug,
/egag_ema; docs/USAGE.md). Ctrl-C stops a generation and returns to the
prompt; Ctrl-D or /quit leaves. A bad command or value is one line, and the
session goes on.
"""

import inspect
import sys

import numpy as np

from errors import UserError, error_line, printable, quoted
from processors import PROCESSORS, Processor, parse_processor
from weights import files
from workbench import display, methods, runner, settings as common
from workbench.bench import ablation, tables
from workbench.methods.text import STORAGE, new_drafter
from workbench.program import UsageError
from workbench.registry import ON_OFF

try:
    import readline  # history and tab completion where the platform has it (not on Windows)
except ImportError:
    readline = None

SOURCE = "the project documentation"  # docs/sources.md: the workbench this one's session follows


class Session:
    def __init__(self, draft, oracle, models_dir, settings, trace=False, html=None, compare=False, color="auto",
                 out=sys.stdout, plain=False, second_core=False):
        self.names = {"draft": draft, "oracle": oracle}
        self.models_dir, self.settings, self.out = models_dir, settings, out
        self.trace, self.html, self.compare = trace, html, compare
        self.color = display.use_color(color, out)
        self.plain = plain         # /plain: the models as gpt2.GPT2.from_pretrained gives them (--plain)
        self.second_core = second_core  # /second_core: the helper process asked for (--second-core, or the setting)
        self.loaded = {}           # (name, plain) -> (model, directory): each model is loaded once
        self.drafter = None        # the n-gram drafter, kept between generations when reset_in_between is off
        self.rng = None            # the sampling generator: /seed restarts it
        self.last_prompt = None
        self.commands = command_table(self)

    # -- the loop --------------------------------------------------------------

    def loop(self, read=input):
        if readline is not None:
            readline.set_completer(self.complete)
            readline.set_completer_delims(" ")
            readline.parse_and_bind("tab: complete")
        self.say("speculative-gpt2 workbench: type a prompt, or /help. Ctrl-C stops a generation, Ctrl-D leaves.")
        self.say(self.summary_line())
        while True:
            try:
                line = read("> ")
            except EOFError:
                self.say("")
                return
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh line, as in Python's own
                self.say("")
                continue
            if not self.handle(line):
                return

    def handle(self, line):
        """Run one line; False when the session should end."""
        line = line.strip()
        if not line:
            return True
        try:
            if line.startswith("/"):
                return self.command(line)
            self.generate(line)
        except KeyboardInterrupt:
            self.say("\n(stopped)")
        except BrokenPipeError:  # the reader of the session's output has gone: nothing more can be said
            raise
        except (UserError, OSError) as e:
            self.say(f"error: {error_line(e)}")
        return True

    def command(self, line):
        name, *values = line[1:].split() or [""]
        if name in WHOLE_VALUE:  # a file or directory name: the rest of the line, spaces and all
            rest = line[1:].split(None, 1)[1:]
            values = [rest[0].strip()] if rest else []
        if name in WHOLE_VALUE:  # a file or directory name: the rest of the line, spaces and all
            rest = line[1:].split(None, 1)[1:]
            values = [rest[0].strip()] if rest else []
        if name in ("quit", "exit"):
            return False
        if name not in self.commands:
            ours = [ours for ours, (_, _, _, theirs) in self.commands.items() if theirs == f"/{name}" and ours != name]
            if ours:  # the project documentation's name for one of ours: a pointer, not a second name
                raise UsageError(f"unknown command /{name}: {SOURCE}'s /{name} is /{ours[0]} here")
            raise UsageError(f"unknown command /{name}; /help lists the commands")
        handler, _, usage, _ = self.commands[name]
        try:
            inspect.signature(handler).bind(*values)
        except TypeError:
            raise UsageError(f"usage: {usage}") from None
        handler(*values)
        return True

    def complete(self, text, state):
        """readline's completer: command names, then the values a command takes."""
        buffer = readline.get_line_buffer() if readline else text
        words = buffer.split()
        if len(words) <= 1 and not buffer.endswith(" "):
            options = ["/" + name for name in [*self.commands, "quit"]]
        else:
            options = COMPLETIONS.get(words[0].lstrip("/"), [])
        matches = [o for o in options if o.startswith(text)]
        return matches[state] if state < len(matches) else None

    def say(self, text):
        print(printable(text), file=self.out, flush=True)  # names and values typed or read from files, shown safely

    # -- generating ------------------------------------------------------------

    def model(self, role):
        """(model, directory) of the draft or the oracle, loaded on first use and kept."""
        key = (self.names[role], self.plain)
        if key not in self.loaded:
            self.loaded[key] = runner.load_model(key[0], self.models_dir, log=self.out, plain=self.plain)
        return self.loaded[key]

    def method(self, method=None, processor=None):
        """The method a generation runs (default: the current one's): /target, the oracle alone, is greedy or
        sampling by the processor; every other method is itself."""
        method, processor = method or self.settings.method, processor or self.settings.processor
        if method == "target":
            return "greedy" if processor.temperature == 0 else "sample"
        return method

    def check_sampling(self, method, processor):
        """The command line's rule (runner.check_sampling): a processor that samples, only with a method that
        samples. Checked before a command changes either, so that no setting is left that the next generation
        would refuse: /speculative at temperature 0.8 is refused as --method speculative --temperature 0.8 is."""
        if processor.temperature > 0:
            runner.check_sampling(self.method(method, processor), f"the processor ({processor})", command="/method ")

    def method_said(self):
        """The method, and which one /target runs: "sample (/target samples at temperature 0.8; ...)"."""
        method = self.method()
        if method == self.settings.method:
            return method
        why = "samples" if method == "sample" else "is greedy"
        return (f"{method} (/{self.settings.method} {why} at temperature {self.settings.processor.temperature:g}; "
                f"/temperature changes it)")

    def generate(self, prompt):
        settings = self.runs()
        method = settings.method
        loaded = runner.prepare(self.model, method, prompt, settings.max_new_tokens, self.names, command="/method ")
        if self.rng is None:
            self.rng = np.random.default_rng(self.settings.seed)
        if self.drafter is None:
            self.drafter = new_drafter(lambda name: settings.options.get(name, self.option(name).default))
        self.last_prompt = prompt
        view = runner.View(self.out, self.out, color=self.color, trace=self.trace, html=self.html, compare=self.compare)
        try:
            runner.run(settings, loaded, prompt, view, self.rng, self.drafter)
        except runner.Stopped as stopped:
            self.say(f"(stopped after {stopped.args[0]} tokens)")

    # -- the commands ----------------------------------------------------------

    def summary_line(self):
        """The session in one line: the models, the method and its main settings (/settings, and at the start)."""
        s = self.settings
        method = self.method() + (f" (/{s.method})" if s.method != self.method() else "")
        n_draft = methods.n_draft_of(methods.get(self.method()), s)
        return (f"draft {self.names['draft']}, oracle {self.names['oracle']}{' (plain)' if self.plain else ''}; "
                f"method {method}, length {s.max_new_tokens}, n_draft {n_draft}, processor {s.processor}")

    def runs(self):
        """The settings a generation runs with: /target's method resolved by the processor."""
        return self.settings.but(method=self.method())

    def option(self, name):
        return next(o for o in methods.options() if o.name == name)

    def show_settings(self):
        s = self.settings
        self.say(self.summary_line())
        own = "; ".join(f"{option.name} {self.shown_value(option)} ({', '.join(methods.methods_taking(option.name))})"
                        for option in methods.options())
        self.say(f"seed {s.seed}; {own}")
        self.say(f"trace {on_off(self.trace)}, html {self.html or 'off'}, cache {on_off(s.cache)}, compare {on_off(self.compare)}, "
                 f"plain {on_off(self.plain)}, second_core {on_off(self.second_core)}")

    def shown_value(self, option):
        value = self.settings.options.get(option.name, option.default)
        if option.type is bool:
            return on_off(value)
        return "default" if value is None else value

    def set_method(self, name):
        if name not in methods.METHODS and name != "target":
            raise UsageError(f"unknown method {quoted(name)}; the methods are: {', '.join([*methods.METHODS, 'target'])}")
        try:
            self.check_sampling(name, self.settings.processor)
        except UsageError as e:
            raise UsageError(f"{e}: /processor greedy first, or a method that samples") from None
        self.settings.method = name
        self.say(f"method {self.method_said()}")

    def toggle_method(self, method, value=None, off_method="speculative"):
        """The project documentation's /egag and /ngram: on switches to the method, off back to plain speculative."""
        on = flag(value, self.settings.method != method)
        self.set_method(method if on else off_method)

    def set_model(self, role, name):
        self.names[role] = name
        self.say(f"{role} {name} (loaded on the next generation)")

    def set_common(self, option, value):
        """/length, /n_draft: a setting every method has (workbench/settings.py)."""
        shown = option.command or option.name
        number = option.parse(value, name=shown)
        if option.name == "max_new_tokens":
            self.check_fits(option.name, number)
        setattr(self.settings, option.name, number)
        self.say(f"{shown} {number}")

    def set_option(self, option, value=None):
        """A method's own option (registry.Option, from its family's file): /n_beams 8, /reset_in_between off."""
        if value is None:
            if option.type is not bool:
                raise UsageError(f"usage: /{option.name} {'N' if option.type is int else 'X'} ({option.bounds()})")
            value = not self.settings.options.get(option.name, option.default)  # a flag alone: toggled
        new = option.parse(value, name=option.name)
        bounds = {"n_draft_min": (new, self.settings.options.get("n_draft_max", self.option("n_draft_max").default)),
                  "n_draft_max": (self.settings.options.get("n_draft_min", self.option("n_draft_min").default), new)}
        if option.name in bounds and bounds[option.name][0] > bounds[option.name][1]:
            low, high = bounds[option.name]
            raise UsageError(f"need n_draft_min <= n_draft_max, this would make them {low} and {high}")
        if option.name == "draft_layers":
            self.check_fits(option.name, new)
        self.settings.options[option.name] = new
        if option.name in ("ngram_n", "storage", "top_k_filler", "reset_in_between"):
            self.drafter = None  # the next generation's n-gram drafter follows the new setting
        self.say(f"{option.name} {self.shown_value(option)}")

    def check_fits(self, field, number):
        """/length and /draft_layers against the models themselves (loaded for it, as the next generation
        would): the tokens a context window leaves after a one-token prompt, the layers below the oracle's last."""
        if field == "max_new_tokens":
            roles = ["oracle"] + (["draft"] if methods.get(self.method()).draft_model else [])
            window, role = min((self.model(role)[0].n_positions, role) for role in roles)  # the smaller window
            if number > window - 1:
                raise UsageError(f"length must be a whole number from 0 to {window - 1} with these models (the {role} "
                                 f"{self.names[role]} has a context window of {window} tokens, and a prompt takes at "
                                 f"least one), not {number}")
        else:
            oracle = self.model("oracle")[0]
            if oracle.n_layer < 2:
                raise UsageError(f"the oracle {self.names['oracle']} has 1 layer: no shorter draft can be cut from it")
            if number > oracle.n_layer - 1:
                raise UsageError(f"draft_layers must be a whole number from 1 to {oracle.n_layer - 1} with the oracle "
                                 f"{self.names['oracle']} ({oracle.n_layer} layers), not {number}")

    def set_processor(self, *words):
        if not words:
            raise UsageError(f"/processor takes one of: {', '.join(PROCESSORS)} (with its values)")
        temperature = self.settings.processor.temperature or 1.0
        processor = parse_processor(" ".join(words), temperature=temperature)
        for option in (common.TOP_K, common.TOP_P):  # the command line's bounds, here too
            if getattr(processor, option.name) is not None:
                option.parse(getattr(processor, option.name), name=option.name)
        self.change_processor(processor)

    def set_temperature(self, value):
        p = self.settings.processor
        self.change_processor(Processor(common.TEMPERATURE.parse(value, name="temperature"), p.top_k, p.top_p))

    def change_processor(self, processor):
        try:
            self.check_sampling(self.settings.method, processor)
        except UsageError as e:
            raise UsageError(f"{e}: a method that samples first (/method sps)") from None
        self.settings.processor = processor
        self.say(f"processor {processor}; method now: {self.method_said()}")

    def set_seed(self, value):
        self.settings.seed = common.SEED.parse(value, name="seed")
        self.rng = None  # the next generation starts from the new seed
        self.say(f"seed {self.settings.seed}")

    def set_storage(self, storage=None, n=None):
        """The project documentation's /set_ngramstorage: the n-gram table and its order at once."""
        if storage not in STORAGE.choices:
            raise UsageError(f"/set_ngramstorage takes {' or '.join(STORAGE.choices)} and n, e.g. /set_ngramstorage basic 3")
        if n is not None:  # checked first: a refused n changes nothing, not even the storage
            self.settings.options["ngram_n"] = self.option("ngram_n").parse(n, name="n")
        self.settings.options["storage"] = storage
        self.drafter = None
        self.say(f"n-gram storage {storage}, n {self.shown_value(self.option('ngram_n'))}")

    def set_flag(self, name, value=None):
        current = self.settings.cache if name == "cache" else getattr(self, name)
        new = flag(value, not current)
        if name == "cache":
            self.settings.cache = new
        else:
            setattr(self, name, new)
        if name == "cache" and not new:  # one line: the setting and what it costs
            self.say("cache off: every forward recomputes the whole prefix (tree and beam need the cache)")
        elif name == "plain":
            self.say(f"plain {on_off(new)}: " + ("the models as gpt2.GPT2.from_pretrained gives them, NumPy's own @ "
                                                 "(logits within about 1e-5 of the fast ones, slower)" if new else "the fast models (speed/)"))
        else:
            self.say(f"{name} {on_off(new)}")

    def set_second_core(self, value=None):
        from workbench.speed import second_core  # imported here: a --plain session imports nothing of speed/
        self.second_core = flag(value, not self.second_core)
        second_core.use(self.second_core)
        self.say(f"second_core {on_off(self.second_core)}: {second_core.status()}"
                 + (" (with /plain off: the plain models run NumPy's own products)" if self.plain else ""))

    def set_html(self, path=None):
        if path is None:
            raise UsageError("/html takes a file name (the page of each generation) or off")
        if path != "off":
            problem = files.why_not_writable(path)
            if problem:
                raise UsageError(f"/html {problem}")
        self.html = None if path == "off" else path
        self.say(f"html {self.html or 'off'}")

    def run_ablations(self, path="ablation.csv"):
        if self.last_prompt is None:
            raise UsageError("/ablation runs on the last prompt: type a prompt first")
        problem = files.why_not_writable(path)
        if problem:
            raise UsageError(f"/ablation {problem}")
        run = runner.prepare(self.model, "speculative", self.last_prompt, self.settings.max_new_tokens, self.names,
                             by_token_id=True)
        temperature = self.settings.processor.temperature or 1.0
        n_draft = methods.n_draft_of(methods.get(self.method()), self.settings)
        rows = ablation.run_ablations(run.draft, run.oracle, [run.ids], self.settings.max_new_tokens, n_draft, temperature,
                                      self.settings.seed or 0)
        self.say(tables.text(rows, ablation.COLUMNS))
        tables.write_csv(path, rows, ablation.COLUMNS)
        self.say(f"wrote {path}")

    def show_help(self):
        width = max(len(usage) for _, _, usage, _ in self.commands.values())
        self.say(f"type a prompt to generate; the commands (and {SOURCE}'s own, where it has one: docs/sources.md "
                 "quotes it):")
        for name, (_, text, usage, theirs) in self.commands.items():
            self.say(f"  {usage.ljust(width)}  {text}" + (f"   [docs: {theirs}]" if theirs else ""))
        self.say(f"  {'/quit'.ljust(width)}  leave (or Ctrl-D)   [docs: /quit]")


def command_table(s):
    """{name: (handler, what it does, usage, the project documentation's command)}: the session's own, then each
    method's own option (methods.options(), declared in its family's file)."""
    def setting(option, theirs):  # a setting every method has: its bounds in its help
        return (lambda v: s.set_common(option, v), f"{option.help}, {option.bounds()}",
                f"/{option.command or option.name} N", theirs)

    table = {
        "help": (s.show_help, "this list", "/help", "/help"),
        "settings": (s.show_settings, "every setting", "/settings", ""),
        "method": (s.set_method, "the decoding method: " + ", ".join([*methods.METHODS, "target"]), "/method NAME", ""),
        "speculative": (lambda: s.set_method("speculative"), "greedy speculative decoding (sampling: /method sps)",
                        "/speculative", "/speculative"),
        "target": (lambda: s.set_method("target"), "the oracle alone (greedy or sampling, by the processor)", "/target", "/target"),
        "draft_alone": (lambda: s.set_method("draft-alone"), "the draft model alone", "/draft_alone", "/drafter"),
        "draft": (lambda name: s.set_model("draft", name), "the draft model: a name or a directory (the rest of the line)",
                  "/draft NAME_OR_DIR", ""),
        "oracle": (lambda name: s.set_model("oracle", name), "the oracle: a name or a directory (the rest of the line)",
                   "/oracle NAME_OR_DIR", ""),
        "length": setting(common.MAX_NEW_TOKENS, "/length"),
        "n_draft": setting(common.N_DRAFT, "/gamma"),
        "processor": (s.set_processor, "sampling: " + " | ".join(" ".join([k] + [v.upper() for v in values])
                                                                 for k, values in PROCESSORS.items()),
                      "/processor NAME [VALUES]", "/processor"),
        "temperature": (s.set_temperature, f"{common.TEMPERATURE.help}, {common.TEMPERATURE.bounds()}",
                        "/temperature T", "(in /processor)"),
        "seed": (s.set_seed, f"restart sampling from this seed, {common.SEED.bounds()}", "/seed S", ""),
        "egag": (lambda v=None: s.toggle_method("adaptive", v), "entropy-adaptive draft length on (method adaptive) or off",
                 "/egag [on|off]", "/egag"),
        "ngram": (lambda v=None: s.toggle_method("ngram", v), "n-gram drafts, no draft model (NASD) on or off",
                  "/ngram [on|off]", "/ngram"),
        "set_ngramstorage": (s.set_storage, "the n-gram table: basic (back-off) or onelevel, and n",
                             "/set_ngramstorage basic|onelevel N", "/set_ngramstorage"),
    }
    for option in methods.options():
        value = "on|off" if option.type is bool else "|".join(option.choices) if option.type is str else \
            "N" if option.type is int else "X"
        table[option.name] = (lambda v=None, *, option=option: s.set_option(option, v),  # one word at most
                              f"{option.help}, {option.bounds()}", f"/{option.name} {'[' + value + ']' if option.type is bool else value}",
                              SOURCE_NAMES.get(option.name, ""))
    table.update({
        "egag_ema": (lambda v=None: s.set_option(s.option("ema"), v), f"{SOURCE}'s name for /ema", "/egag_ema X", "/egag_ema"),
        "trace": (lambda v=None: s.set_flag("trace", v), "print every round", "/trace [on|off]", "/debug"),
        "debug": (lambda v=None: s.set_flag("trace", v), f"{SOURCE}'s name for /trace", "/debug [on|off]", "/debug"),
        "html": (s.set_html, "write each generation's page to FILE, the rest of the line (a file named off: ./off)",
                 "/html FILE|off", ""),
        "cache": (lambda v=None: s.set_flag("cache", v), "the KV cache; off: every step recomputes the prefix",
                  "/cache [on|off]", "/cache"),
        "compare": (lambda v=None: s.set_flag("compare", v), "also run the oracle alone, report the speedup",
                    "/compare [on|off]", ""),
        "plain": (lambda v=None: s.set_flag("plain", v), "the models as gpt2.GPT2.from_pretrained gives them, NumPy's own "
                  "products, nothing of workbench/speed/ (logits within about 1e-5 of the fast ones; for a debugger)",
                  "/plain [on|off]", ""),
        "second_core": (s.set_second_core, "a small model's checks of several tokens half on a helper process: faster on "
                        "a quiet machine, slower beside other work (workbench/speed/second_core.py)", "/second_core [on|off]", ""),
        "ablation": (s.run_ablations, "run the ablation set on the last prompt, write a CSV (the rest of the line)",
                     "/ablation [FILE.csv]",
                     "scripts/run_ablation.ps1"),
    })
    return table


WHOLE_VALUE = {"html", "ablation", "draft", "oracle"}  # commands whose value is the rest of the line: a path may hold spaces
SOURCE_NAMES = {"n_draft_min": "/egag_gamma_min", "n_draft_max": "/egag_gamma_max", "ngram_n": "(in /set_ngramstorage)",
                "storage": "(in /set_ngramstorage)", "top_k_filler": "/top_k_filler",
                "reset_in_between": "/reset_in_between"}  # the project documentation's names for the options
COMPLETIONS = {"method": list(methods.METHODS) + ["target"], "processor": list(PROCESSORS),
               "set_ngramstorage": list(STORAGE.choices), "storage": list(STORAGE.choices),
               **{name: ["on", "off"] for name in ("egag", "ngram", "reset_in_between", "trace", "debug", "cache", "compare",
                                                   "plain", "second_core")},
               "html": ["off"], "draft": ["demo-draft", "demo-draft-4k", "gpt2"], "oracle": ["demo-oracle", "gpt2-large", "gpt2-xl"]}


def flag(value, default):
    """on/off (and true/false, 1/0); no value: default (the toggle)."""
    if value is None:
        return default
    if value.lower() not in ON_OFF:
        raise UsageError(f"expected on or off, got {quoted(value)}")
    return ON_OFF[value.lower()]


def on_off(value):
    return "on" if value else "off"
