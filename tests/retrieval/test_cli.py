"""The `vimrag index` / `vimrag search` commands, run as a user would (in-process for speed)."""

import json

from app.cli import main


def test_index_then_search(mixed_corpus, tmp_path, capsys):
    idx = tmp_path / "idx"
    assert main(["index", str(mixed_corpus), "--index", str(idx), "-q"]) == 0
    out = capsys.readouterr().out
    assert "indexed 7 units from 4 files" in out
    assert main(["search", "robots shipped per quarter", "--index", str(idx), "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "aurora_annual_report_2025.pdf" in out and "[p.3]" in out
    assert main(["search", "battery", "--index", str(idx), "--json", "--modality", "video"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and hits[0]["unit"]["modality"] == "video" and hits[0]["unit"]["start"] == 0


def test_errors_are_one_line_and_nonzero(tmp_path, capsys):
    assert main(["search", "x", "--index", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no index at" in err and "vimrag index" in err
