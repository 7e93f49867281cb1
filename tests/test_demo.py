"""The offline demo pair: the learned pair shipped in assets/learned-pair/, written where it is asked
for and checked against its SHA256SUMS, and what it shows: English, a draft the oracle mostly keeps,
and greedy speculative text equal to greedy text on the held-out prompts it never saw."""

import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import demo as demo_app
from fixtures import ROOT, held_out
from gpt2 import GPT2
from processors import make_processor
from sps import autoregressive_sample, speculative_sample
from speculative import greedy_generate, speculative_generate
from speedup import predicted_speedup
from stats import Stats
from weights import demo_pair as demo
from weights.checkpoint import CheckpointError, load_config
from weights.tokenizer import encode, load_tokenizer

MAX_SHIPPED_BYTES = 30 * 10 ** 6  # the budget for the pair and the oracle's heads in the repository


@pytest.fixture(scope="module")
def pair(demo_dirs):
    draft, oracle = (GPT2.from_pretrained(demo_dirs[k]) for k in ("draft", "oracle"))
    return draft, oracle, load_tokenizer(demo_dirs["oracle"])


# --- what ships, and how it is written ----------------------------------------------------

def test_the_shipped_files_are_their_sums_and_fit_the_budget(demo_dirs):
    sums = demo.shipped_sums()
    demo.check_assets(sums)  # raises on any difference
    total = sum(os.path.getsize(os.path.join(demo.ASSETS, name)) for name in sums)
    assert total <= MAX_SHIPPED_BYTES, total
    for name, model_dir in demo_dirs.items():
        assert demo.is_current(model_dir, f"demo-{name}", sums)


def test_the_oracle_and_the_draft_are_gpt2_checkpoints_of_the_shapes_said(demo_dirs):
    oracle, draft = load_config(demo_dirs["oracle"]), load_config(demo_dirs["draft"])
    assert oracle["vocab_size"] == draft["vocab_size"] == 8192
    # The draft streams under a tenth of the oracle's weights per token (bench.py suite measures the time).
    size = {k: os.path.getsize(os.path.join(demo_dirs[k], "model.safetensors")) for k in demo_dirs}
    assert size["draft"] / size["oracle"] < 0.15, size


@pytest.fixture
def assets_copy(tmp_path, monkeypatch):
    copy = tmp_path / "assets"
    shutil.copytree(demo.ASSETS, copy)
    monkeypatch.setattr(demo, "ASSETS", str(copy))
    return copy


def test_a_tampered_asset_is_refused_and_nothing_is_written(assets_copy, tmp_path):
    weights = assets_copy / "oracle" / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 1
    weights.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="restore it with git checkout"):
        demo.build_pair(str(tmp_path / "models"))
    assert not (tmp_path / "models" / "demo-oracle").exists()


def test_missing_sums_say_how_to_restore_them(assets_copy, tmp_path):
    (assets_copy / "SHA256SUMS").unlink()
    with pytest.raises(CheckpointError, match="restore it with git checkout"):
        demo.build_pair(str(tmp_path / "models"))


def test_an_edited_or_older_model_directory_is_rewritten(tmp_path):
    models = tmp_path / "models"
    draft_dir, oracle_dir = demo.build_pair(str(models))
    with open(os.path.join(oracle_dir, "config.json"), "a") as f:
        f.write(" ")
    os.remove(os.path.join(draft_dir, "merges.txt"))
    demo.build_pair(str(models))
    sums = demo.shipped_sums()
    assert demo.is_current(oracle_dir, "demo-oracle", sums) and demo.is_current(draft_dir, "demo-draft", sums)
    assert sorted(os.listdir(models)) == ["demo-draft", "demo-draft-4k", "demo-oracle"]  # no temporary left beside them


def test_demo_draft_4k_is_written_with_a_tokenizer_of_its_own(tmp_path):
    # The third model: its four files are the shipped ones (draft-4k/ in SHA256SUMS), its vocab.json and merges.txt
    # its own, not the pair's; an edited one is rewritten; the name resolves to it.
    from weights import models as model_names
    models = tmp_path / "models"
    demo.build_pair(str(models))
    own = models / "demo-draft-4k"
    sums = demo.shipped_sums()
    assert sorted(os.listdir(own)) == ["config.json", "merges.txt", "model.safetensors", "vocab.json"]
    for f in os.listdir(own):
        assert demo.sha256(str(own / f)) == sums[f"draft-4k/{f}"], f
    assert demo.sha256(str(own / "vocab.json")) != sums["vocab.json"]
    (own / "merges.txt").write_text("#version: 0.2\n")
    assert model_names.resolve_model_dir("demo-draft-4k", str(models)) == str(own)
    assert demo.is_current(str(own), "demo-draft-4k", sums)
    draft, oracle = GPT2.from_pretrained(str(own)), GPT2.from_pretrained(str(models / "demo-oracle"))
    draft_enc, oracle_enc = load_tokenizer(str(own)), load_tokenizer(str(models / "demo-oracle"))
    assert draft_enc.n_vocab == draft.vocab_size == 4096 and oracle_enc.n_vocab == oracle.vocab_size == 8192


