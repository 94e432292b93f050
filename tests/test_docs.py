"""The README and the docs/ pages point only at things that exist.

Checks over README.md and docs/*.md:

- every relative link, images included, resolves to a file or folder of the repository, and a `#anchor` into a
  markdown file to one of its headings (GitHub's rule: lowercase, punctuation removed, spaces to '-', a
  repeated heading gets -1, -2, ...). http(s) and other scheme links are not fetched.
- every path of this repository named in a code span (`retrieval/onnx_fold.py`, `tests/x.py::test_y`) exists, so
  a page does not go on naming a module after it is split or moved. Paths with placeholders (`<name>`, `*`) and
  other repositories' paths are not checked.
- every ```python block parses, and what it imports from this repository (`from agent.loop import Agent`,
  `import retrieval` then `retrieval.search`) is defined there, read from the source without importing it.
- every command in a ```bash block that runs `vimrag SUB ...` (also `.venv/bin/vimrag`, and `-m app.cli SUB`
  after `accelerate launch`) names a subcommand that exists, nested ones such as `synth questions` included,
  and only `--flags` that the subcommand's --help lists. The parser is built in-process (`app.cli.build_parser`),
  once. Line continuations and `# comments` are handled as the shell does; other programs' flags (accelerate,
  vllm, milvus-lite) are not checked. `python -m MODULE` of this repository must name a module that exists, and
  `scripts/...` a script that exists.

Each check has a test that feeds it a broken link, a moved module, a missing name or a made-up flag and asserts
that it is reported.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
OUR_PACKAGES = {"agent", "app", "assets", "eval", "memory_graph", "retrieval", "rl"}
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_SRC = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"", re.I)
INLINE_CODE = re.compile(r"`+[^`]*`+")
OPERATORS = {"|", "||", "&", "&&", ";", ";;", "(", ")"}
REPO_PATH = re.compile(r"`((?:agent|app|assets|docs|eval|memory_graph|retrieval|rl|scripts|tests)/[\w./-]*)(?:::\w+)?`")


def doc_pages(repo: Path = REPO) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


# ---- links ----------------------------------------------------------------------------------------------------


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps only its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        a = anchor(m.group(2))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def link_problems(page: Path, repo: Path = REPO) -> list[str]:
    problems = []
    rel = page.relative_to(repo)
    for n, line in prose_lines(page.read_text(encoding="utf-8")):
        line = INLINE_CODE.sub("", line)
        for target in LINK.findall(line) + HTML_SRC.findall(line):
            if re.match(r"^[a-zA-Z][\w+.-]*:", target):  # http(s), mailto, ...: not fetched
                continue
            path_part, _, frag = target.partition("#")
            path_part = unquote(path_part.split("?")[0])
            dest = (page.parent / path_part).resolve() if path_part else page
            if not dest.exists():
                problems.append(f"{rel}:{n}: links to {target!r}, which does not exist")
                continue
            if frag and dest.suffix == ".md" and dest.is_file() and frag.lower() not in anchors(dest):
                problems.append(f"{rel}:{n}: links to {target!r}, but {dest.name} has no heading with that anchor")
    return problems


def path_problems(page: Path, repo: Path = REPO) -> list[str]:
    rel = page.relative_to(repo)
    return [
        f"{rel}:{n}: names `{path}`, which does not exist"
        for n, line in prose_lines(page.read_text(encoding="utf-8"))
        for path in REPO_PATH.findall(line)
        if not (repo / path).exists()
    ]


# ---- python snippets -----------------------------------------------------------------------------------------


def fenced_blocks(text: str, lang: str) -> list[tuple[int, str]]:
    """(first line number, body) of every fenced block in the language."""
    out, body, start, open_lang = [], [], 0, None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if FENCE.match(stripped):
            if open_lang is None:
                open_lang, start, body = stripped.lstrip("`~").strip().lower(), n + 1, []
            else:
                if open_lang == lang:
                    out.append((start, "\n".join(body)))
                open_lang = None
            continue
        if open_lang is not None:
            body.append(line)
    return out


def module_file(module: str, repo: Path) -> Path | None:
    base = repo.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def defines(module: str, name: str, repo: Path) -> bool:
    path = module_file(module, repo)
    if path is None:
        return False
    return name in top_level_names(path) or (path.name == "__init__.py" and module_file(f"{module}.{name}", repo))


def python_problems(text: str, where: str = "", repo: Path = REPO) -> list[str]:
    problems = []
    for start, code in fenced_blocks(text, "python"):
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            problems.append(f"{where}:{start + (e.lineno or 1) - 1}: the python block does not parse: {e.msg}")
            continue
        modules = {}  # `import retrieval` -> its attributes are checked too
        for node in ast.walk(tree):
            line = f"{where}:{start + getattr(node, 'lineno', 1) - 1}"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OUR_PACKAGES:
                if module_file(node.module, repo) is None:
                    problems.append(f"{line}: no module {node.module} in the repository")
                    continue
                problems += [
                    f"{line}: {node.module} defines no {a.name}"
                    for a in node.names
                    if not defines(node.module, a.name, repo)
                ]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in OUR_PACKAGES:
                        if module_file(a.name, repo) is None:
                            problems.append(f"{line}: no module {a.name} in the repository")
                        else:
                            modules[a.asname or a.name] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                module = modules[node.value.id]
                if not defines(module, node.attr, repo):
                    problems.append(f"{where}:{start + node.lineno - 1}: {module} defines no {node.attr}")
    return problems


# ---- commands -------------------------------------------------------------------------------------------------


def bash_commands(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) of every ```bash block, continuations joined, comments cut."""
    out, in_bash, pending, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if FENCE.match(stripped):
            in_bash = not in_bash and stripped.lstrip("`~").strip().lower() in ("bash", "sh", "shell", "console")
            pending = ""
            continue
        if not in_bash:
            continue
        code = strip_comment(line)
        if not pending:
            start = n
        if code.rstrip().endswith("\\"):
            pending += code.rstrip()[:-1] + " "
            continue
        logical = (pending + code).strip()
        pending = ""
        if logical:
            out.append((start, logical))
    return out


