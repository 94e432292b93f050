"""VRAG-RL's protocol, in the exact layout its released checkpoint was trained on.

Follows `VRAG-RL/vrag_agent/generation.py` (training rollouts), `VRAG-RL/scripts/hf_dataset_convert.py` (the
prompt) and `demo/vrag_agent.py` (the demo's limits); tests/agent/golden/ cites the line ranges part by part:

1. One user turn holds the instruction and the question; there is no system message (the chat template adds
   its default one, as in training).
2. The model writes `<think>`, then `<search>`, `<bbox>` or `<answer>`. Its turn is kept as the complete tags it
   wrote, re-joined by newlines (generation.py `_postprocess_responses`), and the first action tag in that text
   runs, think blocks included (`postprocess_predictions`; agent/actions.py). No action, or a box that
   json.loads cannot read as four numbers >= 0, gets the invalid-action turn (prompts `invalid`, `invalid_bbox`).
3. A search inserts the first page not yet inserted among the top 10 results, as a user turn holding the
   image alone; every inserted image, search result or crop, is resized into [256*28*28, 512*28*28] pixels.
4. `<bbox>` crops the latest image: the box, padded by 28 px in the model's coordinates, is scaled to the raw
   page with int() and clamped (generation.py, the validation branch).
5. The demo allows 10 actions and, on the last observation, asks for the answer now; so `max_steps` is 11
   model calls, and the observation before the last call carries the nudge.

Where we knowingly differ (docs/protocols.md): a crop of a crop cuts from the crop the model saw, as the demo does
(training maps a second box against the page while measuring it on the crop). When all top-10 results were
inserted before, the 10th is shown again, as the demo does (training reads a stale variable there). A
search that finds nothing, or a non-picture result, is shown as text. Our instruction, nudge and invalid-
action wording are replaced by the official texts with `--prompt-file`.
"""

from __future__ import annotations

import functools
from typing import Any

from agent.actions import Action, keep_tags, vrag_tag
from agent.events import Event, SearchResults
from agent.media import model_view, vrag_image, vrag_size
from agent.protocols import schema as S
from agent.protocols.base import Protocol, chain, cropped, fresh_id, remember, result_rows
from agent.state import EpisodeState
from agent.tools import ToolError

SEARCH_TOP_K = 10  # VRAG's search engine returns the top 10 (search_engine/search_engine.py, batch_search)
CROP_PAD = 28  # generation.py lines 138-139: in the validation branch the box grows by 28 px on every side

TOOLS = {  # a tag protocol: the schemas serve validation and documentation
    "search": S.tool(
        "search",
        "<search>query</search>: retrieve the next page image.",
        {"query": S.text("the search query")},
        ["query"],
    ),
    "crop": S.tool(
        "crop", "<bbox>[x1, y1, x2, y2]</bbox>: zoom into a region of the latest image.", {"bbox": S.BBOX}, ["bbox"]
    ),
    "answer": S.tool(
        "answer", "<answer>text</answer>: the final answer.", {"answer": S.text("the final answer")}, ["answer"]
    ),
}

# Our wording; the released checkpoint's own instruction is USER_PROMPT in VRAG-RL/scripts/hf_dataset_convert.py.
INSTRUCTION = (
    "Answer the question with the help of a search engine over document pages and images. Each time "
    "you receive new information, reason inside <think> and </think> first. Then do exactly one of: "
    "<search> query </search> to retrieve a page as an image; <bbox>[x1, y1, x2, y2]</bbox> to crop "
    "the latest image ({coords}) and see it closer; <answer> answer </answer> when you know it, "
    "briefly and without explanation, e.g. <answer> 1997 </answer>. Question: {question}"
)
COORDS = {"absolute": "pixels of the image as you see it", "relative": "each from 0 to 1000 of its width and height"}
NUDGE = "This is your last turn: give the answer now, inside <answer> and </answer>."


def vrag_crop_box(bbox: list[float], seen: tuple[int, int], raw: tuple[int, int], pad: float = CROP_PAD) -> list[int]:
    """VRAG-RL's crop (generation.py, validation branch): pad in the model's coordinates, scale each corner to
    the raw image with int(), clamp.

    >>> vrag_crop_box([100, 50, 200, 150], seen=(500, 250), raw=(1000, 500))
    [144, 44, 456, 356]
    >>> vrag_crop_box([0, 0, 40, 40], seen=(560, 728), raw=(1700, 2200))  # clamped at the corner
    [0, 0, 206, 205]
    """
    x1, y1, x2, y2 = bbox[0] - pad, bbox[1] - pad, bbox[2] + pad, bbox[3] + pad
    (w, h), (rw, rh) = seen, raw
    box = [int(rw * x1 / w), int(rh * y1 / h), int(rw * x2 / w), int(rh * y2 / h)]
    box = [max(0, box[0]), max(0, box[1]), min(rw, box[2]), min(rh, box[3])]
    if box[2] <= box[0] or box[3] <= box[1]:
        raise ToolError(
            f"bbox {list(bbox)} is empty after mapping it to the image; give x1 < x2 and y1 < y2 "
            f"inside the {w}x{h} image"
        )
    return box


