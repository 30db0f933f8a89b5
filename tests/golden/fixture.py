"""The golden fixture: its records (records.json, written from `scenarios` once), what the claims' rules decide
on them, and the digest of those decisions.

A judgement is kept as what the rule decided: its status, its runs and pairs, each deciding comparison's
interval and what it left out, by reason. Its sentences are not kept: a rewording decides nothing.
"""

import hashlib
import json
import math
from pathlib import Path

import pandas as pd

try:
    from dlrm_study.claims import registry as claims
except ImportError:  # the code of a commit before the claims package (scripts/rerule.py judges the fixture with it)
    from dlrm_study.analysis import claims
from dlrm_study.analysis import evidence as ev
from dlrm_study.analysis.judgement import Judgement, Status

RECORDS = Path(__file__).with_name("records.jsonl")
# By path, not from dlrm_study.rules: scripts/rerule.py judges the fixture with the code of commits before it.
GOLDEN = Path(__file__).resolve().parents[2] / "src" / "dlrm_study" / "rules" / "golden.json"
KNOB = "gpu_knob:"
DIGITS = 6  # significant digits kept of an interval's ends: far below any rule's margin, above float noise
# A bf16 class's row is the set of its machines' verdicts: these sets, by class.
CLASSES = {
    "agree": {"intel-xeon/avx512f+avx512_bf16/2cpu": Status.REPRODUCED},
    "disagree": {"intel-xeon/avx512f+avx512_bf16/2cpu": Status.REPRODUCED,
                 "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu": Status.INCONCLUSIVE,
                 "intel-xeon-f6m143s8/avx512f+avx512_bf16+amx_bf16/2cpu": Status.NOT_YET},
    "without records": {"intel-xeon/avx512f+avx512_bf16/2cpu": Status.REPRODUCED,
                        "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu": Status.NOT_YET},
}  # fmt: skip


def frames_of(evidence: ev.Evidence) -> dict[str, dict]:
    """Every frame with columns as its columns and rows (the knob sweeps under `gpu_knob:<knob>`)."""
    found = {}
    for name, frame in evidence.frames().items():
        if len(frame.columns):
            found[name] = json.loads(frame.to_json(orient="split", index=False))
    return found


def frame_of(part: dict) -> pd.DataFrame:
    return pd.DataFrame(part["data"], columns=part["columns"])


def evidence_of(frames: dict[str, dict]) -> ev.Evidence:
    knobs = {name.removeprefix(KNOB): frame_of(f) for name, f in frames.items() if name.startswith(KNOB)}
    plain = {name: frame_of(f) for name, f in frames.items() if not name.startswith(KNOB)}
    return ev.Evidence(**plain, gpu_knobs=knobs)


def write_records(scenarios: dict[str, tuple[str, str, ev.Evidence]], path: Path = RECORDS) -> None:
    """One scenario a line: its claim, machine and frames."""
    lines = [json.dumps({"scenario": name, "claim": c, "machine": m, "frames": frames_of(e)}, sort_keys=True)
             for name, (c, m, e) in sorted(scenarios.items())]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def read_records(path: Path = RECORDS) -> dict[str, tuple[str, str, ev.Evidence]]:
    found = [json.loads(line) for line in path.read_text().splitlines() if line]
    return {s["scenario"]: (s["claim"], s["machine"], evidence_of(s["frames"])) for s in found}


def rounded(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(f"{x:.{DIGITS}g}")


def kept(j: Judgement) -> dict:
    """What a judgement decided (`DIGITS` of each interval's ends), without its sentences."""
    numbers = {name: {"n": int(r.n), "runs": int(r.runs), "center": rounded(r.center), "low": rounded(r.low),
                      "high": rounded(r.high)} for name, r in sorted(j.numbers.items())}  # fmt: skip
    said = {"qualifier": j.qualifier} if j.qualifier else {}  # what a word tested, where the rule says (S3)
    return {"status": str(j.status), "runs": j.runs, "pairs": j.pairs, "numbers": numbers,
            "left_out": dict(sorted(j.left_out.items())), **said}  # fmt: skip


def judgements(path: Path = RECORDS) -> dict[str, dict]:
    """Each scenario judged as the ledger judges it (`claims.judge`: the rule, leave-one-out, what it left
    out), and each class row of `CLASSES`."""
    found = {name: {"claim": c, **kept(claims.judge(c, e.of(m), m))} for name, (c, m, e) in read_records(path).items()}
    for name, statuses in CLASSES.items():
        status, mine = claims.class_status({m: Judgement(s) for m, s in statuses.items()}, "native bf16 without AMX")
        found[f"class row: {name}"] = {"status": str(status), "machines": sorted(mine)}
    return dict(sorted(found.items()))


def text(found: dict[str, dict]) -> str:
    return json.dumps(found, indent=1, sort_keys=True) + "\n"


def digest(found: dict[str, dict]) -> str:
    return hashlib.sha256(text(found).encode()).hexdigest()[:12]


def moved(found: dict[str, dict], golden: dict[str, dict]) -> list[str]:
    """The scenarios whose judgement differs from the golden one (or that only one of the two has)."""
    return sorted(name for name in found.keys() | golden.keys() if found.get(name) != golden.get(name))


def written() -> dict[str, dict]:
    """The committed golden judgements."""
    return json.loads(GOLDEN.read_text())
