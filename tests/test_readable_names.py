"""What the notebooks print goes through `readable.words` / `readable.for_readers`: the internal names the scan
finds come out in words, tables keep their columns aligned, and link targets and machine keys stay as they are."""

import pandas as pd

from dlrm_study.report import readable, session

PRINTED = (
    "cpu-loops-quick / dlrm-benchmark: optimized-bf16 over optimized-fp32 on gpu-hbm, "
    "gpu-sensitivity-embedding-dim in gpu-placement-size, avx512_bf16 and amx_bf16"
)
TABLE = "  bottom_mlp       8.92\n  samples_per_s    7699.41\n  embedding_backward_update  40.77"
KEPT = "[05](results/notebooks/05_embedding_placement.ipynb) on intel-xeon/avx512f+avx512_bf16+amx_bf16/16cpu"


def test_printed_text_names_nothing_internal_once_in_words():
    assert readable.identifiers(PRINTED)  # the scan sees them before
    said = readable.words(PRINTED)
    assert readable.identifiers(said) == []
    assert "optimized bf16 over optimized fp32 on tables in GPU memory" in said
    assert "GPU sensitivity to embedding dim" in said and "dlrm-benchmark" in said


def test_a_table_printed_as_text_keeps_its_columns():
    said = readable.words(TABLE)
    assert readable.identifiers(said) == []
    assert [len(line) for line in said.splitlines()] == [len(line) for line in TABLE.splitlines()]


def test_link_targets_and_machine_keys_are_left_alone():
    assert readable.words(KEPT) == KEPT


def test_a_frame_for_readers_has_its_columns_index_and_ids_in_words():
    frame = pd.DataFrame({"variant": ["gpu-hbm", "gpu-uvm"], "samples_per_s": [1.0, 2.0], "world_size": [1, 2]})
    frame = frame.set_index(pd.Index(["cpu-compare", "x"], name="config_name"))
    shown = readable.for_readers(frame)
    text = shown.to_string()
    assert readable.identifiers(frame.to_string()) and readable.identifiers(text) == []
    assert list(shown.columns) == ["variant", "samples/s", "ranks"] and shown.index.name == "preset"
    assert shown["variant"].tolist() == ["tables in GPU memory", "host memory via UVM"]
    assert shown["samples/s"].tolist() == [1.0, 2.0]  # values other than ids are untouched


def test_an_unlisted_name_is_left_for_the_scan_to_report():
    assert readable.words("a made_up_field") == "a made_up_field"


def test_session_say_prints_words(capsys):
    session.say("over", "gpu-hbm")
    assert capsys.readouterr().out == "over tables in GPU memory\n"


def test_english_host_memory_is_not_an_id_but_a_host_table_kind_is():
    assert readable.identifiers("host-memory tables cost throughput") == []
    assert readable.identifiers("the host-fused-cpu kind") == ["host-fused-cpu"]
