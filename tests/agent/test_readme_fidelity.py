"""The README's fidelity tables claim "same" only where a test proves it.

In the README section "Protocols, exact to the published code", every line that says "same" must be a table
row whose last cell names a test as `tests/...py::test_name`, and that test must exist (it runs in this suite,
so a failing one fails CI). A "same" anywhere else in the section, or a row naming a test that is not there,
fails with the line.
"""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Protocols, exact to the published code"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def fidelity_section(readme: str) -> list[str]:
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    return readme[start : end if end >= 0 else len(readme)].splitlines()


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def problems(lines: list[str], repo: Path) -> list[str]:
    out = []
    for line in lines:
        refs = TEST_REF.findall(line)
        for file, name in refs:
            path = repo / file
            if not path.is_file() or name not in defined_tests(path):
                out.append(f"names a test that does not exist ({file}::{name}): {line[:120]}")
        if not re.search(r"\bsame\b", line, re.I):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")] if line.lstrip().startswith("|") else []
        if len(cells) < 4 or not TEST_REF.search(cells[-1]):
            out.append(f"says 'same' without naming its test in the row's last cell: {line[:120]}")
    return out


def test_every_same_names_an_existing_test():
    lines = fidelity_section((REPO / "README.md").read_text(encoding="utf-8"))
    rows = [ln for ln in lines if ln.startswith("|") and re.search(r"\|\s*same", ln)]
    assert len(rows) >= 20, f"found only {len(rows)} 'same' rows: is {SECTION!r} still the section's title?"
    assert problems(lines, REPO) == []


def test_the_check_catches_a_claim_without_a_test_and_a_missing_test(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_x.py").write_text("def test_real():\n    assert True\n")
    lines = [
        "| part | code | here | proved by |",
        "| action | the first tag | same | `tests/test_x.py::test_real` |",
        "| search | top 10 | same | (none) |",
        "| crop | the box | same | `tests/test_x.py::test_gone` |",
        "Prose that says the same thing.",
    ]
    found = problems(lines, tmp_path)
    assert [p.split(" (")[0].split(":")[0] for p in found] == [
        "says 'same' without naming its test in the row's last cell",
        "names a test that does not exist",
        "says 'same' without naming its test in the row's last cell",
    ], found
