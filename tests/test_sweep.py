import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlrm_study.analysis import sensitivity as knobs
from dlrm_study.analysis import wording
from dlrm_study.analysis.readers import GONE, left_out, sweep_records
from dlrm_study.cli.main import main
from dlrm_study.errors import UsageError
from dlrm_study.measure import runner, sweep
from dlrm_study.plans import sweep as sweep_plan
from dlrm_study.records import store

SPEC = """
name: {name}
config: tiny
set: [train.batch_size=16]
grid:
  data.lookups_per_table: [1, 2, 3]
  model.embedding_dim: {dims}
variants: [reference, optimized-fp32]
repeats: 2
steps: 2
warmup: 1
out: {out}
"""


def write_spec(tmp_path: Path, name: str = "s", dims: str = "[8, 16]") -> Path:
    """A sweep of 3 x 2 points (embedding dim 16 cannot run: its bottom MLP ends in 8), 2 variants, 2 repeats."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, out=tmp_path / "sweeps.csv", dims=dims))
    return path


def test_points_cover_the_grid_and_variants(tmp_path):
    spec = sweep_plan.load(write_spec(tmp_path))
    spec.set.append("data.lookups_per_table=9")  # a base value of a gridded field is not part of the grid
    points = sweep_plan.points(spec)
    assert points[0].grid == ["data.lookups_per_table=1", "model.embedding_dim=8"]
    assert len(points) == 3 * 2 * 2
    assert points[0].overrides[-2:] == ["train.loop=reference", "train.steps=2"]
    assert points[1].variant == "optimized-fp32" and points[0].cfg.train.steps == 2  # the steps are in the hash
    assert len({(p.variant, p.cfg.hash()) for p in points}) == 12


def test_failed_points_are_recorded_and_the_sweep_goes_on(tmp_path):
    spec = sweep_plan.load(write_spec(tmp_path))
    counts = sweep.run(spec, progress=False)
    # 24 measurements: the 6 failing (point, variant) pairs fail once each, their second repeat is not tried.
    assert (counts.tasks, counts.ran, counts.failed) == (24, 18, 12)
    frame = store.load(Path(spec.out))
    failed = frame[frame["error"].notna()]
    assert set(failed["model.embedding_dim"]) == {16} and len(failed) == 6
    assert failed["error"].str.contains("model.bottom_mlp").all()
    assert (frame[frame["error"].isna()]["samples_per_s"] > 0).all()
    assert sweep.run(spec, progress=False).ran == 0  # all recorded: nothing to do
    assert sweep.run(spec, retry_errors=True, progress=False).ran == 6


def test_interrupted_sweep_resumes_without_duplicates(tmp_path):
    spec = sweep_plan.load(write_spec(tmp_path, dims="[8]"))
    assert sweep.run(spec, progress=False, limit=5).ran == 5
    counts = sweep.run(spec, progress=False)
    assert counts.skipped == 5 and counts.ran == 7
    frame = store.load(Path(spec.out))
    assert len(frame) == 12 and not frame.duplicated(["variant", "config_hash", "repeat"]).any()


def test_a_point_two_sweeps_share_is_measured_once(tmp_path):
    one = sweep_plan.load(write_spec(tmp_path, "one", dims="[8]"))
    other = sweep_plan.Sweep(**{**vars(one), "name": "other", "grid": {"data.lookups_per_table": [3, 4]}})
    sweep.run(one, progress=False)
    assert sweep.run(other, progress=False).skipped == 4  # lookups 3: both variants, both repeats
    assert set(sweep_records(other)["point"]) == {"data.lookups_per_table=3", "data.lookups_per_table=4"}


def test_killed_sweep_process_resumes_and_loses_nothing(tmp_path):
    path = write_spec(tmp_path, "killed", dims="[8]")
    out = tmp_path / "sweeps.csv"
    command = [sys.executable, "-m", "dlrm_study", "sweep", str(path), "--no-progress"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    guard = time.monotonic() + 600  # against a hang only: a busy machine takes what it takes
    while len(store.read_rows(out)[1]) < 3:
        assert proc.poll() is None and time.monotonic() < guard, "the sweep ended or hung before 3 records"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(store.read_rows(out)[1])
    assert 3 <= before < 12
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    frame = store.load(out)
    assert len(frame) == 12 and not frame.duplicated(["variant", "config_hash", "repeat"]).any()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("config: tiny\n", "at least a name"),
        ("name: x\ncolour: red\n", "unknown key 'colour'"),
        ("name: x\nvariants: [turbo]\n", "unknown variant 'turbo'"),
        ("name: x\ngrid:\n  model.depth: [1]\n", "unknown config key 'model.depth'"),
        ("name: x\nsteps: 0\n", "steps must be positive"),
        ("name: x\nrepeats: 0\n", "repeats and steps must be positive"),
        ("name: x\nsteps: ten\n", "steps must be a whole number, got 'ten'"),
        ("name: x\ngrid: {model.dense_features: 8}\n", "grid must be a mapping of each field to a list"),
    ],
)
def test_bad_sweep_files(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        sweep_plan.load(path)


def test_cli_dry_run_and_missing_file(tmp_path, capsys):
    assert main(["sweep", str(write_spec(tmp_path)), "--dry-run"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 12  # points x variants (each measured in 2 repeats)
    assert main(["sweep", str(tmp_path / "none.yaml")]) == 2
    assert capsys.readouterr().err.strip() == f"dlrm-study: error: sweep file not found: {tmp_path / 'none.yaml'}"


def test_coupled_grid_keys_set_fields_together(tmp_path):
    spec = sweep_plan.Sweep(name="c", grid={"model.embedding_dim+model.bottom_mlp": [[8, "16-8"], [16, "16-16"]]})
    points = sweep_plan.points(spec)
    assert [(p.cfg.model.embedding_dim, p.cfg.model.bottom_mlp) for p in points] == [(8, [16, 8]), (16, [16, 16])]
    assert points[1].grid == ["model.embedding_dim=16", "model.bottom_mlp=16-16"]
    with pytest.raises(UsageError, match="one value per field"):
        sweep_plan.points(sweep_plan.Sweep(name="c", grid={"model.embedding_dim+model.bottom_mlp": [8]}))


def test_knob_values_for_the_axis():

    assert knobs.knob_value("tables", "model.table_rows=32x100000") == 32
    assert knobs.knob_value("rows", "model.table_rows=8x1000000") == 1_000_000
    assert knobs.knob_value("embedding_dim", "model.embedding_dim=64 model.bottom_mlp=512-64") == 64
    assert knobs.knob_value("mlp_width", "model.top_mlp=4096-4096-1") == 4096


def test_records_hold_only_the_current_points(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "arranged", lambda tasks, seed: list(tasks))  # as scheduled: dim 8 first, which runs
    spec = sweep_plan.load(write_spec(tmp_path))
    sweep.run(spec, progress=False, limit=2)
    first = store.read_rows(Path(spec.out))[1][0]
    stale = {**first, "config_hash": "0123456789ab", "model.dense_features": "99"}  # a config since changed
    store.append(Path(spec.out), stale)
    frame = sweep_records(spec)
    assert len(frame) == 2 and "0123456789ab" not in set(frame["config_hash"])
    assert left_out(frame) == {GONE: 1}  # left out, and said


def knob_sweeps(tmp_path: Path) -> tuple[sweep_plan.Sweep, sweep_plan.Sweep]:
    """Two one-knob sweeps around one base (lookups 2, dim 8): they share the base point."""
    base = sweep_plan.load(write_spec(tmp_path, "knobs", dims="[8]"))
    lookups = sweep_plan.Sweep(**{**vars(base), "name": "lookups", "grid": {"data.lookups_per_table": [1, 2]}})
    dims = sweep_plan.Sweep(**{**vars(base), "name": "dims", "set": [*base.set, "data.lookups_per_table=2"]})
    dims.grid = {"model.embedding_dim+model.bottom_mlp": [[8, "16-8"], [4, "16-4"]]}
    return lookups, dims


def test_sweeps_run_together_share_the_base_and_pair_within_one_run(tmp_path):
    lookups, dims = knob_sweeps(tmp_path)
    counts = sweep.run_together([lookups, dims], "knobs")
    assert counts.tasks == 3 * 2 * 2  # three points (the base once), two variants, two repeats
    frame = store.load(Path(lookups.out))
    assert frame["run_id"].nunique() == 1 and set(frame["study"]) == {"knobs"}
    far = sweep_records(dims).assign(x=lambda f: f["point"].str.contains("embedding_dim=4").astype(int))
    finding = wording.paired_finding(far[far["variant"] == "reference"], 1, 0, between="x")
    assert finding.all.n == 2  # the far end pairs with the base in each repeat


def test_sweeps_run_one_after_the_other_leave_the_shared_base_unpaired(tmp_path):
    """Why the study runs its sweeps together: alone, the second sweep reuses the first's base."""
    lookups, dims = knob_sweeps(tmp_path)
    sweep.run(lookups, progress=False)
    assert sweep.run(dims, progress=False).skipped == 4
    far = sweep_records(dims).assign(x=lambda f: f["point"].str.contains("embedding_dim=4").astype(int))
    assert wording.paired_finding(far[far["variant"] == "reference"], 1, 0, between="x").all.n == 0


