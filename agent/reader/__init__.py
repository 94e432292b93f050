"""The embedded default's reader: typed, grounded answer extraction from text (DESIGN.md 5.2).

The embedded backend (agent/backends/embedded.py) drives the tools; this package reads its evidence:
`extract.py` works out what the question wants and returns the grounded span that answers it, or abstains
with a note. The span and rule modules each hold one kind of reading: `answer_types` (what a question asks
for), `sentences` and `words` (splitting and matching text), `spans` (typed phrases), `table_reader`
(cells, arithmetic and extremes of the evidence's tables, built by retrieval/tables.py), `clause_spans`
(conditions and definitions), `name_spans` (people, organisations, places),
`doc_spans` (titles and pages); `ranking` gathers the spans of the wanted type and ranks them, and
`date_format` writes a date as the question asks; `smollm` is SmolLM2-135M, which ranks a few candidate spans.
`extract_baseline` is the reader before it, kept for `python -m eval.bench_extract`'s comparison.
"""
