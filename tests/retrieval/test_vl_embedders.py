"""GVE (`gve:`) and Qwen3-VL-Embedding (`qwen3vl-emb:`) on tiny random Qwen2.5-VL / Qwen3-VL folders.

The folders come from tests/tiny_vlm.py (random weights, a tokenizer trained there, a Qwen-style chat
template) and load through the real loading code; nothing is downloaded. Random weights say nothing about
retrieval quality, so the tests check the contract (shapes, norms, prompts, pooling, pixel budget) and
that a mixed folder indexes and searches end to end.
"""

import numpy as np
import pytest
import torch

from retrieval.embedder_specs import parse_spec
from retrieval.embedders import load_embedder
from retrieval.errors import RetrievalError
from retrieval.vl_embedders import GVEEmbedder, Qwen3VLEmbedder, last_token
from tests.retrieval.test_embedders import _assert_unit_rows, _image

pytestmark = pytest.mark.usefixtures("hub_offline")

KINDS = ("gve", "qwen3vl-emb")
TEXTS = ["a photo of a cat", "the report opens with a summary of the annual results", "revenue 2024"]


def _drop_lm_head(path):
    """Qwen3-VL-Embedding ships a bare Qwen3VLModel under `model.` with no LM head; make the tiny folder alike."""
    from safetensors.torch import load_file, save_file

    file = path / "model.safetensors"
    save_file(
        {k: v for k, v in load_file(file).items() if not k.startswith("lm_head")}, file, metadata={"format": "pt"}
    )
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from tests.tiny_vlm import build_tiny_qwen2_5_vl, build_tiny_qwen3_vl

    root = tmp_path_factory.mktemp("tiny_vl")
    return {"gve": build_tiny_qwen2_5_vl(root / "gve"), "qwen3vl-emb": _drop_lm_head(build_tiny_qwen3_vl(root / "q3"))}


@pytest.fixture(scope="module", params=KINDS)
def emb(request, folders):
    return load_embedder(f"{request.param}:{folders[request.param]}", device="cpu")


# ---------------------------------------------------------------------------------------------- contract


def test_specs_parse():
    assert parse_spec("gve:Alibaba-NLP/GVE-7B") == ("gve", "Alibaba-NLP/GVE-7B")
    assert parse_spec(" QWEN3VL-EMB:Qwen/Qwen3-VL-Embedding-2B") == ("qwen3vl-emb", "Qwen/Qwen3-VL-Embedding-2B")
    with pytest.raises(RetrievalError, match="names no model"):
        parse_spec("qwen3vl-emb:")


def test_shapes_norms_and_determinism(emb, folders):
    kind = emb.spec.split(":", 1)[0]
    assert isinstance(emb, {"gve": GVEEmbedder, "qwen3vl-emb": Qwen3VLEmbedder}[kind])
    assert emb.spec == f"{kind}:{folders[kind].resolve()}"
    assert emb.dim == 64 and emb.supports_images and not emb.multi_vector  # the tiny text hidden size
    docs, queries = emb.encode_texts(TEXTS), emb.encode_queries(TEXTS)
    images = [_image(1), _image(2, size=(300, 200)), _image(3, mode="RGBA"), _image(4, mode="L")]
    pics = emb.encode_images(images)
    for x, n in ((docs, 3), (queries, 3), (pics, 4)):
        assert x.shape == (n, 64)
        _assert_unit_rows(x)
    assert not np.allclose(docs[0], docs[1]) and not np.allclose(pics[0], pics[1])
    np.testing.assert_allclose(emb.encode_texts(TEXTS), docs, atol=1e-6)  # deterministic
    # padding inside a batch changes nothing: the pooled token sees only its own prompt
    np.testing.assert_allclose(emb.encode_texts(TEXTS, batch_size=1), docs, atol=1e-5)
    np.testing.assert_allclose(emb.encode_images(images, batch_size=1), pics, atol=1e-5)
    assert emb.encode_texts([]).shape == (0, 64) and emb.encode_images([]).shape == (0, 64)
    assert load_embedder(emb.spec, device="cpu") is emb


def test_prompts_follow_the_references(emb):
    doc, query = emb.prompts(["where is the cat"])[0], emb.prompts(["where is the cat"], query=True)[0]
    image_doc, image_query = emb.image_prompts(1)[0], emb.image_prompts(1, query=True)[0]
    assert "<|im_start|>user\nwhere is the cat<|im_end|>" in doc
    assert "<|vision_start|><|image_pad|><|vision_end|>" in image_doc
    if isinstance(emb, GVEEmbedder):
        # VRAG's GVE search engine: one prompt for queries and documents, closed by <|endoftext|>
        assert doc == query and image_doc == image_query
        assert doc.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>")
        assert doc.endswith("<|im_start|>assistant\n<|endoftext|>")
        np.testing.assert_allclose(emb.encode_queries(TEXTS), emb.encode_texts(TEXTS), atol=1e-6)
    else:
        # Qwen3-VL-Embedding: documents get the default instruction, queries the retrieval one
        assert doc.startswith("<|im_start|>system\nRepresent the user's input.<|im_end|>")
        assert query.startswith("<|im_start|>system\nRetrieve images or text relevant to the user's query.<|im_end|>")
        assert image_query.startswith(query.split("<|im_start|>user")[0])
        assert doc.endswith("<|im_start|>assistant\n")
        assert not np.allclose(emb.encode_queries(TEXTS), emb.encode_texts(TEXTS), atol=1e-3)
        assert not np.allclose(emb.encode_image_queries([_image(1)]), emb.encode_images([_image(1)]), atol=1e-3)


