"""The embedded offline policy: a deterministic controller plus a small LM, driving the real tools and graph.

No vision-language model can be downloaded here (DESIGN.md 5.2), so the default policy reads text instead
of pixels: the units' text layers and OCR, and the OCR of the regions it crops. It makes the same tool calls
a VLM would, in the protocol's own syntax, so they go through the same parser, tools and memory graph:

    search (query rewritten by SmolLM2)  ->  memorize the results that mention the question's words, with
    priorities from how much they match  ->  crop where those words sit in small print (OCR boxes), and
    read the zoomed region  ->  maybe one more search when the evidence is thin  ->  answer: a short phrase
    of the type the question wants, read from the best sentence of the evidence (agent/reader/extract.py),
    citing the nodes it used; the sentence and its unit go to the trace.

It is an honest baseline, far below a 7B VLM. Connect a real one with `--backend openai` or
`--backend transformers`.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import Any, Iterator

from agent.backends.base import Policy, PolicyConfig, PolicyError
from agent.reader.words import search_terms

QUESTION_WORDS = {
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "many",
    "much",
    "does",
    "did",
    "do",
    "is",
    "are",
    "was",
    "were",
    "according",
    "document",
    "report",
    "shown",
    "show",
    "shows",
    "mentioned",
    "listed",
    "given",
    "stated",
    "page",
    "figure",
    "please",
    "can",
    "could",
    "would",
    "should",
    "will",
    "may",
    "might",
    "has",
    "have",
    "had",
    "tell",
}
_STAMP = re.compile(r"\[(\d{1,2}):(\d{2})\]")
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")


def keywords(question: str) -> set[str]:
    """The question's search terms (the BM25 tokenizer's, so 'matching' here means what search means)."""
    q = search_terms(question)
    return (q - search_terms(" ".join(QUESTION_WORDS))) or q


def relevance(kw: set[str], text: str) -> float:
    """Share of the question's content words present in `text` (0..1)."""
    if not kw:
        return 0.0
    return len(kw & search_terms(text)) / len(kw)


def best_sentences(kw: set[str], text: str, n: int = 2) -> list[str]:
    # PDF text layers break lines mid-sentence: rejoin a line break followed by a lower-case word
    text = re.sub(r"(?<![\n.!?:])\n(?=[a-z0-9(])", " ", text or "")
    sents = [s.strip() for s in _SENT.split(text) if len(s.strip()) > 3]
    ranked = sorted(sents, key=lambda s: -relevance(kw, s))
    return ranked[:n]


def fallback_query(question: str) -> str:
    """Keywords of the question in their original form (used when the small LM is not loaded)."""
    from bm25s.stopwords import STOPWORDS_EN

    words = [w.strip(".,;:!?") for w in re.findall(r"[\w.%$€-]+", question)]
    kept = [w for w in words if len(w) > 1 and w.lower() not in QUESTION_WORDS and w.lower() not in STOPWORDS_EN]
    return " ".join(kept) or question


class KeywordLM:
    """Stand-in for the small LM without weights: keyword queries, and free-text spans left in the reader's
    rule order (it has no `score`).

    Used by fast tests, and by `--backend embedded --model keyword` for runs that must not load SmolLM2.
    """

    def rewrite_query(self, question: str) -> str:
        return fallback_query(question)


MAX_PASSAGES = 8  # evidence texts the reader looks at (memorized first)
OCR_CACHE_MAX = 256  # pictures whose OCR boxes are kept (oldest dropped first)


