"""The first screen says which code each verdict read: a verdict whose records are of earlier code keeps its word
and numbers, said at that code (its loop's short fingerprint, or its commits) and the day of its newest record
(issue 68: verdicts keep their code); a class's set of verdicts counts today's code alone."""

import pandas as pd

from dlrm_study.analysis.evidence import Evidence
from dlrm_study.analysis.judgement import Judgement, Status
from dlrm_study.records import provenance
from dlrm_study.report import ledger, verdicts

MACHINE = "amd-epyc-f25m17s1/avx512f+avx512_bf16/2cpu"


def loops(code: str, commit: str) -> Evidence:
    frame = pd.DataFrame({
        "machine": [MACHINE] * 2, "code_fingerprint": [code] * 2, "git_commit": [commit, commit + "-dirty"],
        "timestamp": ["2026-12-05T00:00:00+00:00", "2026-12-05T00:00:01+00:00"], "run_id": ["r1", "r1"],
        "repeat": [0, 1], "threads": [2, 2], "variant": ["reference", "reference"],
    })  # fmt: skip
    return Evidence(cpu_loops=frame)


def test_a_column_of_earlier_code_says_so_and_no_verdict_word():
    old = loops("0123456789ab", "abcdef0123456789")
    assert ledger.earlier_commits(old, MACHINE) == "commit abcdef0"  # the commits, said once (-dirty dropped)
    assert ledger.earlier_code(old, MACHINE) == "earlier code (commit abcdef0)"
    assert verdicts.earlier_said("") == "earlier code"  # no commit recorded
    machine_fact = Judgement(Status.NOT_MEASURABLE, "no GPU")
    assert "not measurable here" in ledger.short_cell("H1", machine_fact, earlier="earlier code (commit abcdef0)")


def test_a_cell_of_earlier_code_shows_its_word_and_numbers_at_that_code_and_date():
    """The verdict read at the machine's own newest code keeps its word and numbers; the cell says which code
    (loop and short fingerprint, or commits where none) and the day of its newest record."""
    from dlrm_study.analysis import stats

    numbers = {"dlrm-benchmark": stats.Ratio(2.34, 2.31, 2.37, 96, 0.03, runs=32)}
    word = Judgement(Status.REPRODUCED, "bf16 over fp32", numbers=numbers)
    frame = loops("9e2daaf70920", "abcdef0123456789").cpu_loops.assign(**{"train.loop": "optimized"})
    frame["timestamp"] = ["2026-12-05T00:00:00+00:00", "2026-12-06T09:00:00+00:00"]
    earlier = verdicts.earlier_at(Evidence(cpu_loops=frame).of(MACHINE), MACHINE, "S3", word)
    assert earlier == "earlier code (optimized 9e2daaf, 2026-12-06)"
    cell = ledger.short_cell("S3", word, earlier=earlier)
    assert cell.startswith("**reproduced** at earlier code (optimized 9e2daaf, 2026-12-06): bf16 over fp32, ")
    assert "2.34x [2.31, 2.37]" in cell and len(cell.replace("**", "")) <= ledger.MAX_CELL
    unknown = frame.assign(code_fingerprint="")  # measured before fingerprints: its commits
    assert verdicts.earlier_at(Evidence(cpu_loops=unknown).of(MACHINE), MACHINE, "S3", word) == (
        "earlier code (optimized commit abcdef0, 2026-12-06)"
    )
    assert verdicts.earlier_at(Evidence(cpu_loops=frame).of(MACHINE), MACHINE, "S3", Judgement(Status.NOT_YET)) == ""
    assert ledger.said_word(word, earlier) == "reproduced at earlier code (optimized 9e2daaf, 2026-12-06)"
    assert ledger.said_word(word, "") == "reproduced"


