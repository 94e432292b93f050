"""VimRAG's tools and prompts: the JSON Schemas of its five calls, and the system, user and summary prompts.

The tools are the demo's (add_search_node, summarize_and_memorize, add_answer_node) plus our crop and scale.
The prompts' wording is ours: the official ones (demo/vimrag_prompt.py) are not public, and a user supplies
them with --prompt-file. The protocol (agent/protocols/vimrag.py) lays them out.
"""

from __future__ import annotations

from agent.protocols import schema as S

_MEMO_ITEM = {
    "type": "object",
    "required": ["information_id", "is_useful", "priority_score"],
    "x-aliases": {
        "info_id": "information_id",
        "id": "information_id",
        "useful": "is_useful",
        "priority": "priority_score",
        "score": "priority_score",
        "key_timestamps": "key_timestamp",
        "timestamps": "key_timestamp",
    },
    "properties": {
        "information_id": S.ref('label of one of the current results, e.g. "Picture 2"', "memorizable"),
        "is_useful": {"type": "boolean", "description": "whether it helps answer the question"},
        "priority_score": {
            "type": "integer",
            "minimum": 1,
            "maximum": 5,
            "description": "1 (marginal) .. 5 (decisive): decides how many pixels it keeps",
        },
        "key_timestamp": {
            "type": "array",
            "items": {"type": "number", "minimum": 0},
            "description": "videos only: seconds of the frames to keep, as labelled",
        },
    },
}

TOOLS = {
    "add_search_node": S.tool(
        "search",
        "Open a search step: retrieve evidence for a sub-query. The results come back as Text k / "
        "Picture k / Video k. To search with a region of a picture, give `image` (and `bbox`).",
        {
            "id": S.NEW_ID,
            "query": S.text("the search query", nonempty=False),
            "parent_ids": S.PARENTS,
            "image": S.IMAGE,
            "bbox": S.BBOX,
        },
        ["id", "parent_ids"],
        S.NODE_ALIASES,
    ),
    "summarize_and_memorize": S.tool(
        "memorize",
        "Close the current step: summarize what its results show and memorize the useful ones with "
        "a priority (memorize may be empty).",
        {
            "summarize": S.text("what the results show, in a few sentences", nonempty=False),
            "memorize": {"type": "array", "items": _MEMO_ITEM, "description": "the results worth keeping"},
        },
        ["summarize", "memorize"],
        {"summary": "summarize", "memory": "memorize", "items": "memorize"},
    ),
    "crop": S.tool(
        "crop",
        "Zoom into a region of a picture you were shown; the crop comes back as Picture 1 of a new "
        "step, a child of the step that showed the picture.",
        {"image": S.IMAGE, "bbox": S.BBOX, "id": S.NEW_ID, "parent_ids": S.PARENTS},
        ["image", "bbox"],
        S.NODE_ALIASES,
    ),
    "scale": S.tool(
        "scale",
        "Show a picture you were shown again at another resolution, as Picture 1 of a new step.",
        {
            "image": S.ref('label of the picture, e.g. "Picture 1"', "info"),
            "factor": S.FACTOR,
            "id": S.NEW_ID,
            "parent_ids": S.PARENTS,
        },
        ["image", "factor"],
        {**S.NODE_ALIASES, "scale": "factor"},
    ),
    "add_answer_node": S.tool(
        "answer",
        "Give the final answer, citing the steps it rests on. Ends the episode.",
        {"answer": S.text("the final answer"), "parent_ids": S.PARENTS},
        ["answer", "parent_ids"],
        S.NODE_ALIASES,
    ),
}

# Our wording. The official prompts (demo/vimrag_prompt.py) are not public: supply them with --prompt-file.
SYSTEM = """You are a research agent that answers questions about a collection of documents, images and videos.
You work in steps and keep a graph of them. Each turn you see the question, your action graph so far (JSON)
and your Multimodal Memory: the pictures you memorized, at a resolution that reflects how important they have been.

Each turn, think briefly, then make exactly one tool call:
<tool_call>{{"name": "<tool>", "arguments": {{...}}}}</tool_call>
{tools}
How to work:
- Start with add_search_node (parent "root"); a later search may build on earlier steps as its parents.
- After each search (or crop, or scale), call summarize_and_memorize before anything else: keep only the
  useful results, give each a priority from 1 to 5 (5 = decisive), and for a video list the seconds of the
  key frames, as labelled.
- {coords}
- When the memory holds the answer, call add_answer_node with a short answer and the steps it rests on as
  parent_ids. If the collection does not contain the answer, answer "Not answerable".
"""
USER = "Question: {query}\n\nAction graph:\n{action_graph}"
SUMMARY = "Summarize what these results show about the question, then call summarize_and_memorize with the useful ones."
COORDS = {
    "absolute": "Use crop when a detail (small text, a table cell, a chart label) needs a closer look; "
    "give bbox in pixels of the picture exactly as you see it.",
    "relative": "Use crop when a detail (small text, a table cell, a chart label) needs a closer look; "
    "give bbox as [x1, y1, x2, y2] from 0 to 1000, relative to the picture's width and height.",
}
