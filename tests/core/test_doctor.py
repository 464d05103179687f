"""The doctor end to end on a real store (SQLite file and PostgreSQL): idempotent records,
a final pass that drops what no longer holds, the live sweep over running runs, the CLI
(`tracker doctor`, `tracker runs show`), and the client's on_nonfinite="stop" policy."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tracker
from tracker.errors import InvalidInput, NonFiniteLossError
from tracker.rules.health import Diagnosis, Evidence
from tracker.store import Store
from tracker.store.diagnoses import LiveSweep, diagnose_run, list_diagnoses, record_diagnoses
from tracker.store.events import add_event, list_events
from tracker.store.metrics import log_metrics, metric_history
from tracker.store.runs import create_run, finish_run, list_runs

CLI = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'tracker'; from tracker.cli import main; main()",
]


def _nan_run(store: Store, status: str = "finished") -> int:
    run = create_run(store, "p", "nan")
    for s in range(30):
        log_metrics(store, run.id, s, {"loss": 1.0 / (s + 1) if s < 20 else math.nan})
    if status != "running":
        finish_run(store, run.id, status)
    return run.id


def _d(code: str, metric: str, step: int) -> Diagnosis:
    return Diagnosis(code, "warning", step, f"{code} msg", "hint", Evidence(metric, (step, step)))


def test_record_is_idempotent_and_final_pass_replaces(store: Store) -> None:
    run_id = _nan_run(store)
    first = diagnose_run(store, run_id)
    assert [(d.code, d.metric, d.step) for d in first] == [("nonfinite", "loss", 20)]
    for _ in range(3):
        diagnose_run(store, run_id)
    [event] = list_diagnoses(store, run_id)
    assert event.data is not None and event.data["step"] == 20
    record_diagnoses(store, run_id, [_d("loss_spike", "loss", 5)])  # live: adds, keeps
    assert len(list_diagnoses(store, run_id)) == 2
    record_diagnoses(store, run_id, [_d("loss_spike", "loss", 7)])  # live: its onset stays
    steps = {e.data["code"]: e.data["step"] for e in list_diagnoses(store, run_id) if e.data}
    assert steps == {"nonfinite": 20, "loss_spike": 5}
    worse = Diagnosis("loss_spike", "error", 9, "worse", "hint", Evidence("loss", (9, 9)))
    record_diagnoses(store, run_id, [worse])  # live, but its severity rose: reported again
    steps = {e.data["code"]: e.data["step"] for e in list_diagnoses(store, run_id) if e.data}
    assert steps == {"nonfinite": 20, "loss_spike": 9}
    diagnose_run(store, run_id)  # final pass: the spike no longer holds
    assert [e.data["code"] for e in list_diagnoses(store, run_id) if e.data] == ["nonfinite"]
    other = create_run(store, "p", "other")
    add_event(store, other.id, "note", "not a diagnosis")
    diagnose_run(store, other.id, final=True)
    assert [e.kind for e in list_events(store, other.id)] == ["note"]


def test_live_onsets_stay_where_first_reported(store: Store) -> None:
    """A leak's onset seen live at 140 must not move to 173 and back as points arrive; the
    final pass then says what the whole run shows."""
    run = create_run(store, "p", "live")
    for step in (140, 173, 140, 151):
        record_diagnoses(store, run.id, [_d("memory_growth", "sys/rss_bytes", step)])
        [event] = list_diagnoses(store, run.id)
        assert event.data is not None and event.data["step"] == 140
        assert event.message == "memory_growth msg"
    record_diagnoses(store, run.id, [_d("memory_growth", "sys/rss_bytes", 151)], replace=True)
    [event] = list_diagnoses(store, run.id)
    assert event.data is not None and event.data["step"] == 151


def test_live_sweep_diagnoses_running_runs_once_per_change(store: Store) -> None:
    run_id = _nan_run(store, status="running")
    finished = _nan_run(store)
    sweep = LiveSweep(store)
    found = sweep.once()
    assert set(found) == {run_id}  # finished runs are the final pass's business
    assert [d.code for d in found[run_id]] == ["nonfinite"]
    assert sweep.once() == {}  # nothing new: nothing read
    log_metrics(store, run_id, 30, {"loss": math.nan})
    assert set(sweep.once()) == {run_id}
    assert len(list_diagnoses(store, run_id)) == 1 and list_diagnoses(store, finished) == []


def test_judge_run_replays_a_live_pass_at_a_step_and_records_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``judge_run(until_step=)`` is the live pass as it was when the run reached that step
    (the bench's corpus replays a run's live passes with it): a spike is reported once the
    200 points after it are seen, and in a series longer than the pass reads (partial) only
    in the newer half of what it read. Nothing is recorded."""
    from tracker.store import diagnoses

    run = create_run(store, "p", "replay").id
    for step in range(1000):
        loss = 2.0 * math.exp(-step / 200) + 0.3 + 0.003 * ((step * 7919) % 11)
        log_metrics(store, run, step, {"train/loss": loss * (8 if step == 300 else 1)})

    def live(until: int) -> list[tuple[str, int | None]]:
        found = diagnoses.judge_run(store, run, final=False, until_step=until)
        return [(d.code, d.step) for d in found]

    assert live(200) == []  # before it
    assert live(450) == []  # 150 points after it: not yet
    assert live(600) == [("loss_spike", 300)]
    assert list_diagnoses(store, run) == []  # judged, not recorded
    monkeypatch.setattr(diagnoses, "LIVE_POINTS", 600)
    assert live(599) == [("loss_spike", 300)]  # reads 0..599: 300 in the newer half
    assert live(700) == []  # reads 101..700: 300 in the older half, memory only