class EmbeddedPolicy(Policy):
    name = "embedded"
    is_vlm = False

    def __init__(self, config: PolicyConfig | None = None, lm: Any = None, ocr: Any = "auto") -> None:
        self.config = config or PolicyConfig()
        self._lm = KeywordLM() if (lm is None and self.config.model == "keyword") else lm
        self._ocr = ocr
        self._boxes: dict[str, Any] = {}  # unit uid -> OCR result: a picture is read once per process
        self._rewrites: dict[str, str] = {}
        self._encoder: Any = False  # not loaded yet
        self._lock = threading.Lock()

    def describe(self) -> str:
        lm = "keyword extraction" if isinstance(self._lm, KeywordLM) else "SmolLM2-135M"
        return (
            f"embedded offline policy (deterministic controller + {lm}; reads text and OCR, not "
            "pixels). Connect a real VLM with --backend openai --base-url URL --model NAME"
        )

    # -- small LM and OCR, loaded on first use ------------------------------------------------------------
    @property
    def lm(self):
        if self._lm is None:
            with self._lock:
                if self._lm is None:
                    try:
                        from agent.reader.smollm import get_small_lm

                        self._lm = get_small_lm()
                    except ImportError as e:
                        raise PolicyError(f"the embedded policy needs SmolLM2 weights: {e}") from e
        return self._lm

    @property
    def ocr(self):
        if isinstance(self._ocr, str):
            from retrieval.ocr import get_ocr

            self._ocr = get_ocr(self._ocr)
        return self._ocr

    # -- the controller ------------------------------------------------------------------------------------
    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str]:
        if view is None:
            raise PolicyError(
                "the embedded policy drives the agent's own tools and needs the episode state "
                "(view); run it through agent.loop.Agent"
            )
        from agent.protocols import get

        proto = get(view.protocol)
        # one strategy per kind of protocol, chosen by its capabilities (never by its name)
        if proto.one_shot:
            yield self._one_shot(view)
        elif proto.reads_in_chunks:
            yield self._chunks(proto, view)
        elif proto.folds:
            yield self._folding(proto, view)
        elif proto.single_image:
            yield self._single_image(proto, view)
        elif proto.memorizes:
            yield self._graph(proto, view)
        else:
            yield self._linear(proto, view)

    def _graph(self, proto, st) -> str:
        """Search, memorize what matches, crop small print, maybe search again, answer citing the nodes."""
        kw = keywords(st.question)
        g = st.graph
        if st.pending:
            return proto.write("memorize", self._memorize(st, kw))
        searches = [n for n in g.nodes.values() if n.kind == "search"]
        crops = [n for n in g.nodes.values() if n.kind == "crop"]
        last_call = st.step >= st.config.max_steps
        if not searches:
            return proto.write("search", {"id": "s1", "query": self.rewrite(st.question), "parent_ids": ["root"]})
        ranked = self._memory(st, kw)
        if not last_call and not crops and not st.feedback and ranked:
            node_id, ev = ranked[0][0], ranked[0][1]
            region = self.find_region(st, ev, kw)
            if region is not None:  # the picture by the name its step's results gave it
                return proto.write(
                    "crop", {"image": st.label_of(ev.info_id, node_id), "bbox": region, "parent_ids": [node_id]}
                )
        best = ranked[0][2] if ranked else 0.0
        if not last_call and best < 0.5 and len(searches) < 2 and st.step + 2 < st.config.max_steps:
            query = st.question if self.rewrite(st.question) != st.question else fallback_query(st.question)
            return proto.write(
                "search", {"id": f"s{len(searches) + 1}", "query": query, "parent_ids": [searches[-1].id]}
            )
        answer = self.answer(st, [ev for _, ev, _ in ranked])
        parents = list(dict.fromkeys(n for n, _, r in ranked[:2] if r > 0)) or [searches[-1].id]
        return proto.write("answer", {"answer": answer, "parent_ids": parents})

    def _linear(self, proto, st) -> str:
        """Search once, crop small print, answer."""
        kw = keywords(st.question)
        g = st.graph
        if not any(n.kind == "search" for n in g.nodes.values()):
            return proto.write("search", {"query": self.rewrite(st.question)})
        ranked = self._memory(st, kw)
        if (
            st.step < st.config.max_steps
            and proto.tool_named("crop")  # mem1 has no crop
            and not any(n.kind == "crop" for n in g.nodes.values())
            and not st.feedback
            and ranked
        ):
            region = self.find_region(st, ranked[0][1], kw)
            if region is not None:
                return proto.write("crop", {"image": ranked[0][1].info_id, "bbox": region})
        return proto.write("answer", {"answer": self.answer(st, [ev for _, ev, _ in ranked])})

    def _single_image(self, proto, st) -> str:
        """One page per search: crop the latest page's small print, search again while the evidence is thin."""
        kw = keywords(st.question)
        g = st.graph
        searches = [n for n in g.nodes.values() if n.kind == "search"]
        ranked = self._memory(st, kw)
        last_call = st.step >= st.config.max_steps
        if not searches:
            return proto.write("search", {"query": self.rewrite(st.question)})
        if not last_call and st.last_image and not any(n.kind == "crop" for n in g.nodes.values()) and not st.feedback:
            region = self.find_region(st, st.evidence.get(st.last_image), kw)
            if region is not None:
                return proto.write("crop", {"bbox": region})
        best = ranked[0][2] if ranked else 0.0
        if not last_call and best < 0.5 and len(searches) < 3 and st.step + 2 < st.config.max_steps:
            queries = [self.rewrite(st.question), fallback_query(st.question), st.question]
            return proto.write("search", {"query": queries[len(searches) % 3]})
        return proto.write("answer", {"answer": self.answer(st, [ev for _, ev, _ in ranked])})

    def _chunks(self, proto, st) -> str:
        """A memory rewritten one result at a time: the old memory plus the result's sentences that match the
        question; at the end, the reader over the memory alone (what the protocol lets an answer rest on)."""
        from agent.protocols.memagent import NO_MEMORY
        from agent.reader.extract import Passage

        notes, kw = st.notes, keywords(st.question)
        memory = "" if notes["memory"] == NO_MEMORY else notes["memory"]
        if notes["read"] < len(notes["chunks"]):
            ev = st.evidence.get(notes["chunks"][notes["read"]])
            found = best_sentences(kw, ev.text if ev is not None else "", 2)
            added = [f"{s} ({ev.citation()})" for s in found if relevance(kw, s) > 0 and s not in memory]
            return proto.write("memorize", {"memory": "\n".join([memory, *added]).strip() or NO_MEMORY})
        return proto.write("answer", {"answer": self.answer(st, [], [Passage(memory, "the memory", "memory")])})

    def _folding(self, proto, st) -> str:
        """Search; when the results are thin, fold (the change of direction DeepAgent's prompt folds for) and search
        again; crop small print; answer from what the context still holds: the memories and what came after."""
        from agent.reader.extract import Passage

        notes, kw = st.notes, keywords(st.question)
        if notes.get("folding"):
            return proto.write("memorize", {"memory": json.dumps(self._fold_memory(st, notes["folding"][0], kw))})
        asked = [n.query for n in st.graph.nodes.values() if n.kind == "search"]
        g = st.graph
        folded = max((n.index for n in g.nodes.values() if n.kind == "memory"), default=-1)
        ranked = [r for r in self._memory(st, kw) if g.nodes[r[0]].index > folded]  # what the context still shows
        last_call = notes.get("final") or st.step >= st.config.max_steps
        if not last_call and not asked:
            return proto.write("search", {"query": self.rewrite(st.question)})
        best = ranked[0][2] if ranked else 0.0
        fresh = [q for q in (fallback_query(st.question), st.question) if q not in asked]
        if not last_call and len(asked) < 2 and fresh and best < 0.5 and st.step + 6 < st.config.max_steps:
            if not notes.get("folds"):
                return proto.write("memorize", {})  # <fold_thought>
            return proto.write("search", {"query": fresh[0]})
        if not last_call and ranked and not any(n.kind == "crop" for n in g.nodes.values()):
            region = self.find_region(st, ranked[0][1], kw)
            if region is not None:
                return proto.write("crop", {"image": ranked[0][1].info_id, "bbox": region})
        if folded < 0:
            return proto.write("answer", {"answer": self.answer(st, [ev for _, ev, _ in ranked])})
        passages = [Passage(_memory_text(notes.get("parts", {}).get("episode", "")), "the folded memory", "memory")] + [
            Passage(ev.text, ev.citation(), ev.info_id, ev.unit.modality, memorized=True)
            for _, ev, _ in ranked[: MAX_PASSAGES - 1]
            if ev.text.strip()
        ]
        return proto.write("answer", {"answer": self.answer(st, [], passages)})

    def _fold_memory(self, st, part: str, kw: set[str]) -> dict[str, Any]:
        """One of the three memories, as the published JSON fields, from the episode's own record: its searches and
        crops with the sentences of their results that match the question."""
        events, calls = [], []
        for i, node in enumerate(n for n in st.graph.nodes.values() if n.kind in ("search", "crop")):
            found = [
                f"{s} ({st.evidence.get(it.info_id).citation()})"
                for it in node.items
                for s in best_sentences(kw, st.evidence.get(it.info_id).text, 1)
                if relevance(kw, s) > 0
            ]
            outcome = " ".join(found[:3])  # empty when no result names the question's key words
            events.append({"step": str(i + 1), "description": f"{node.kind} {node.query}", "outcome": outcome})
            calls.append(node.kind)
        if part == "episode":
            progress = " ".join(e["outcome"] for e in events if e["outcome"])
            task = "answer the question from the collection's documents, pictures and videos"
            return {"task_description": task, "key_events": events, "current_progress": progress}
        if part == "working":
            return {
                "immediate_goal": "find evidence that answers the question",
                "current_challenges": "the results so far barely mention the question's key words",
                "next_actions": [{"type": "tool_call", "description": "search again with other key words"}],
            }
        used = [{"tool_name": t, "success_rate": "1.0", "experience": f"{calls.count(t)} calls"} for t in set(calls)]
        return {"tools_used": sorted(used, key=lambda u: u["tool_name"]), "derived_rules": []}

    def _one_shot(self, st) -> str:
        kw = keywords(st.question)
        evs = [st.evidence.get(i) for i in st.pending]
        evs = sorted((e for e in evs if e is not None), key=lambda e: -relevance(kw, e.text))
        return self.answer(st, evs)

    # -- pieces --------------------------------------------------------------------------------------------
    def rewrite(self, question: str) -> str:
        if question not in self._rewrites:  # asked again when choosing a second query: run the LM once
            q = self.lm.rewrite_query(question).strip()
            self._rewrites[question] = q or fallback_query(question)
            while len(self._rewrites) > 256:
                self._rewrites.pop(next(iter(self._rewrites)))
        return self._rewrites[question]

    def answer(self, st, evidence: list, passages: list | None = None) -> str:
        """The typed, grounded reader over the memorized evidence (best first), then the rest of what the
        episode retrieved, or over `passages` when the protocol says what the answer may rest on (memagent: its
        memory alone); what the answer rests on goes to the episode (`st.support`) for the trace and UI."""
        from agent.reader.confidence import abstain_below
        from agent.reader.extract import Passage, read_answer

        ranked = [ev for ev in evidence if ev is not None]
        seen = {ev.info_id for ev in ranked}
        rest = [ev for ev in st.evidence.by_id.values() if ev.info_id not in seen and not ev.crop_box]
        passages = passages or [
            Passage(
                ev.text,
                ev.citation(),
                ev.info_id,
                ev.unit.modality,
                memorized=i < len(ranked),
                page=ev.unit.page if ev.unit.modality == "page" and ev.unit.page else 0,
                source=ev.unit.source,
                tables=ev.unit.tables,
            )
            for i, ev in enumerate((ranked + rest)[:MAX_PASSAGES])
            if ev.text.strip()
        ]
        lm = self.lm if hasattr(self.lm, "score") else None
        reading = read_answer(st.question, passages, lm=lm, encoder=self.encoder)
        reading = abstain_below(reading, st.question, self.config.min_confidence, passages)
        st.support = reading.to_dict()
        return reading.answer

    @property
    def encoder(self):
        """The retriever's MiniLM (process-wide, so already loaded when the index uses it); None if it
        cannot load, and the reader scores by term coverage alone."""
        if self._encoder is False:
            try:
                from retrieval.embedders import load_embedder

                self._encoder = load_embedder("minilm")
            except Exception as e:  # noqa: BLE001 - a refinement, never a reason to fail
                print(f"the answer reader runs without MiniLM similarity: {e}", file=sys.stderr)
                self._encoder = None
        return self._encoder

    def _memory(self, st, kw: set[str]) -> list[tuple[str, Any, float]]:
        """(node id, evidence, relevance) of memorized useful items, best first; crops win ties (zoomed)."""
        rows = []
        for node, item in st.graph.items():
            ev = st.evidence.get(item.info_id)
            if ev is not None and item.useful:
                rows.append((node.id, ev, relevance(kw, ev.text), item.priority, bool(ev.crop_box)))
        rows.sort(key=lambda r: (-r[2], -r[3], not r[4]))
        return [(n, ev, rel) for n, ev, rel, _, _ in rows]

    def _memorize(self, st, kw: set[str]) -> dict[str, Any]:
        scored = [(st.evidence.get(i), relevance(kw, st.evidence.get(i).text)) for i in st.pending]
        top = max((r for _, r in scored), default=0.0)
        memorize, summary = [], ""
        for rank, (ev, rel) in enumerate(sorted(scored, key=lambda x: -x[1])):
            useful = rel > 0 and (rel >= 0.25 or rel == top)
            entry = {
                "information_id": st.label_of(ev.info_id),
                "is_useful": useful,
                "priority_score": max(1, min(5, 1 + round(4 * rel) + (1 if ev.crop_box else 0))),
            }
            if ev.kind == "video":
                entry["key_timestamp"] = snap(key_timestamps(kw, ev), st.evidence.sampled_times(ev))
            memorize.append(entry)
            if rank == 0 and rel > 0:
                summary = " ".join(best_sentences(kw, ev.text, 1))[:240]
        return {"summarize": summary or "No result mentions the question's key words.", "memorize": memorize}

    def find_region(self, st, ev, kw: set[str]) -> list[int] | None:
        """A box (in the model's view) around the small print that matches the question, or None.

        Only pictures whose text came from OCR are worth zooming: a PDF text layer is already exact.
        """
        if ev is None or ev.kind != "image" or ev.crop_box:
            return None
        if ev.unit.modality == "page" and not ev.unit.text_source.startswith("ocr"):
            return None
        ocr = self.ocr
        if ocr is None:
            return None
        img = st.evidence.full_image(ev.unit)  # the display raster: boxes are mapped to the seen view below
        key = ev.unit.uid
        with self._lock:
            read = self._boxes.get(key)
        if read is None:
            read = ocr.read(img)
            with self._lock:  # the policy is shared by every session of a server: keep the cache bounded
                self._boxes[key] = read
                while len(self._boxes) > OCR_CACHE_MAX:
                    self._boxes.pop(next(iter(self._boxes)))
        boxes = read.boxes
        from agent.tools import target_size

        seen = ev.seen_size or target_size(img.width, img.height, st.config.obs_pixels)
        fx, fy = seen[0] / img.width, seen[1] / img.height
        # lines that match the question but are small print at the size the model sees (< 18 px tall)
        small = [(relevance(kw, b.text), b) for b in boxes if b.height * fy < 18]
        small = [(r, b) for r, b in small if r > 0]
        if not small:
            return None
        _, best = max(small, key=lambda x: (x[0], -x[1].height))
        x1, y1, x2, y2 = best.box
        pad_y = 2 * best.height  # keep the neighbouring lines: answers often sit next to the match
        return [int(x1 * fx), int(max(0, y1 - pad_y) * fy), int(x2 * fx) + 1, int(min(img.height, y2 + pad_y) * fy) + 1]


