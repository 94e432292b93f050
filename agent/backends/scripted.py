"""A scripted policy for tests and benchmarks: it replies with prepared outputs, one per step.

Each script entry is a string (sent as is) or a callable `(messages, view) -> str` that can look at the
episode state, e.g. to name the information id the last search returned. When the script runs out it
repeats its last entry, so a limit test needs only one entry. With `load_policy`, `model` may name a JSON
file holding a list of strings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Union

from agent.backends.base import Policy, PolicyConfig, PolicyError

Entry = Union[str, Callable[[list, Any], str]]


class ScriptedPolicy(Policy):
    name = "scripted"

    def __init__(
        self,
        config: PolicyConfig | None = None,
        script: list[Entry] | None = None,
        chunk: int = 16,
        patch: int = 28,
        is_vlm: bool = True,
        coords: str = "absolute",
    ) -> None:
        self.config = config or PolicyConfig(backend="scripted")
        if script is None and self.config.model:
            path = Path(self.config.model)
            if not path.is_file():
                raise PolicyError(f"scripted policy file {path} does not exist; give a JSON list of replies")
            script = json.loads(path.read_text())
        if not script:
            raise PolicyError("the scripted policy needs a non-empty script (a list of replies)")
        self.script = list(script)
        self.calls: list[list[dict]] = []  # the messages of every call, for assertions
        self.chunk = chunk
        self.patch = patch
        self.is_vlm = is_vlm
        self.coords = coords

    def describe(self) -> str:
        return f"scripted policy ({len(self.script)} replies)"

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str]:
        entry = self.script[min(len(self.calls), len(self.script) - 1)]
        self.calls.append(messages)
        text = entry(messages, view) if callable(entry) else entry
        for i in range(0, len(text), self.chunk):  # streamed in pieces, like a real backend
            yield text[i : i + self.chunk]
