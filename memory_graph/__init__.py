"""The DAG working memory: nodes and their items (graph.py), energy and the pixel budget it buys each
memorized item (energy.py), the memory section and action graph as the model sees them (render.py,
draw.py), and `to_dict` / `from_dict` for every dataclass that crosses a boundary (record.py)."""
