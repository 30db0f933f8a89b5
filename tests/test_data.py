import gzip

import pytest
import torch
from tests.conftest import CRITEO_SAMPLE

from dlrm_study import config
from dlrm_study.data import CriteoData, SyntheticData, make_data
from dlrm_study.data.synthetic import zipf_ranks
from dlrm_study.errors import UsageError


def assert_same(a, b):
    assert torch.equal(a.dense, b.dense) and torch.equal(a.labels, b.labels)
    assert all(torch.equal(x, y) for x, y in zip(a.indices + a.offsets, b.indices + b.offsets, strict=True))


def test_synthetic_batches_are_a_function_of_seed_stream_and_index(tiny):
    data = SyntheticData(tiny)
    assert_same(data.batch(5), SyntheticData(tiny).batch(5))
    assert not torch.equal(data.batch(5).dense, data.batch(6).dense)
    assert not torch.equal(data.batch(0).dense, SyntheticData(tiny, "eval").batch(0).dense)
    tiny.train.seed = 1
    assert not torch.equal(data.batch(0).dense, SyntheticData(tiny).batch(0).dense)


def test_synthetic_layout(tiny):
    batch = SyntheticData(tiny).batch(0)
    b, lookups = tiny.train.batch_size, tiny.data.lookups_per_table
    assert batch.dense.shape == (b, tiny.model.dense_features) and batch.labels.shape == (b,)
    for table, rows in enumerate(tiny.model.table_rows):
        lengths = batch.lengths(table)
        assert lengths.min() >= 1 and lengths.max() <= lookups  # uniform pooling in [1, L]
        assert batch.offsets[table][0] == 0 and lengths.sum() == batch.indices[table].numel()
        assert batch.indices[table].min() >= 0 and batch.indices[table].max() < rows
    assert set(batch.labels.unique().tolist()) <= {0.0, 1.0}


def test_fixed_pooling(small):
    batch = SyntheticData(small).batch(0)
    assert all((batch.lengths(t) == 6).all() for t in range(small.model.num_tables))


def test_labels_carry_signal_and_are_not_degenerate():
    cfg = config.load("tiny", ["train.batch_size=4096"])
    batch = SyntheticData(cfg).batch(0)
    rate = batch.labels.mean().item()
    assert 0.2 < rate < 0.8
    # The teacher's dense weights alone separate the classes better than chance.
    data = SyntheticData(cfg)
    score = (batch.dense - 0.5) @ data.dense_weights
    assert score[batch.labels == 1].mean() > score[batch.labels == 0].mean() + 0.3


def test_zipf_ids_are_skewed_and_in_range():
    gen = torch.Generator().manual_seed(0)
    ranks = zipf_ranks(200_000, 10_000, 1.05, gen)
    assert ranks.min() >= 0 and ranks.max() < 10_000
    counts = torch.bincount(ranks, minlength=10_000).float()
    assert counts[0] > 20 * counts[100]  # P(k) ~ k^-1.05: rank 0 far hotter than rank 100
    assert counts[:100].sum() > 0.4 * ranks.numel()
    uniform = config.load("tiny", ["data.id_distribution=uniform", "train.batch_size=4096"])
    ids = SyntheticData(uniform).batch(0).indices[0]
    assert torch.bincount(ids, minlength=1000).max() < 40  # no hot rows


def test_to_kjt_matches_the_batch(tiny):
    pytest.importorskip("torchrec")
    batch = SyntheticData(tiny).batch(0)
    kjt = batch.to_kjt()
    assert kjt.keys() == ["t0", "t1", "t2", "t3"]
    for table, key in enumerate(kjt.keys()):
        jagged = kjt[key]
        assert torch.equal(jagged.values(), batch.indices[table])
        assert torch.equal(jagged.lengths(), batch.lengths(table))
        assert torch.equal(jagged.offsets()[:-1], batch.offsets[table])


def test_criteo_reader_parses_the_sample(criteo_cfg):
    data = CriteoData(criteo_cfg)
    batch = next(data.batches())
    assert batch.dense.shape == (64, 13) and len(batch.indices) == 26
    assert all(ids.max() < 1000 for ids in batch.indices)
    assert torch.equal(batch.offsets[0], torch.arange(64))
    assert batch.dense.min() >= 0  # log(1 + max(x, 0))
    eval_batches = list(CriteoData(criteo_cfg, "eval").batches())
    assert len(eval_batches) == 2
    assert not torch.equal(eval_batches[0].dense, batch.dense)  # held out, not trained on


