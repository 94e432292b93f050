"""The import layers of DESIGN.md section 3, enforced: `app -> eval, rl -> agent -> memory_graph, retrieval`.

Every import in every module of the packages (imports inside functions included, relative ones resolved) is
checked against the arrows below; a back edge fails with its file, line and import. Inside each package,
imports point one way too: `cycles_in` fails on any circle of modules importing each other, lazy imports
inside functions included (they hide a circle, they do not remove it). Only imports under `if TYPE_CHECKING:`
are left out, since they never run. Tests are not checked: they may import any layer. `check_tree` and
`cycles_in` take the root to check, so the checkers themselves are tested on small trees under tmp_path.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Which of our packages each package may import (besides itself). rl -> eval is the one sideways arrow:
# rewards reuse eval's metrics and datasets so training optimizes what evaluation measures (STYLE.md 5);
# eval never imports rl. assets is the bundled corpus and its generator, used by the demo and the benchmarks.
ALLOWED = {
    "app": {"eval", "rl", "agent", "memory_graph", "retrieval", "assets"},
    "eval": {"agent", "memory_graph", "retrieval", "assets"},
    "rl": {"eval", "agent", "memory_graph", "retrieval"},
    "agent": {"memory_graph", "retrieval"},
    "memory_graph": set(),
    "retrieval": set(),
    "assets": set(),
}
# Third-party packages only some layers may import: the core never imports gradio (DESIGN.md section 3).
RESERVED = {"gradio": {"app"}}


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node: ast.AST, module: list[str], is_package: bool) -> list[str]:
    """The absolute module names an import statement names (relative ones resolved against `module`)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        return [node.module or ""]
    base = module if is_package else module[:-1]
    base = base[: len(base) - (node.level - 1)]
    if node.module:
        return [".".join(base + [node.module])]
    return [".".join(base + [a.name]) for a in node.names]  # `from .. import x`: x is a module


def _forbidden(package: str, top: str) -> str | None:
    """Why `package` may not import the top-level module `top`, or None when it may."""
    if top == package:
        return None
    if top in ALLOWED and top not in ALLOWED[package]:
        may = sorted(ALLOWED[package])
        return f"{package} may import only {may}" if may else f"{package} may import none of ours"
    if top in RESERVED and package not in RESERVED[top]:
        return f"only {sorted(RESERVED[top])} may import {top}"
    return None


