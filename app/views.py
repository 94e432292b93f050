"""What the web demo shows of a running episode: chat messages per step, the evidence gallery, the graph.

Pure functions of the agent's events and state, so they are tested without a server:

    view = ChatView()
    for ev in agent.stream(q):
        view.apply(ev)            # -> True when the graph or the evidence changed
    view.messages                 # gr.ChatMessage list: one collapsible message per step, then the answer

Each step is one assistant message whose metadata title names the tool call ("Step 1 · Search: ...").
It shows as pending while the model writes or the tool runs, and done (with its duration) after.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import gradio as gr
from PIL import Image, ImageDraw

from agent.events import (
    AnswerEvent,
    Cropped,
    ErrorEvent,
    Finished,
    LimitReached,
    Memorized,
    MemorizedItem,
    ModelOutput,
    Scaled,
    SearchHit,
    SearchResults,
    StepStarted,
    ToolCall,
)
from agent.protocols import tool_kinds

# tool name (per protocol) -> the kind of step it is. Titles are plain text: emoji fonts are missing on
# many Linux machines and headless browsers.
TOOL_KINDS = tool_kinds()  # from the protocols' schemas
MAX_RAW_CHARS = 4000  # of a model reply shown in its step (the trace keeps all of it)


def _fmt_bbox(b) -> str:
    return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in b) + "]"


def _name(row: SearchHit | MemorizedItem) -> str:
    """An evidence id as the UI shows it, with the label the model saw when the protocol relabels each response."""
    label = row.label or row.info_id
    return row.info_id if label == row.info_id else f"{row.info_id} (model: {label})"


def step_title(name: str, args: dict[str, Any]) -> str:
    """A one-line title for a tool call, e.g. 'Search: “revenue 2025”' or 'Crop Picture 1 [10, 20, 300, 90]'."""
    kind = TOOL_KINDS.get(name, name)
    if kind == "search":
        if args.get("image"):
            return f"Search with a region of {args['image']}"
        return f"Search: “{str(args.get('query', '')).strip()}”"
    if kind == "memorize" and "memorize" not in args:  # the memory baselines: memagent's update, fold's folding
        if args.get("part"):
            return f"Write the {args['part']} memory"
        return "Update the memory" if "memory" in args else "Fold the history into memory"
    if kind == "memorize":
        kept = [
            m.get("information_id") for m in args.get("memorize") or [] if isinstance(m, dict) and m.get("is_useful")
        ]
        return "Memorize " + (", ".join(str(k) for k in kept) if kept else "nothing")
    if kind == "crop":
        where = f" {_fmt_bbox(args['bbox'])}" if isinstance(args.get("bbox"), list) else ""
        return f"Crop {args.get('image', 'the latest image')}{where}"
    if kind == "scale":
        return f"Zoom {args.get('image', '')} ×{args.get('factor', '')}"
    return "Answer" if kind == "answer" else name


class ChatView:
    """Turns the agent's events into chat messages, one per step, updated in place."""

    def __init__(self, question: str = "", messages: list | None = None) -> None:
        self.messages: list[gr.ChatMessage] = list(messages or [])
        if question:
            self.messages.append(gr.ChatMessage(role="user", content=question))
        self.cur: gr.ChatMessage | None = None
        self._raw = ""
        self._think = ""
        self._body: list[str] = []
        self._t0 = 0.0
        self.trace = None

    # -- the current step's message ------------------------------------------------------------------
    def _render(self) -> None:
        if self.cur is None:
            return
        parts = []
        if self._think:
            parts.append(f"*{self._think.strip()}*")
        parts += self._body
        if self._raw:
            raw = self._raw if len(self._raw) <= MAX_RAW_CHARS else self._raw[:MAX_RAW_CHARS] + " …"
            parts.append("<details><summary>model output</summary>\n\n```text\n" + raw.strip() + "\n```\n</details>")
        self.cur.content = "\n\n".join(parts) or "…"

    def _done(self) -> None:
        if self.cur is not None and self.cur.metadata.get("status") == "pending":
            self.cur.metadata["status"] = "done"
            self.cur.metadata["duration"] = round(time.perf_counter() - self._t0, 2)

    def note(self, title: str, text: str) -> None:
        self._done()
        self.messages.append(
            gr.ChatMessage(role="assistant", content=text, metadata={"title": title, "status": "done"})
        )

    # -- events -------------------------------------------------------------------------------------
    def apply(self, ev) -> bool:
        """Update the messages for one event; True when the graph or evidence changed (time to redraw)."""
        if isinstance(ev, StepStarted):
            self._done()
            self._raw, self._think, self._body, self._t0 = "", "", [], time.perf_counter()
            self.cur = gr.ChatMessage(
                role="assistant",
                content="…",
                metadata={
                    "title": f"Step {ev.step}: thinking",
                    "status": "pending",
                    "log": f"{ev.image_pixels:,} px in context (~{ev.visual_tokens:,} visual tokens)",
                },
            )
            self.messages.append(self.cur)
        elif isinstance(ev, ModelOutput):
            self._raw = ev.text if ev.done else self._raw + ev.delta
        elif isinstance(ev, ToolCall) and self.cur is not None:
            self.cur.metadata["title"] = f"Step {ev.step} · " + step_title(ev.name, ev.args)
            self._think = ev.think
        elif isinstance(ev, SearchResults):
            rows = [f"- **{_name(r)}** {r.citation} · score {r.score:.3f}" for r in ev.results]
            self._body.append("Found:\n" + "\n".join(rows) if rows else "Found nothing.")
            self._render()
            self._done()
            return True
        elif isinstance(ev, Memorized):
            kept = [f"- **{_name(i)}** {i.citation} · priority {i.priority}" for i in ev.items if i.useful]
            self._body.append(
                (f"Summary: {ev.summary}\n\n" if ev.summary else "")
                + ("Kept:\n" + "\n".join(kept) if kept else "Kept nothing.")
            )
            self._render()
            self._done()
            return True
        elif isinstance(ev, Cropped):
            self._body.append(
                f"{ev.source_info_id} {_fmt_bbox(ev.bbox_seen)} (as seen) → **{ev.info_id}**: {ev.citation}"
            )
            self._render()
            self._done()
            return True
        elif isinstance(ev, Scaled):
            self._body.append(f"{ev.source_info_id} ×{ev.factor:g} → **{ev.info_id}** at {ev.pixels:,} px")
            self._render()
            self._done()
            return True
        elif isinstance(ev, ErrorEvent):
            if self.cur is not None and self.cur.metadata.get("status") == "pending":
                if not self.cur.metadata["title"].startswith("Step"):
                    self.cur.metadata["title"] = f"Step {ev.step}: the reply was not a valid call"
                self._body.append(f"**Problem:** {ev.message}")
                self._render()
                self._done()
            else:
                self.note("Error", ev.message)
        elif isinstance(ev, LimitReached):
            self.note("Step limit", ev.message)
        elif isinstance(ev, AnswerEvent):
            self._render()
            self._done()
            return True
        elif isinstance(ev, Finished):
            self._render()
            self._done()
            self.trace = ev.trace
            self.messages.append(gr.ChatMessage(role="assistant", content=answer_markdown(ev.trace)))
            return True
        if isinstance(ev, (ModelOutput, ToolCall)):
            self._render()
        return False

    def table_picture(self, path: str | None, citation: str) -> None:
        """After a table answer: the page's crop of the table it read, to check the marked cells against."""
        if path:
            picture = {"path": path, "alt_text": f"the table on {citation}"}
            self.messages.append(gr.ChatMessage(role="assistant", content=picture))

    def pointers(self, pictures: list[tuple[str, str]]) -> None:
        """After an abstention: the pages it points to, as thumbnails (path, caption) under one note."""
        if not pictures:
            return
        where = ", ".join(cap for _, cap in pictures)
        self.messages.append(gr.ChatMessage(role="assistant", content=f"**Where to look:** {where}"))
        for path, cap in pictures:  # one picture a message: shown open, not folded under a title
            picture = {"path": path, "alt_text": f"likely on {cap}"}  # a path: gradio reads its type, shows a picture
            self.messages.append(gr.ChatMessage(role="assistant", content=picture))

    def stop(self, reason: str = "Stopped. Ask again, or ask something else.") -> list:
        self._render()
        self._done()
        self.note("Stopped", reason)
        return self.messages


