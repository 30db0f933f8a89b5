"""The evidence behind the claims: every machine's current records of the studies that test them.

`Evidence.load` reads each study once, for every machine; `Evidence.of(machine)` is one machine's
part. Whatever the reader's machine, the same files give the same evidence: nothing here asks
what this process runs on.
"""

import dataclasses
from pathlib import Path

import pandas as pd

from dlrm_study.analysis.baseline import baseline_records
from dlrm_study.analysis.contention import contended_runs, without_contended
from dlrm_study.analysis.convergence import accuracy_records, convergence_records
from dlrm_study.analysis.current import at_head, current, fingerprints, newest
from dlrm_study.analysis.current import loops as current_loops
from dlrm_study.analysis.placement import cache_hit_rates, placement_records, remote_vs_local
from dlrm_study.analysis.readers import (
    NoRecords,
    checked_kernels,
    failed_checks,
    one_kernel_path,
    point_records,
    sweep_records,
)
from dlrm_study.analysis.scaling import scaling_records
from dlrm_study.analysis.sensitivity import sensitivity_records
from dlrm_study.plans import cpu
from dlrm_study.plans.sensitivity import GPU_RECORDS, dense_sparse_grid, on_gpu, sensitivity
from dlrm_study.records import Machine, code_identity, store
from dlrm_study.records import columns as col
from dlrm_study.rules import literal

GPU_FRAMES = ("gpu", "gpu_grid", "gpu_placements")  # the GPU's records (the knob sweeps besides: `gpu_knobs`)
UNTIMED = ("convergence", "accuracy", "cache")  # frames of trained seeds or hit rates: no warm-up to drop
COMPARE_RECORDS, COMPARE_STUDIES = "bench.csv", ("cpu-compare",)  # `dlrm-study compare`: the CPU loops' points
H1_KNOBS = tuple(literal("H1", "knobs"))  # not batch size (declared: src/dlrm_study/rules/rules.toml)


