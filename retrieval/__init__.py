"""Retrieval: ingest a corpus of PDFs, images, videos and text into an index, and search it.

    import retrieval
    hits = retrieval.search("revenue growth in 2023", k=5, filters={"modalities": ["page"]}, index="idx")
    hits[0].unit.citation(), hits[0].score, hits[0].unit.load_image()

Heavy parts (models, FAISS) load on first use, so importing this package is cheap.

Where things live, in the order data flows:
    ingest.py        Indexer: files -> units -> vectors, committed in batches (ingest_plan.py: what is new;
                     extract_units.py: a file's units; embed_units.py: passages or pixels; sharded.py: the
                     same over N processes, planned by shard_plan.py, each rank's share in shard_run.py)
    loaders.py       reading PDFs, images, videos, text; page_images.py: VRAG's X_N.jpg page images
    ocr.py           OCR engines behind one interface (ocr_rapid.py: RapidOCR, its graphs folded by
                     onnx_fold.py; reading_order.py: layout)
    embedders.py     load_embedder(spec) (embedder_specs.py: specs; embedder_base.py: the interface;
                     vl_embedders.py: GVE, Qwen3-VL; st_embedder.py: MiniLM and st: models, on ONNX Runtime
                     (onnx_text.py) or torch (torch_text.py: bf16), in the precision.py chooses per CPU)
    store.py         the SQLite store, the source of truth; units.py: Unit, Hit, Filters
    milvus_store.py  the same on Milvus (store_spec.py: where an index lives; milvus_client.py: the
                     connection; milvus_schema.py, milvus_rows.py: collections and rows); stores.py opens either
    index.py         FAISS single-vector index; late_interaction.py: multi-vector two-stage MaxSim
                     (maxsim.py: the exact score, token pooling; index_base.py: shared checks;
                     index_file.py: the file format)
    retriever.py     hybrid search (bm25.py, fusion.py); remote.py: a search server as a retriever;
                     server.py: the HTTP search API
"""

from retrieval.errors import IndexOpenError, IngestError, RetrievalError
from retrieval.units import Filters, Hit, Unit


def search(query, k: int = 5, filters=None, *, index=None, mode: str = "hybrid", dynamic: bool = False):
    """Search an index (default: $VIMRAG_INDEX or ./vimrag-index); see `retrieval.retriever.Retriever.search`."""
    from retrieval.retriever import search as _search

    return _search(query, k=k, filters=filters, index=index, mode=mode, dynamic=dynamic)


__all__ = ["search", "Filters", "Hit", "Unit", "RetrievalError", "IngestError", "IndexOpenError"]