def check_tree(root: Path) -> tuple[list[str], int]:
    """(one line per forbidden import, number of modules read) for the packages of ALLOWED under `root`."""
    errors, read = [], 0
    for package in sorted(ALLOWED):
        for path in sorted((root / package).rglob("*.py")):
            read += 1
            module = _module_name(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                for name in _imported(node, module, path.name == "__init__.py"):
                    why = _forbidden(package, name.split(".")[0])
                    if why:
                        errors.append(f"{path.relative_to(root)}:{node.lineno}: imports {name} ({why})")
    return errors, read


def _runtime_imports(tree: ast.AST):
    """Every import statement in `tree` but those under `if TYPE_CHECKING:` (annotations only; never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
            yield node


def _modules(root: Path, package: str) -> dict[str, Path]:
    return {".".join(_module_name(p, root)): p for p in sorted((root / package).rglob("*.py"))}


def _edges(root: Path, package: str) -> dict[str, dict[str, int]]:
    """module -> {module of the same package it imports: line}. `from pkg import sub` names the submodule
    `pkg.sub` (and `pkg` itself only for names that are not modules)."""
    mods = _modules(root, package)
    edges: dict[str, dict[str, int]] = {m: {} for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _runtime_imports(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                (base,) = _imported(
                    ast.ImportFrom(module=node.module, names=[], level=node.level),
                    mod.split("."),
                    path.name == "__init__.py",
                ) or [""]
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = [t for t in subs if t in mods]
                if len(targets) < len(subs):
                    targets.append(base)
            else:
                targets = [a.name for a in node.names]
            for t in targets:
                if t in mods and t != mod:
                    edges[mod].setdefault(t, node.lineno)
    return edges


def cycles_in(root: Path) -> list[str]:
    """One line per circle of imports inside a package, each step with its file and line."""
    out = []
    for package in sorted(ALLOWED):
        edges = _edges(root, package)
        done: set[str] = set()
        for start in sorted(edges):
            # depth-first from each module; a path that comes back to a module on it is a circle
            stack = [(start, [start])]
            while stack:
                mod, path = stack.pop()
                for nxt in sorted(edges[mod], reverse=True):
                    if nxt == start:
                        circle = path + [start]
                        key = frozenset(circle)
                        if key not in done:
                            done.add(key)
                            steps = [
                                f"{_modules(root, package)[a].relative_to(root)}:{edges[a][b]} imports {b}"
                                for a, b in zip(circle, circle[1:])
                            ]
                            out.append(
                                f"cycle inside {package}: " + " -> ".join(circle) + " (" + "; ".join(steps) + ")"
                            )
                    elif nxt not in path and nxt > start:  # each circle is found from its smallest module
                        stack.append((nxt, path + [nxt]))
    return out


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_code_has_no_back_edge():
    errors, read = check_tree(REPO)
    assert read >= 60, f"read only {read} modules under {REPO}: the checker is not looking at the code"
    assert not errors, "imports against DESIGN.md's layers:\n" + "\n".join(errors)


def test_a_back_edge_fails_with_file_line_and_import(tmp_path):
    root = _write(
        tmp_path,
        {
            "agent/__init__.py": "",
            "agent/loop.py": "from memory_graph.graph import Graph\n",  # an allowed arrow
            "memory_graph/__init__.py": "",
            "memory_graph/draw.py": '"""x"""\n\n\ndef f():\n    from agent.loop import Agent\n    return Agent\n',
            "eval/__init__.py": "",
            "eval/demo.py": "import json\nimport app.web\n",
            "retrieval/sub/__init__.py": "from ... import rl\n",  # relative, resolved to the top level
        },
    )
    errors, read = check_tree(root)
    assert read == 7
    assert errors == [
        "eval/demo.py:2: imports app.web (eval may import only ['agent', 'assets', 'memory_graph', 'retrieval'])",
        "memory_graph/draw.py:5: imports agent.loop (memory_graph may import none of ours)",
        "retrieval/sub/__init__.py:1: imports rl (retrieval may import none of ours)",
    ], errors


def test_relative_imports_and_gradio_are_checked(tmp_path):
    root = _write(
        tmp_path,
        {
            "retrieval/__init__.py": "",
            "retrieval/sub/__init__.py": "from . import index\nfrom .. import store\n",
            "retrieval/sub/index.py": "from ..store import Store\n",
            "agent/tools.py": "import gradio as gr\n",
            "app/web.py": "import gradio\nfrom rl import trainer\n",
        },
    )
    errors, _ = check_tree(root)
    assert errors == ["agent/tools.py:1: imports gradio (only ['app'] may import gradio)"], errors
    (root / "retrieval/sub/index.py").write_text("from agent.loop import Agent\nfrom ...agent import tools\n")
    errors, _ = check_tree(root)
    assert [e.split(" (")[0] for e in errors] == [
        "agent/tools.py:1: imports gradio",
        "retrieval/sub/index.py:1: imports agent.loop",
        "retrieval/sub/index.py:2: imports agent",
    ], errors


def test_no_package_imports_itself_in_a_circle():
    cycles = cycles_in(REPO)
    assert not cycles, "modules that import each other in a circle; give the imports one direction:\n" + "\n".join(
        cycles
    )


def test_a_circle_is_found_lazy_imports_included_and_type_checking_left_out(tmp_path):
    root = _write(
        tmp_path,
        {
            "agent/__init__.py": "",
            "agent/actions.py": "from agent.protocols import resolve\n",
            "agent/protocols/__init__.py": "def _load():\n    from agent.protocols.base import Protocol\n",
            "agent/protocols/base.py": "from agent import actions\n",
            "agent/state.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent.loop import Agent\n",
            "agent/loop.py": "from agent.state import EpisodeState\n",
            "retrieval/__init__.py": "from retrieval.units import Unit\n",
            "retrieval/units.py": "def f():\n    from retrieval import loaders\n",  # the package, not a circle
            "retrieval/loaders.py": "",
        },
    )
    cycles = cycles_in(root)
    assert cycles == [
        "cycle inside agent: agent.actions -> agent.protocols -> agent.protocols.base -> agent.actions "
        "(agent/actions.py:1 imports agent.protocols; agent/protocols/__init__.py:2 imports agent.protocols.base; "
        "agent/protocols/base.py:1 imports agent.actions)"
    ], cycles
    (root / "agent/actions.py").write_text("import json\n")  # the circle broken: nothing left to report
    assert cycles_in(root) == []