def test_doctor_and_runs_show_cli(store_url: str, store: Store, tmp_path: Path) -> None:
    run_id = _nan_run(store)
    healthy = create_run(store, "p", "ok")
    log_metrics(store, healthy.id, 0, {"loss": 1.0})
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = store_url

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120, check=False)  # fmt: skip

    done = cli("doctor", str(run_id))
    assert done.returncode == 1, done.stderr
    assert "[error] nonfinite at step 20 (loss)" in done.stdout
    assert "loss became NaN at step 20 (last finite value 0.05 at step 19)" in done.stdout
    assert "try: Lower the learning rate" in done.stdout
    as_json = cli("doctor", str(run_id), "--json")
    doc = json.loads(as_json.stdout)
    assert doc["diagnoses"][0]["evidence"]["values"][-1] == "NaN"
    ok = cli("doctor", str(healthy.id))
    assert (ok.returncode, ok.stdout.strip()) == (0, f"run {healthy.id}: no problems found")
    missing = cli("doctor", "987654")
    assert missing.returncode == 2 and "run 987654 does not exist" in missing.stderr
    show = cli("runs", "show", str(run_id))
    assert "health:" in show.stdout and "[error] nonfinite at step 20" in show.stdout
    assert len(list_diagnoses(store, run_id)) == 1