def test_vector_is_the_last_prompt_tokens_hidden_state(emb):
    enc = emb.inputs(emb.prompts(TEXTS[1:2]))
    with torch.inference_mode():
        hidden = emb.model(**enc).last_hidden_state  # (1, seq, dim)
    want = torch.nn.functional.normalize(hidden[:, -1], dim=-1).numpy()  # (1, dim)
    np.testing.assert_allclose(emb.encode_texts(TEXTS[1:2]), want, atol=1e-5)
    if isinstance(emb, GVEEmbedder):
        assert enc["input_ids"][0, -1] == emb.processor.tokenizer.convert_tokens_to_ids("<|endoftext|>")


def test_last_token_reads_left_and_right_padding():
    hidden = torch.arange(24.0).reshape(3, 4, 2)  # (batch, seq, dim)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]])
    assert last_token(hidden, mask).tolist() == [[6.0, 7.0], [10.0, 11.0], [22.0, 23.0]]


def test_pixel_budget(emb):
    grid = 28 if isinstance(emb, GVEEmbedder) else 32  # merged 2x2 patches of 14 px (Qwen2.5-VL) or 16 px (Qwen3-VL)
    for size in ((1600, 1200), (20, 20)):
        thw = emb.inputs(emb.image_prompts(1), [_image(5, size=size)])["image_grid_thw"][0]
        tokens = int(thw.prod()) // 4
        assert emb.min_pixels // grid**2 <= tokens <= emb.max_pixels // grid**2


# ---------------------------------------------------------------------------------------------- errors


def test_wrong_model_family_is_explained(folders):
    with pytest.raises(RetrievalError, match="'qwen3_vl' model, not 'qwen2_5_vl'"):
        load_embedder(f"gve:{folders['qwen3vl-emb']}", device="cpu")
    with pytest.raises(RetrievalError, match="'qwen2_5_vl' model, not 'qwen3_vl'"):
        load_embedder(f"qwen3vl-emb:{folders['gve']}", device="cpu")


@pytest.mark.parametrize("spec", ["gve:nonexistent-org/nonexistent-gve", "qwen3vl-emb:nonexistent-org/no-emb"])
def test_unknown_hub_id_offline_says_to_pass_a_folder(spec):
    with pytest.raises(RetrievalError) as e:
        load_embedder(spec, device="cpu")
    assert "cannot be downloaded" in str(e.value) and f"{spec.split(':')[0]}:DIR" in str(e.value)


# ---------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_index_and_search_a_mixed_folder(emb, mixed_corpus, tmp_path, capsys, monkeypatch):
    from app.cli import main
    from retrieval import embedders
    from retrieval.retriever import Retriever

    # The CLI and the Retriever load this same CPU instance on any machine: the self-match margins below
    # (about 1e-3 between bright pages and the poster) are under bf16 noise on a GPU.
    monkeypatch.setattr(embedders, "pick_device", lambda device: "cpu")
    idx = tmp_path / "idx"
    assert main(["index", str(mixed_corpus), "--index", str(idx), "--embedder", emb.spec, "--ocr", "none", "-q"]) == 0
    assert "indexed 7 units from 4 files" in capsys.readouterr().out  # 4 PDF pages, the poster, a clip, a note
    r = Retriever(idx, ocr="none")
    assert r.spec == emb.spec and r.embedder is emb

    hits = r.search("battery runtime of the Falcon X2", k=7, mode="dense")
    assert {h.unit.modality for h in hits} == {"page", "image", "video", "text"}
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= s <= 1.0 + 1e-5 for s in scores)

    poster = next(h.unit for h in hits if h.unit.modality == "image")
    clip = next(h.unit for h in hits if h.unit.modality == "video")
    frame = clip.load_frames()[-1][1]  # a keyframe, embedded at ingest like any image
    for query, unit in ((poster.load_image(max_pixels=1_000_000), poster), (frame, clip)):
        by_image = r.search(query, k=7, mode="dense")
        assert {"page", "image", "video"} <= {h.unit.modality for h in by_image}
        if isinstance(emb, GVEEmbedder):  # a query image is framed like a stored one: it finds itself
            assert by_image[0].unit.uid == unit.uid and by_image[0].score == pytest.approx(1.0, abs=1e-4)