def test_sweeps_run_together_need_one_protocol(tmp_path):
    lookups, dims = knob_sweeps(tmp_path)
    dims.steps = 3
    with pytest.raises(UsageError, match="lookups, dims do not"):
        sweep.run_together([lookups, dims], "knobs")


def test_a_label_two_sweeps_give_to_different_configs_is_told_apart(tmp_path):
    lookups, _ = knob_sweeps(tmp_path)
    wider = sweep_plan.Sweep(**{**vars(lookups), "name": "wider", "set": [*lookups.set, "model.embedding_dim=16"]})
    wider.set.append("model.bottom_mlp=16-16")
    labels = [label for label, _ in sweep.merged_plan([lookups, wider])[0]]
    assert labels == [
        "data.lookups_per_table=1",
        "data.lookups_per_table=2",
        "wider: data.lookups_per_table=1",
        "wider: data.lookups_per_table=2",
    ]


def test_two_bases_and_a_grid_keep_every_point():
    """A point is named by its base and its grid values: with two bases, the same grid values are two points
    (before, the second base's configs took the first's label and replaced them in the plan)."""
    spec = sweep_plan.Sweep(name="two", config=["tiny", "kaggle"], grid={"train.batch_size": [16, 32]},
                       variants=["reference", "optimized-fp32"])  # fmt: skip
    plan, _ = sweep_plan.plan(spec, here=False)
    labels = [label for label, _ in plan]
    assert labels == [f"{base} train.batch_size={b}" for base in ("tiny", "kaggle") for b in (16, 32)]
    configs = {(cfg.name, cfg.train.batch_size) for _, cfgs in plan for cfg in cfgs.values()}
    assert configs == {(name, b) for name in ("tiny", "kaggle") for b in (16, 32)}
    assert all(len(cfgs) == 2 for _, cfgs in plan)
    one = sweep_plan.Sweep(name="one", config=["tiny"], grid={"train.batch_size": [16]})  # one base: the grid alone
    assert [label for label, _ in sweep_plan.plan(one, here=False)[0]] == ["train.batch_size=16"]


