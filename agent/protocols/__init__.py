"""The agent's protocols, one module each, behind one registry.

- `vimrag` (vimrag.py): DAG memory in the VimRAG demo's exact layout; the default. Its tools and prompts are in
  vimrag_prompts.py, the making of its pictures in vimrag_pictures.py.
- `vrag` (vrag.py): VRAG-RL's tags in its exact layout, to run the released checkpoint as trained.
- `react` (react.py): the same tools as vimrag in a linear, growing history (a baseline).
- `vanilla` (vanilla.py): the top-k pages in context and one answer (a baseline).

Adding a protocol means adding one module here that defines a `Protocol` subclass with a `name`; the
registry finds it. Nothing outside this package switches on a protocol's name: callers ask the registry
(`get(name)`) and read the class's attributes (tools, capabilities, limits).

Imports inside agent/ point one way: the parser (agent/actions.py, agent/validate.py), the episode state and
the toolbox sit below this package and never import it (they take a protocol class or object, not a name);
the protocol modules import them; the loop and `AgentConfig` (agent/settings.py) sit above. `parse` and
`validate` here are the parser's functions taking a protocol's name as well. The protocol modules load on
first use of the registry, so importing `schema` alone stays cheap.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

_REGISTRY: dict[str, type] = {}


def _load() -> dict[str, type]:
    if not _REGISTRY:
        from agent.protocols.base import Protocol

        found = {}
        for mod in pkgutil.iter_modules(__path__):
            if mod.name in ("base", "schema"):
                continue
            module = importlib.import_module(f"{__name__}.{mod.name}")
            for obj in vars(module).values():
                if (
                    isinstance(obj, type)
                    and issubclass(obj, Protocol)
                    and obj.name
                    and obj.__module__ == module.__name__
                ):
                    found[obj.name] = obj
        _REGISTRY.update(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))
    return _REGISTRY


def names() -> tuple[str, ...]:
    """The registered protocols, in menu order.

    >>> names()
    ('vimrag', 'vrag', 'react', 'vanilla', 'memagent', 'mem1', 'fold')
    """
    return tuple(_load())


def get(name: str):
    """The protocol class registered under `name`; a ValueError naming the choices otherwise."""
    reg = _load()
    if name not in reg:
        raise ValueError(f"unknown protocol {name!r}; choose one of {', '.join(reg)}")
    return reg[name]


def resolve(protocol: Any):
    """The protocol behind `protocol`: a registered name, or an object with `tools` and `syntax` (returned as is)."""
    return get(protocol) if isinstance(protocol, str) else protocol


def parse(text: str, protocol: Any, ctx=None):
    """agent.actions.parse, with `protocol` a registered name or a protocol class or object."""
    from agent.actions import parse as parse_reply

    return parse_reply(text, resolve(protocol), ctx)


def validate(name: str, args: Any, protocol: Any, ctx=None) -> list[str]:
    """agent.validate.validate, with `protocol` a registered name or a protocol class or object."""
    from agent.validate import validate as problems

    return problems(name, args, resolve(protocol), ctx)


def make_protocol(name: str, tools, **options: Any):
    return get(name)(tools, **options)


def tool_kinds() -> dict[str, str]:
    """Every tool name of every protocol -> its kind (search, memorize, crop, scale, answer).

    >>> sorted(n for n, k in tool_kinds().items() if k == "search")
    ['add_search_node', 'search']
    """
    return {n: t["x-kind"] for cls in _load().values() for n, t in cls.tools.items()}


def tools_of_kind(kind: str) -> tuple[str, ...]:
    return tuple(n for n, k in tool_kinds().items() if k == kind)


def read_prompt_file(path: str | Path, protocol: str, role: str = "") -> dict[str, str]:
    """The prompts a user supplies for `protocol`, as AgentConfig.prompts.

    A .json or .yaml/.yml file maps prompt names to texts (e.g. vimrag's system, user and summary). Any other
    file is one prompt, used as the one named by `role` (default: the protocol's main prompt: the user turn
    for vrag, the system message otherwise). Unknown names and missing placeholders are errors that say
    which names and placeholders the protocol has.
    """
    cls = get(protocol)
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(
            f"prompt file {p} does not exist; give a text file, or JSON/YAML mapping prompt "
            f"names ({', '.join(cls.PROMPTS)}) to texts"
        )
    raw = p.read_text(encoding="utf-8")
    if p.suffix.lower() in (".json", ".yaml", ".yml"):
        if role:
            raise ValueError(f"--prompt-role applies to a plain text prompt file; {p.name} already names its prompts")
        if p.suffix.lower() == ".json":
            data = json.loads(raw)
        else:
            import yaml

            data = yaml.safe_load(raw)
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f'prompt file {p} must map prompt names to texts, e.g. {{"system": "..."}}')
        prompts = dict(data)
    else:
        prompts = {role or cls.main_prompt: raw}
    return check_prompts(protocol, prompts, str(p))


def check_prompts(protocol: str, prompts: dict[str, str], where: str = "the prompts") -> dict[str, str]:
    cls = get(protocol)
    unknown = sorted(set(prompts) - set(cls.PROMPTS))
    if unknown:
        raise ValueError(
            f"{where}: protocol {protocol} has no prompt(s) {unknown}; its prompts are {', '.join(cls.PROMPTS)}"
        )
    for key, text in prompts.items():
        missing = [ph for ph in cls.PLACEHOLDERS.get(key, ()) if "{" + ph + "}" not in text]
        if missing:
            raise ValueError(
                f"{where}: the {protocol} {key} prompt must contain "
                f"{', '.join('{' + m + '}' for m in missing)}, where the protocol puts "
                f"{'them' if len(missing) > 1 else 'it'}"
            )
    return prompts