def strip_comment(line: str) -> str:
    """The line up to a `#` that starts a word outside quotes, as the shell reads it."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                continue
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def split_commands(logical: str) -> list[list[str]]:
    lex = shlex.shlex(logical, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""
    commands, current = [], []
    for tok in lex:
        if tok in OPERATORS:
            commands.append(current)
            current = []
        else:
            current.append(tok)
    commands.append(current)
    return [c for c in commands if c]


def vimrag_args(tokens: list[str]) -> list[str] | None:
    """The arguments after `vimrag` or `-m app.cli`, or None when the command runs something else."""
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):  # VAR=value before the command
        tokens = tokens[1:]
    if not tokens:
        return None
    if tokens[0] == "vimrag" or tokens[0].endswith("/vimrag"):
        return tokens[1:]
    for i in range(len(tokens) - 1):
        if tokens[i] == "-m" and tokens[i + 1] == "app.cli":
            return tokens[i + 2 :]
    return None


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def help_flags(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings the parser's --help lists."""
    return {o for a in parser._actions if a.help is not argparse.SUPPRESS for o in a.option_strings}


def flag_values(parser: argparse.ArgumentParser, flag: str) -> int | None:
    """How many values the flag takes: 0, a count, or None for 'any' (nargs ?, * or +; a flag --help lacks)."""
    action = parser._option_string_actions.get(flag)
    if action is None or action.nargs in ("?", "*", "+", argparse.REMAINDER):
        return None
    return 1 if action.nargs is None else int(action.nargs)


