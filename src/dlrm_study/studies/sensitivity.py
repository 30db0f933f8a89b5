"""Notebooks 03 and 04 measured: the sensitivity study (`plans.sensitivity`) as one run, and its GPU mirror
as a second where this machine has a GPU."""

from pathlib import Path

from dlrm_study.measure import sweep
from dlrm_study.plans.sensitivity import gpu_mirrors, study_sweeps


def measure(profile: str, out: Path, device: str = "auto") -> list[str]:
    """The whole study measured as one run, so every knob value pairs with the base point within a
    repeat (`sweep.run_together`), and its GPU points as a second run where this machine has a GPU.
    Notebooks 03 and 04 both call it: the second finds everything recorded. One line per run."""
    runs = [(f"sensitivity-{profile}", study_sweeps(profile, out))]
    if gpu_here(device):
        runs.append((f"gpu-sensitivity-{profile}", gpu_mirrors(profile, out)))
    return [f"{study}: {sweep.run_together(group, study, progress=False)}" for study, group in runs]


def gpu_here(device: str) -> bool:
    """Whether a notebook's `device` parameter lets it measure on a GPU now."""
    import torch

    return device in ("auto", "cuda") and torch.cuda.is_available()
