"""The schemas of an index's four Milvus collections (meta, files, units, vectors; retrieval/milvus_store.py says
what each holds): their fields, the BM25 function that turns the units' `terms` into sparse vectors, and the
indexes Milvus searches.
"""

from __future__ import annotations


def create_collection(cl, full: str, name: str, dim: int | None = None) -> None:
    """Create the collection `full`, the `name` one of the four (the vectors one needs the embedder's dim), through
    the client `cl`; one that another worker creates at the same moment is loaded instead."""
    from pymilvus import DataType, Function, FunctionType

    s = cl.create_schema(auto_id=False, enable_dynamic_field=False)
    ip = cl.prepare_index_params()
    if name == "meta":
        s.add_field("key", DataType.VARCHAR, is_primary=True, max_length=256)
        s.add_field("value", DataType.VARCHAR, max_length=65535)
    elif name == "files":
        s.add_field("path", DataType.VARCHAR, is_primary=True, max_length=4096)
        s.add_field("root", DataType.VARCHAR, max_length=4096)
        s.add_field("sha256", DataType.VARCHAR, max_length=64)
        s.add_field("size", DataType.INT64)
        s.add_field("mtime", DataType.DOUBLE)
        s.add_field("status", DataType.VARCHAR, max_length=16)
        s.add_field("reason", DataType.VARCHAR, max_length=4096)
        s.add_field("n_units", DataType.INT64)
        s.add_field("indexed_at", DataType.DOUBLE)
    else:
        s.add_field("uid" if name == "units" else "vid", DataType.VARCHAR, is_primary=True, max_length=512)
        if name == "vectors":
            s.add_field("uid", DataType.VARCHAR, max_length=512)
            s.add_field("part", DataType.INT64)
        s.add_field("path", DataType.VARCHAR, max_length=4096)
        s.add_field("name", DataType.VARCHAR, max_length=1024)
        s.add_field("doc", DataType.VARCHAR, max_length=1024)
        s.add_field("modality", DataType.VARCHAR, max_length=16)
        s.add_field("t_start", DataType.DOUBLE)
        s.add_field("t_end", DataType.DOUBLE)
    if name == "units":
        s.add_field("text", DataType.VARCHAR, max_length=65535)
        s.add_field("data", DataType.VARCHAR, max_length=65535)
        s.add_field("terms", DataType.VARCHAR, max_length=65535, enable_analyzer=True)
        s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        s.add_function(
            Function(
                name="bm25",
                function_type=FunctionType.BM25,
                input_field_names=["terms"],
                output_field_names=["sparse"],
            )
        )
        # k1 and b as the local BM25 (retrieval/bm25.py: bm25s, Lucene scoring).
        bm25 = {"bm25_k1": 1.2, "bm25_b": 0.75}
        ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=bm25)
    elif name == "vectors":
        s.add_field("vec", DataType.FLOAT_VECTOR, dim=int(dim))
        ip.add_index("vec", index_type="AUTOINDEX", metric_type="IP")
    else:  # Milvus wants a vector field in every collection: a 2-d placeholder, never searched
        s.add_field("_v", DataType.FLOAT_VECTOR, dim=2)
        ip.add_index("_v", index_type="FLAT", metric_type="L2")
    try:
        cl.create_collection(full, schema=s, index_params=ip, consistency_level="Strong")
    except Exception:
        if full not in cl.list_collections():  # not another worker creating it at the same moment
            raise
        cl.load_collection(full)