def answer_markdown(trace) -> str:
    """The final chat message: the answer, then its evidence as a numbered source list."""
    if trace.answer is None:
        if trace.status == "error":
            return (
                f"**The model backend failed:** {trace.error}\n\nCheck the settings (endpoint URL, model, key) "
                "and ask again; the corpus and the index are unaffected."
            )
        return f"**No answer** ({trace.status}). {trace.error}".strip()
    lines = [trace.answer.strip(), ""]
    sup = trace.support or {}
    if sup.get("sentence"):  # the embedded reader's grounding: the sentence the phrase was read from
        if sup.get("candidate"):  # an abstention: the sentence of the answer it did not give
            lines += [f"Its best reading, not given (“{sup['candidate']}”), was from:"]
        lines += [f"> {sup['sentence']}", f"> — *{sup.get('citation') or sup.get('info_id')}*", ""]
    if sup.get("table") and not sup.get("candidate"):  # a table answer: its table, the cells used marked
        from app.table_view import table_markdown

        for used in sup["table"].get("tables") or [sup["table"]]:  # two, for a difference across two tables
            drawn = table_markdown({**sup["table"], **used})
            lines += [drawn, ""] if drawn else []
    if sup.get("note"):
        lines += [f"ℹ️ {sup['note'][0].upper()}{sup['note'][1:]}.", ""]
    if trace.citations:
        lines.append("**Sources**")
        lines += [f"{i}. {c['citation']} ({c['info_id']})" for i, c in enumerate(trace.citations, 1)]
    t = trace.timings
    lines.append(
        f"\n<sub>{len(trace.steps)} steps · {t.get('total_s', 0):.1f} s (model {t.get('model_s', 0):.1f} s,"
        f" retrieval {t.get('retrieval_s', 0):.1f} s) · peak {trace.peak_visual_tokens:,} visual tokens"
        "</sub>"
    )
    return "\n".join(lines)


