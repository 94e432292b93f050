"""Crop coordinate mapping and resizing, worked by hand (non-square images, resized views, nested crops)."""

import pytest
from PIL import Image

from agent.tools import ToolError, compose_box, map_bbox, resize_for_model, scaled_budget, target_size


def test_identity_view_only_pads():
    # the model saw the raw 800x600 image as is: the box grows by 28 px on each side
    assert map_bbox([100, 100, 200, 150], (800, 600), (800, 600)) == (72, 72, 228, 178)


def test_non_square_downscaled_view():
    # raw 3000x1000 seen at 840x280 (factor 3000/840 = 25/7 on both axes)
    # x1 = (420 - 28) * 25/7 = 1400, y1 = (140 - 28) * 25/7 = 400, x2 = (560 + 28) * 25/7 = 2100,
    # y2 = (210 + 28) * 25/7 = 850
    assert map_bbox([420, 140, 560, 210], (840, 280), (3000, 1000)) == (1400, 400, 2100, 850)


def test_unequal_axis_factors():
    # a view resized to the patch grid can stretch the axes differently: 1000x500 seen at 980x504
    # x: 98 * 1000/980 = 100, 196 * 1000/980 = 200; y: 56 * 500/504 = 55.6 -> floor 55, 112 * 500/504 = 111.1
    # -> ceil 112 (the box is rounded outwards, never cutting into the region asked for)
    assert map_bbox([98, 56, 196, 112], (980, 504), (1000, 500), pad=0) == (100, 55, 200, 112)


def test_clamped_to_the_image_edges():
    # a box touching the corner is padded outwards and then clamped to the image
    assert map_bbox([0, 0, 50, 50], (100, 100), (1000, 1000)) == (0, 0, 780, 780)
    assert map_bbox([90, 90, 140, 140], (100, 100), (1000, 1000)) == (620, 620, 1000, 1000)


@pytest.mark.parametrize(
    "bbox,match",
    [
        ([50, 50, 10, 80], "inverted"),
        ([10, 10, 10, 80], "empty"),
        ([200, 200, 300, 300], "outside"),
        ([-50, -50, -1, -1], "outside"),
        ([1, 2, 3], "4 numbers"),
    ],
)
def test_bad_boxes_are_refused_with_the_reason(bbox, match):
    with pytest.raises(ToolError, match=match):
        map_bbox(bbox, (100, 100), (1000, 1000))


def test_crop_of_a_crop_lands_in_source_pixels():
    outer = list(map_bbox([10, 10, 60, 60], (100, 100), (1000, 1000)))  # (0, 0, 880, 880)
    inner = map_bbox([40, 40, 60, 60], (100, 100), (880, 880), pad=0)  # in the crop's own pixels
    assert compose_box([100, 50, 980, 930], inner) == [100 + 352, 50 + 352, 100 + 528, 50 + 528]
    assert outer == [0, 0, 880, 880]


def test_resize_is_on_the_patch_grid_and_within_limits():
    img = Image.new("RGB", (1600, 1000))
    out = resize_for_model(img, 401_408)
    assert out.width % 28 == 0 and out.height % 28 == 0 and out.width * out.height <= 401_408
    # a small crop is enlarged up to the floor, which is how zooming makes small text readable
    small = resize_for_model(Image.new("RGB", (120, 40)), 401_408, min_pixels=256 * 28 * 28)
    assert small.width * small.height >= 256 * 28 * 28 * 0.9 and small.width > 120
    assert target_size(1600, 1000, 401_408, patch=32)[0] % 32 == 0
    cache = {}
    assert resize_for_model(img, 401_408, cache=cache) is resize_for_model(img, 401_408, cache=cache)


@pytest.mark.parametrize("patch", [28, 32])
def test_target_size_is_width_then_height_on_the_patch_grid(patch):
    w, h = target_size(1000, 1400, 500_000, patch=patch)  # a portrait page: (width, height), as PIL has it
    assert w % patch == 0 and h % patch == 0 and w * h <= 500_000
    assert h > w and abs((h / w) - 1.4) < 0.1


def test_scale_budget_and_range():
    assert scaled_budget(401_408, 1.5, 1_003_520) == int(401_408 * 2.25)
    with pytest.raises(ToolError, match="outside"):
        scaled_budget(401_408, 8, 1_003_520)
