"""A measurement's self-checks, written into its record as `flags`: profiled operators that do not add up
to the timed step (`profile-vs-timed`), or timed steps that spread too far (`spread`)."""

from dlrm_study.records import columns as col

PROFILE_TOLERANCE = 0.15  # |profiled sum - timed median| / timed median


SPREAD_LIMIT = 1.5  # p90 / p10 of the timed steps


def flags(fields: dict[str, object]) -> str:
    """The self-check flags of one record's measured fields (see the module docstring)."""
    out = []
    median, p10, p90 = (as_float(fields.get(k)) for k in (col.MS_MEDIAN, col.MS_P10, col.MS_P90))
    operators = list(col.Breakdown.from_row(fields).ms.values())
    if operators and median and abs(sum(operators) - median) > PROFILE_TOLERANCE * median:
        out.append("profile-vs-timed")
    if p10 and p90 and p90 / p10 > SPREAD_LIMIT:
        out.append("spread")
    return ";".join(out)


def as_float(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if number == number else 0.0