# -- the evidence gallery ---------------------------------------------------------------------------
def _font(size: int):
    from memory_graph.draw import _font as graph_font

    return graph_font(size)


def _label(img: Image.Image, text: str) -> Image.Image:
    """`text` on a dark band across the top of a copy of `img`."""
    img = img.convert("RGB").copy()
    f = _font(max(14, img.width // 28))
    d = ImageDraw.Draw(img)
    h = int(f.size * 1.5)
    d.rectangle((0, 0, img.width, h), fill=(20, 30, 50))
    d.text((8, (h - f.size) // 2), text, font=f, fill=(255, 255, 255))
    return img


def text_card(title: str, body: str, size=(640, 480)) -> Image.Image:
    """A picture of a text unit, so text evidence sits in the gallery beside the images."""
    img = Image.new("RGB", size, (250, 250, 246))
    d = ImageDraw.Draw(img)
    tf, bf = _font(22), _font(17)
    d.rectangle((0, 0, size[0], 44), fill=(60, 90, 140))
    d.text((14, 10), title[:60], font=tf, fill=(255, 255, 255))
    y = 58
    for para in body.split("\n"):
        for line in textwrap.wrap(para, 62) or [""]:
            if y > size[1] - 26:
                d.text((14, y), "…", font=bf, fill=(40, 40, 40))
                return img
            d.text((14, y), line, font=bf, fill=(40, 40, 40))
            y += 24
    return img


def evidence_entries(state) -> list[tuple[tuple, Any, Any]]:
    """(key, evidence, memorized item or None) for every piece of evidence, memorized items first.

    `key` changes whenever the picture would change (newly memorized, other key frames), so callers can
    cache pictures by it.
    """
    memo = {it.info_id: it for _, it in state.graph.items()}

    def useful(ev) -> bool:
        return ev.info_id in memo and memo[ev.info_id].useful

    out = []
    for ev in sorted(state.evidence.by_id.values(), key=lambda ev: (not useful(ev), _id_num(ev.info_id))):
        item = memo.get(ev.info_id)
        key = (
            ev.info_id,
            bool(item and item.useful),
            item.priority if item else 0,
            tuple(item.key_timestamps or ()) if item else (),
        )
        out.append((key, ev, item))
    return out


def evidence_picture(state, ev, item, max_side: int = 900) -> list[tuple[Image.Image, str]]:
    """(picture, caption) for one piece of evidence: crops as a red box on their source image, video
    frames with their timestamp, text units as cards. A source file that vanished becomes a card saying so.
    """
    tag = f"★ memorized (priority {item.priority})" if item is not None and item.useful else "retrieved"
    cap = f"{ev.info_id} · {ev.citation()} · {tag}"
    try:
        if ev.kind == "text":
            return [(text_card(f"{ev.info_id}: {Path(ev.unit.source).name}", ev.text or ev.unit.text), cap)]
        if ev.kind == "video":
            out = []
            for img, label in state.evidence.frames(ev, item.key_timestamps if item is not None else None)[:4]:
                pic = img.copy()
                pic.thumbnail((max_side, max_side))
                out.append((_label(pic, f"{ev.info_id} · {label.replace('t=', '')}"), f"{cap} · {label}"))
            return out
        full = state.evidence.full_image(ev.unit).convert("RGB").copy()
        if ev.crop_box:  # the box is in source-frame pixels; the display raster may be smaller
            box = tuple(state.evidence.display_box(ev))
            ImageDraw.Draw(full).rectangle(box, outline=(230, 30, 30), width=max(3, full.width // 250))
        full.thumbnail((max_side, max_side))
        label = ev.info_id + (" · crop" if ev.crop_box else "") + (f" · ×{ev.scale:g}" if ev.scale != 1.0 else "")
        return [(_label(full, label), cap)]
    except Exception as e:  # noqa: BLE001 - a moved or broken file must not break the page
        return [(text_card(f"{ev.info_id}: unavailable", f"{ev.citation()}\n\n{e}"), cap + " (unavailable)")]


def evidence_pictures(state, max_side: int = 900) -> list[tuple[Image.Image, str]]:
    """(picture, caption) for every piece of evidence of an episode, memorized items first."""
    return [pic for _, ev, item in evidence_entries(state) for pic in evidence_picture(state, ev, item, max_side)]


def _id_num(info_id: str) -> tuple[str, int]:
    kind, _, n = info_id.rpartition(" ")
    return kind, int(n) if n.isdigit() else 0


def graph_picture(state):
    """The memory DAG with node energies and each item's pixel allocation under the episode's config."""
    from memory_graph.draw import draw_graph
    from memory_graph.energy import allocate

    allocs = allocate(state.graph, **state.config.memory_budget())
    return draw_graph(state.graph, allocs, thumbnails=state.evidence.thumbnail, max_width=1200)


def trace_json(trace) -> str:
    return json.dumps(trace.to_dict(), indent=1, ensure_ascii=False)


def pointer_pictures(state, trace, run: Path, max_side: int = 480) -> list[tuple[str, str]]:
    """(JPEG path under the run folder, citation) of the pages an abstaining reader points to; none when it
    answered, or for pointers without pixels (text notes)."""
    sup = trace.support or {}
    if trace.answer is None or sup.get("answer", trace.answer) != "Not answerable":
        return []
    out = []
    for i, p in enumerate(sup.get("pointers") or []):
        ev = state.evidence.get(p.get("info_id", ""))
        if ev is None or ev.kind != "image":
            continue
        try:
            img = state.evidence.full_image(ev.unit).convert("RGB").copy()
        except Exception:  # noqa: BLE001 - a page whose file moved is left out, not an error
            continue
        img.thumbnail((max_side, max_side))
        path = run / f"pointer_{i}.jpg"
        img.save(path, quality=85)
        out.append((str(path), p.get("citation") or ev.citation()))
    return out
