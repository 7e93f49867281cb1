"""The plan (workbench/speed/plan.py, planned.py): made once per machine and model, kept beside the model bound to
both, remade when either changes, never trusted when edited or planted; plain NumPy kept unless a way beats it by
more than its spread; a forward on more than one thread that the cores were taken from falls back to one."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from fixtures import make_model_dir
from permissions import permissions_binding_root
from gpt2 import GPT2
from kvcache import KVCache
from speculative import greedy_generate, speculative_generate
from workbench.speed import plan as planning
from workbench.speed import cores, planned, threads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def model_dir(tmp_path):
    return make_model_dir(tmp_path / "m", seed=3)


@pytest.fixture
def measured(monkeypatch):
    """Counts the plans measured; each measured plan as make_plan makes it, on a small budget."""
    made = []
    real = planning.make_plan

    def counted(runners, **kwargs):
        made.append(sorted(runners))
        return real(runners, rows=(1, 2, 5), **{**kwargs, "progress": False})

    monkeypatch.setattr(planning, "make_plan", counted)
    monkeypatch.setattr(planning, "MAX_REPEATS", 3)
    # the machine's use unknown: no plan here is found measured beside a busy program (and measured again) because a
    # neighbour of the test machine ran during it; the test of that sets it itself
    monkeypatch.setattr(planning, "cpu_seconds", lambda: None)
    return made


def test_a_plan_is_made_once_and_read_after(model_dir, measured):
    first = planned.load_planned(model_dir)
    assert measured == [["fast", "numpy", "numpy-1"]] or measured == [["fast", "numpy-1"]]  # numpy: more than a core
    assert first.plan.busy == 0, "the machine's use unknown (the fixture's): not measured beside a busy program"
    assert os.path.isfile(os.path.join(model_dir, planning.PLAN_FILE))
    assert os.path.isfile(os.path.join(model_dir, planning.PLAN_RECORD))
    second = planned.load_planned(model_dir)
    assert len(measured) == 1, "the second load measured again instead of reading the plan"
    assert second.plan.ways == first.plan.ways and second.plan.seconds == first.plan.seconds
    assert planned.load_planned(model_dir, again=True) and len(measured) == 2  # bench plan --again


@pytest.mark.parametrize("change", ["cpu", "cores", "numpy", "blas", "kernel"])
def test_a_plan_is_made_again_when_the_machine_changes(model_dir, measured, monkeypatch, change):
    planned.load_planned(model_dir)
    key = planning.machine_key()
    kernel = "Sandybridge" if key["forced"].get("OPENBLAS_CORETYPE") == "Haswell" else "Haswell"  # not the run's own
    other = {"cpu": {"cpu": "another CPU"}, "cores": {"cores": key["cores"] + 1}, "numpy": {"numpy": "9.9.9"},
             "blas": {"blas": ["openblas 9.9 Zen pthreads"]}, "kernel": {"forced": {"OPENBLAS_CORETYPE": kernel}}}
    monkeypatch.setattr(planning, "machine_key", lambda: {**key, **other[change]})
    assert planning.read(model_dir) is None
    planned.load_planned(model_dir)
    assert len(measured) == 2


def test_a_plan_is_made_again_when_the_model_changes(model_dir, measured):
    planned.load_planned(model_dir)
    make_model_dir(model_dir, seed=4)  # other weights, in place
    assert planning.read(model_dir) is None
    planned.load_planned(model_dir)
    assert len(measured) == 2


def test_an_edited_plan_is_not_trusted(model_dir, measured):
    planned.load_planned(model_dir)
    path = os.path.join(model_dir, planning.PLAN_FILE)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["ways"] = {r: "fast" for r in data["ways"]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    assert planning.read(model_dir) is None


def test_a_planted_plan_is_not_trusted(tmp_path, model_dir, measured):
    planned.load_planned(model_dir)
    other = make_model_dir(tmp_path / "other", seed=5)
    for name in (planning.PLAN_FILE, planning.PLAN_RECORD):  # a plan and record from another model, key and all
        shutil.copy(os.path.join(model_dir, name), os.path.join(other, name))
    assert planning.read(other) is None
    alone = make_model_dir(tmp_path / "alone", seed=5)
    shutil.copy(os.path.join(model_dir, planning.PLAN_FILE), os.path.join(alone, planning.PLAN_FILE))  # no record
    assert planning.read(alone) is None
    os.remove(os.path.join(model_dir, planning.PLAN_RECORD))
    assert planning.read(model_dir) is None


def test_a_plan_that_cannot_be_kept_serves_the_run_and_says_so(model_dir, measured, monkeypatch, capsys):
    def refuse(path):
        return f"{path} is not ours to replace"
    monkeypatch.setattr(planning.files, "why_not_ours_to_replace", refuse)  # as a read-only directory refuses
    model = planned.load_planned(model_dir)
    assert model.forward([1, 2, 3]).shape == (3, model.vocab_size)
    err = capsys.readouterr().err
    assert "is not kept" in err and "measured again next run" in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(os.path.join(model_dir, planning.PLAN_FILE))


def test_a_read_only_directory_gets_no_plan_and_the_run_goes_on(model_dir, measured, capfd):
    if os.name != "posix":
        pytest.skip("POSIX permission bits")
    before = sorted(os.listdir(model_dir))
    os.chmod(model_dir, 0o555)
    try:
        with permissions_binding_root() as bound:
            if not bound:
                pytest.skip("root writes into read-only directories, and cannot set that aside here")
            model = planned.load_planned(model_dir)
            assert model.forward([1, 2]).shape == (2, model.vocab_size)
            planned.load_planned(model_dir)
    finally:
        os.chmod(model_dir, 0o755)
    assert sorted(os.listdir(model_dir)) == before and len(measured) == 2
    err = capfd.readouterr().err
    assert err.count("is not kept") == 2 and "Traceback" not in err


def test_the_planned_model_gives_the_plain_models_tokens(tiny_dirs, tmp_path, measured):
    dirs = {role: shutil.copytree(tiny_dirs[role], tmp_path / role) for role in ("draft", "oracle")}
    plain = {role: GPT2.from_pretrained(d) for role, d in dirs.items()}
    fast = {role: planned.load_planned(d) for role, d in dirs.items()}
    ids = [5, 9, 2, 7, 1]
    expected = list(greedy_generate(plain["oracle"], ids, 24))
    assert list(greedy_generate(fast["oracle"], ids, 24)) == expected
    assert list(speculative_generate(fast["draft"], fast["oracle"], ids, 24, 4)) == expected


def test_a_plan_measured_beside_busy_programs_is_measured_again_at_a_quiet_start(model_dir, measured, monkeypatch,
                                                                                 capsys):
    others_use = [1000.0]  # CPU seconds other programs use during each measuring: 0 on a quiet machine
    running_now = [0]      # other programs' threads running as a start looks (cores.others_running)

    def machine_seconds():  # (the machine's busy CPU seconds, this process's): others' added at each reading
        machine_seconds.others += others_use[0]
        return machine_seconds.others + planning.time.process_time(), planning.time.process_time()
    machine_seconds.others = 0.0
    monkeypatch.setattr(planning, "cpu_seconds", machine_seconds)
    monkeypatch.setattr(planning, "others_running", lambda: running_now[0])

    def load():
        planned.load_planned(model_dir)
        return len(measured), planning.read(model_dir).busy

    assert load() == (1, 1), "a measuring beside another program: the plan says so"
    running_now[0] = 1
    assert load() == (1, 1), "a start with other programs running reads the plan it has"
    running_now[0] = 0
    assert load() == (2, 2), "a quiet start measures it again; still busy through it: one more in a row"
    assert "measured while other programs were running" in capsys.readouterr().err
    others_use[0] = 0.0
    assert load() == (3, 0), "measured again, quiet through it: the count starts again"
    assert load() == (3, 0), "a quiet measuring is kept"
    others_use[0] = 1000.0
    for n in range(1, planning.BUSY_PLAN_TRIES + 1):
        planned.load_planned(model_dir, again=n == 1)  # bench plan --again, then starts that measure again
        assert planning.read(model_dir).busy == n and len(measured) == 3 + n
    assert load() == (3 + planning.BUSY_PLAN_TRIES, planning.BUSY_PLAN_TRIES), "busy at every try: it holds here"
    planned.load_planned(model_dir, again=True)
    assert planning.read(model_dir).busy == 1
    with monkeypatch.context() as m:  # the negative control: never measured again, the busy plan stays
        m.setattr(planning, "measure_again", lambda plan, model_dir: False)
        assert load() == (4 + planning.BUSY_PLAN_TRIES, 1)
    # a plan that could not be kept is not measured again at every quiet start, its count never growing
    monkeypatch.setattr(planning.files, "why_not_ours_to_replace", lambda path: f"{path} is read-only")
    assert load() == (4 + planning.BUSY_PLAN_TRIES, 1)


def test_other_programs_cores_are_the_machine_s_cpu_less_this_process_s():
    assert cores.others_cores((10.0, (100.0, 5.0)), (12.0, (103.0, 6.0))) == pytest.approx(1.0)
    assert cores.others_cores((10.0, (100.0, 5.0)), (12.0, (101.0, 6.5))) == 0.0, "never under nothing"
    assert cores.others_cores((10.0, None), (12.0, (101.0, 6.0))) is None, "unknown"
    assert cores.others_cores((10.0, (100.0, 5.0)), (10.0, (101.0, 5.0))) is None, "no time between them"


@pytest.mark.parametrize("busy", [-1, planning.BUSY_PLAN_TRIES + 1, True, 1.5, "1", None])
def test_a_plan_whose_busy_count_make_plan_could_not_have_made_is_not_a_plan(busy):
    data = planning.Plan({1: "numpy"}, {"numpy": {1: 1e-3}}, busy=1).to_json()
    assert planning.Plan.from_json(data).busy == 1
    with pytest.raises(ValueError):
        planning.Plan.from_json({**data, "busy": busy})


# ---------------------------------------------------------------------------
# The choice, and the watch
# ---------------------------------------------------------------------------

def test_plain_numpy_is_kept_unless_a_way_beats_it_by_more_than_its_spread():
    base = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0]
    assert planning.choose({"numpy-1": base, "numpy": base, "fast": base}) == "numpy-1"
    assert planning.choose({"numpy-1": base, "numpy": [t * 0.8 for t in base], "fast": base}) == "numpy"
    # faster in the median, but not in its slow quartile: not chosen
    mixed = [t * f for t, f in zip(base, [0.7, 0.7, 0.7, 0.9, 1.2, 1.2, 1.3])]
    assert planning.choose({"numpy-1": base, "fast": mixed}) == "numpy-1"
    # the fast layout must beat the plain way chosen, not numpy-1
    assert planning.choose({"numpy-1": base, "numpy": [t * 0.6 for t in base], "fast": [t * 0.7 for t in base]}) == "numpy"
    assert planning.choose({"numpy-1": base, "numpy": [t * 0.8 for t in base], "fast": [t * 0.5 for t in base]}) == "fast"
    # ... by FAST_MIN_SAVING of a forward of FAST_MIN_SECONDS or more, to repay its start
    assert planning.choose({"numpy-1": base, "numpy": base, "fast": [t * 0.95 for t in base]}) == "numpy-1"
    small = [t * 1e-3 for t in base]
    assert planning.choose({"numpy-1": small, "numpy": small, "fast": [t * 0.5 for t in small]}) == "numpy-1"


def scripted_runners(monkeypatch, scripted):
    """make_plan's runners, every way's forwards timed by scripted(runs, repeats) -> {way: [seconds]}, where
    runs[way] is the row count measured."""
    class Model:
        vocab_size = 8

        def forward(self, *args, **kwargs):
            pass

    monkeypatch.setattr(planning, "turns", scripted)
    monkeypatch.setattr(planning, "forward_run", lambda model, cache, context, r: r)
    monkeypatch.setattr(planning, "prepared", lambda run, prepare: run)
    monkeypatch.setattr(planning, "time_one", lambda *args: 0.5)
    return {way: (Model(), lambda: None) for way in planning.WAYS}


def test_a_row_count_other_programs_slowed_is_measured_again(monkeypatch):
    measured = []
    at_9 = [0.5, 0.3]  # NumPy on both cores at 9 rows, less 0.09: as slow as one thread the first time

    def scripted(runs, repeats):  # seconds by way at r rows
        r = runs["numpy"]
        numpy = at_9[measured.count(9)] if r == 9 else 0.3
        measured.append(r)
        return {"numpy-1": [0.5 + 0.01 * r] * repeats, "numpy": [numpy + 0.01 * r] * repeats,
                "fast": [0.4 + 0.005 * r] * repeats}

    runners = scripted_runners(monkeypatch, scripted)
    plan = planning.make_plan(runners, rows=(1, 5, 9, 17), progress=False)
    assert measured == [1, 5, 9, 17, 9], "the slowed row count measured once more, and only it"
    assert plan.ways == {1: "numpy", 5: "numpy", 9: "numpy", 17: "numpy"}
    assert plan.seconds["numpy"][9] == pytest.approx(0.39), "the measuring less slowed kept"
    measured.clear()
    at_9[1] = 0.6  # slower still the second time: the first measuring kept
    assert planning.make_plan(runners, rows=(1, 5, 9, 17), progress=False).seconds["numpy"][9] == pytest.approx(0.59)
    at_9[1] = 0.3
    # the negative control: without the second measuring, the slowed minute chose the fast layout at 9 rows
    measured.clear()
    monkeypatch.setattr(planning, "disturbed", lambda times: [])
    assert planning.make_plan(runners, rows=(1, 5, 9, 17), progress=False).ways[9] == "fast"


def test_a_choice_a_measuring_left_open_is_measured_again_and_both_taken_together(monkeypatch):
    """A learned draft's plan took numpy-1 at 12 rows: NumPy on both cores was faster in the median, but a stretch of
    slowed turns put the slow quartile of its ratios over 1, and the draft's forwards of 10 to 12 rows ran slower than
    they could (PERFORMANCE.md says by how much). Such a row count is measured once more and the turns of both
    measurings taken together: a slowed stretch then weighs half as much."""
    measured = []
    first_at_12 = [0.85, 0.85, 0.85, 0.85, 0.85, 1.64, 1.64, 1.64]  # numpy over numpy-1, turn by turn

    def scripted(runs, repeats):
        r = runs["numpy"]
        ratios = first_at_12 if r == 12 and 12 not in measured else [0.8] * len(first_at_12)
        measured.append(r)
        return {"numpy-1": [1.0] * len(ratios), "numpy": list(ratios), "fast": [1.2] * len(ratios)}

    runners = scripted_runners(monkeypatch, scripted)
    plan = planning.make_plan(runners, rows=(9, 12, 17), progress=False)
    assert measured == [9, 12, 17, 12], "the row count left open measured once more, and only it"
    assert plan.ways == {9: "numpy", 12: "numpy", 17: "numpy"}
    assert plan.ratios["numpy"][12] == pytest.approx([0.825, 0.8, 0.85]), "both measurings' turns together"
    # a steady measuring, a way slower in every turn, or two ways as fast as each other leave nothing open
    assert not planning.undecided({"numpy-1": [1.0] * 4, "numpy": [0.8] * 4})
    assert not planning.undecided({"numpy-1": [1.0] * 4, "numpy": [1.1] * 4})
    assert not planning.undecided({"numpy-1": [1.0] * 4, "numpy": [0.97, 1.03, 0.98, 1.02]})
    # nor a fast layout that could not be chosen there: a forward too short to repay its start
    assert not planning.undecided({"numpy-1": [1e-3] * 4, "numpy": [2e-3] * 4, "fast": [0.5e-3, 0.5e-3, 1.2e-3, 1.2e-3]})
    assert planning.undecided({"numpy-1": [1.0] * 4, "numpy": [2.0] * 4, "fast": [0.5, 0.5, 1.2, 1.2]})
    # the negative control: without the second measuring, numpy-1 was kept at 12 rows
    measured.clear()
    monkeypatch.setattr(planning, "undecided", lambda times: False)
    assert planning.make_plan(runners, rows=(9, 12, 17), progress=False).ways[12] == "numpy-1"


def test_a_plan_gives_a_way_for_every_row_count():
    plan = planning.Plan({1: "numpy", 5: "fast", 17: "numpy-1"}, {"numpy": {1: 1e-3, 5: 2e-3, 17: 4e-3}})
    assert [plan.way(n) for n in (1, 2, 5, 6, 17, 40)] == ["numpy", "fast", "fast", "numpy-1", "numpy-1", "numpy-1"]
    assert plan.expected("numpy", 3) == pytest.approx(2e-3)
    assert plan.expected("numpy", 40) == pytest.approx(4e-3 * 40 / 17)
    assert plan.expected("fast", 3) is None
    assert planning.Plan.from_json(json.loads(json.dumps(plan.to_json()))).ways == plan.ways


def test_a_forward_the_cores_were_taken_from_falls_back_to_one_thread(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(planning.time, "monotonic", lambda: now[0])
    # every forward judged below took 0.5 s
    plan = planning.Plan({1: "numpy", 5: "numpy"}, {"numpy-1": {1: 0.2, 5: 0.4}})
    others = [0]  # nothing else running when first looked at; a busy program once the forwards are slow
    cores = planning.Cores(others=lambda: others[0])
    watch = planning.Watch(plan, uses_threads=lambda way: way == "numpy", cores=cores)
    other = planning.Watch(plan, uses_threads=lambda way: way == "numpy", cores=cores)  # another model's
    watch.judge("numpy", 1, 0.5)  # a model's first forward is not judged (it wakes the threads)
    assert cores.fallbacks == 0
    assert watch.way(5) == "numpy"
    watch.judge("numpy", 5, 0.5)  # 0.5 s, under FALLBACK times one thread's 0.4 s: jitter
    assert watch.way(1) == "numpy" and cores.fallbacks == 0
    others[0] = 1
    watch.judge("numpy", 1, 0.5)  # 0.5 s where one thread takes 0.2 s: the cores were taken
    assert cores.fallbacks == 1
    assert watch.way(5) == "numpy-1" and other.way(1) == "numpy-1", "every row count, every model of the process"
    now[0] += planning.BUSY_SECONDS + 0.1
    others[0] = 0
    assert watch.way(1) == "numpy", "after BUSY_SECONDS, nothing else running, the plan's way is tried again"
    others[0] = 1
    watch.judge("numpy", 1, 0.5)  # slow again: taken for twice as long
    now[0] += planning.BUSY_SECONDS + 0.1
    assert watch.way(1) == "numpy-1", "found taken again: the while is doubled"
    now[0] += planning.BUSY_SECONDS
    others[0] = 0
    assert watch.way(1) == "numpy"
    watch.judge("numpy", 5, 0.5)  # kept its time: the next while starts short again
    assert cores.wait == planning.BUSY_SECONDS


def test_a_forward_slow_with_nothing_else_running_changes_nothing():
    plan = planning.Plan({1: "numpy", 5: "numpy"}, {"numpy-1": {1: 0.2, 5: 0.2}})
    cores = planning.Cores(others=lambda: 0)
    draft = planning.Watch(plan, lambda way: way == "numpy", cores)
    for _ in range(4):  # 0.5 s against one thread's 0.2 s, with nothing else running: jitter, not the cores
        draft.judge("numpy", 1, 0.5)
    assert cores.fallbacks == 0 and draft.way(1) == "numpy"


def test_cores_another_program_is_running_on_are_not_shared(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(planning.time, "monotonic", lambda: now[0])
    others = [1]
    cores = planning.Cores(others=lambda: others[0])
    watch = planning.Watch(planning.Plan({1: "numpy"}, {"numpy-1": {1: 0.2}}), lambda way: way == "numpy", cores)
    assert watch.way(1) == "numpy-1", "a busy program when first looked at: one thread from the first forward"
    others[0] = 0
    assert watch.way(1) == "numpy-1", "not looked at again before the while ends"
    now[0] += planning.BUSY_SECONDS + 0.1
    assert watch.way(1) == "numpy"
    assert planning.Cores(others=lambda: None).free(), "where it cannot be known, the watch alone decides"


def test_workbench_py_starts_openblas_on_one_thread_beside_a_busy_program_unless_a_count_was_chosen(monkeypatch):
    environ = {}
    cores.start_blas_threads(environ, others=lambda: 0)
    assert environ == {}, "nothing else running: OpenBLAS starts its threads"
    cores.start_blas_threads(environ, others=lambda: 1)
    assert environ == {"OPENBLAS_NUM_THREADS": "1", cores.STARTED_ON_ONE: "1"}
    chosen = {"OPENBLAS_NUM_THREADS": "2"}
    cores.start_blas_threads(chosen, others=lambda: 3)
    assert chosen == {"OPENBLAS_NUM_THREADS": "2"}, "the user's own choice is left as it is"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv(cores.STARTED_ON_ONE, "1")
    assert "OPENBLAS_NUM_THREADS" not in planning.machine_key()["forced"], "the plan made on a quiet start is the one"
    monkeypatch.delenv(cores.STARTED_ON_ONE)
    assert planning.machine_key()["forced"]["OPENBLAS_NUM_THREADS"] == "1", "a user's forced count is its own plan"


def test_other_programs_running_are_counted_without_this_process(tmp_path):
    (tmp_path / "loadavg").write_text("0.50 0.40 0.30 4/120 999\n")
    for tid, state in (("1", "R"), ("2", "S"), ("3", "R")):
        (tmp_path / "task" / tid).mkdir(parents=True)
        (tmp_path / "task" / tid / "stat").write_text(f"{tid} (a name) with) {state} 1 2 3\n")
    assert cores.others_running(str(tmp_path / "loadavg"), str(tmp_path / "task")) == 2
    assert cores.others_running(str(tmp_path / "missing"), str(tmp_path / "task")) is None
    (tmp_path / "loadavg").write_text("garbage\n")
    assert cores.others_running(str(tmp_path / "loadavg"), str(tmp_path / "task")) is None
    (tmp_path / "loadavg").write_text("0.50 0.40 0.30 4/120 999\n")
    (tmp_path / "task" / "2" / "stat").unlink()  # a thread that ended while they were counted
    assert cores.others_running(str(tmp_path / "loadavg"), str(tmp_path / "task")) == 2


def test_a_thread_woken_for_a_moment_is_not_a_program_that_wants_the_cores(monkeypatch):
    # A slow forward (the VM's neighbours) and one thread of another program runnable at that instant: taken only
    # if other programs also used OTHERS_MIN_CORES over the last tenths of a second (/proc/stat, less this process).
    now = [100.0]
    monkeypatch.setattr(planning.time, "monotonic", lambda: now[0])
    machine, mine = [50.0], [10.0]  # CPU seconds the machine was busy, and this process's
    cores = planning.Cores(others=lambda: 1, used=lambda: (machine[0], mine[0]))
    watch = planning.Watch(planning.Plan({1: "numpy"}, {"numpy-1": {1: 0.2}}), lambda way: way == "numpy", cores)

    def seconds_pass(seconds, others_cores):  # this process busy on 2 cores, other programs on others_cores
        now[0] += seconds
        mine[0] += 2 * seconds
        machine[0] += (2 + others_cores) * seconds

    seconds_pass(0.3, 0.05)  # a kernel thread's blip: 0.05 cores
    assert watch.way(1) == "numpy", "first look: a program running now, but it used 0.05 cores"
    watch.judge("numpy", 1, 0.5)  # the first on threads: not judged
    for _ in range(3):
        seconds_pass(0.3, 0.05)
        assert watch.way(1) == "numpy"
        watch.judge("numpy", 1, 0.5)  # slow, one runnable now: but no program wants the cores
    assert cores.fallbacks == 0
    seconds_pass(0.3, 1.0)  # a busy loop
    assert watch.way(1) == "numpy"
    watch.judge("numpy", 1, 0.5)
    assert cores.fallbacks == 1 and watch.way(1) == "numpy-1", "a program using a core: taken"
    # The negative control: the same blips with the instant alone (used=None) take the cores.
    alone = planning.Cores(others=lambda: 1)
    assert not alone.free() and alone.fallbacks == 1
    # Where the CPU's use cannot be read, the instant alone decides.
    unknown = planning.Cores(others=lambda: 1, used=lambda: None)
    seconds_pass(0.3, 0.0)
    assert not unknown.free()


def test_the_machine_s_cpu_seconds_leave_out_a_virtual_machine_s_steal(tmp_path):
    stat = tmp_path / "stat"  # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks
    stat.write_text("cpu  100 20 30 4000 50 6 4 900 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    busy, mine = cores.cpu_seconds(str(stat))
    assert busy == pytest.approx(160 / os.sysconf("SC_CLK_TCK")) and mine >= 0
    assert cores.cpu_seconds(str(tmp_path / "missing")) is None
    stat.write_text("cpu  garbage\n")
    assert cores.cpu_seconds(str(stat)) is None


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux's /proc")
def test_a_child_process_s_cpu_is_this_run_s_own_not_another_program_s():
    # the second core's helper is such a child: its work must not make a plan look measured beside a busy program
    def children():  # this process's own CPU seconds as cpu_seconds counts them, less its own threads'
        return cores.cpu_seconds()[1] - cores.time.process_time()
    before = children()
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nwhile time.process_time() < 0.3: pass\n"
                              "print(flush=True)\nsys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.stdout.readline()  # it has used 0.3 s of CPU, and lives on
        assert cores.children_seconds() >= 0.25  # /proc counts in ticks
        assert children() - before >= 0.25
    finally:
        child.kill()
        child.wait()
    assert children() - before >= 0.25, "a child that ended (the helper stopped) is counted still"
    assert cores.children_seconds("/nonexistent") == 0.0 and cores.process_seconds("999999999") == 0.0


def test_where_others_cannot_be_seen_a_slow_forward_counts_as_the_cores_taken():
    cores = planning.Cores(others=lambda: None)
    watch = planning.Watch(planning.Plan({1: "numpy"}, {"numpy-1": {1: 0.2}}), lambda way: way == "numpy", cores)
    assert watch.way(1) == "numpy", "nothing to look at: the plan's way"
    watch.judge("numpy-1", 1, 5.0)  # a forward on one thread is never judged, and does not use up the first
    watch.judge("numpy", 1, 5.0)  # the first on threads: not judged
    watch.judge("numpy", 1, 5.0)
    assert cores.fallbacks == 1 and watch.way(1) == "numpy-1"


def test_a_planned_model_s_forwards_on_threads_are_watched(tiny_dirs, monkeypatch):
    monkeypatch.setattr(threads, "N_THREADS", 2)  # the watch is for forwards on more than one thread
    others = [0]  # nothing else running when first looked at
    monkeypatch.setattr(planning, "CORES", planning.Cores(others=lambda: others[0]))
    plan = planning.Plan({1: "numpy"}, {"numpy-1": {1: 1e-9}})  # every forward slower than FALLBACK times this
    model = planned.PlannedGPT2(GPT2.from_pretrained(tiny_dirs["oracle"]), plan)
    cache = KVCache()
    model.forward([1, 2], cache)  # the first forward on threads: not judged
    others[0] = 1
    model.forward([3], cache)
    assert planning.CORES.fallbacks == 1, "a slow forward, another program running: the cores taken"
    assert model.watch.start(1) == ("numpy-1", None)
    model.forward([4], cache)  # on one thread, not watched
    assert planning.CORES.fallbacks == 1 and cache.n_tokens() == 4


@pytest.mark.parametrize("setting", [{}, {"OPENBLAS_NUM_THREADS": "1"}, {"GOTO_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "1"},
                                     {"OPENBLAS_NUM_THREADS": "64"}, {"GOTO_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"},
                                     {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"}])
def test_the_thread_count_the_blas_started_with_is_the_one_it_has(setting):
    # A run whose plan never changes the count does not ask the BLAS (threads.started_with): held to what it says,
    # in a process started with each setting (OpenBLAS reads them once, as NumPy loads).
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}
    code = ("import threadpoolctl; from workbench.speed import threads; print(threads.started_with(), "
            "*[i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'])")
    out = subprocess.run([sys.executable, "-c", code], env={**env, **setting}, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    started, *counts = out.stdout.split()
    if started == "None":
        pytest.skip("NumPy's BLAS is not OpenBLAS: the count is asked of it")
    assert counts and all(int(n) == int(started) for n in counts), (setting, out.stdout)


@pytest.mark.parametrize("value", ["", " ", "0", "-1", "+2", "1_0", "\u00b2", "2x", "\u0663"])
def test_a_thread_setting_openblas_may_read_otherwise_is_asked_of_the_blas(value):
    started = threads.started_with({"OPENBLAS_NUM_THREADS": value})
    if not threads.numpy_blas() or "openblas" not in threads.numpy_blas()[0].lower():
        assert started is None
    elif value.strip() == "":
        assert started == threads.N_THREADS  # unset: every core
    else:
        assert started is None, value


def test_the_blas_threads_are_set_again_after_a_small_model_s_forward_left_them_at_one():
    if threads.N_THREADS < 2 or not threads.blas_libraries():
        pytest.skip("one core, or no BLAS threadpoolctl can set")
    threads.use_blas_threads(2)
    with threads.single_threaded():
        pass
    threads.use_blas_threads(2)
    assert all(lib.get_num_threads() == 2 for lib in threads.blas_libraries())
    threads.use_blas_threads(1)


def test_the_fast_model_is_mapped_at_its_first_forward_only(tiny_dirs, tmp_path, monkeypatch):
    model_dir = shutil.copytree(tiny_dirs["oracle"], tmp_path / "oracle")
    fast_plan = planning.Plan({1: "numpy-1", 2: "fast"}, {"numpy-1": {1: 1.0, 2: 1.0}})
    monkeypatch.setattr(planned, "plan_for", lambda plain, fast, **kwargs: fast_plan)
    loads = []
    real = planned.load_fast
    monkeypatch.setattr(planned, "load_fast", lambda d: loads.append(d) or real(d))
    model = planned.load_planned(model_dir, again=True)  # this plan, whatever an earlier test kept beside the copy
    model.forward([1])
    assert loads == [], "a forward the plan gives plain NumPy maps nothing"
    model.forward([1, 2])
    model.forward([3, 4])
    assert len(loads) == 1 and model.fast is not None
