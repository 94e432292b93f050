"""The protocol fidelity tables claim "same" only where a test proves it.

The tables live on their own page, docs/protocols.md ("Protocols, exact to the published code"; the README
links to it). On that page every line that says "same" must be a table row whose last cell names a test as
`tests/...py::test_name`, and that test must exist (it runs in this suite, so a failing one fails CI). A "same"
anywhere else on the page, or a row naming a test that is not there, fails with the line. A table row claiming
"same" on any other page (README.md, docs/*.md) is held to the same rule, so a copy of a table cannot escape it.
"""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "protocols.md"
TITLE = "# Protocols, exact to the published code"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
SAME_ROW = re.compile(r"^\|.*\|\s*same\b", re.I)


def fidelity_page(text: str) -> list[str]:
    """The page's lines; it must open with the tables' title, so a renamed or moved page fails loudly."""
    lines = text.splitlines()
    assert lines and lines[0] == TITLE, f"{PAGE.relative_to(REPO)} must open with {TITLE!r}"
    return lines


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
    lines = fidelity_page(PAGE.read_text(encoding="utf-8"))
    rows = [ln for ln in lines if ln.startswith("|") and re.search(r"\|\s*same", ln)]
    assert len(rows) >= 20, f"found only {len(rows)} 'same' rows in {PAGE.relative_to(REPO)}"
    assert problems(lines, REPO) == []


def test_same_rows_on_other_pages_name_their_tests_too():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    rows = [ln for p in pages if p != PAGE for ln in p.read_text(encoding="utf-8").splitlines() if SAME_ROW.match(ln)]
    assert problems(rows, REPO) == []


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