def test_criteo_parse_rules(criteo_cfg):
    data = CriteoData(criteo_cfg)
    line = "\t".join(["1", "", "-3", "7", *["0"] * 10, "", "ff", *["1"] * 24])
    label, dense, ids = data.parse(line + "\n")
    assert label == 1.0 and dense[:3] == [0.0, 0.0, pytest.approx(2.0794415)]
    assert ids[:2] == [0, 255 % 1000]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1\t2\t3", "expected 40 tab-separated fields, got 3"),
        ("\t".join(["2", *["1"] * 39]), "label must be 0 or 1"),
        ("\t".join(["0", "x", *["1"] * 38]), "integer feature I1 is 'x', not an integer"),
        ("\t".join(["0", *["1"] * 13, "zz", *["1"] * 25]), "categorical feature C1 is 'zz', not hexadecimal"),
    ],
)
def test_malformed_line_names_file_and_line(criteo_cfg, tmp_path, line, message):
    path = tmp_path / "bad.tsv"
    good = CRITEO_SAMPLE.read_text().splitlines()
    path.write_text("\n".join([*good[:3], line, *good[3:]]) + "\n")
    criteo_cfg.data.path = str(path)
    with pytest.raises(UsageError, match=f"{path}:4: {message}"):
        list(CriteoData(criteo_cfg, "eval").batches())
    criteo_cfg.data.skip_bad_lines = True
    data = CriteoData(criteo_cfg, "eval")
    batches = list(data.batches())
    assert data.bad_lines == 1 and sum(b.size for b in batches) == 128


def test_criteo_missing_file_and_too_small(criteo_cfg):
    criteo_cfg.data.path = "no/such.tsv"
    with pytest.raises(UsageError, match=r"Criteo file not found: no/such\.tsv"):
        make_data(criteo_cfg)
    criteo_cfg.data.path = str(CRITEO_SAMPLE)
    criteo_cfg.train.eval_batches = 1000
    with pytest.raises(UsageError, match="no training batches left"):
        next(CriteoData(criteo_cfg).batches())


def test_criteo_train_stream_resumes_and_wraps(criteo_cfg):
    data = CriteoData(criteo_cfg)
    stream = data.batches()
    first = [next(stream) for _ in range(40)]  # 2000 lines: 30 train batches per pass
    assert_same(first[30], first[0])
    assert_same(next(data.batches(start=7)), first[7])


def gzipped(lines: list[bytes]) -> bytes:
    return gzip.compress(b"".join(lines))


def test_criteo_reads_gzip_as_it_streams_like_the_plain_file(criteo_cfg, tmp_path):
    """The public logs ship as day_N.gz: the same batches as the decompressed file."""
    plain = list(CriteoData(criteo_cfg, "eval").batches())
    (tmp_path / "sample.tsv.gz").write_bytes(gzipped(CRITEO_SAMPLE.read_bytes().splitlines(keepends=True)))
    criteo_cfg.data.path = str(tmp_path / "sample.tsv.gz")
    for a, b in zip(plain, CriteoData(criteo_cfg, "eval").batches(), strict=True):
        assert_same(a, b)


def test_criteo_gzip_error_names_the_line_of_the_decompressed_text(criteo_cfg, tmp_path):
    good = CRITEO_SAMPLE.read_bytes().splitlines(keepends=True)
    path = tmp_path / "bad.gz"  # the magic bytes tell gzip, not the name
    path.write_bytes(gzipped([*good[:5], b"1\t2\n", *good[5:]]))
    criteo_cfg.data.path = str(tmp_path / "bad.gz")
    with pytest.raises(UsageError, match=f"{path}:6: expected 40 tab-separated fields, got 2"):
        list(CriteoData(criteo_cfg, "eval").batches())
    path.write_bytes(gzipped(good)[:4000])  # cut off mid-stream
    with pytest.raises(UsageError, match="the gzip stream breaks off"):
        list(CriteoData(criteo_cfg, "eval").batches())


def test_criteo_folder_reads_its_days_in_order(criteo_cfg, tmp_path):
    """day_0.gz, day_1, ..., day_10 by number (not by name), as one stream; errors name the day's file."""
    good = CRITEO_SAMPLE.read_bytes().splitlines(keepends=True)
    days = tmp_path / "days"
    days.mkdir()
    (days / "day_0.gz").write_bytes(gzipped(good[:64]))
    (days / "day_2").write_bytes(b"".join(good[128:192]))
    (days / "day_10.gz").write_bytes(gzipped(good[64:128]))
    (days / "notes.txt").write_text("not a day")
    criteo_cfg.data.path = str(days)
    criteo_cfg.train.eval_batches = 2
    first, second = CriteoData(criteo_cfg, "eval").batches()
    criteo_cfg.data.path = str(CRITEO_SAMPLE)
    expected = list(CriteoData(criteo_cfg, "eval").batches())
    assert_same(first, expected[0])  # day_0
    assert not torch.equal(second.dense, expected[1].dense)  # day_2 came before day_10
    criteo_cfg.data.path = str(days)
    with (days / "day_2").open("ab") as day:
        day.write(b"0\t1\n")
    with pytest.raises(UsageError, match=f"{days / 'day_2'}:65: expected 40"):
        list(CriteoData(criteo_cfg, "eval").batches())