@pytest.mark.slow
def test_python_demo_py_writes_the_three_models(tmp_path):
    models = tmp_path / "models"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "demo.py"), "--models-dir", str(models)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    sums = demo.shipped_sums()
    assert sorted(os.listdir(models)) == ["demo-draft", "demo-draft-4k", "demo-oracle"]
    assert all(demo.is_current(str(models / name), name, sums) for name in demo.DEMO_NAMES)


def test_a_file_the_project_did_not_write_is_never_deleted(tmp_path):
    """A stranger's file inside a demo model's directory: the directory is refused in one line, not
    rewritten over it (issue 33, case 11: never move or delete a file the project did not write)."""
    from errors import UserError
    models = tmp_path / "models"
    draft_dir, _ = demo.build_pair(str(models))
    os.remove(os.path.join(draft_dir, "merges.txt"))  # so that the directory needs rewriting
    stranger = os.path.join(draft_dir, "notes.txt")
    with open(stranger, "w") as f:
        f.write("a user's own notes")
    with pytest.raises(UserError) as refused:
        demo.build_pair(str(models))
    assert "notes.txt" in str(refused.value) or "demo-draft" in str(refused.value)
    with open(stranger) as f:
        assert f.read() == "a user's own notes"


def test_demo_names_resolve_and_build_on_first_use(tmp_path, monkeypatch):
    from weights import models
    built = []
    monkeypatch.setattr(demo, "build_pair", lambda d: built.append(d) or (d + "/demo-draft", d + "/demo-oracle"))
    assert models.resolve_model_dir("demo-oracle", str(tmp_path)) == str(tmp_path) + "/demo-oracle"
    assert built == [str(tmp_path)]


# --- what it shows ----------------------------------------------------------------------

def test_greedy_speculative_text_is_greedy_text_on_held_out_prompts(pair):
    # Exact token equality, one prompt of each kind the pair never saw; and the draft is kept often.
    draft, oracle, enc = pair
    stats = Stats()
    for kind, prompt in held_out():
        ids = encode(enc, prompt)[:48]
        assert list(speculative_generate(draft, oracle, ids, 32, n_draft=4, stats=stats)) == \
            list(greedy_generate(oracle, ids, 32)), kind
    assert stats.kept_fraction >= 0.55, stats.kept_fraction


def test_the_oracle_writes_words_of_the_documentation(pair):
    # English-looking: most words of the oracle's greedy text on a held-out prose prompt are words
    # that occur in the held-out prompts' own text (a dictionary the test has without the corpus).
    draft, oracle, enc = pair
    words = set(re.findall(r"[a-z]+", " ".join(p for _, p in held_out(n_per_kind=100)).lower()))
    prompt = next(p for kind, p in held_out() if kind == "prose")
    text = enc.decode(list(greedy_generate(oracle, encode(enc, prompt)[:32], 48)))
    written = re.findall(r"[a-z]+", text.lower())
    assert len(written) >= 10, text
    assert sum(w in words for w in written) / len(written) >= 0.6, text


# --- SpS on the learned pair: the oracle's distribution, by a chi-square test -----------------

N_SAMPLES = 1500


def exact_two_tokens(model, ids, processor):
    """{(a, b): probability} of the next two tokens under autoregressive sampling with processor."""
    first = processor(model.forward(ids)[-1:])[0]
    dist = {}
    for a in np.flatnonzero(first):
        second = processor(model.forward(list(ids) + [int(a)])[-1:])[0]
        for b in np.flatnonzero(second):
            dist[(int(a), int(b))] = float(first[a]) * float(second[b])
    return dist


def chi_square_rejects(counts, dist, n):
    """Pearson's chi-square at alpha = 0.001 (bins expected under 5 pooled); any impossible outcome rejects."""
    observed, expected, pooled_o, pooled_e = [], [], 0.0, 0.0
    for seq, p in dist.items():
        if p * n >= 5:
            observed.append(counts.get(seq, 0))
            expected.append(p * n)
        else:
            pooled_o, pooled_e = pooled_o + counts.get(seq, 0), pooled_e + p * n
    if pooled_e > 0:
        observed.append(pooled_o)
        expected.append(pooled_e)
    impossible = sum(c for seq, c in counts.items() if seq not in dist)
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    df = len(observed) - 1
    assert df >= 1, "degenerate: the oracle puts all its mass on one continuation"
    critical = df * (1 - 2 / (9 * df) + 3.0902 * math.sqrt(2 / (9 * df))) ** 3  # Wilson-Hilferty, z(0.001)
    return impossible > 0 or chi2 > critical, (chi2, critical, df, impossible)


