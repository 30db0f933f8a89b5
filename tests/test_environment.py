"""environment.yml, pyproject.toml and requirements/ describe one environment."""

import re
import tomllib

import yaml
from tests.conftest import ROOT


def name_of(requirement: str) -> str:
    return re.split(r"[=<>!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_packages() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {name_of(r) for r in listed}


def conda_packages() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {name_of(r) for r in dep["pip"]}
        else:
            names.add(name_of(dep.split("=")[0]))
    return names - {"python", "pip"}


def requirement_lines(name: str) -> list[str]:
    lines = (ROOT / "requirements" / name).read_text().splitlines()
    return [line for line in lines if line and not line.startswith(("#", "-r"))]


def test_environment_yml_lists_what_pyproject_lists():
    assert conda_packages() == pyproject_packages()


def test_pins_agree_between_environment_and_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(dep["pip"] for dep in env["dependencies"] if isinstance(dep, dict))
    cpu = set(requirement_lines("cpu.txt"))
    pinned = [r for r in pip if "==" in r and name_of(r) in {"torch", "fbgemm-gpu-cpu"}]
    assert sorted(name_of(r) for r in pinned) == ["fbgemm-gpu-cpu", "torch"]  # both pinned, so both compared
    for requirement in pinned:
        assert requirement in cpu


def test_every_pyproject_package_is_pinned_for_make_env():
    pinned = {name_of(r) for f in ("base.txt", "cpu.txt") for r in requirement_lines(f)}
    assert pyproject_packages() <= pinned
    assert all("==" in r for f in ("base.txt", "cpu.txt", "cuda.txt", "no-deps.txt") for r in requirement_lines(f))


def test_torchrec_is_installed_without_its_cuda_requirement():
    assert requirement_lines("no-deps.txt") == ["torchrec==1.8.0"]
    assert "torchrec" not in pyproject_packages() and "torchrec" not in conda_packages()
    assert "--no-deps -r requirements/no-deps.txt" in (ROOT / "Makefile").read_text()
    assert "pip install --no-deps torchrec==1.8.0" in (ROOT / "environment.yml").read_text()


def requirement_pins() -> dict[str, str]:
    pins = {}
    for f in ("base.txt", "cpu.txt", "no-deps.txt"):
        for r in requirement_lines(f):
            name, version = r.split("==", 1)
            pins[name_of(name)] = version.strip()
    return pins


def test_environment_yml_pins_every_package_at_the_requirements_version():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins, listed = requirement_pins(), []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            listed += [tuple(r.split("==", 1)) if "==" in r else (r, "") for r in dep["pip"]]
        elif dep.split("=")[0] not in ("python", "pip"):
            listed.append(tuple(dep.split("=", 1)) if "=" in dep else (dep, ""))
    assert listed
    wrong = {name: version for name, version in listed if pins.get(name_of(name)) != version.strip()}
    assert not wrong, f"environment.yml differs from requirements/ (or is unpinned) for {wrong}"