def test_only_the_records_a_verdict_read_name_its_code():
    """Records its rule left out (another loop's, in S2's frame) do not make a verdict's code earlier."""
    from dlrm_study.analysis.readers import leave_out
    from dlrm_study.claims.rule import counted

    today = provenance.today_code("reference")
    frame = pd.concat([
        loops(today, "abcdef0123456789").cpu_loops.assign(**{"train.loop": "reference"}),
        loops("0123456789ab", "abcdef0123456789").cpu_loops.assign(**{"train.loop": "optimized",
                                                                        "variant": "optimized-fp32"}),
    ], ignore_index=True)  # fmt: skip
    evidence = Evidence(cpu_loops=frame)
    read = leave_out(frame, frame["variant"] == "reference", "of other loops")
    word = counted(Judgement(Status.TOO_FEW, "45%"), read)
    assert verdicts.earlier_at(evidence.of(MACHINE), MACHINE, "S2", word) == ""
    assert verdicts.earlier_at(evidence.of(MACHINE), MACHINE, "S2", Judgement(Status.TOO_FEW, "45%")).startswith(
        "earlier code (optimized 0123456, "
    )


def test_a_column_of_todays_code_keeps_its_verdict_word():
    now = loops(provenance.code_fingerprint(), "abcdef0123456789")
    assert ledger.earlier_commits(now, MACHINE) is None and ledger.earlier_code(now, MACHINE) == ""
    word = Judgement(Status.REPRODUCED, "dlrm-benchmark 2.1x")
    assert ledger.short_cell("S3", word, earlier="").startswith("**reproduced**")


def test_every_machine_with_records_is_listed_judged_or_not(tmp_path):
    from dlrm_study.report import results_page

    pd.DataFrame({"machine": ["a/avx2/2cpu", "b/avx2/2cpu"], "timestamp": ["2026-12-01T00:00:00", ""],
                  "git_commit": ["abcdef0123", ""], "code_fingerprint": [provenance.code_fingerprint(), ""]}).to_csv(
        tmp_path / "sweeps.csv", index=False)  # fmt: skip
    pd.DataFrame({"machine": ["b/avx2/2cpu"], "timestamp": ["2026-11-30T00:00:00"]}).to_csv(
        tmp_path / "bench.csv", index=False
    )
    lines = results_page.machines_table(tmp_path)
    assert lines[2] == "| `a/avx2/2cpu` | 1 | sweeps.csv | 2026-12-01 | abcdef0 | today's |"
    assert lines[3] == "| `b/avx2/2cpu` | 2 | bench.csv, sweeps.csv | 2026-11-30 | unrecorded | unrecorded |"


def test_a_class_row_counts_only_machines_of_today_s_code():
    """S3's row per bf16 class says no verdict word of earlier code: a machine whose column reads earlier code is
    named so and left out of its class's set of verdicts."""
    xeon = "intel-xeon/avx512f+avx512_bf16/2cpu"
    by_machine = {MACHINE: Judgement(Status.REPRODUCED), xeon: Judgement(Status.TOO_FEW)}
    hosts = [MACHINE, xeon]
    both_today = ledger.class_rows("S3", by_machine, hosts, {})
    assert "- S3 on native bf16 without AMX: **machines disagree**" in "\n".join(both_today)
    rows = "\n".join(ledger.class_rows("S3", by_machine, hosts, {xeon: "earlier code (commit abcdef0)"}))
    assert (
        f"- S3 on native bf16 without AMX: **reproduced** (`{MACHINE}` reproduced, `{xeon}` too few repeats at "
        "earlier code (commit abcdef0), not counted)"
    ) in rows
    only_old = "\n".join(ledger.class_rows("S3", by_machine, hosts, dict.fromkeys(hosts, "earlier code")))
    assert "**not yet measured**" in only_old and f"`{MACHINE}` reproduced at earlier code, not counted" in only_old


def test_the_why_column_names_earlier_code_once_with_its_code(monkeypatch):
    from dlrm_study.claims.registry import BY_ID
    from dlrm_study.report import results_page

    verdicts = {claim: {MACHINE: Judgement(Status.NOT_REPRODUCED, "dlrm-benchmark 40%")} for claim in BY_ID}
    monkeypatch.setattr(results_page.reading, "verdicts_of", lambda evidence: verdicts)
    found = results_page.judged(loops("0123456789ab", "abcdef0123456789"))["S2"]
    assert (found[MACHINE].word, found[MACHINE].reason) == ("earlier code", "0123456, 2026-12-05")
    assert found[MACHINE].cell.startswith("**not reproduced** at earlier code (0123456, 2026-12-05)")
    assert results_page.why("S2", found) == "No machine could decide it: earlier code (0123456, 2026-12-05)."


