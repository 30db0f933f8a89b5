"""Building a config from a preset or a YAML file, and `--set section.field=value` overrides.

Every value is converted to its field's type here, or refused with a message naming the key.
"""

import enum
import math
import os
import re
import typing
from pathlib import Path

import yaml

from dlrm_study.config.presets import PRESETS, preset
from dlrm_study.config.schema import CHOICES, SECTIONS, Config, as_member
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


class Loader(yaml.SafeLoader):
    """YAML with the 1.2 core schema's plain scalars: `true`/`false` are the only booleans and numbers
    are decimal, so `no`, `on`, `1:30` (sexagesimal 90 in YAML 1.1), `010` (octal 8) or `2020-01-01`
    stay the text they look like and a field's own type decides what they are."""


# Scalars the 1.2 core schema reads differently, replaced below; null, merge and the rest are kept.
REPLACED = ("bool", "int", "float", "timestamp")
Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag.rsplit(":", 1)[-1] not in REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for tag, pattern, first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^[-+]?(?:0|[1-9][0-9_]*)$", "-+0123456789"),
    ("float", r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?"
     r"|[0-9][0-9_]*[eE][-+]?[0-9]+|\.(?:inf|Inf|INF))$|^\.(?:nan|NaN|NAN)$", "-+0123456789."),
):  # fmt: skip
    Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern), list(first))


def parse_yaml(text: str) -> object:
    return yaml.load(text, Loader=Loader)  # a SafeLoader: builds plain data only


def check_input_file(path: Path, what: str) -> None:
    """Refuse, naming it, an input file that is a folder or is not there."""
    if path.is_dir():
        raise UsageError(f"{what} file {path} is a folder")
    if not path.is_file():
        raise UsageError(f"{what} file not found: {path}")


def read_text(path: Path, what: str) -> str:
    """A UTF-8 text file's content, or a UsageError naming the file and why it cannot be read."""
    check_input_file(path, what)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1  # the bytes read: no second read
        raise UsageError(f"{path}:{line}: not UTF-8 text (byte 0x{err.object[err.start]:02x})") from None
    except OSError as err:
        raise UsageError(f"{what} file {path}: {err.strerror}") from None


def read_yaml(path: Path, what: str = "config") -> dict:
    """A YAML file holding a mapping, or a UsageError naming the file and what is wrong."""
    text = read_text(path, what)
    try:
        doc = parse_yaml(text) or {}
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    return doc


def from_yaml(path: Path) -> Config:
    """A YAML file: optional `base: PRESET`, `name`, and `model` / `data` / `train` sections."""
    doc = read_yaml(path)
    unknown = set(map(str, doc)) - {"base", "name", *SECTIONS}
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    try:
        cfg = preset(doc["base"]) if "base" in doc else Config()
        set_field(cfg, "name", doc.get("name", path.stem))
        for section in SECTIONS:
            values = doc.get(section) or {}
            if not isinstance(values, dict):
                raise UsageError(f"section {section!r} must be a mapping")
            for key, value in values.items():
                set_field(cfg, f"{section}.{key}", value)
    except UsageError as err:  # name the file: the same key may come from --set too
        raise UsageError(f"{path}: {err}") from None
    return cfg


def apply_override(cfg: Config, item: str) -> None:
    """Apply one `section.field=value` override: a text field takes the text as written; others
    parse it as YAML (`true`, `0.5`, `[1, 2]`), lists also as `a-b-c` or `NxM`."""
    if "=" not in item:
        raise UsageError(f"--set {item!r}: expected section.field=value")
    key, text = (part.strip() for part in item.split("=", 1))
    set_field(cfg, key, text if is_text(field_type(cfg, key)) else parse_text(text))


def is_text(kind: type) -> bool:
    """Whether a field holds text (a name, a path, or a choice such as `train.loop`)."""
    return kind is str or (isinstance(kind, type) and issubclass(kind, enum.StrEnum))


def parse_text(text: str) -> object:
    try:
        return parse_yaml(text) if text else ""
    except yaml.YAMLError:
        return text


def field_type(cfg: Config, key: str) -> type:
    """The type of the field `key` names (`name`, `section.field`), or a UsageError for an unknown key."""
    if key == "name":
        return str
    section, _, name = key.partition(".")
    if section not in SECTIONS or not name:
        raise UsageError(f"unknown config key {key!r} (expected name, model.*, data.* or train.*)")
    hints = typing.get_type_hints(type(getattr(cfg, section)))
    if name not in hints:
        raise UsageError(f"unknown config key {key!r}")
    return hints[name]


def set_field(cfg: Config, key: str, value: object) -> None:
    kind = field_type(cfg, key)
    if key == "name":  # a changed config names itself (records and captions say what ran)
        if not isinstance(value, str) or not value.strip() or not value.isprintable() or not encodable(value):
            raise UsageError(f"name: {value!r} is not a valid name (printable UTF-8 text)")
        cfg.name = value.strip()
        return
    section, _, name = key.partition(".")
    value = coerce(key, value, kind)
    if section == "train" and name in CHOICES:  # a valid choice becomes its member (else `validate` names it)
        value = as_member(CHOICES[name], value)
    setattr(getattr(cfg, section), name, value)


def encodable(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (a lone surrogate from a non-UTF-8 argument cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def coerce(key: str, value: object, kind: type) -> object:
    """Convert a YAML or command-line value to the field's type, or say which key is wrong."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise ValueError
        if kind is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, int):
                return int64(value)
            number = float(value)  # `1e6` is a whole number too
            if not number.is_integer():  # also refuses inf and nan
                raise ValueError
            return int64(int(number))
        if kind is float:
            number = float(value)
            if not math.isfinite(number):  # nan and inf pass every comparison test below: refuse them here
                raise ValueError
            return number
        if is_text(kind):
            if isinstance(value, bool) or not isinstance(value, str | int | float) or not encodable(str(value)):
                raise ValueError  # a list, a mapping, an empty YAML value or bytes that are not UTF-8
            return str(value)
        if typing.get_origin(kind) is list:
            return parse_int_list(value)
    except (TypeError, ValueError, OverflowError):
        pass
    names = {bool: "boolean (true or false)", int: "whole number", float: "finite number", str: "text"}
    name = names.get(str if is_text(kind) else kind, "list of whole numbers (e.g. 4x1000 or 16-8)")
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
    return [int64(v) for v in items]


def int64(value: int) -> int:
    """`value`, if a tensor's size or an index can hold it; else ValueError."""
    if not -(2**63) <= value < 2**63:
        raise ValueError
    return value
