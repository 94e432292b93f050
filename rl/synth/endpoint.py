"""The question writer and verifier behind any OpenAI-compatible VLM endpoint (vLLM, SGLang, transformers serve).

The writer is shown the sampled pages (their images as data URLs, and their text) and replies with one JSON
object: the question, its answer, its type, its hop count and the pages it rests on, or a reason to skip. The
verifier is the same kind of endpoint, asked three things: whether the evidence alone supports the answer (it
sees only the evidence), what it would answer closed-book, and what another page answers.

A reply that is not the JSON asked for is not an error of the run: the draft is rejected with the reply quoted
(`MalformedReply`), and the run goes on. An endpoint that cannot be reached fails before the first page, with
the URL and the fix (eval/judge.py's client, its retries and messages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agent.backends.openai_compat import image_data_url
from rl.synth.offline import TYPES, Draft

WRITER_SYSTEM = (
    "You write questions for a document question-answering benchmark. Each question must be answerable from "
    "the pages you are shown and only from them, have one short answer printed or drawn on those pages, and "
    "read as a person would ask it. Reply with one JSON object and nothing else."
)
WRITER_USER = """{pages}

Write one question about {what}. Reply with JSON only, in this form:
{{"question": "...", "answer": "...", "type": "text|table|chart|layout|multi-page|video", "hops": 1,
 "evidence": [{{"file": "NAME", "page": N}}]}}
`evidence` lists the pages the answer needs (both pages for a two-page question; "time": [start, end] for a video
clip instead of "page"). If these pages hold nothing worth asking, reply {{"skip": "why"}}."""
GROUNDED_USER = """{pages}

Question: {question}
Proposed answer: {answer}

Using only the evidence above, is the proposed answer correct and fully supported by it? Reply only yes or no."""
CLOSED_USER = "Answer in a few words, from what you know, without any document: {question}"
RIVAL_USER = """{pages}

Question: {question}

If this evidence answers the question, reply with the short answer only. If it does not, reply NONE."""


class MalformedReply(ValueError):
    """The writer's reply was not the JSON object asked for."""


def page_parts(pages: list[dict[str, Any]], images: bool, max_chars: int = 3000) -> list[dict[str, Any]]:
    """OpenAI content parts for the evidence: per page its citation, its image (a clip: its keyframes) and its
    text."""
    parts: list[dict[str, Any]] = []
    for p in pages:
        parts.append({"type": "text", "text": f"[{p['cite']}]"})
        for im in (p.get("images") or []) if images else []:
            # Qwen2.5-VL's default budget, 1280·28² pixels
            parts.append({"type": "image_url", "image_url": {"url": image_data_url(im, 1_003_520, "jpeg")}})
        text = (p.get("text") or "").strip()
        parts.append({"type": "text", "text": f"Text of {p['cite']}:\n{text[:max_chars] or '(no text layer)'}"})
    return parts


def _with(parts: list[dict[str, Any]], template: str, **kw: Any) -> list[dict[str, Any]]:
    head, tail = template.split("{pages}")
    out = [{"type": "text", "text": head.format(**kw)}] if head.strip() else []
    return out + parts + [{"type": "text", "text": tail.format(**kw)}]


