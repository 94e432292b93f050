"""The ONNX rewrites give the same outputs with fewer operators, on a graph built here and on the shipped models."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper, version_converter  # noqa: E402

from retrieval import ocr, onnx_fold  # noqa: E402
from retrieval.ocr import get_ocr  # noqa: E402

RAPID_MODELS = None
if "rapidocr" in ocr.available_engines():
    import rapidocr_onnxruntime

    RAPID_MODELS = Path(rapidocr_onnxruntime.__file__).parent / "models"


def _block(nodes, inits, rng, x, tag, cin, cout, kernel, pads, group=1, after=True):
    """Conv, then (when `after`) Mul/Add by scalars and a spelt-out hard-swish, as paddle2onnx exports them."""
    w = rng.normal(size=(cout, cin // group, kernel, kernel)).astype(np.float32) * 0.3
    inits += [
        numpy_helper.from_array(w, f"{tag}.w"),
        numpy_helper.from_array(rng.normal(size=cout).astype(np.float32), f"{tag}.b"),
    ]
    nodes.append(
        helper.make_node(
            "Conv",
            [x, f"{tag}.w", f"{tag}.b"],
            [f"{tag}.y"],
            pads=[pads] * 4,
            group=group,
            kernel_shape=[kernel, kernel],
        )
    )
    if not after:
        return f"{tag}.y"
    consts = {"a": 1.7, "c": -0.4, "three": 3.0, "zero": 0.0, "six": 6.0, "a2": 0.6, "c2": 0.25}
    for k, v in consts.items():
        nodes.append(
            helper.make_node("Constant", [], [f"{tag}.{k}"], value=numpy_helper.from_array(np.array(v, np.float32)))
        )
    nodes += [
        helper.make_node("Mul", [f"{tag}.a", f"{tag}.y"], [f"{tag}.m"]),
        helper.make_node("Add", [f"{tag}.m", f"{tag}.c"], [f"{tag}.h"]),
        helper.make_node("Add", [f"{tag}.h", f"{tag}.three"], [f"{tag}.h3"]),
        helper.make_node("Clip", [f"{tag}.h3", f"{tag}.zero", f"{tag}.six"], [f"{tag}.cl"]),
        helper.make_node("Mul", [f"{tag}.h", f"{tag}.cl"], [f"{tag}.hm"]),
        helper.make_node("Div", [f"{tag}.hm", f"{tag}.six"], [f"{tag}.hs"]),
        helper.make_node("Mul", [f"{tag}.a2", f"{tag}.hs"], [f"{tag}.m2"]),
        helper.make_node("Add", [f"{tag}.m2", f"{tag}.c2"], [f"{tag}.out"]),
    ]
    return f"{tag}.out"


def _exported_like(path: Path) -> None:
    """A 4-conv opset-12 graph: padded 3x3, unpadded 1x1, padded depthwise 3x3, and a 1x1 head."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    y = _block(nodes, inits, rng, "x", "c1", 3, 8, 3, 1)
    y = _block(nodes, inits, rng, y, "c2", 8, 8, 1, 0)  # its affine before is foldable (no padding)
    y = _block(nodes, inits, rng, y, "c3", 8, 8, 3, 1, group=8)  # its affine before is not (padded)
    y = _block(nodes, inits, rng, y, "c4", 8, 4, 1, 0, after=False)
    graph = helper.make_graph(
        nodes,
        "exported_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, None, None])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [None, 4, None, None])],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8), str(path))


def _run(model, x):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_rewrites_keep_the_outputs_and_remove_the_elementwise_passes(tmp_path):
    path = tmp_path / "m.onnx"
    _exported_like(path)
    model = version_converter.convert_version(onnx.load(str(path)), onnx_fold.HARDSWISH_OPSET)
    onnx_fold.constants_to_initializers(model)
    assert onnx_fold.fold_affine_after_conv(model) == 3
    assert onnx_fold.fuse_hardswish(model) == 3
    # Of the three affines before a conv, the one before the padded depthwise conv cannot be folded into
    # it: its padded border would hold c2, not 0. It becomes a 1x1 depthwise conv of its own.
    assert onnx_fold.fold_affine_before_conv(model) == 2
    assert onnx_fold.affine_as_depthwise_conv(model) == 1
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops == {"Conv": 5, "HardSwish": 3}, ops
    folded = onnx_fold.fold(path)
    assert Counter(n.op_type for n in onnx.load_from_string(folded).graph.node) == ops
    x = np.random.default_rng(1).normal(size=(2, 3, 17, 23)).astype(np.float32) * 2
    np.testing.assert_allclose(_run(folded, x), _run(str(path), x), atol=1e-4, rtol=1e-4)


def test_a_conv_output_read_twice_is_not_folded(tmp_path):
    """Folding the affine into a conv whose output something else also reads would change that reader."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.normal(size=(2, 3, 1, 1)).astype(np.float32), "w")
    a = numpy_helper.from_array(np.array(2.0, np.float32), "a")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1]),
        helper.make_node("Mul", ["y", "a"], ["scaled"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 4]) for n in ("y", "scaled")],
        initializer=[w, a],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    assert onnx_fold.fold_affine_after_conv(model) == 0
    assert [n.op_type for n in model.graph.node] == ["Conv", "Mul"]


@pytest.mark.skipif(RAPID_MODELS is None, reason="rapidocr-onnxruntime is not installed")
@pytest.mark.parametrize("name, shape", [("rec", (2, 3, 48, 320)), ("det", (1, 3, 320, 480))])
def test_shipped_models_give_the_same_outputs(name, shape):
    path = RAPID_MODELS / f"ch_PP-OCRv4_{name}_infer.onnx"
    folded = onnx_fold.fold(path)
    before = Counter(n.op_type for n in onnx.load(str(path)).graph.node)
    after = Counter(n.op_type for n in onnx.load_from_string(folded).graph.node)
    assert after["Clip"] == 0 and after["HardSwish"] == before["Clip"]
    assert after["Mul"] + after["Add"] < (before["Mul"] + before["Add"]) / 2
    x = np.random.default_rng(3).uniform(-1, 1, size=shape).astype(np.float32)
    new, old = _run(folded, x), _run(str(path), x)
    np.testing.assert_allclose(new, old, atol=1e-4)
    if name == "rec":  # (batch, frames, classes): the decoded characters are the same
        assert (new.argmax(axis=2) == old.argmax(axis=2)).all()


@pytest.mark.skipif(RAPID_MODELS is None, reason="rapidocr-onnxruntime is not installed")
def test_engine_reads_the_same_text_with_and_without_folding():
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (900, 200), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=30)
    d.text((30, 40), "Quarterly revenue rose 12.5% to $4,310 million", fill="black", font=font)
    d.text((30, 120), "Net income 2023: 815 (in thousands)", fill="black", font=font)
    folded = get_ocr("rapidocr").read(img)
    from retrieval.ocr_rapid import RapidOcrEngine

    plain = RapidOcrEngine(fold=False).read(img)
    assert folded.text == plain.text and folded.text.strip()


@pytest.mark.skipif(RAPID_MODELS is None, reason="rapidocr-onnxruntime is not installed")
def test_a_model_the_rewrites_do_not_fit_runs_as_shipped_with_a_warning(monkeypatch):
    from retrieval import ocr_rapid

    def broken(path):
        raise ValueError("unexpected graph")

    monkeypatch.setattr(onnx_fold, "fold", broken)
    path = str(RAPID_MODELS / "ch_PP-OCRv4_rec_infer.onnx")
    with pytest.warns(UserWarning, match="runs as shipped; its rewrite failed .ValueError: unexpected graph"):
        session = ocr_rapid._quiet_session(path, 1)
    x = np.zeros((1, 3, 48, 96), np.float32)
    assert session.run(None, {"x": x})[0].shape[-1] == 6625  # the shipped recogniser's classes