def test_a_column_measured_by_code_declared_alike_with_today_s_keeps_its_verdict_word(monkeypatch):
    """LOOP_LOCK: records of a fingerprint declared to run the step as today's does are today's code; records of
    a fingerprint it does not list are earlier code."""
    from dlrm_study.records import code_identity

    monkeypatch.setattr(
        code_identity, "LOOP_LOCK", {"reference": ("step", (("old000000000", "c1"), ("new000000000", "c2")))}
    )
    monkeypatch.setattr(code_identity, "fingerprint_here", lambda _: "new000000000")
    for code in ("old000000000", "new000000000"):
        alike = loops(code, "abcdef0123456789").cpu_loops.assign(**{"train.loop": "reference"})
        assert ledger.earlier_commits(Evidence(cpu_loops=alike), MACHINE) is None
    other = loops("0123456789ab", "abcdef0123456789").cpu_loops.assign(**{"train.loop": "reference"})
    assert ledger.earlier_commits(Evidence(cpu_loops=other), MACHINE) == "commit abcdef0"


def test_notebook_00s_tally_and_findings_say_earlier_code_as_the_ledger_does(monkeypatch):
    """The summary under the ledger counts a verdict of earlier code as the ledger's cell says it (its word at
    that code), and so do its findings; "not yet measured" and machine facts hold whatever the code."""
    from pathlib import Path

    from dlrm_study.report import reading, session

    old = loops("0123456789ab", "abcdef0123456789")
    table = {"S2": {MACHINE: Judgement(Status.TOO_FEW, "45% (2 runs)")},
             "S4": {MACHINE: Judgement(Status.NOT_YET, "no records")},
             "H1": {MACHINE: Judgement(Status.NOT_MEASURABLE, "no GPU")}}  # fmt: skip
    monkeypatch.setattr(reading, "judged", lambda out, profile: (old, table))
    at = "at earlier code (0123456, 2026-12-05)"
    assert session.tally(Path("."), "quick") == (
        f"On {MACHINE}: 1 claim too few repeats {at}, 1 claim not yet measured, 1 claim not measurable here"
    )
    lines = session.verdict_lines(Path("."), "quick").splitlines()
    assert lines[0] == f"S2 on {MACHINE}: too few repeats {at}: 45% (2 runs)"
    assert ledger.short_cell("S2", table["S2"][MACHINE], earlier="earlier code (0123456, 2026-12-05)").startswith(
        f"**too few repeats** {at}"
    )
    assert lines[1] == f"S4 on {MACHINE}: not yet measured: no records"
    assert ledger.short_cell("S4", table["S4"][MACHINE], earlier="earlier code (commit abcdef0)").startswith(
        "**not yet measured**"
    )


def test_a_machine_with_records_but_no_column_is_named_under_the_ledger(tmp_path):
    """Every machine results/*.csv names is either a ledger column or named under the ledger, none unsaid."""
    import types

    pd.DataFrame({"machine": [MACHINE, ""], "x": [1, 2]}).to_csv(tmp_path / "sweeps.csv", index=False)
    pd.DataFrame({"machine": ["amd-epyc-f26m2s1/avx512f+avx512_bf16/2cpu"]}).to_csv(tmp_path / "bench.csv", index=False)
    pd.DataFrame({"y": [1]}).to_csv(tmp_path / "other.csv", index=False)  # no machine column: names none
    judged = types.SimpleNamespace(machines=lambda: [MACHINE])
    assert ledger.without_column(tmp_path, judged) == ["amd-epyc-f26m2s1/avx512f+avx512_bf16/2cpu"]
    assert "No column: `amd-epyc-f26m2s1/avx512f+avx512_bf16/2cpu`" in ledger.unjudged_line(tmp_path, judged)[1]
    assert (
        ledger.unjudged_line(
            tmp_path, types.SimpleNamespace(machines=lambda: [MACHINE, "amd-epyc-f26m2s1/avx512f+avx512_bf16/2cpu"])
        )
        == []
    )
