"""Building blocks for the tools' JSON Schemas, and the plain function specs a prompt or `tools=` field gets.

A protocol module declares its tools as `{name: tool(...)}`. Keys starting "x-" are ours: the validator in
agent/validate.py reads them, and `specs` strips them before a schema reaches the model.
- "x-kind" on a tool: what the step is (search, memorize, crop, scale, answer); rewards, rollouts and the UI
  read tool lists from it, never from tool names.
- "x-ref" on a string: the pool an id must come from: "node" (an existing node), "new_node" (an unused id),
  "info" (an information id the model has seen), "image" (a seen id with pixels), "memorizable" (a result of
  the current search).
- "x-kind": "bbox" on an array: a box [x1, y1, x2, y2] in the coordinates the model grounds in.
- "x-aliases": argument aliases of a nested object (a `memorize` item).

    >>> t = tool("search", "Search the corpus.", {"query": text("the search query")}, ["query"])
    >>> params = specs({"search": t})[0]["function"]["parameters"]
    >>> params["required"], params["properties"]["query"]
    (['query'], {'type': 'string', 'description': 'the search query', 'minLength': 1})
"""

from __future__ import annotations

from typing import Any

SCALE_RANGE = (0.25, 4.0)
KINDS = ("search", "memorize", "crop", "scale", "answer")

# How a box is described to the model, per grounding convention (agent/coords.py decides which applies).
BBOX_TEXT = {
    "absolute": "[x1, y1, x2, y2]: left, top, right, bottom in pixels of the image as you see it",
    "relative": "[x1, y1, x2, y2]: left, top, right, bottom, each from 0 to 1000 relative to the image's "
    "width and height",
}


def tool(kind: str, description: str, props: dict, required: list[str], aliases: dict | None = None) -> dict:
    if kind not in KINDS:
        raise ValueError(f"unknown tool kind {kind!r}; choose one of {KINDS}")
    return {
        "x-kind": kind,
        "description": description,
        "aliases": aliases or {},
        "parameters": {"type": "object", "properties": props, "required": required},
    }


def text(desc: str, nonempty: bool = True) -> dict:
    return {"type": "string", "description": desc, **({"minLength": 1} if nonempty else {})}


def ref(desc: str, pool: str) -> dict:
    return {"type": "string", "minLength": 1, "description": desc, "x-ref": pool}


BBOX = {
    "type": "array",
    "items": {"type": "number"},
    "minItems": 4,
    "maxItems": 4,
    "x-kind": "bbox",
    "description": BBOX_TEXT["absolute"],
}
PARENTS = {
    "type": "array",
    "items": ref("an existing node id", "node"),
    "minItems": 1,
    "description": 'ids of the existing nodes this step builds on ("root" is the question)',
}
NEW_ID = ref("a new, unused node id for this step", "new_node")
IMAGE = ref('information id of an image you have seen, e.g. "Picture 1"', "image")
FACTOR = {
    "type": "number",
    "minimum": SCALE_RANGE[0],
    "maximum": SCALE_RANGE[1],
    "description": "resolution factor: 2 shows the item at twice the pixels' side, 0.5 at half",
}
NODE_ALIASES = {"parents": "parent_ids", "parent_id": "parent_ids", "parent": "parent_ids", "node_id": "id"}


def public(schema: Any, coords: str = "absolute") -> Any:
    """The schema without our "x-" keys; a bbox is described in the `coords` convention."""
    if isinstance(schema, dict):
        out = {k: public(v, coords) for k, v in schema.items() if not k.startswith("x-") and k != "aliases"}
        if schema.get("x-kind") == "bbox":
            out["description"] = BBOX_TEXT[coords]
        return out
    if isinstance(schema, list):
        return [public(v, coords) for v in schema]
    return schema


def specs(tools: dict[str, dict], coords: str = "absolute") -> list[dict]:
    """OpenAI/Qwen function specs of `tools`, for a prompt or an API's `tools=` field."""
    return [
        {
            "type": "function",
            "function": {"name": name, "description": t["description"], "parameters": public(t["parameters"], coords)},
        }
        for name, t in tools.items()
    ]
