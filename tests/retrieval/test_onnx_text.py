"""MiniLM on ONNX Runtime (the default on a CPU): the same vectors as torch, exported once and cached."""

import numpy as np
import pytest

from retrieval import embedders, onnx_text, st_embedder

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def minilm():
    """MiniLM on torch, as VIMRAG_TEXT_BACKEND=torch loads it."""
    mp = pytest.MonkeyPatch()
    mp.setenv(onnx_text.BACKEND_ENV, "torch")
    emb = embedders.SentenceTransformerEmbedder("minilm", st_embedder.minilm_path(), "cpu")
    mp.undo()
    return emb


@pytest.fixture(scope="module")
def onnx_minilm(minilm):
    """MiniLM as it loads by default: on ONNX Runtime."""
    mp = pytest.MonkeyPatch()
    mp.delenv(onnx_text.BACKEND_ENV, raising=False)
    emb = embedders.SentenceTransformerEmbedder("minilm", st_embedder.minilm_path(), "cpu")
    mp.undo()
    return emb


def _texts() -> list[str]:
    rng = np.random.default_rng(0)
    words = "the defect rate fell from 2.1 percent to 0.8 percent after the new calibration rig in Tampere".split()
    # Lengths from one word to past MiniLM's 256-token window, in one call, so batches mix padding and truncation.
    return [" ".join(rng.choice(words, n)) for n in rng.integers(1, 400, size=40)] + ["", "x"]


def test_onnx_runtime_is_the_default_and_torch_is_kept_when_asked(onnx_minilm, minilm):
    # measured faster end to end on the quiet 2-core box (retrieval/onnx_text.py)
    assert isinstance(onnx_minilm._onnx, onnx_text.OnnxTextEncoder)
    assert minilm._onnx is None


@pytest.mark.slow
def test_onnx_runtime_matches_torch(onnx_minilm, minilm):
    assert isinstance(onnx_minilm._onnx, onnx_text.OnnxTextEncoder) and onnx_minilm._onnx.path.is_file()
    texts = _texts()
    fast = onnx_minilm.encode_texts(texts, batch_size=8)  # (n, 384)
    ref = minilm.encode_texts(texts, batch_size=8)  # torch
    assert fast.shape == ref.shape == (len(texts), 384) and fast.dtype == np.float32
    assert np.einsum("nd,nd->n", fast, ref).min() > 0.99999
    q = onnx_minilm.encode_queries(["defect rate after the rig"])
    assert np.dot(q[0], minilm.encode_queries(["defect rate after the rig"])[0]) > 0.99999


def test_the_export_is_cached_and_reused(onnx_minilm):
    path = onnx_minilm._onnx.path
    stamp = path.stat().st_mtime_ns
    again = onnx_text.OnnxTextEncoder.for_model(
        onnx_minilm.model, onnx_text.Path(st_embedder.minilm_path()) / "model.safetensors"
    )
    assert again.path == path and again.path.stat().st_mtime_ns == stamp


def test_torch_when_asked_or_when_the_pipeline_is_not_plain(minilm, monkeypatch):
    path = st_embedder.minilm_path()
    monkeypatch.setenv(onnx_text.BACKEND_ENV, "torch")
    assert st_embedder._onnx_encoder(minilm.model, path, "minilm") is None
    monkeypatch.setenv(onnx_text.BACKEND_ENV, "fastest")
    with pytest.raises(ValueError, match="onnx .the default. or torch"):
        onnx_text.wanted()
    monkeypatch.setenv(onnx_text.BACKEND_ENV, "onnx")
    monkeypatch.setattr(minilm.model, "prompts", {"query": "query: ", "document": ""})
    assert not onnx_text.supported(minilm.model)  # a prompt would change the text torch sees


def test_a_failed_export_falls_back_to_torch_with_a_warning(minilm, monkeypatch, tmp_path):
    monkeypatch.setenv(onnx_text.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(onnx_text.BACKEND_ENV, "onnx")

    def broken(*a, **k):
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr("torch.onnx.export", broken)
    with pytest.warns(UserWarning, match="running on torch.*exporter exploded"):
        assert st_embedder._onnx_encoder(minilm.model, st_embedder.minilm_path(), "minilm") is None
    assert not list(tmp_path.rglob("*.onnx")) and not list(tmp_path.rglob("*.tmp"))  # no half-written graph


TRICKY = ["", "x", "  leading and trailing  ", "Ünïcödé Café naïve 東京 🙂", "tab\tand\nnewline", "word " * 600]


def test_a_cached_graph_loads_from_the_folder_with_the_models_tokens_and_vectors(onnx_minilm):
    """`from_folder` (no sentence-transformers) tokenizes as the loaded model does and gives the same vectors."""
    folder = onnx_text.Path(st_embedder.minilm_path())
    light = onnx_text.from_folder(folder)
    loaded = onnx_text.OnnxTextEncoder.for_model(onnx_minilm.model, folder / "model.safetensors")
    assert light is not None and light.path == loaded.path and light.dim == 384
    texts = _texts() + TRICKY
    for batch in (texts[:8], texts[8:30], TRICKY, [texts[5]]):
        want = {k: v for k, v in loaded._tokenize(batch).items()}
        got = light._tokenize(batch)
        assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want), batch[:2]
    assert np.array_equal(light.encode(texts, batch_size=8), loaded.encode(texts, batch_size=8))


@pytest.mark.slow
def test_a_new_process_encodes_without_importing_torch(onnx_minilm):
    import subprocess
    import sys

    code = (
        "import sys; from retrieval.embedders import load_embedder; e = load_embedder('minilm'); "
        "v = e.encode_queries(['defect rate']); "
        "print(v.shape, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[0] == "(1, 384) False False"  # the default device is found without torch too
    q = onnx_minilm.encode_queries(["defect rate"])
    assert q.shape == (1, 384)


def test_only_a_plain_folder_loads_without_the_model(tmp_path, onnx_minilm, monkeypatch):
    import json
    import shutil

    src = onnx_text.Path(st_embedder.minilm_path())
    assert onnx_text.plain_folder(src) == {"max_length": 256, "dim": 384}

    def variant(name: str, file: str, change) -> onnx_text.Path:
        folder = tmp_path / name
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("*.safetensors"))
        (folder / "model.safetensors").symlink_to(src / "model.safetensors")
        data = json.loads((folder / file).read_text()) if (folder / file).is_file() else {}
        (folder / file).write_text(json.dumps(change(data)))
        return folder

    prompts = variant("prompts", "config_sentence_transformers.json", lambda d: d | {"prompts": {"query": "q: "}})
    lower = variant("lower", "sentence_bert_config.json", lambda d: d | {"do_lower_case": True})
    cls = variant(
        "cls",
        "1_Pooling/config.json",
        lambda d: d | {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
    )
    dense = variant("dense", "modules.json", lambda d: d + [{"idx": 3, "path": "3_Dense", "type": "x.models.Dense"}])
    monkeypatch.setattr(onnx_text, "graph_path", lambda weights: onnx_minilm._onnx.path)  # MiniLM's cached graph
    for folder in (prompts, lower, cls, dense):
        assert onnx_text.plain_folder(folder) is None, folder.name
    assert onnx_text.from_folder(prompts) is None  # and so it is never loaded without the model
    assert onnx_text.from_folder(variant("plain", "modules.json", lambda d: d)) is not None  # the graph is found
