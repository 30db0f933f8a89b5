"""Every DLRM_STUDY_* switch is declared and parsed in one module (`dlrm_study.settings`)."""

import ast
import re
from pathlib import Path

import pytest

from dlrm_study import settings
from dlrm_study.errors import UsageError

PACKAGE = Path(settings.__file__).resolve().parent
NAME = re.compile(r"DLRM_STUDY_[A-Z0-9_]+")


def named_in_code(path: Path) -> set[str]:
    """The switch names a file spells as a whole string constant (how a read spells them; a docstring or a
    message that mentions one is not a read)."""
    tree = ast.parse(path.read_text())
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and NAME.fullmatch(node.value)}  # fmt: skip


def test_no_module_but_settings_spells_a_switch_name():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative != "settings.py" and (names := named_in_code(path)):
            found[relative] = names
    assert found == {}


def test_every_variable_is_declared_once_and_known_to_current():
    assert len(set(settings.VARIABLES)) == len(settings.VARIABLES) == 12
    assert all(NAME.fullmatch(name) for name in settings.VARIABLES)


def test_an_empty_environment_gives_the_defaults():
    assert settings.current({}) == settings.Settings()
    assert settings.current({}).graph_profiler == "init" and settings.current({}).kernels == "auto"


def test_each_switch_is_parsed_to_its_type():
    given = settings.current({
        "DLRM_STUDY_PROFILE": "smoke", "DLRM_STUDY_KERNELS": "torch", "DLRM_STUDY_KERNEL_WAIT_S": "2.5",
        "DLRM_STUDY_COMMIT": "abc1234", "DLRM_STUDY_INVOCATION": "inv-1", "DLRM_STUDY_TRACEBACK": "1",
        "DLRM_STUDY_FAULT": "1:3:hang", "DLRM_STUDY_LOAD_MAX": "inf", "DLRM_STUDY_LIMITS_CACHE": "off",
        "DLRM_STUDY_VERDICT_CACHE": "/tmp/kept", "DLRM_STUDY_GRAPH_PROFILER": "attach",
        "DLRM_STUDY_PROGRESS_LINES": "1", "UNRELATED": "x",
    })  # fmt: skip
    assert given == settings.Settings(
        profile="smoke", kernels="torch", kernel_wait_s=2.5, commit="abc1234", invocation="inv-1", traceback=True,
        fault=settings.Fault(1, 3, "hang"), load_max=float("inf"), limits_cache="off", verdict_cache="/tmp/kept",
        graph_profiler="attach", progress_lines=True,
    )  # fmt: skip


def test_an_empty_value_is_unset():
    assert settings.current({"DLRM_STUDY_TRACEBACK": "", "DLRM_STUDY_KERNEL_WAIT_S": ""}) == settings.Settings()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("DLRM_STUDY_KERNELS", "tourch"),
        ("DLRM_STUDY_KERNEL_WAIT_S", "soon"),
        ("DLRM_STUDY_KERNEL_WAIT_S", "-1"),
        ("DLRM_STUDY_KERNEL_WAIT_S", "inf"),
        ("DLRM_STUDY_LOAD_MAX", "-1"),
        ("DLRM_STUDY_LOAD_MAX", "lots"),
        ("DLRM_STUDY_FAULT", "1:3"),
        ("DLRM_STUDY_FAULT", "1:x:kill"),
        ("DLRM_STUDY_FAULT", "1:3:explode"),
        ("DLRM_STUDY_GRAPH_PROFILER", "later"),
    ],
)
def test_a_value_that_does_not_parse_is_one_line_naming_its_variable(name, text):
    with pytest.raises(UsageError) as refused:
        settings.current({name: text})
    message = str(refused.value)
    assert message.startswith(f"{name} must be") and repr(text) in message and "\n" not in message


def test_a_process_reads_its_environment_as_it_is_now(monkeypatch):
    monkeypatch.setenv("DLRM_STUDY_PROFILE", "full")
    assert settings.current().profile == "full"
    monkeypatch.setenv("DLRM_STUDY_PROFILE", "smoke")
    assert settings.current().profile == "smoke"


def test_a_cache_switch_gives_no_cache_its_own_path_or_the_users_cache_folder(monkeypatch, tmp_path):
    assert settings.cache_path("off", "limits.json") is None
    assert settings.cache_path(str(tmp_path / "x.json"), "limits.json") == tmp_path / "x.json"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert settings.cache_path("", "verdicts") == tmp_path / "dlrm-study" / "verdicts"
