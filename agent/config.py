"""Config dataclasses: build them from dicts, YAML files, `key=value` overrides and command-line flags.

Every config (AgentConfig, PolicyConfig, RunConfig, TrainConfig, IngestConfig, DemoConfig) is a dataclass
whose fields carry their help in `metadata["help"]` (TRL's pattern) and whose nested settings are typed
fields, one level deep (`RunConfig.policy: PolicyConfig`). This module knows none of them:

- `from_dict(cls, d)` builds a config, nested ones included; an unknown key or a value of the wrong type
  is refused with the key, the reason and the valid names;
- `load(cls, path, overrides)` reads a flat YAML file, then `key=value` overrides (`policy.model=M` for a
  nested setting; values are read as YAML, except for text settings, which take the value as written);
- `to_dict(cfg)` is the inverse, with secrets (`metadata["secret"]`) masked unless asked otherwise;
- `add_arguments(parser, cls)` generates one flag per field (help, type, choices and default from the
  field), `add_command` makes a subcommand of them, and `args_to_dict` / `from_args` read them back. Flags
  left out are absent from the parsed namespace, so a default stays declared once: on the dataclass.

Fields are declared with `setting(default, help, **metadata)`, short for `dataclasses.field` with the help
in its metadata (`setting(factory=PolicyConfig, help=...)` for a mutable or nested default), and a setting
that one config passes on to another with `setting_like(OtherConfig, "name", default)`.
Other metadata keys: `choices` (a sequence, or a function returning one for registries that load lazily),
`nargs` on a list (its flag takes the values in one go, `--seeds 0 1 2`, instead of one per flag),
`aliases` (extra flag names, e.g. `budget` for `s_total`, kept for command lines people already type),
and on a nested field `flag_prefix` (its flags read `--judge-model`; without it they are unprefixed).

`transformers.HfArgumentParser` does the flag part for flat dataclasses, but it takes no nested dataclass
and importing it costs about 1.2 s here against 0.4 s for all of `vimrag --help`, so this stays ours.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

SECRET = "***"


class Config:
    """Mixin for config dataclasses: `to_dict`, `from_dict` and `load` through this module's functions.

    `config_name` names the settings in error messages ("unknown agent settings ...")."""

    config_name = "config"

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        return to_dict(self, redact)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        return from_dict(cls, d)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = (), values: Mapping | None = None):
        return load(cls, path, overrides, values)


_METADATA_KEYS = frozenset({"choices", "nargs", "aliases", "secret", "flag_prefix"})


def setting(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING, **metadata):
    """A config field with its help: `retries: int = setting(2, "retries on 5xx / 429")`.

    `factory` builds a mutable or nested default (`setting(factory=PolicyConfig, help=...)`); `metadata` takes
    the keys this module reads (choices, nargs, aliases, secret, flag_prefix), and a misspelt one is refused."""
    unknown = sorted(set(metadata) - _METADATA_KEYS)
    if unknown:
        raise TypeError(f"setting() got unknown metadata {unknown}; valid: {sorted(_METADATA_KEYS)}")
    return dataclasses.field(default=default, default_factory=factory, metadata={"help": help, **metadata})


def setting_like(cls, name: str, default: Any = dataclasses.MISSING, **metadata):
    """The setting `cls.name` again under another default (and field name), with its help and metadata, so a
    setting one config passes on to another is described once: `updates: int = setting_like(TrainConfig,
    "updates", 25)`. `metadata` overrides keys of the original (e.g. narrower `choices`)."""
    original = {f.name: f for f in dataclasses.fields(cls)}[name]
    return setting(default, **{**original.metadata, **metadata})


# -- types ------------------------------------------------------------------------------------------
@functools.cache
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _unwrap(tp) -> tuple[Any, bool]:
    """(the type, whether None is allowed) for `X | None`."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else Any), len(args) < len(typing.get_args(tp))
    return tp, False


def _nested(tp) -> type | None:
    base, _ = _unwrap(tp)
    return base if isinstance(base, type) and dataclasses.is_dataclass(base) else None


def _type_name(tp) -> str:
    base, optional = _unwrap(tp)
    name = getattr(base, "__name__", str(base)) if typing.get_origin(base) is None else str(base)
    return f"{name} or null" if optional else name


def _choices(f: dataclasses.Field) -> Sequence | None:
    c = f.metadata.get("choices")
    return tuple(c()) if callable(c) else c


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """`value` as type `tp`: numbers written as text are read (YAML reads 5e-7 as a string), nothing else is
    guessed."""
    base, optional = _unwrap(tp)
    if value is None:
        if optional or base is Any:
            return None
        raise ValueError(f"{key} cannot be empty: it is a {_type_name(tp)}")
    if base is Any:
        return value
    if isinstance(base, type) and dataclasses.is_dataclass(base):
        if isinstance(value, base):
            return value
        if isinstance(value, Mapping):
            return from_dict(base, value, key + ".")
        raise ValueError(f"{key} must be a mapping of {base.__name__} settings, not {value!r}")
    origin = typing.get_origin(base) or base
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{key}={value!r}: expected a list, e.g. [a, b]")
        item = (typing.get_args(base) or (Any,))[0]
        return [_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"{key}={value!r}: expected a mapping, e.g. {{name: value}}")
        return dict(value)
    if base is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{key}={value!r}: expected true or false")
    if base in (int, float):
        if isinstance(value, str):
            try:
                value = float(value) if base is float else int(value)
            except ValueError:
                raise ValueError(f"{key}={value!r} is not a number ({base.__name__})") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key}={value!r}: expected a number ({base.__name__})")
        if base is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{key}={value!r}: expected a whole number")
        return base(value)
    if base is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ValueError(f"{key}={value!r}: expected text")
    return value


