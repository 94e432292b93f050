"""The DAG working memory: nodes and their items (graph.py), energy and the pixel budget it buys each
memorized item (energy.py), and the memory section and action graph as the model sees them (render.py,
draw.py)."""
