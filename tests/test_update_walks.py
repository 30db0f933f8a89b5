"""scripts/update_walks.py: the bound's update probe over the sorted, the drawn and the fused update's own walk."""

import re
import runpy
from pathlib import Path

import pytest

MAIN = runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "update_walks.py"))["main"]


def test_each_walk_gets_its_fastest_case(capsys):
    assert MAIN(["--config", "tiny", "--steps", "2", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "tiny, 2 steps, 1 thread: the update probe's fastest case per walk"
    walks = [line.split("  ")[1].strip() for line in lines[1:]]
    assert walks == ["sorted unique rows", "drawn unique rows", "every id in bag order"]
    unique, every = (int(re.search(r"([\d,]+) ids a step", line)[1].replace(",", "")) for line in (lines[1], lines[3]))
    assert 0 < unique < every  # tiny's Zipf ids repeat: the fused update's walk holds the repeats


@pytest.mark.parametrize(("given", "said"), [(["--config", "huge"], "unknown preset 'huge'"),
                                             (["--steps", "0"], "--steps is at least 1")])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(given, said, capsys):
    assert MAIN(given) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
