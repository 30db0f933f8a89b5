"""Building a config from a preset or a YAML file, and `--set section.field=value` overrides.

Every value is converted to its field's type here, or refused with a message naming the key.
"""

import math
import os
import typing
from pathlib import Path

import yaml

from dlrm_study.config.presets import PRESETS, preset
from dlrm_study.config.schema import SECTIONS, Config
from dlrm_study.errors import UsageError


def load(spec: str, overrides: typing.Sequence[str] = ()) -> Config:
    """A preset name or a YAML file, with `section.field=value` overrides applied."""
    if spec in PRESETS:
        cfg = preset(spec)
    elif spec.endswith((".yaml", ".yml")) or os.sep in spec:
        cfg = from_yaml(Path(spec))
    else:
        raise UsageError(f"--config {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a YAML file")
    for item in overrides:
        apply_override(cfg, item)
    return cfg


def read_yaml(path: Path, what: str = "config") -> dict:
    """A YAML file holding a mapping, or a UsageError naming the file and what is wrong."""
    if not path.is_file():
        raise UsageError(f"{what} file not found: {path}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    return doc


def from_yaml(path: Path) -> Config:
    """A YAML file: optional `base: PRESET`, `name`, and `model` / `data` / `train` sections."""
    doc = read_yaml(path)
    unknown = set(doc) - {"base", "name", *SECTIONS}
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    cfg = preset(doc["base"]) if "base" in doc else Config()
    cfg.name = str(doc.get("name", path.stem))
    for section in SECTIONS:
        values = doc.get(section) or {}
        if not isinstance(values, dict):
            raise UsageError(f"{path}: section {section!r} must be a mapping")
        for key, value in values.items():
            set_field(cfg, f"{section}.{key}", value)
    return cfg


def apply_override(cfg: Config, item: str) -> None:
    """Apply one `section.field=value` override (value parsed as YAML, lists as `a-b-c` or `NxM`)."""
    if "=" not in item:
        raise UsageError(f"--set {item!r}: expected section.field=value")
    key, text = item.split("=", 1)
    set_field(cfg, key.strip(), parse_text(text.strip()))


def parse_text(text: str) -> object:
    try:
        return yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        return text


def set_field(cfg: Config, key: str, value: object) -> None:
    if key == "name":  # a changed config names itself (records and captions say what ran)
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"name: {value!r} is not a valid name")
        cfg.name = value.strip()
        return
    section, _, name = key.partition(".")
    if section not in SECTIONS or not name:
        raise UsageError(f"unknown config key {key!r} (expected name, model.*, data.* or train.*)")
    target = getattr(cfg, section)
    hints = typing.get_type_hints(type(target))
    if name not in hints:
        raise UsageError(f"unknown config key {key!r}")
    setattr(target, name, coerce(key, value, hints[name]))


def coerce(key: str, value: object, kind: type) -> object:
    """Convert a YAML or command-line value to the field's type, or say which key is wrong."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        if kind is float:
            number = float(value)
            if not math.isfinite(number):  # nan and inf pass every comparison test below: refuse them here
                raise ValueError
            return number
        if kind is str:
            return str(value)
        if typing.get_origin(kind) is list:
            return parse_int_list(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        pass
    name = getattr(kind, "__name__", str(kind))
    if kind is float:
        name = "finite float"
    raise UsageError(f"{key}: {value!r} is not a valid {name}")


def parse_int_list(value: object) -> list[int]:
    """`[1, 2]`, `1-2`, `4x1000` (four times 1000) or a single int."""
    if isinstance(value, list):
        items = value
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, str):
        items = []
        for part in value.split("-"):
            count, times, size = part.partition("x")
            items += [int(size)] * int(count) if times else [int(part)]
    else:
        raise ValueError
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError
    return list(items)