@pytest.fixture(scope="module")
def sps_case(pair):
    # Top-k 4 at temperature 1.5: at most 16 two-token outcomes, each of them likely enough to count.
    draft, oracle, enc = pair
    ids = encode(enc, next(p for kind, p in held_out() if kind == "prose"))[:24]
    processor = make_processor("topk", 4, temperature=1.5)
    return draft, oracle, ids, processor, exact_two_tokens(oracle, ids, processor)


@pytest.mark.slow
def test_sps_on_the_learned_pair_samples_the_oracles_distribution(sps_case):
    draft, oracle, ids, processor, dist = sps_case
    rng, stats = np.random.default_rng(2024), Stats()
    counts = Counter(tuple(speculative_sample(draft, oracle, ids, 2, n_draft=2, rng=rng, processor=processor, stats=stats))
                     for _ in range(N_SAMPLES))
    rejects, detail = chi_square_rejects(counts, dist, N_SAMPLES)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted  # both kept and rejected drafts occurred


@pytest.mark.slow
def test_the_same_test_tells_the_draft_from_the_oracle(sps_case):
    # Negative control: the draft's own samples, where the pair disagrees, fail the same test.
    draft, oracle, ids, processor, dist = sps_case
    rng = np.random.default_rng(7)
    counts = Counter(tuple(autoregressive_sample(draft, ids, 2, rng=rng, processor=processor)) for _ in range(N_SAMPLES))
    assert chi_square_rejects(counts, dist, N_SAMPLES)[0]


# --- the README's demo session, word for word ---------------------------------------------

def doc_block(starting, doc="README.md"):
    """The code block of doc whose first line is `starting`, as a list of lines."""
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
    for block in text.split("```")[1::2]:
        lines = block.split("\n")[1:]  # after the opening fence's language tag
        if lines and lines[0] == starting:
            return lines
    raise AssertionError(f"{doc} has no code block starting with {starting!r}")


def without_timings(line):  # and without the models' directory, which is the test's own
    line = re.sub(r"^(loaded \S+) from \S+", r"\1", line)
    line = re.sub(r"^predicted [\d.]+x|, c [\d.]+ and T\((\d+)\)/T\(1\) [\d.]+", "", line)  # timed by the run
    return re.sub(r" in [\d.]+ s, [\d.]+ tokens/s|; time in draft .*|; speedup [\d.]+x|in [\d.]+ s$", "", line)


STATS_LINES = ("speculative:", "oracle alone", "loaded ", "predicted ", "no prediction: ")


def test_the_readme_demo_session_is_what_the_demo_prints(demo_dirs):
    # `python demo.py`'s output in the README, but for the timings: the text, the statistics, the next steps.
    lines = doc_block("$ python demo.py")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "demo.py"), "--models-dir",
                          os.path.dirname(demo_dirs["draft"])], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text_lines = [line for line in lines[1:] if not line.startswith(STATS_LINES)]
    shown_text = "\n".join(text_lines[:len(out.stdout.rstrip("\n").split("\n"))])
    assert out.stdout.rstrip("\n") == shown_text
    assert shown_text.startswith(demo_app.PROMPT)
    got = [without_timings(line) for line in out.stderr.splitlines() if line.startswith(STATS_LINES)]
    shown = [without_timings(line) for line in lines if line.startswith(STATS_LINES)]
    assert shown[-1].startswith(" (Leviathan et al.) from this run's alpha")  # the README shows a prediction
    if got[-1].startswith("no prediction: "):  # a busy machine: the line that says why there is none, in its place
        got[-1] = shown[-1]
    assert got == shown
    assert "identical output" in got[-2]
    accepted = re.search(r"acceptance ([\d.]+)%", out.stderr)
    assert float(accepted.group(1)) >= 55, out.stderr
    assert "Next:" in out.stderr and "exercises/ex03_accepted_prefix.py" in out.stderr
    why = [line for line in out.stderr.splitlines() if line.startswith("why ")]
    assert len(why) <= 1, why  # one line of why, only when the speedup is under 1 or far from the prediction
    # The roofline line: this machine's T(1) and T(k) beside its roofline and the ridge, the same words as shown.
    shown_roofline = [line for line in lines if line.startswith("one core of this machine: ")]
    got_roofline = [line for line in out.stderr.splitlines() if line.startswith("one core of this machine: ")]
    assert len(shown_roofline) == len(got_roofline) == 1, (shown_roofline, got_roofline)
    assert [re.sub(r"\d+(\.\d+)?", "N", line) for line in got_roofline] == \
        [re.sub(r"\d+(\.\d+)?", "N", line) for line in shown_roofline]


