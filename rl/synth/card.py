"""The outputs of `vimrag synth questions`, rewritten from its journal: questions.jsonl (our eval schema),
rejected.jsonl, the dataset card (card.md, card.json) and VRAG-RL's training parquet."""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from rl.synth.items import Item, vrag_row


def read_journal(out: Path) -> tuple[list[Item], list[dict[str, Any]]]:
    """The journal's items (kept and rejected, in slot order) and its rows."""
    from eval.runner import read_predictions

    rows = list(read_predictions(out / "journal.jsonl").values())
    return [Item.from_dict(r["item"]) for r in rows if r.get("item")], rows


def write_outputs(out: Path, progress: bool = True) -> dict[str, Any]:
    """questions.jsonl, rejected.jsonl, the card and the parquet, rewritten from the journal (and the
    difficulty a `vimrag synth difficulty` run measured, when there is one)."""
    items, rows = read_journal(out)
    diff_path = out / "difficulty.json"
    if diff_path.exists():
        rates = json.loads(diff_path.read_text()).get("pass_rate", {})
        for it in items:
            it.difficulty = rates.get(it.id)
    kept = [it for it in items if it.kept]
    rejected = [it for it in items if not it.kept]
    _write_jsonl(out / "questions.jsonl", [it.to_row() for it in kept])
    _write_jsonl(out / "rejected.jsonl", [it.to_dict() | {"reason": it.reason} for it in rejected])
    card = card_counts(kept, rejected, rows)
    parquet = write_parquet(out / "vrag_train.parquet", kept)
    card["parquet"] = parquet
    (out / "card.json").write_text(json.dumps(card, indent=1))
    (out / "card.md").write_text(card_markdown(card, kept, rejected))
    if progress:
        print(
            f"synth: {len(kept)} kept, {len(rejected)} rejected, {card['slots_without_draft']} slots without a draft; "
            f"{out / 'questions.jsonl'} and {out / 'card.md'}"
        )
    return card


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    os.replace(tmp, path)


def _bucket(d: float | None) -> str:
    if d is None:
        return "not measured"
    return "0 (unsolved)" if d == 0 else ("1 (solved)" if d == 1 else "between (learnable)")


def card_counts(kept: list[Item], rejected: list[Item], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kept": len(kept),
        "rejected": len(rejected),
        "slots": len(rows),
        "slots_without_draft": sum(1 for r in rows if not r.get("item")),
        "by_type": dict(Counter(it.type for it in kept).most_common()),
        "by_hops": dict(sorted(Counter(it.hops for it in kept).items())),
        "by_rule": dict(Counter(it.source for it in kept).most_common()),
        "by_difficulty": dict(Counter(_bucket(it.difficulty) for it in kept).most_common()),
        "rejected_by_check": dict(Counter(it.reason.split(":")[0] for it in rejected).most_common()),
        "rejected_by_reason": dict(Counter(_reason_kind(it.reason) for it in rejected).most_common(12)),
        "malformed_replies": sum(1 for r in rows if str(r.get("note", "")).startswith("malformed")),
        "documents": len({it.doc for it in kept if it.doc}),
    }


def _reason_kind(reason: str) -> str:
    """A reason without its particulars, for counting.

    >>> _reason_kind("unambiguous: report.pdf p.4, in the same document, answers '23%'")
    "unambiguous: a page, in the same document, answers '…'"
    >>> _reason_kind("not_duplicate: cosine 0.97 to layout-4e9d6aef82 'What is ...?', same answer")
    "not_duplicate: cosine N to an item '…', same answer"
    """
    r = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", reason)
    r = re.sub(r"[\w.-]+\.(?:pdf|png|jpe?g|mp4|mov|md|txt)(?: p\.\d+| #\d+| [\d:]+-[\d:]+)?", "a page", r)
    r = re.sub(r"\b(?:text|table|chart|layout|multi-page|video)-[0-9a-f]{10}\b", "an item", r)
    return re.sub(r"\d+(?:\.\d+)?", "N", r)[:100]


def card_markdown(card: dict[str, Any], kept: list[Item], rejected: list[Item], samples: int = 8) -> str:
    def table(title: str, counts: dict) -> str:
        rows = "\n".join(f"| {k} | {v} |" for k, v in counts.items())
        return f"| {title} | items |\n|---|---|\n{rows}\n"

    rng = random.Random(0)
    lines = [
        "# Synthesized questions: dataset card",
        "",
        f"{card['kept']} kept and {card['rejected']} rejected items from {card['slots']} sampled slots "
        f"({card['slots_without_draft']} gave no draft), over {card['documents']} documents. Every kept item passed "
        "all four checks (grounded, needs the evidence, unambiguous, not a near-duplicate); see rl/synth/checks.py.",
        "",
        table("type", card["by_type"]),
        table("hops", card["by_hops"]),
        table("writer rule", card["by_rule"]),
        table("difficulty (pass rate)", card["by_difficulty"]),
        table("rejected at check", card["rejected_by_check"]),
        table("rejection reason", card["rejected_by_reason"]),
        f"Parquet: {card.get('parquet')}",
        "",
        "## Sample kept items",
        "",
    ]
    for it in rng.sample(kept, min(samples, len(kept))):
        where = ", ".join(f"{e['file']} p.{e['page']}" if e.get("page") else e["file"] for e in it.evidence)
        lines.append(f"- **{it.question}** → {it.answer[0]} ({it.type}, {where}); from: “{it.sentence[:160]}”")
    lines += ["", "## Sample rejected items", ""]
    for it in rng.sample(rejected, min(samples, len(rejected))):
        lines.append(f"- {it.question} → {it.answer[0]}: *{it.reason[:200]}*")
    return "\n".join(lines) + "\n"


def write_parquet(path: Path, kept: list[Item]) -> str:
    """VRAG-RL's training parquet of the kept items; says why not when pyarrow is missing."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return "not written: pyarrow is missing (pip install 'vimrag[train]' or pip install pyarrow)"
    rows = [vrag_row(it, i) for i, it in enumerate(kept)]
    if not rows:
        return "not written: no kept items"
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    os.replace(tmp, path)
    return str(path)