def args_problems(args: list[str], root: argparse.ArgumentParser) -> list[str]:
    """What in `vimrag ARGS` no parser knows: a subcommand, or a --flag its subcommand's --help does not list."""
    parser, path, problems, values = root, ["vimrag"], [], 0
    for tok in args:
        if tok == "--":
            return problems
        if tok.startswith("--"):
            flag, eq, _ = tok.partition("=")
            if flag not in help_flags(parser):
                problems.append(f"`{' '.join(path)}` has no {flag} in its --help")
            n = flag_values(parser, flag)
            values = 0 if eq else (1 if n is None else n)  # an unknown or open-ended flag: one value, if any
            continue
        if tok.startswith("-") and len(tok) > 1:
            values = 0 if len(tok) > 2 else (flag_values(parser, tok) or 0)
            continue
        if values:
            values -= 1
            continue
        subs = subparsers(parser)
        if subs is None:
            continue  # a positional argument
        if tok not in subs.choices:
            problems.append(f"`{' '.join(path)}` has no subcommand {tok!r} (it has {', '.join(subs.choices)})")
            return problems
        parser = subs.choices[tok]
        path.append(tok)
    if subparsers(parser) is not None and not {"-h", "--help"} & set(args):
        problems.append(f"`{' '.join(path)}` is given no subcommand")
    return problems


def module_exists(module: str, repo: Path) -> bool:
    base = repo.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()


def command_problems(text: str, root: argparse.ArgumentParser, where: str = "", repo: Path = REPO) -> list[str]:
    problems = []
    for n, logical in bash_commands(text):
        for tokens in split_commands(logical):
            args = vimrag_args(tokens)
            if args is not None:
                problems += [f"{where}:{n}: {p}: {logical[:100]}" for p in args_problems(args, root)]
                continue
            prog = tokens[0] if not re.match(r"^[A-Za-z_]\w*=", tokens[0]) else None
            for i in range(len(tokens) - 1):
                if tokens[i] == "-m" and tokens[i + 1].split(".")[0] in OUR_PACKAGES:
                    if not module_exists(tokens[i + 1], repo):
                        problems.append(f"{where}:{n}: no module {tokens[i + 1]} in the repository: {logical[:100]}")
            if prog and re.match(r"^(\./)?scripts/", prog) and not (repo / prog).is_file():
                problems.append(f"{where}:{n}: no script {prog}: {logical[:100]}")
    return problems


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    from app.cli import build_parser

    return build_parser()


# ---- the checks on the real pages ------------------------------------------------------------------------------


def test_every_relative_link_resolves():
    problems = [p for page in doc_pages() for p in link_problems(page)]
    assert problems == [], "\n".join(problems)


def test_every_repository_path_named_exists():
    problems = [p for page in doc_pages() for p in path_problems(page)]
    assert problems == [], "\n".join(problems)


def test_every_python_snippet_imports_what_exists():
    problems = [p for page in doc_pages() for p in python_problems(page.read_text("utf-8"), page.name)]
    assert problems == [], "\n".join(problems)


def test_every_vimrag_command_uses_existing_subcommands_and_flags(parser):
    problems, checked = [], 0
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        checked += sum(vimrag_args(t) is not None for _, line in bash_commands(text) for t in split_commands(line))
        problems += command_problems(text, parser, str(page.relative_to(REPO)))
    assert checked >= 40, f"only {checked} vimrag commands found in the docs: is the command parsing broken?"
    assert problems == [], "\n".join(problems)


# ---- each check can fail ---------------------------------------------------------------------------------------


def test_the_link_check_reports_missing_files_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "pic.png").write_bytes(b"")
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Retrieval, exact (v2)\n\n## Notes\n## Notes\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "![ok](pic.png) ![gone](missing.png) [ok](docs/page.md#retrieval-exact-v2) [dup](docs/page.md#notes-1)\n"
        "[bad anchor](docs/page.md#retrieval) [gone page](docs/gone.md) [self](#a-readme) [web](https://x.invalid)\n"
        "`[in code](nowhere.md)` [`code as the text`](docs/gone-too.md)\n"
        "```bash\n[in a block](nowhere.md)\n```\n"
        "# A README\n"
    )
    found = link_problems(readme, tmp_path)
    assert [p.split("'")[1] for p in found] == [
        "missing.png",
        "docs/page.md#retrieval",
        "docs/gone.md",
        "docs/gone-too.md",
    ], found
    assert "has no heading" in found[1] and "does not exist" in found[2]