def parse_draft(reply: str, pages: list[dict[str, Any]], model: str) -> Draft | None:
    """The writer's JSON reply as a Draft; None when it chose to skip; MalformedReply when it is not the JSON."""
    from agent.lenient_json import ParseError, loads

    text = re.sub(r"<think>.*?</think>", "", reply or "", flags=re.S).strip()
    start = text.find("{")
    try:
        obj = loads(text[start:]) if start >= 0 else None
    except ParseError as e:
        raise MalformedReply(f"not JSON ({e}): {reply[:200]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedReply(f"no JSON object in the reply: {reply[:200]!r}")
    if "skip" in obj and "question" not in obj:
        return None
    q, a = str(obj.get("question") or "").strip(), obj.get("answer")
    if not q or a in (None, "", []):
        raise MalformedReply(f"the reply lacks a question or an answer: {reply[:200]!r}")
    kind = str(obj.get("type") or "text").strip().lower()
    if kind not in TYPES:
        raise MalformedReply(f"unknown type {kind!r} (one of {', '.join(TYPES)}): {reply[:200]!r}")
    try:
        hops = int(obj.get("hops") or 1)
    except (TypeError, ValueError):
        raise MalformedReply(f"hops is not a number: {reply[:200]!r}") from None
    by_cite = {(p["file"], p.get("page")): p for p in pages}
    chosen = []
    for e in obj.get("evidence") or []:
        if isinstance(e, dict) and (e.get("file"), e.get("page")) in by_cite:
            chosen.append(by_cite[(e.get("file"), e.get("page"))])
    chosen = chosen or pages  # evidence it did not name among the shown pages: all of them
    answer = a if isinstance(a, str) else (str(a) if not isinstance(a, list) else str([str(x) for x in a]))
    fmt = "List" if isinstance(a, list) else ""
    return Draft(
        q,
        answer,
        kind,
        f"endpoint:{model}",
        "",
        chosen[0]["unit"],
        hops=max(1, hops),
        answer_format=fmt,
        parts=[Draft(q, answer, kind, "part", "", p["unit"]) for p in chosen] if len(chosen) > 1 else [],
    )


@dataclass
class Endpoint:
    """One OpenAI-compatible chat endpoint (eval/judge.py's client, with its retries and errors)."""

    base_url: str
    model: str = ""
    api_key: str = ""
    role: str = "generator"
    max_tokens: int = 1024
    timeout_s: float = 120.0
    images: bool = True  # send page images (a text-only endpoint: False)
    _client: Any = field(default=None, init=False, repr=False)

    def client(self):
        if self._client is None:
            from eval.judge import Judge

            self._client = Judge(
                self.base_url,
                self.model or _first_model(self.base_url, self.api_key, self.role),
                self.api_key,
                timeout_s=self.timeout_s,
                max_tokens=self.max_tokens,
                role=self.role,
                key_flag=f"vimrag synth --{self.role}-key",
            )
        return self._client

    @property
    def name(self) -> str:
        return self.client().model

    def check(self) -> None:
        self.client().check()

    def ask(self, content: list[dict[str, Any]] | str, system: str = "") -> str:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        return self.client().complete(msgs)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _first_model(base_url: str, api_key: str, role: str) -> str:
    import httpx

    url = base_url.rstrip("/") + "/models"
    try:
        r = httpx.get(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {}, timeout=10)
        r.raise_for_status()
        ids = [m["id"] for m in r.json().get("data", [])]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
        raise RuntimeError(
            f"{role} endpoint {url} did not list its models ({type(e).__name__}: {e}); start the server, fix the "
            f"URL (the API root, ending in /v1), or name the model with --{role}-model"
        ) from None
    if not ids:
        raise RuntimeError(f"{role} endpoint {url} lists no models; name one with --{role}-model")
    return ids[0]


@dataclass
class EndpointWriter:
    endpoint: Endpoint

    @property
    def calls_per_slot(self) -> int:
        return 1

    def write(self, pages: list[dict[str, Any]]) -> Draft | None:
        what = "these two pages together (a question that needs both)" if len(pages) > 1 else "this page"
        content = _with(page_parts(pages, self.endpoint.images), WRITER_USER, what=what)
        return parse_draft(self.endpoint.ask(content, WRITER_SYSTEM), pages, self.endpoint.name)


@dataclass
class EndpointVerifier:
    """The checks asked of a model: it sees only the evidence for `grounded`, nothing for `closed_book`."""

    endpoint: Endpoint
    name: str = "endpoint"

    def grounded(
        self, question: str, answer: str, fmt: str, pages: list[dict[str, Any]], reread: str = "", cells=()
    ) -> tuple[bool, str]:
        """The verifier model's verdict; it is shown the question as asked (`reread` and `cells`, the offline
        table check's, are not needed: a model reads the table and does the arithmetic itself)."""
        from eval.judge import parse_verdict

        reply = self.endpoint.ask(
            _with(page_parts(pages, self.endpoint.images), GROUNDED_USER, question=question, answer=answer)
        )
        verdict = parse_verdict(reply)
        if verdict is None:
            return False, f"the verifier's reply is neither yes nor no: {reply[:120]!r}"
        cites = ", ".join(p["cite"] for p in pages)
        return verdict >= 1.0, f"the verifier, shown only {cites}, said {'yes' if verdict else 'no'}"

    def closed_book(self, question: str) -> str:
        return self.endpoint.ask(CLOSED_USER.format(question=question)).strip()

    def rival(self, question: str, page: dict[str, Any]) -> str:
        reply = self.endpoint.ask(_with(page_parts([page], self.endpoint.images), RIVAL_USER, question=question))
        reply = re.sub(r"<think>.*?</think>", "", reply, flags=re.S).strip()
        return "" if not reply or reply.upper().startswith("NONE") else reply