class VragProtocol(Protocol):
    name = "vrag"
    order = 1
    summary = "VRAG-RL's <search>/<bbox>/<answer> tags in its exact layout, for its released checkpoint"
    syntax = "tags"
    tools = TOOLS
    # "invalid" and "invalid_bbox": VRAG-RL's two invalid-action turns (generation.py lines 629 and 632: after a
    # bbox that cannot be cropped, and after a reply with no action); empty = our corrective message
    PROMPTS = {"user": INSTRUCTION, "system": "", "nudge": NUDGE, "invalid": "", "invalid_bbox": ""}
    PLACEHOLDERS = {"user": ("question",)}
    main_prompt = "user"
    max_steps = 11  # demo/vrag_agent.py: max_steps 10, then one call that must answer
    single_image = True

    def default_prompt(self, key: str) -> str:
        if key == "user":
            return INSTRUCTION.replace("{coords}", COORDS[self.coords])
        return super().default_prompt(key)

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        system = self.prompt(st, "system")
        if "user" not in st.config.prompts and "system" in st.config.prompts:
            user = "Question: {question}"  # the instruction went into the system message
        else:
            user = self.prompt(st, "user")
        first = [{"role": "system", "content": system}] if system else []
        return [*first, {"role": "user", "content": user.replace("{question}", st.question)}, *st.history]

    def observe(self, st: EpisodeState, raw: str, content: str | list[dict[str, Any]]) -> None:
        """Append the reply (its tags) and the observation; before the last call, the nudge too."""
        if st.step == st.config.max_steps - 1 and self.prompt(st, "nudge"):
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            content = parts + [{"type": "text", "text": self.prompt(st, "nudge")}]
        st.history += [{"role": "assistant", "content": keep_tags(raw)}, {"role": "user", "content": content}]

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        events = super().reject(st, message, raw)
        bbox = vrag_tag(raw) == "bbox"
        text = (self.prompt(st, "invalid_bbox") if bbox else "") or self.prompt(st, "invalid") or message
        self.observe(st, raw, text)
        return events

    def _show(self, st: EpisodeState, info_id: str) -> list[dict[str, Any]] | str:
        """The observation for one piece of evidence: the image alone, VRAG-RL-sized; text as text."""
        ev = st.evidence.get(info_id)
        if ev.kind == "text":
            return ev.text
        try:
            if ev.crop_box:  # VRAG-RL resizes the crop of the original into its range (generation.py lines 141-143)
                target = vrag_size(*st.evidence.raw_size(ev))
                region = st.evidence.raw_image(ev, at_least=target)  # a page's small region: rendered finer
                img = vrag_image(region) if region.size == st.evidence.raw_size(ev) else _resized(region, target)
            else:
                img = vrag_image(st.evidence.raw_image(ev))  # the original file, or the page at 200 dpi
        except Exception as e:  # noqa: BLE001 - a vanished file must not end the episode
            return f"The image of {ev.citation()} could not be loaded ({e}). Its text: {ev.text[:1200]}"
        ev.seen_size = img.size  # VRAG-RL maps boxes against this size (generation.py, `latest_image.size`)
        if ev.kind == "image":
            st.last_image = ev.info_id
        return [{"type": "image", "image": img, "ref": ev.info_id}, *self.toolbox.read_view(st, img)]

    def box_frame(self, ev) -> tuple[int, int] | None:
        frame = super().box_frame(ev)
        if frame is not None and self.coords == "absolute" and ev.seen_size:
            return model_view(*ev.seen_size, self.toolbox.patch)  # the processor's grid: what the model sees
        return frame

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        a = action.args
        if kind == "search":
            node_id = fresh_id(st.graph, "search")
            hits = self.toolbox.search(st, node_id, a["query"], k=SEARCH_TOP_K)  # a failed search adds no node
            node = chain(st, "search", a["query"], node_id)
            fresh = next((e for e in hits if e.unit.uid not in st.inserted), hits[-1] if hits else None)
            if fresh is None:
                self.observe(st, action.raw, "The search returned no results.")
                return [SearchResults(st.step, node_id=node.id, query=a["query"], results=[])]
            if fresh.unit.uid not in st.inserted:
                st.inserted.append(fresh.unit.uid)
            remember(st, node.id, [fresh.info_id])
            self.observe(st, action.raw, self._show(st, fresh.info_id))
            return [SearchResults(st.step, node_id=node.id, query=a["query"], results=result_rows(st, [fresh.info_id]))]
        if kind == "crop":
            if not st.last_image:  # VRAG-RL generation.py lines 132-157 (24f8d05): its invalid-action turn
                raise ToolError("there is no image to crop yet; <search> first")
            node_id = fresh_id(st.graph, "crop")
            pad = functools.partial(vrag_crop_box, pad=st.config.vrag_pad)  # 28: validation; 0: training rollouts
            ev, box = self.toolbox.crop(st, st.last_image, a["bbox"], node_id, mapper=pad)
            chain(st, "crop", f"crop {st.last_image}", node_id)
            remember(st, node_id, [ev.info_id])
            event = cropped(st, node_id, ev, st.last_image, a["bbox"], box)
            self.observe(st, action.raw, self._show(st, ev.info_id))
            return [event]
        return self.finish_chain(st, a["answer"])


def _resized(image, size: tuple[int, int]):
    """A region rendered finer than its box, brought to the size VRAG-RL gives the box (Pillow's default filter)."""
    out = image.resize(size) if image.size != size else image
    return out.convert("RGB") if out.mode != "RGB" else out