# -- dicts ------------------------------------------------------------------------------------------
def _label(cls, prefix: str) -> str:
    return prefix.rstrip(".") or getattr(cls, "config_name", cls.__name__)


def _refuse_unknown(cls, unknown: list, prefix: str) -> None:
    if not unknown:
        return
    import difflib

    names = [f.name for f in _fields(cls)]
    hint = [m for k in unknown for m in difflib.get_close_matches(str(k), names, n=1)]
    raise ValueError(
        f"unknown {_label(cls, prefix)} settings {[prefix + str(k) for k in unknown]}; "
        + (f"did you mean {[prefix + m for m in hint]}? " if hint else "")
        + f"known ones are {sorted(prefix + n for n in names)}"
    )


def from_dict(cls, d: Mapping[str, Any], prefix: str = ""):
    """Build dataclass `cls` from `d` (nested dataclasses from nested mappings); missing keys keep their
    defaults. Unknown keys, wrong types and values outside a field's choices raise ValueError by name."""
    if not isinstance(d, Mapping):
        raise ValueError(f"{_label(cls, prefix)} settings must be a mapping of name: value, not {d!r}")
    fields = {f.name: f for f in _fields(cls)}
    _refuse_unknown(cls, [k for k in d if k not in fields], prefix)
    hints = _hints(cls)
    kwargs = {}
    for name, value in d.items():
        key = prefix + name
        value = _coerce(value, hints[name], key)
        choices = _choices(fields[name])
        if choices is not None and value is not None and value not in choices:
            raise ValueError(f"{key}={value!r} is not one of {list(choices)}")
        kwargs[name] = value
    return cls(**kwargs)


def to_dict(cfg, redact: bool = True) -> dict[str, Any]:
    """The config as plain data (nested configs as dicts); with `redact`, non-empty secrets read '***'."""
    out = {}
    for f in _fields(type(cfg)):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            v = to_dict(v, redact)
        elif redact and f.metadata.get("secret") and v:
            v = SECRET
        else:
            v = _plain(v)
        out[f.name] = v
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return str(v) if isinstance(v, Path) else v


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys.

    >>> flatten({"lr": 1e-6, "agent": {"protocol": "vimrag", "prompts": {"system": "S"}}})
    {'lr': 1e-06, 'agent.protocol': 'vimrag', 'agent.prompts.system': 'S'}
    """
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`update` over `base`, nested mappings merged key by key.

    >>> merge({"policy": {"backend": "openai", "model": "a"}}, {"policy": {"model": "b"}})
    {'policy': {'backend': 'openai', 'model': 'b'}}
    """
    out = dict(base)
    for k, v in update.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


# -- files and overrides ----------------------------------------------------------------------------
def _field_type(cls, key: str) -> Any:
    """The type of dotted setting `key` of `cls`; ValueError naming the known settings when it has none."""
    parts = key.split(".")
    for i, part in enumerate(parts):
        prefix = "".join(p + "." for p in parts[:i])
        if part not in {f.name for f in _fields(cls)}:
            _refuse_unknown(cls, [part], prefix)
        tp = _hints(cls)[part]
        if i < len(parts) - 1:
            cls = _nested(tp)
            if cls is None:
                raise ValueError(f"{prefix}{part} is a single setting, not a group: write {prefix}{part}=VALUE")
    return tp


def parse_override(cls, text: str) -> dict[str, Any]:
    """`key=value` (dotted keys for nested settings) as a nested dict; the value is read as YAML (1e-6, true,
    [a, b], {r: 16}) unless the setting is text.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class C:
    ...     lr: float = 0.1
    ...     name: str = ""
    >>> parse_override(C, "lr=0.5"), parse_override(C, "name=007")
    ({'lr': 0.5}, {'name': '007'})
    """
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"override {text!r} must look like key=value (e.g. lr=1e-6, or policy.model=M)")
    base, _ = _unwrap(_field_type(cls, key))
    value: Any = raw if base is str else yaml.safe_load(raw)
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


def load(cls, path: str | Path | None = None, overrides: Sequence[str] = (), values: Mapping | None = None):
    """Config `cls` from a YAML file (optional), then `key=value` overrides, then `values` (e.g. flags)."""
    import yaml

    data: dict[str, Any] = {}
    if path:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"config file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"{p} is not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p} must hold a mapping of setting: value, not {type(data).__name__}")
    for text in overrides:
        data = merge(data, parse_override(cls, text))
    return from_dict(cls, merge(data, values or {}))