@dataclasses.dataclass
class Evidence:
    """The current records of the studies behind the claims (every machine's, or one's); a study left
    out has no records (an empty frame), so a reader of one study builds Evidence of that study alone."""

    cpu_loops: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    cpu_compare: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # the CPU loops' points, compared
    convergence: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    accuracy: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    scaling: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    remote: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    cache: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    gpu: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    gpu_knobs: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    gpu_grid: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    gpu_placements: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    baseline: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    # Each machine's part, made once (a verdict asks for it per claim and per rule): not a field of the
    # copies `dataclasses.replace` makes, so a copy with other frames starts with none.
    parts: dict[str, "Evidence"] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def load(cls, out: Path, profile: str) -> "Evidence":
        def read(fn, *args) -> pd.DataFrame:
            try:
                return fn(*args)
            except NoRecords:  # nothing measured yet; any other error (two records of one cell) is said
                return pd.DataFrame()

        caught = contended_runs(out)  # runs the load guard caught: counted, not judged
        failed = failed_checks(out)  # lendings whose Triton kernels failed their numerics check

        def gpu(frame: pd.DataFrame) -> pd.DataFrame:
            return checked_kernels(frame, failed)

        return cls(
            cpu_loops=without_contended(read(sweep_records, cpu.cpu_loops(profile, out), None), caught),
            cpu_compare=read(point_records, cpu.cpu_loops(profile, out), out / COMPARE_RECORDS, COMPARE_STUDIES, None),
            convergence=read(convergence_records, profile, out, None),
            accuracy=read(accuracy_records, profile, out, None),
            scaling=read(scaling_records, profile, out, None),
            remote=read(remote_vs_local, profile, out, None),
            cache=read(cache_hit_rates, profile, out, None),
            gpu=gpu(read(gpu_records, out)),
            gpu_knobs={
                knob: gpu(read(sensitivity_records, knob, on_gpu(sensitivity(knob, profile, out)), None))
                for knob in H1_KNOBS
            },
            gpu_grid=gpu(read(sweep_records, on_gpu(dense_sparse_grid(profile, out), host=True), None)),
            gpu_placements=gpu(read(placement_records, out, "gpu-placements")),
            baseline=read(baseline_records, profile, out),
        )

    def plain_frames(self) -> list[str]:
        """The names of the fields that hold one frame each (not the knob sweeps' dict, not the parts)."""
        return [f.name for f in dataclasses.fields(self) if f.init and f.name != "gpu_knobs"]

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every frame by name (the GPU knob sweeps as `gpu_knob:<knob>`)."""
        named = {name: getattr(self, name) for name in self.plain_frames()}
        return named | {f"gpu_knob:{k}": v for k, v in self.gpu_knobs.items()}

    def of(self, machine: str) -> "Evidence":
        """One machine's part of the evidence at its newest code, warm-up repeats out (`analysis.current`);
        S3's accuracy half is its bf16 class's (`same_class`), each machine's at its own newest code.
        Made once per machine; a part's own part is itself (the selection is idempotent)."""
        if machine not in self.parts:
            part = self.select(machine)
            part.parts[machine] = part
            self.parts[machine] = part
        return self.parts[machine]

    def select(self, machine: str) -> "Evidence":
        """`of`, made anew."""
        code = newest(self.frames().values())

        def mine(frame: pd.DataFrame) -> pd.DataFrame:
            return current(of(frame, machine), code)

        own = {name: mine(getattr(self, name)) for name in self.plain_frames()}
        # Trained seeds, not timed repeats: their `repeat` is the seed, and no first-use cost is in an AUC.
        own |= {name: at_head(of(getattr(self, name), machine), code) for name in UNTIMED}
        own["accuracy"] = at_head(same_class(self.accuracy, machine), code)
        # A GPU comparison pairs records of one kernel path: a repeat that mixed Triton and its stand-ins, out.
        own |= {name: one_kernel_path(own[name]) for name in GPU_FRAMES}
        knobs = {k: one_kernel_path(mine(v)) for k, v in self.gpu_knobs.items()}
        return dataclasses.replace(self, **own, gpu_knobs=knobs)

    def without_run(self, run: str) -> "Evidence":
        """This evidence less one run's records (a leave-one-out check)."""
        return self.without_runs(frozenset({run}))

    def without_runs(self, runs: frozenset[str]) -> "Evidence":
        """This evidence less these runs' records (leaving out one run, or one invocation's runs)."""

        def less(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[~frame[col.RUN_ID].astype(str).isin(runs)] if col.RUN_ID in frame else frame

        plain = {name: less(getattr(self, name)) for name in self.plain_frames()}
        return dataclasses.replace(self, **plain, gpu_knobs={k: less(v) for k, v in self.gpu_knobs.items()})

    def machines(self) -> list[str]:
        """Every machine with current records: recorded CPU-only hosts, GPU hosts, then unrecorded ones."""
        found = {m for frame in self.frames().values() if col.MACHINE in frame for m in frame[col.MACHINE].dropna()}
        return sorted(found, key=lambda m: (not Machine.parse(m).recorded, Machine.parse(m).has_gpu, m))

    def rules_hashes(self) -> set[str]:
        """The rules' ids the records were measured under ("" for records older than the first hash)."""
        hashes: set[str] = set()
        for frame in self.frames().values():
            if not frame.empty:
                column = frame[col.RULES_HASH] if col.RULES_HASH in frame else pd.Series("", index=frame.index)
                hashes |= set(column.fillna("").astype(str))
        return hashes


def gpu_records(out: Path) -> pd.DataFrame:
    path = out / GPU_RECORDS
    frame = store.load(path) if path.exists() else pd.DataFrame()
    return frame[frame[col.DEVICE] == "cuda"] if col.DEVICE in frame else frame


def same_class(frame: pd.DataFrame, machine: str) -> pd.DataFrame:
    """The records of every machine whose CPU does bf16 as `machine`'s does (`Machine.bf16_class`): training's
    arithmetic, and so its accuracy, is the class's; each seed's gap is still paired on one machine and run."""
    if col.MACHINE not in frame or frame.empty:
        return frame.iloc[0:0]
    mine = Machine.parse(machine).bf16_class
    return frame[[Machine.parse(m).bf16_class == mine for m in frame[col.MACHINE]]]


def of(frame: pd.DataFrame, machine: str) -> pd.DataFrame:
    """One machine's records of a frame (none where the frame has no machine column)."""
    return frame[frame[col.MACHINE] == machine] if col.MACHINE in frame else frame.iloc[0:0]


def primary_machine(evidence: Evidence) -> str | None:
    """The machine whose records the published figures draw (`most_measured` of the CPU loops)."""
    return most_measured(evidence.cpu_loops)


def published_machine(out: Path, profile: str) -> str | None:
    """`primary_machine` of a results folder, whatever machine asks."""
    try:
        return most_measured(sweep_records(cpu.cpu_loops(profile, out), None))
    except NoRecords:
        return None


def most_measured(loops: pd.DataFrame) -> str | None:
    """The machine with the most runs of the CPU loops measured by today's code of each loop (its fingerprint
    here), the last to measure them among equals; of machines whose key records their ISA. Not simply the last to
    measure: a machine that measured a few runs today would otherwise take the published figures from one that
    measured every run of the same code."""
    if loops.empty:
        return None
    loops = loops[[Machine.parse(m).recorded for m in loops[col.MACHINE]]]
    if loops.empty:
        return None
    today = fingerprints(loops) == current_loops(loops).map(code_identity.today)
    runs = loops[today].groupby(col.MACHINE)[col.RUN_ID].nunique() if col.RUN_ID in loops else pd.Series()
    last = loops.groupby(col.MACHINE)[col.TIMESTAMP].max()
    return str(max(last.index, key=lambda machine: (runs.get(machine, 0), last[machine])))


def gpu_hosts(evidence: Evidence) -> list[str]:
    """The GPU hosts with GPU records."""
    return [m for m in evidence.machines() if Machine.parse(m).has_gpu and not of(evidence.gpu, m).empty]
