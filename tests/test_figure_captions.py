"""Every published figure's caption names the machine, the code and the repeats of what it draws."""

from pathlib import Path

import pytest
from PIL import Image

from dlrm_study.report.plots.common import CAPTION, caption_gaps

FIGURES = Path(__file__).resolve().parents[1] / "results" / "figures"
SAID = (
    "intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu (Intel(R) Xeon(R) Processor), torch 2.13.0+cpu, "
    "2026-12-05, 32 runs x 3 repeats, records measured at 4 commits, 063dc1b to 20eb8d1; error bars: 95% intervals"
)


def test_a_caption_that_leaves_out_machine_code_or_repeats_is_caught() -> None:
    assert caption_gaps(SAID) == []
    assert caption_gaps(SAID.replace("intel-xeon-f6m207s2/avx512f+avx512_bf16+amx_bf16/2cpu", "a machine")) == [
        "its machine"
    ]
    assert caption_gaps(SAID.replace("records measured at 4 commits, 063dc1b to 20eb8d1", "")) == ["its code"]
    assert caption_gaps(SAID.replace("32 runs x 3 repeats", "")) == ["its repeats"]
    gpu = "intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu/nvidia-h200 (NVIDIA H200)"
    assert caption_gaps(f"{gpu}, 2 runs x 2 repeats, records measured at 577ad01, e5c64cd") == []


@pytest.mark.parametrize("png", sorted(FIGURES.glob("*.png")), ids=lambda p: p.stem)
def test_every_published_figure_names_machine_code_and_repeats(png: Path) -> None:
    said = Image.open(png).text.get(CAPTION, "")
    assert said, f"{png.name}: no caption in its metadata (rendered before captions were kept: make render)"
    assert caption_gaps(said) == [], f"{png.name}: its caption does not name {caption_gaps(said)}: {said!r}"
