"""The tools of each agent protocol, as JSON Schemas: what the model is told, and what its calls are checked
against (DESIGN.md 4.1).

`TOOLS[protocol][tool]` holds the tool's description, its `parameters` schema and `aliases` (argument
names a model often writes instead, mapped to the real ones). Keys starting "x-" are ours: the validator in
agent/actions.py reads them, and `tool_specs` strips them before the schemas reach a prompt.
- "x-ref": the pool a string id must come from: "node" (an existing node), "new_node" (an unused node id),
  "info" (an information id the model has seen), "image" (a seen id with pixels), "memorizable" (a result
  of the current search).
- "x-kind": "bbox": a 4-number array [x1, y1, x2, y2] in pixels of the image as the model sees it.
- "x-aliases": argument aliases of a nested object (a `memorize` item).

    >>> [spec["function"]["name"] for spec in tool_specs("react")]
    ['search', 'crop', 'scale', 'answer']
    >>> TOOLS["react"]["crop"]["parameters"]["properties"]["image"]["x-ref"]
    'image'
    >>> tool_specs("react")[1]["function"]["parameters"]["properties"]["image"]
    {'type': 'string', 'minLength': 1, 'description': 'information id of an image you have seen, e.g. "Picture 1"'}

Left out on purpose: parsing and checking calls (agent/actions.py) and running them (agent/toolbox.py, agent/tools.py).
"""

from __future__ import annotations

from typing import Any

PROTOCOLS = ("vimrag", "react", "vrag")
SCALE_RANGE = (0.25, 4.0)


# ---- schema builders -------------------------------------------------------------------------------------
def _tool(description: str, props: dict, required: list[str], aliases: dict | None = None) -> dict:
    return {"description": description, "aliases": aliases or {},
            "parameters": {"type": "object", "properties": props, "required": required}}


def _text(desc: str, nonempty: bool = True) -> dict:
    return {"type": "string", "description": desc, **({"minLength": 1} if nonempty else {})}


def _ref(desc: str, ref: str) -> dict:
    return {"type": "string", "minLength": 1, "description": desc, "x-ref": ref}


_BBOX = {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4, "x-kind": "bbox",
         "description": "[x1, y1, x2, y2]: left, top, right, bottom in pixels of the image as you see it"}
_PARENTS = {"type": "array", "items": _ref("an existing node id", "node"), "minItems": 1,
            "description": 'ids of the existing nodes this step builds on ("root" is the question)'}
_NEW_ID = _ref("a new, unused node id for this step", "new_node")
_IMAGE = _ref('information id of an image you have seen, e.g. "Picture 1"', "image")
_FACTOR = {"type": "number", "minimum": SCALE_RANGE[0], "maximum": SCALE_RANGE[1],
           "description": "resolution factor: 2 shows the item at twice the pixels' side, 0.5 at half"}
_MEMO_ITEM = {"type": "object", "required": ["information_id", "is_useful", "priority_score"], "x-aliases": {
    "info_id": "information_id", "id": "information_id", "useful": "is_useful", "priority": "priority_score",
    "score": "priority_score", "key_timestamps": "key_timestamp", "timestamps": "key_timestamp"},
    "properties": {
        "information_id": _ref('id of one of the current results, e.g. "Picture 2"', "memorizable"),
        "is_useful": {"type": "boolean", "description": "whether it helps answer the question"},
        "priority_score": {"type": "integer", "minimum": 1, "maximum": 5,
                           "description": "1 (marginal) .. 5 (decisive): decides how many pixels it keeps"},
        "key_timestamp": {"type": "array", "items": {"type": "number", "minimum": 0},
                          "description": "videos only: seconds of the key frames to keep"}}}
_NODE_ALIASES = {"parents": "parent_ids", "parent_id": "parent_ids", "parent": "parent_ids", "node_id": "id"}

TOOLS: dict[str, dict[str, dict]] = {
    "vimrag": {
        "add_search_node": _tool(
            "Open a search step: retrieve evidence for a sub-query. The top results are shown as Picture k / "
            "Video k / Text k. To search with a region of an image you have seen, give `image` (and `bbox`).",
            {"id": _NEW_ID, "query": _text("the search query", nonempty=False), "parent_ids": _PARENTS,
             "image": _IMAGE, "bbox": _BBOX}, ["id", "parent_ids"], _NODE_ALIASES),
        "summarize_and_memorize": _tool(
            "Close the current search step: summarize what its results show and memorize the useful ones "
            "with a priority (memorize may be empty).",
            {"summarize": _text("what the results show, in a few sentences", nonempty=False),
             "memorize": {"type": "array", "items": _MEMO_ITEM, "description": "the results worth keeping"}},
            ["summarize", "memorize"], {"summary": "summarize", "memory": "memorize", "items": "memorize"}),
        "crop": _tool(
            "Zoom into a region of an image you have seen; the crop becomes a child node with more pixels.",
            {"image": _IMAGE, "bbox": _BBOX, "id": _NEW_ID, "parent_ids": _PARENTS}, ["image", "bbox"],
            _NODE_ALIASES),
        "scale": _tool(
            "Show an item you have seen again at another resolution; the result becomes a child node.",
            {"image": _ref('information id of the item, e.g. "Picture 1"', "info"), "factor": _FACTOR,
             "id": _NEW_ID, "parent_ids": _PARENTS}, ["image", "factor"], {**_NODE_ALIASES, "scale": "factor"}),
        "add_answer_node": _tool(
            "Give the final answer, citing the nodes it rests on. Ends the episode.",
            {"answer": _text("the final answer"), "parent_ids": _PARENTS}, ["answer", "parent_ids"],
            _NODE_ALIASES),
    },
    "react": {
        "search": _tool("Search the corpus; the top results are shown.", {"query": _text("the search query")},
                        ["query"]),
        "crop": _tool("Zoom into a region of an image you have seen.", {"image": _IMAGE, "bbox": _BBOX},
                      ["image", "bbox"]),
        "scale": _tool("Show an item you have seen again at another resolution.",
                       {"image": _ref('information id of the item, e.g. "Picture 1"', "info"),
                        "factor": _FACTOR}, ["image", "factor"], {"scale": "factor"}),
        "answer": _tool("Give the final answer. Ends the episode.", {"answer": _text("the final answer")},
                        ["answer"]),
    },
    "vrag": {  # tag protocol; the schemas serve validation and documentation
        "search": _tool("<search>query</search>: retrieve the next page image.",
                        {"query": _text("the search query")}, ["query"]),
        "crop": _tool("<bbox>[x1, y1, x2, y2]</bbox>: zoom into a region of the latest image.",
                      {"bbox": _BBOX}, ["bbox"]),
        "answer": _tool("<answer>text</answer>: the final answer.", {"answer": _text("the final answer")},
                        ["answer"]),
    },
}


def protocol_tools(protocol: str) -> dict[str, dict]:
    """TOOLS[protocol]; an unknown protocol is the caller's bug, so it raises ValueError naming the choices."""
    if protocol not in TOOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {list(PROTOCOLS)}")
    return TOOLS[protocol]


def _public(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _public(v) for k, v in schema.items() if not k.startswith("x-")}
    return schema


def tool_specs(protocol: str) -> list[dict]:
    """OpenAI/Qwen function schemas of the protocol's tools, for the system prompt or the `tools=` field."""
    return [{"type": "function", "function": {"name": name, "description": t["description"],
                                              "parameters": _public(t["parameters"])}}
            for name, t in protocol_tools(protocol).items()]
