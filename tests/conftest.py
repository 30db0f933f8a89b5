"""Shared fixtures: small configs and the Criteo sample."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

# Without a GPU, Triton kernels run in Triton's interpreter on CPU tensors, so their logic is
# tested here too. Must be set before Triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Machine limits the tests measure are cached for this session only, never in the user's cache
# (`measure.limits_cache`); commands the tests run inherit it.
LIMITS = Path(tempfile.mkdtemp(prefix="dlrm-study-limits-")) / "limits.json"
os.environ.setdefault("DLRM_STUDY_LIMITS_CACHE", str(LIMITS))
atexit.register(shutil.rmtree, LIMITS.parent, ignore_errors=True)  # the session's cache goes with the session
# So are judged records (`report.verdict_cache`): a render's kernels share them, the user's cache is not touched.
VERDICTS = Path(tempfile.mkdtemp(prefix="dlrm-study-verdicts-"))
os.environ.setdefault("DLRM_STUDY_VERDICT_CACHE", str(VERDICTS))
atexit.register(shutil.rmtree, VERDICTS, ignore_errors=True)

from dlrm_study import config  # noqa: E402  (after the environment above)

ROOT = Path(__file__).resolve().parents[1]
CRITEO_SAMPLE = ROOT / "data" / "criteo_sample.tsv"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the package the code fingerprints read (what a checkout of other code would be)."""
    from dlrm_study.records import code_identity

    copy = tmp_path / "dlrm_study"
    shutil.copytree(code_identity.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(code_identity, "PACKAGE", copy)
    code_identity.fingerprint_here.cache_clear()
    yield copy
    code_identity.fingerprint_here.cache_clear()


@pytest.fixture
def tiny() -> config.Config:
    return config.preset("tiny")


@pytest.fixture
def small() -> config.Config:
    """Tiny, with duplicate-heavy fixed bags of 6 ids: exercises repeated ids in a batch."""
    return config.load(
        "tiny",
        ["data.pooling=fixed", "data.lookups_per_table=6", "model.table_rows=50-70-30-90", "train.batch_size=32"],
    )


@pytest.fixture
def criteo_cfg(tmp_path: Path) -> config.Config:
    cfg = config.load(
        "kaggle",
        ["model.table_rows=26x1000", "train.batch_size=64", "train.eval_batches=2", f"data.path={CRITEO_SAMPLE}"],
    )
    cfg.data.source = "criteo"
    return cfg


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """A run built with `train.threads` sets torch's thread count for the whole process: put it back,
    or a later test's machine key ("this" machine at torch's threads) would name another thread count."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
