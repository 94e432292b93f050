"""Retrieval: ingest a corpus of PDFs, images, videos and text into an index, and search it.

    import retrieval
    hits = retrieval.search("revenue growth in 2023", k=5, filters={"modalities": ["page"]}, index="idx")
    hits[0].unit.citation(), hits[0].score, hits[0].unit.load_image()

Heavy parts (models, FAISS) load on first use, so importing this package is cheap.
"""

from retrieval.errors import IndexOpenError, IngestError, RetrievalError
from retrieval.units import Filters, Hit, Unit


def search(query, k: int = 5, filters=None, *, index=None, mode: str = "hybrid", dynamic: bool = False):
    """Search an index (default: $VIMRAG_INDEX or ./vimrag-index); see `retrieval.retriever.Retriever.search`."""
    from retrieval.retriever import search as _search

    return _search(query, k=k, filters=filters, index=index, mode=mode, dynamic=dynamic)


__all__ = ["search", "Filters", "Hit", "Unit", "RetrievalError", "IngestError", "IndexOpenError"]