def _memory_text(memory: str) -> str:
    """What a fold's episode memory says was found (its events' outcomes and its progress, not its plans, task or
    JSON keys): the text the reader may quote once the pictures are folded away.

    >>> _memory_text('{"task_description": "t", "key_events": [{"step": "1", "outcome": "Anna spoke."}]}')
    'Anna spoke.'
    >>> _memory_text("not json")
    ''
    """
    try:
        data = json.loads(memory)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    events = data.get("key_events") if isinstance(data.get("key_events"), list) else []
    found = [str(e.get("outcome", "")) for e in events if isinstance(e, dict)] + [str(data.get("current_progress", ""))]
    return "\n".join(dict.fromkeys(f.strip() for f in found if f.strip()))


def key_timestamps(kw: set[str], ev) -> list[float]:
    """Seconds of the keyframes whose OCR text (stamped [mm:ss] at ingest) mentions the question's words."""
    text = ev.text or ""
    marks = [(m.start(), int(m.group(1)) * 60 + int(m.group(2))) for m in _STAMP.finditer(text)]
    hits = []
    for i, (pos, t) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        if relevance(kw, text[pos:end]) > 0:
            hits.append(float(t))
    if not hits and ev.unit.keyframes:
        hits = [float(ev.unit.keyframes[0])]
    return hits[:4]


def snap(times: list[float], sampled: list[float]) -> list[float]:
    """Each time moved to the nearest sampled frame, written as the frame is labelled (to 0.1 s); repeats dropped.

    >>> snap([12, 12.4, 40], [0.0, 11.9, 24.1, 36.2, 48.0])
    [11.9, 36.2]
    """
    if not sampled:
        return list(times)
    out = [round(min(sampled, key=lambda s: abs(s - t)), 1) for t in times]
    return list(dict.fromkeys(out))
