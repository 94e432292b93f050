"""The DAG working memory: nodes, energy, pixel-budget allocation, rendering (built in a later issue)."""