def test_doctor_reports_how_a_failed_run_ended(
    store_url: str, store: Store, tmp_path: Path
) -> None:
    """A run whose series look fine but that failed (a collective error, a crash) is not
    "no problems found", exit 0: the doctor says how it ended, with the hint, and exits 1."""
    run = create_run(store, "p", "gloo")
    log_metrics(store, run.id, 0, {"loss": 1.0})
    hint = "a rank lost its peer: check the other ranks' logs"
    finish_run(store, run.id, "failed", failure_class="gloo", failure_hint=hint)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = store_url
    done = subprocess.run([*CLI, "doctor", str(run.id)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[:3] == [
        f"run {run.id} failed (gloo)",
        f"  {hint}",
        f"run {run.id}: no problems found in its series",
    ]
    as_json = subprocess.run(
        [*CLI, "doctor", str(run.id), "--json"], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert (doc["status"], doc["failure_class"], doc["failure_hint"]) == ("failed", "gloo", hint)


def test_direct_run_is_diagnosed_at_finish(store_url: str, store: Store) -> None:
    with tracker.init(project="p", uri=store_url, system_interval=None) as run:
        for s in range(20):
            tracker.log({"loss": 0.5 if s < 10 else math.inf}, step=s)
    [event] = list_diagnoses(store, run.id)
    assert event.data is not None and (event.data["code"], event.data["step"]) == ("nonfinite", 10)


def test_on_nonfinite_stop_raises_at_the_first_persistent_nan(store_url: str, store: Store) -> None:
    run = tracker.init(project="p", uri=store_url, system_interval=None, on_nonfinite="stop")
    tracker.log({"loss": 0.7, "acc": math.nan}, step=0)  # not a loss: ignored
    tracker.log({"loss": math.nan}, step=1)  # one skipped batch ...
    tracker.log({"loss": 0.6}, step=2)  # ... that recovered
    tracker.log({"train/loss": math.nan}, step=3)
    tracker.log({"train/loss": math.inf}, step=4)
    with pytest.raises(NonFiniteLossError) as info:
        tracker.log({"train/loss": math.nan}, step=5)
    assert info.value.code == "nonfinite_loss"
    assert "train/loss is nan at step 5: non-finite 3 times in a row since step 3" in str(
        info.value
    )
    assert "on_nonfinite='stop'" in str(info.value)
    tracker.finish()
    steps = [p.step for p in metric_history(store, run.id, "train/loss")]
    assert steps == [3, 4, 5]  # the NaN that stopped it is stored


def test_on_nonfinite_rejects_unknown_policy(store_url: str, store: Store) -> None:
    with pytest.raises(InvalidInput) as info:
        tracker.init(project="p", uri=store_url, system_interval=None, on_nonfinite="halt")
    assert info.value.field == "on_nonfinite" and "record, stop" in str(info.value)
    assert list_runs(store) == []


def test_a_nonfinite_stretch_longer_than_a_pass_reads_is_named_where_it_began(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass reads each series' newest points; when they start inside a stretch of NaN or
    Inf that began before them (a run that kept logging NaN), the doctor reads back to the
    last finite value and names the step the stretch began at, not the first point it
    read: final and live, on rows and on sealed chunks (whose headers skip the chunks
    without a finite value). A stretch from the first point is named at it; on rows, one
    longer than the read-back says the earliest step it saw."""
    from tracker.store import chunks, diagnoses
    from tracker.store.metrics import intern_keys, write_points

    monkeypatch.setattr(diagnoses, "MAX_POINTS", 500)
    monkeypatch.setattr(diagnoses, "LIVE_POINTS", 200)
    run = create_run(store, "p", "long nan").id
    ids = intern_keys(store, ["loss", "grad/global_norm", "acc"])
    values = {
        "loss": lambda s: 2.0 / (s + 1) if s < 2000 else math.nan,
        "grad/global_norm": lambda s: math.inf,
        "acc": lambda s: 0.5 if s < 1200 else -math.inf,
    }
    write_points(store, [
        (run, ids[key], s, 1_750_000_000_000 + s, value(s))
        for key, value in values.items() for s in range(5000)
    ])  # fmt: skip

    def onsets(final: bool) -> dict[str, tuple[int | None, str]]:
        found = diagnoses.judge_run(store, run, final=final)
        return {d.metric: (d.step, d.message) for d in found if d.code == "nonfinite"}

    for sealed in (False, True):
        if sealed:
            chunks.seal_run(store, run, chunk_points=256)
            assert chunks.sealed_series(store, run) != []
        for final in (True, False):
            found = onsets(final)
            assert found["loss"][0] == 2000, (sealed, final, found)
            assert "(last finite value 0.001 at step 1999)" in found["loss"][1]
            assert found["acc"][0] == 1200 and "at step 1199)" in found["acc"][1]
            assert found["grad/global_norm"][0] == 0, found  # never finite: its first point
        with monkeypatch.context() as short:
            short.setattr(diagnoses, "ONSET_BLOCKS", 2)  # reads back 2 x 500 points at most
            found = onsets(True)
        if sealed:  # the chunks' headers skip those without a finite value
            assert (found["loss"][0], found["acc"][0]) == (2000, 1200), found
        else:  # the earliest point read back
            assert (found["loss"][0], found["acc"][0]) == (3500, 3500), found


def _loss_with_spikes(store: Store, n: int, spikes: tuple[int, ...]) -> int:
    """A run whose loss decays with noise over ``n`` steps and jumps 8x for 3 points at
    each of ``spikes``."""
    import random

    from tracker.store.metrics import intern_keys, write_points

    rng = random.Random(7)
    run = create_run(store, "p", "spiky").id
    key = intern_keys(store, ["loss"])["loss"]
    values = [2.0 * math.exp(-3 * s / n) + 0.01 * rng.gauss(0, 1) for s in range(n)]
    for at in spikes:
        values[at : at + 3] = [8 * v for v in values[at : at + 3]]
    write_points(store, [(run, key, s, 1_750_000_000_000 + s, v) for s, v in enumerate(values)])
    return run


@pytest.mark.parametrize("sealed", [False, True])
@pytest.mark.parametrize("spike", [13_000, 27_000])
def test_every_point_of_a_loss_is_judged_for_spikes_however_fast_the_run_logs(
    store: Store, sealed: bool, spike: int
) -> None:
    """Live passes 10,000 steps apart (a run logging 1,000 steps/s) each read the newest
    5,000 points and judge the newer half; the final pass the newest 20,000: a spike
    between those halves was judged by none. With the passes' memory each reads back far
    enough to judge every point since the last one; the run's own final pass, which has
    seen the run from its start, judges every point too."""
    from tracker.store import chunks
    from tracker.store.diagnoses import DoctorMemory, judge_run

    run = _loss_with_spikes(store, 40_000, spikes=(spike,))
    if sealed:
        chunks.seal_run(store, run, chunk_points=4096)

    def spikes(memory: DoctorMemory | None) -> list[int]:
        found = [judge_run(store, run, final=False, until_step=cut, memory=memory)
                 for cut in range(10_000, 40_001, 10_000)]  # fmt: skip
        return sorted({d.step for f in found for d in f if d.code == "loss_spike"})

    assert spikes(None) == []  # what the passes judged without memory: no spike
    assert spikes(DoctorMemory()) == [spike]
    final = judge_run(store, run, final=True, memory=DoctorMemory(whole_runs=True))
    assert [(d.code, d.step) for d in final] == [("loss_spike", spike)]
    plain = judge_run(store, run, final=True)  # another process: the newest points
    assert [(d.code, d.step) for d in plain] == []


def test_a_final_pass_keeps_what_happened_before_the_points_it_read(
    store_url: str, store: Store
) -> None:
    """The final pass of a long run reads its newest points: a spike, a non-finite stretch
    or an explosion an earlier pass found before them stays on the Health panel, with its
    onset; a diagnosis of the run's state (a divergence) that no longer holds goes, and an
    event inside what the final pass read is judged again (gone when it no longer holds)."""
    run = _loss_with_spikes(store, 40_000, spikes=(5_000,))
    live = [
        _d("loss_spike", "loss", 5_000),
        _d("nonfinite", "loss", 3_000),
        _d("divergence", "loss", 4_000),
        _d("grad_explosion", "loss", 39_000),  # inside what the final pass reads
    ]
    record_diagnoses(store, run, live)
    finish_run(store, run, "finished")
    # the newest 20,000 points are healthy: the pass keeps, and returns, what it did not read
    back = diagnose_run(store, run)
    assert [(d.code, d.step) for d in back] == [("nonfinite", 3_000), ("loss_spike", 5_000)]
    assert back[1].as_dict() == live[0].as_dict()  # as it was stored
    kept = {(e.data["code"], e.data["step"]) for e in list_diagnoses(store, run) if e.data}
    assert kept == {("loss_spike", 5_000), ("nonfinite", 3_000)}
    # `tracker doctor RUN` says what the Health panel shows, not "no problems found"
    from click.testing import CliRunner

    from tracker.cli import main

    said = CliRunner().invoke(main, ["doctor", str(run), "--uri", store_url])
    assert said.exit_code == 1 and "2 problem(s)" in said.output, said.output
    assert "loss_spike at step 5000" in said.output, said.output
    # the run's own final pass finds the spike itself (it has seen the run from its start)
    from tracker.store.diagnoses import DoctorMemory

    found = diagnose_run(store, run, memory=DoctorMemory(whole_runs=True))
    assert [(d.code, d.step) for d in found] == [("loss_spike", 5_000)]


def test_a_fast_runs_own_final_pass_judges_every_point(store_url: str, store: Store) -> None:
    """A run logs 60,000 steps in a second or so: no live pass ran. Its own final pass (at
    ``finish()``) reads every point of its loss, so a spike at step 41,000 -- before the
    newest 20,000 points' newer half, all a final pass judged before -- is on the panel."""
    import random

    rng = random.Random(3)
    run = tracker.init(project="p", uri=store_url, system_interval=None)
    n = 60_000
    for s in range(n):
        loss = 2.0 * math.exp(-3 * s / n) + 0.01 * rng.gauss(0, 1)
        run.log({"loss": loss * (8 if 41_000 <= s < 41_003 else 1), "lr": 0.1}, step=s)
    run.finish()
    found = [(e.data["code"], e.data["step"]) for e in list_diagnoses(store, run.id) if e.data]
    assert found == [("loss_spike", 41_000)]