# --- the prediction beside the measured speedup, and the line of why ----------------------

def demo_stats(accepted=35, rejections=5, draft_time=0.05, oracle_time=0.14, oracle_passes=13):
    stats = Stats()
    stats.accepted, stats.rejections, stats.oracle_passes = accepted, rejections, oracle_passes
    stats.draft_time, stats.oracle_time = draft_time, oracle_time
    return stats


def predict(measured, seconds, elapsed=0.2, **stats):
    """demo.prediction's lines for a run of `elapsed` seconds whose oracle alone took measured x elapsed."""
    return demo_app.prediction(demo_stats(**stats), elapsed, measured * elapsed, seconds, 4)


def demo_costs(t1=0.004, check=0.0056, draft=0.0006, slowest=0.0045, oracle_prompt=0.006, draft_prompt=0.001,
               checks=None):
    """The demo's timings as costs() gives them, in the order they ran: 9 pairs of the oracle's forwards of
    1 and 5 tokens (the last one-token forward the slowest), or the 9 checks given."""
    ones = [t1] * 8 + [slowest]
    return {("oracle", 1): ones, ("oracle", 5): checks or [check] * 8 + [check * slowest / t1],
            ("draft", 1): [draft] * 9, ("oracle", "prompt"): [oracle_prompt] * 9, ("draft", "prompt"): [draft_prompt] * 9}


def test_the_demo_predicts_from_its_own_alpha_k_c_and_check():
    seconds = demo_costs()
    alpha = 35 / 40
    expected = predicted_speedup(alpha, 4, 0.0006 / 0.004, 0.0056 / 0.004)
    lines = predict(expected, seconds)  # measured = the prediction
    assert lines == [f"predicted {expected:.2f}x (Leviathan et al.) from this run's alpha 0.88 (35 kept, 5 rejected), "
                     "n_draft 4, c 0.15 and T(5)/T(1) 1.40 (the median of 9 pairs timed after the run)"]


@pytest.mark.parametrize("ratios, why", [
    ([0.93] * 9, "below 0.9: a check cannot cost less than one pass"),          # 0.93 is a sound timing;
    ([0.85, 0.88, 0.8, 0.89, 0.87, 1.2, 0.86, 0.84, 0.9], "below 0.9"),          # these are not
    ([15.24] * 9, "above 4: more than this machine's checks cost"),
    ([1.0, 1.1, 1.2, 2.5, 2.6, 2.7, 2.4, 1.05, 1.15], "too far apart to predict from"),
])
def test_no_prediction_from_a_check_no_machine_gives(ratios, why):
    lines = predict(0.8, demo_costs(checks=[0.004 * r for r in ratios]))
    if why.startswith("below 0.9: a check") and min(ratios) >= 0.9:  # 0.93 is a sound timing: a prediction
        assert lines[0].startswith("predicted ") and "T(5)/T(1) 0.93 (the median of 9 pairs" in lines[0], lines
        return
    assert len(lines) == 1 and lines[0].startswith("no prediction: the oracle's check of 5 tokens timed at "), lines
    assert why in lines[0] and "predicted" not in lines[0], lines


def test_a_busy_machine_is_named_with_the_spread_of_the_same_forward():
    lines = predict(0.8, demo_costs(slowest=0.019))
    assert lines[1] == ("why 0.80x: the machine is busy: the oracle's one-token forward took 4.0 to 19.0 ms in the 9 "
                        "timings after the run (375% apart)")


def test_what_the_formula_leaves_out_is_named_with_its_share():
    # Under 1 on a quiet machine: the prompt passes (0.03 s of 0.2 s) and the work between passes (0.2 - 0.19).
    lines = predict(0.9, demo_costs(oracle_prompt=0.025, draft_prompt=0.005), draft_time=0.1, oracle_time=0.0922)
    assert lines[1] == ("why 0.90x: the formula counts only each round's passes, and the prompt passes took 15% "
                        "of the run's time")
    # Far above the prediction: the oracle alone ran slower than its own timed forward.
    lines = predict(3.1, demo_costs())
    assert lines[1] == ("why 3.10x: the formula counts only each round's passes, and the oracle alone took 223% more "
                        "per token than T(1) timed after the run")


def test_nothing_large_left_out_says_so_rather_than_inventing_a_cause():
    # Negative control: measured far below the prediction, yet no cost the formula leaves out reaches a tenth.
    lines = predict(0.95, demo_costs(), draft_time=0.12, oracle_time=0.0732)
    assert len(lines) == 2 and "nothing the formula leaves out is large" in lines[1], lines