def test_a_plan_refuses_two_configs_under_one_label(tmp_path):
    """Two bases of one name (a preset and a YAML file named after it) cannot share labels silently."""
    (tmp_path / "tiny.yaml").write_text("base: tiny\ntrain:\n  seed: 5\n")
    spec = sweep_plan.Sweep(name="twice", config=["tiny", str(tmp_path / "tiny.yaml")], grid={"train.batch_size": [16]})
    with pytest.raises(UsageError, match=r"twice: 'tiny train.batch_size=16' names two configs"):
        sweep_plan.plan(spec, here=False)


def test_a_run_of_some_points_first_then_the_rest_builds_only_what_is_left(tmp_path, monkeypatch):
    """A GPU session measures its targets first (`only`), under the sweep's own labels; the sweep's own run
    then skips them, and its memory check counts only the runs it still has to build."""
    spec = sweep_plan.Sweep(name="two", config=["tiny", "kaggle"], grid={"train.batch_size": [16, 32]},
                       set=["model.table_rows=4x100"], variants=["reference"], repeats=2, steps=1, warmup=0,
                       out=str(tmp_path / "s.csv"))  # fmt: skip
    asked = []
    monkeypatch.setattr(runner, "fits_together", lambda configs: asked.append(len(configs)) or True)
    first = sweep.run_together([spec], "targets", progress=False, only=lambda v, cfg: cfg.train.batch_size == 32)
    assert (first.tasks, first.ran) == (4, 4) and asked == [2]
    frame = store.load(Path(spec.out))
    assert set(frame["point"]) == {"tiny train.batch_size=32", "kaggle train.batch_size=32"}
    rest = sweep.run(spec, progress=False)
    assert (rest.tasks, rest.skipped, rest.ran) == (8, 4, 4) and asked == [2, 2]
