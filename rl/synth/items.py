"""A synthesized question with its answer, evidence, type, verdicts and difficulty; and the rows it is written as.

An item is kept only when every check passed; a rejected item keeps its verdicts, so the dataset card can say
why each was dropped. `to_row` is our JSONL eval schema (eval/datasets.py `jsonl:`), which `vimrag eval` and
`vimrag train --dataset jsonl:` read; `vrag_row` is a row of VRAG-RL's training parquet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_graph.record import Record

CHECKS = ("grounded", "needs_evidence", "unambiguous", "not_duplicate")


@dataclass
class Item(Record):
    id: str
    question: str
    answer: list[str]  # acceptable answers; a list-format answer is one string "['a', 'b']"
    type: str  # text | table | chart | layout | multi-page | video
    evidence: list[dict[str, Any]]  # {"file", "page"} or {"file", "time": [start, end]}, one per hop
    answer_format: str = ""  # MMLongBench-Doc's Int | Float | Str | List
    hops: int = 1
    doc: str = ""  # the one document it is about (searched alone under --scope doc); "" for several
    source: str = ""  # who wrote it: "offline:<rule>" or "endpoint:<model>"
    sentence: str = ""  # the printed statement(s) it rests on
    slot: str = ""  # the sample it came from (pages or clip), for resuming
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # check -> {"ok", "reason"}
    difficulty: float | None = None  # a reference agent's pass rate over k samples

    @property
    def kept(self) -> bool:
        return all(self.verdicts.get(c, {}).get("ok") for c in CHECKS)

    @property
    def reason(self) -> str:
        """The failed check and why (the checks stop at the first that fails); empty for a kept item."""
        for c, v in self.verdicts.items():
            if not v.get("ok"):
                return f"{c}: {v.get('reason', '')}"
        missing = [c for c in CHECKS if c not in self.verdicts]
        return f"{missing[0]}: not checked" if missing else ""

    def verdict(self, check: str, ok: bool, reason: str) -> bool:
        self.verdicts[check] = {"ok": bool(ok), "reason": reason}
        return bool(ok)

    def to_row(self) -> dict[str, Any]:
        """The item in our JSONL eval schema."""
        row = {
            "id": self.id,
            "question": self.question,
            "answer": list(self.answer),
            "evidence": self.evidence,
            "answer_format": self.answer_format,
            "evidence_sources": [self.type],
            "question_type": self.type,
            "hops": self.hops,
            "source": self.source,
            "sentence": self.sentence,
        }
        if self.doc:
            row["doc"] = self.doc
        if self.difficulty is not None:
            row["difficulty"] = self.difficulty
        return row


# VRAG-RL's user prompt, quoted from VRAG-RL/scripts/hf_dataset_convert.py line 9 (the parquet's `prompt` column
# holds it with the question filled in).
VRAG_USER_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<search> query </search> and user will return the searched results. Every time you retrieve an image, you "
    "have the option to crop it to obtain a clearer view, the format for coordinates is <bbox>[x1, y1, x2, y2]"
    "</bbox>. You can search as many times as your want. If you find no further external knowledge needed, you "
    "can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>. Question: {question}"
)


def vrag_row(item: Item, index: int, split: str = "train", data_source: str = "vimrag_synth") -> dict[str, Any]:
    """One row of VRAG-RL's training parquet: the columns VRAG-RL/scripts/hf_dataset_convert.py lines 47-93
    write (`id`, `data_source`, `prompt` as one user message, `ability`, `reward_model` {style "rule",
    ground_truth}, `extra_info` {split, index, answer, question, content_type, reason_type, file_name,
    reference_page}). `file_name` is the document and `reference_page` its 1-based pages, as in VRAG-RL's
    examples/rag_dataset.json `meta_info`; a question over two documents names the first."""
    file_name = item.doc or (item.evidence[0]["file"] if item.evidence else "")
    pages = [int(e["page"]) for e in item.evidence if e.get("page") and e["file"] == file_name]
    answer = item.answer[0] if item.answer else ""
    return {
        "id": item.id,
        "data_source": data_source,
        "prompt": [{"role": "user", "content": VRAG_USER_PROMPT.replace("{question}", item.question)}],
        "ability": "math",  # the converter's constant, kept so verl's reward routing reads it unchanged
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {
            "split": split,
            "index": index,
            "answer": answer,
            "question": item.question,
            "content_type": item.type,
            "reason_type": "MultiHop" if item.hops > 1 else "SingleHop",
            "file_name": file_name,
            "reference_page": pages,
        },
    }