# -- command-line flags -----------------------------------------------------------------------------
def _help(f: dataclasses.Field) -> str:
    text = f.metadata.get("help", "")
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    if default not in (None, "", [], {}, dataclasses.MISSING) and not f.metadata.get("secret"):
        text += f" (default: {default})"
    return text.replace("%", "%%")


def add_arguments(parser, cls, prefix: str = "", flag_prefix: str = "", exclude: Iterable[str] = ()) -> dict:
    """Add one flag per field of `cls` to `parser` (a parser or an argument group): `--field-name`, with
    `flag_prefix` in front. A nested config gets its own argument group when `parser` is a parser; the
    groups are returned by field name, for a command to add its own flags to. Flags that are not given are
    absent from the namespace: `args_to_dict` reads the given ones. `exclude` names dotted settings the
    command sets itself."""
    exclude = set(exclude)
    hints = _hints(cls)
    groups = {}
    for f in _fields(cls):
        key = prefix + f.name
        if key in exclude:
            continue
        sub = _nested(hints[f.name])
        if sub is not None:
            group = parser
            if isinstance(parser, argparse.ArgumentParser):
                group = parser.add_argument_group(f"{f.name}: {f.metadata.get('help', '')}".rstrip(": "))
            groups[f.name] = group
            add_arguments(group, sub, key + ".", flag_prefix + f.metadata.get("flag_prefix", ""), exclude)
            continue
        names = [f.name] + list(f.metadata.get("aliases", ()))
        flags = ["--" + flag_prefix + n.replace("_", "-") for n in names]
        kw: dict[str, Any] = {"dest": key, "default": argparse.SUPPRESS, "help": _help(f)}
        base, _ = _unwrap(hints[f.name])
        origin = typing.get_origin(base) or base
        if base is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif origin in (list, tuple) and f.metadata.get("nargs"):  # `--seeds 0 1 2`
            elem = (typing.get_args(base) or (str,))[0]
            kw.update(nargs=f.metadata["nargs"], type=elem, metavar={int: "N", float: "X"}.get(elem, "X"))
        elif origin in (list, tuple):
            kw.update(action="append", metavar=f.name.upper().rstrip("S") or "X")
        elif origin is dict:
            kw.update(type=_yaml_mapping, metavar="YAML")
        else:
            kw["type"] = base if base in (int, float, str) else str
            choices = _choices(f)
            if choices is not None:
                kw["choices"] = list(choices)
            else:
                kw["metavar"] = {int: "N", float: "X"}.get(base, f.name.upper())
        parser.add_argument(*flags, **kw)
    return groups


def _yaml_mapping(text: str) -> dict:
    import yaml

    value = yaml.safe_load(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a YAML mapping, e.g. '{{name: value}}'")
    return value


def add_command(sub, name: str, cls, func, help: str, quiet: bool = True):
    """The subcommand `name` of the `sub` subparsers, run by `func(args)` and described by its docstring: `cls`'s
    flags, then (with `quiet`) `-q/--quiet` for "no progress bar". Returns the parser and `add_arguments`'
    groups, for more flags."""
    import inspect

    parser = sub.add_parser(name, help=help, description=inspect.getdoc(func))
    groups = add_arguments(parser, cls)
    if quiet:
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=func)
    return parser, groups


def args_to_dict(cls, args: argparse.Namespace, prefix: str = "") -> dict[str, Any]:
    """The settings given as flags (from `add_arguments`), as a nested dict."""
    out: dict[str, Any] = {}
    for f in _fields(cls):
        key = prefix + f.name
        sub = _nested(_hints(cls)[f.name])
        if sub is not None:
            given = args_to_dict(sub, args, key + ".")
            if given:
                out[f.name] = given
        elif hasattr(args, key):
            out[f.name] = getattr(args, key)
    return out


def from_args(cls, args: argparse.Namespace, prefix: str = "", base: Mapping | None = None):
    """Config `cls` from `base` (e.g. a command's own settings) with the flags given on top."""
    return from_dict(cls, merge(base or {}, args_to_dict(cls, args, prefix)))


def script_main(cls, run, description: str, argv: Sequence[str] | None = None) -> int:
    """`python -m ...` for a script whose settings are the Config `cls`: parse `argv` into one and `run` it."""
    ap = argparse.ArgumentParser(description=description)
    add_arguments(ap, cls)
    run(from_args(cls, ap.parse_args(argv)))
    return 0


def field_help(cls, prefix: str = "") -> dict[str, str]:
    """Every setting of `cls` (dotted) and its help text, nested configs included."""
    out = {}
    for f in _fields(cls):
        sub = _nested(_hints(cls)[f.name])
        if sub is not None:
            out.update(field_help(sub, prefix + f.name + "."))
        else:
            out[prefix + f.name] = f.metadata.get("help", "")
    return out