def test_the_path_check_reports_a_module_that_moved(tmp_path):
    (tmp_path / "retrieval").mkdir()
    (tmp_path / "retrieval" / "ingest.py").write_text("")
    page = tmp_path / "README.md"
    page.write_text(
        "Indexing is `retrieval/ingest.py`; sharding `retrieval/sharded.py`, proved by `tests/test_x.py::test_y`.\n"
        "Placeholders `agent/protocols/<name>.py`, `rl/configs/*.yaml` and `VRAG-RL/scripts/x.py` are not checked.\n"
    )
    found = path_problems(page, tmp_path)
    assert [p.split("`")[1] for p in found] == ["retrieval/sharded.py", "tests/test_x.py"], found


def test_the_python_check_reports_a_moved_class_and_a_missing_function(tmp_path):
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "__init__.py").write_text("from agent.settings import AgentConfig\n")
    (tmp_path / "agent" / "loop.py").write_text("class Agent:\n    pass\n\n\nLIMIT: int = 3\n")
    (tmp_path / "agent" / "settings.py").write_text("class AgentConfig:\n    pass\n")
    text = "\n".join(
        [
            "```python",
            "from agent.loop import Agent, LIMIT",
            "from agent import AgentConfig, settings",
            "from agent.loop import Runner",
            "from agent.gone import Thing",
            "import agent.loop",
            "import agent",
            "agent.search('q')",
            "```",
            "```python",
            "this is not python(",
            "```",
        ]
    )
    found = python_problems(text, "README.md", tmp_path)
    assert found[:3] == [
        "README.md:4: agent.loop defines no Runner",
        "README.md:5: no module agent.gone in the repository",
        "README.md:8: agent defines no search",
    ], found[:3]
    assert len(found) == 4 and found[3].startswith("README.md:11: the python block does not parse"), found


def test_the_command_check_reports_made_up_flags_and_subcommands(parser, tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "demo.sh").write_text("")
    text = "\n".join(
        [
            "```bash",
            "vimrag index corpus/ --index ./idx --embedder minilm     # --not-checked in a comment",
            "VIMRAG_X=1 .venv/bin/vimrag search 'q # not a comment' --index ./idx --made-up 3",
            "vimrag synth questions --corpus d/ \\",
            "    --n 3 --made-up-too",
            "accelerate launch --multi_gpu -m app.cli train --config c.yaml --no-such-flag=1",
            "vimrag frobnicate --index ./idx",
            "vimrag synth --corpus d/",
            "python -m eval.no_such_module && ./scripts/demo.sh && scripts/gone.sh",
            "```",
            "```python",
            "vimrag ask --not-bash",
            "```",
        ]
    )
    found = command_problems(text, parser, "README.md", tmp_path)
    expected = [
        ("README.md:3", "`vimrag search` has no --made-up"),
        ("README.md:4", "`vimrag synth questions` has no --made-up-too"),
        ("README.md:6", "`vimrag train` has no --no-such-flag"),
        ("README.md:7", "`vimrag` has no subcommand 'frobnicate'"),
        ("README.md:8", "`vimrag synth` has no --corpus"),
        ("README.md:8", "`vimrag synth` is given no subcommand"),
        ("README.md:9", "no module eval.no_such_module"),
        ("README.md:9", "no script scripts/gone.sh"),
    ]
    assert len(found) == len(expected), "\n".join(found)
    for problem, (where, what) in zip(found, expected):
        assert problem.startswith(where + ":") and what in problem, problem


def test_anchors_follow_githubs_rule():
    assert anchor("Protocols, exact to the published code") == "protocols-exact-to-the-published-code"
    assert anchor("`vrag`: VRAG-RL's layout") == "vrag-vrag-rls-layout"
    assert anchor("Past one machine: the index on Milvus") == "past-one-machine-the-index-on-milvus"
    assert anchor("Indexing on several GPUs (data-parallel)") == "indexing-on-several-gpus-data-parallel"
