"""Preprocessors against numpy references, on both backends."""
import numpy as np
import pytest

from rlgraph.components.preprocessing import (Clip, ConvertType, Divide, GrayScale, ImageResize, Multiply,
                                              Preprocessor, PreprocessorStack, Sequence)
from rlgraph.spaces import Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphRuntimeError, RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

RNG = np.random.default_rng(11)


def images(*shape):
    return RNG.integers(0, 256, shape).astype(np.uint8)


def image_space(shape, **ranks):
    return IntBox(256, shape=shape, dtype="uint8", **ranks)


# --- numpy references ------------------------------------------------------------------------------------
def bilinear_reference(image, height, width):
    """Half-pixel-center bilinear resize of one [H, W, C] image, by explicit loops."""
    in_h, in_w = image.shape[:2]
    out = np.zeros((height, width, image.shape[2]))
    for i in range(height):
        y = max((i + 0.5) * in_h / height - 0.5, 0.0)
        y0 = min(int(np.floor(y)), in_h - 1)
        y1, wy = min(y0 + 1, in_h - 1), y - y0
        for j in range(width):
            x = max((j + 0.5) * in_w / width - 0.5, 0.0)
            x0 = min(int(np.floor(x)), in_w - 1)
            x1, wx = min(x0 + 1, in_w - 1), x - x0
            top = (1 - wx) * image[y0, x0] + wx * image[y0, x1]
            bottom = (1 - wx) * image[y1, x0] + wx * image[y1, x1]
            out[i, j] = (1 - wy) * top + wy * bottom
    return out


def area_reference(image, height, width):
    """Box-filter resize of one [H, W, C] image: each output pixel averages its exact input footprint."""
    in_h, in_w = image.shape[:2]
    sy, sx = in_h / height, in_w / width
    out = np.zeros((height, width, image.shape[2]))
    for i in range(height):
        for j in range(width):
            total = np.zeros(image.shape[2])
            for y in range(in_h):
                wy = min((i + 1) * sy, y + 1) - max(i * sy, y)
                for x in range(in_w):
                    wx = min((j + 1) * sx, x + 1) - max(j * sx, x)
                    if wy > 0 and wx > 0:
                        total += wy * wx * image[y, x]
            out[i, j] = total / (sy * sx)
    return out


# --- stateless ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("keep_rank", [True, False])
def test_grayscale(backend, keep_rank):
    test = ComponentTest(GrayScale(keep_rank=keep_rank), dict(inputs=image_space((4, 5, 3), add_batch_rank=True)),
                         backend=backend)
    x = images(2, 4, 5, 3)
    gray = 0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]
    out = test.test(("preprocess", [x]), expected_outputs=gray[..., None] if keep_rank else gray, decimals=3)
    assert out.dtype == np.float32


@pytest.mark.parametrize("height,width", [(3, 4), (5, 7), (9, 11), (6, 6)])
@pytest.mark.parametrize("interpolation", ["bilinear", "area"])
def test_image_resize(backend, interpolation, height, width):
    test = ComponentTest(ImageResize(width=width, height=height, interpolation=interpolation),
                         dict(inputs=image_space((6, 8, 2), add_batch_rank=True)), backend=backend)
    x = images(2, 6, 8, 2)
    reference = bilinear_reference if interpolation == "bilinear" else area_reference
    expected = np.stack([reference(img.astype(np.float64), height, width) for img in x])
    test.test(("preprocess", [x]), expected_outputs=expected, decimals=3)


def test_image_resize_gray_images_with_time_rank(backend):
    space = FloatBox(shape=(6, 8), add_batch_rank=True, add_time_rank=True)
    test = ComponentTest(ImageResize(width=3, height=4, interpolation="area"), dict(inputs=space), backend=backend)
    x = RNG.random((2, 3, 6, 8)).astype(np.float32)
    expected = np.stack([area_reference(img[..., None], 4, 3)[..., 0] for img in x.reshape(6, 6, 8)])
    expected = expected.reshape(2, 3, 4, 3)
    test.test(("preprocess", [x]), expected_outputs=expected, decimals=5)


@pytest.mark.parametrize("interpolation", ["bilinear", "area"])
def test_image_resize_backends_agree(interpolation):
    run_on_backends(lambda: ImageResize(width=7, height=5, interpolation=interpolation),
                    dict(inputs=FloatBox(shape=(13, 11, 3), add_batch_rank=True)),
                    [("preprocess", [RNG.random((2, 13, 11, 3)).astype(np.float32)])])


def test_multiply_and_divide(backend):
    space = Dict(image=image_space((2, 2)), value=FloatBox(shape=(3,)), add_batch_rank=True)
    inputs = dict(image=images(2, 2, 2), value=RNG.standard_normal((2, 3)).astype(np.float32))
    divided = ComponentTest(Divide(255), dict(inputs=space), backend=backend).test(
        ("preprocess", [inputs]), expected_outputs=dict(image=inputs["image"] / 255.0, value=inputs["value"] / 255.0),
        decimals=6)
    assert divided["image"].dtype == np.float32
    ComponentTest(Multiply(-0.5), dict(inputs=space), backend=backend).test(
        ("preprocess", [inputs]), expected_outputs=dict(image=inputs["image"] * -0.5, value=inputs["value"] * -0.5))


def test_clip(backend):
    x = np.array([[-3.0, -1.0, 0.5, 2.5]], np.float32)
    test = ComponentTest(Clip(-1.5, 2.0), dict(inputs=FloatBox(shape=(4,), add_batch_rank=True)), backend=backend)
    test.test(("preprocess", [x]), expected_outputs=[[-1.5, -1.0, 0.5, 2.0]])
    # Integer inputs: bounds rounded inward (-1.5 -> -1, 2.5 -> 2), dtype kept.
    ints = np.array([[-3, -1, 0, 3]], np.int32)
    test = ComponentTest(Clip(-1.5, 2.5), dict(inputs=IntBox(-5, 5, shape=(4,), add_batch_rank=True)),
                         backend=backend)
    out = test.test(("preprocess", [ints]), expected_outputs=[[-1, -1, 0, 2]])
    assert out.dtype == np.int32


def test_convert_type(backend):
    x = np.array([[-1.7, 0.0, 0.4, 2.9]], np.float32)
    space = dict(inputs=FloatBox(shape=(4,), add_batch_rank=True))
    as_int = ComponentTest(ConvertType("int32"), space, backend=backend).test(
        ("preprocess", [x]), expected_outputs=[[-1, 0, 0, 2]])
    assert as_int.dtype == np.int32
    as_bool = ComponentTest(ConvertType(to_dtype="bool"), space, backend=backend).test(
        ("preprocess", [x]), expected_outputs=[[True, False, True, True]])
    assert as_bool.dtype == np.bool_
    as_float = ComponentTest(ConvertType(), dict(inputs=image_space((2,), add_batch_rank=True)), backend=backend).test(
        ("preprocess", [np.array([[0, 255]], np.uint8)]), expected_outputs=[[0.0, 255.0]])
    assert as_float.dtype == np.float32


# --- stateful ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("add_rank", [True, False])
def test_sequence_stacks_frames_and_resets(backend, add_rank):
    test = ComponentTest(Sequence(sequence_length=3, batch_size=2, add_rank=add_rank),
                         dict(inputs=FloatBox(shape=(2, 1), add_batch_rank=True)), backend=backend)
    frames = [RNG.standard_normal((2, 2, 1)).astype(np.float32) for _ in range(6)]

    def stacked(*fs):
        return np.stack(fs, axis=-1) if add_rank else np.concatenate(fs, axis=-1)

    f = frames
    # The first input fills the sequence; then the oldest frame drops out.
    test.test(("preprocess", [f[0]]), expected_outputs=stacked(f[0], f[0], f[0]))
    test.test(("preprocess", [f[1]]), expected_outputs=stacked(f[0], f[0], f[1]))
    test.test(("preprocess", [f[2]]), expected_outputs=stacked(f[0], f[1], f[2]))
    test.test(("preprocess", [f[3]]), expected_outputs=stacked(f[1], f[2], f[3]))
    assert test.read_variable_values("sequence/index") == 1
    test.test("reset")
    test.test(("preprocess", [f[4]]), expected_outputs=stacked(f[4], f[4], f[4]))
    test.test(("preprocess", [f[5]]), expected_outputs=stacked(f[4], f[4], f[5]))


def test_sequence_checks_batch_size(backend):
    test = ComponentTest(Sequence(sequence_length=2, batch_size=2),
                         dict(inputs=FloatBox(shape=(3,), add_batch_rank=True)), backend=backend)
    with pytest.raises(RLGraphRuntimeError, match="batch size of the inputs must be 2"):
        test.test(("preprocess", [np.zeros((3, 3), np.float32)]))
    with pytest.raises(RLGraphSpaceError, match="without time rank"):
        ComponentTest(Sequence(), dict(inputs=FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True)),
                      backend=backend)


# --- stack -----------------------------------------------------------------------------------------------------
ATARI_SPEC = [{"type": "grayscale", "keep_rank": True},
              {"type": "image_resize", "width": 4, "height": 3, "interpolation": "area"},
              {"type": "divide", "divisor": 255},
              {"type": "frame-stack", "sequence_length": 2, "batch_size": 2, "add_rank": False}]


def test_preprocessor_stack_atari_pipeline(backend):
    stack = PreprocessorStack(preprocessing_spec=ATARI_SPEC)
    assert stack.stateful
    test = ComponentTest(stack, dict(inputs=image_space((6, 8, 3), add_batch_rank=True)), backend=backend)

    def frame(x):
        gray = (x * np.array([0.299, 0.587, 0.114])).sum(-1, keepdims=True)
        return np.stack([area_reference(g, 3, 4) for g in gray]) / 255.0

    x0, x1, x2 = images(2, 6, 8, 3), images(2, 6, 8, 3), images(2, 6, 8, 3)
    test.test(("preprocess", [x0]), expected_outputs=np.concatenate([frame(x0), frame(x0)], -1), decimals=5)
    test.test(("preprocess", [x1]), expected_outputs=np.concatenate([frame(x0), frame(x1)], -1), decimals=5)
    test.test("reset")
    test.test(("preprocess", [x2]), expected_outputs=np.concatenate([frame(x2), frame(x2)], -1), decimals=5)


def test_preprocessor_stack_backends_agree():
    x = [images(2, 6, 8, 3) for _ in range(3)]
    run_on_backends(lambda: PreprocessorStack(preprocessing_spec=ATARI_SPEC),
                    dict(inputs=image_space((6, 8, 3), add_batch_rank=True)),
                    [("preprocess", [x[0]]), ("preprocess", [x[1]]), ("reset", []), ("preprocess", [x[2]])])


def test_empty_stack_is_the_identity(backend):
    stack = PreprocessorStack()
    assert not stack.stateful
    test = ComponentTest(stack, dict(inputs=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    x = np.ones((3, 2), np.float32)
    test.test(("preprocess", [x]), expected_outputs=x)
    assert test.test("reset") is None


# --- specs and checks ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,cls", [
    ({"type": "GrayScale"}, GrayScale), ({"type": "gray_scale"}, GrayScale),
    ({"type": "image-resize", "width": 2, "height": 2}, ImageResize), ({"type": "resize", "width": 2, "height": 2},
                                                                       ImageResize),
    ({"type": "multiply", "factor": 2}, Multiply), ({"type": "divide", "divisor": 2}, Divide),
    ({"type": "clip", "min_value": 0, "max_value": 1}, Clip), ({"type": "convert_type", "to_dtype": "uint8"},
                                                               ConvertType),
    ({"type": "sequence"}, Sequence), ({"type": "FrameStack"}, Sequence),
    ({"type": "preprocessor-stack", "preprocessing_spec": []}, PreprocessorStack),
])
def test_preprocessors_from_spec(spec, cls):
    assert type(Preprocessor.from_spec(spec)) is cls


def test_preprocessor_checks():
    with pytest.raises(RLGraphSpaceError, match="last axis has 3 color channels"):
        ComponentTest(GrayScale(), dict(inputs=image_space((4, 4, 4), add_batch_rank=True)), backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match=r"shape \[H, W, C\] or \[H, W\]"):
        ComponentTest(ImageResize(2, 2), dict(inputs=FloatBox(shape=(4,), add_batch_rank=True)), backend="pytorch")
    with pytest.raises(RLGraphSpecError, match="interpolation"):
        ImageResize(2, 2, interpolation="bicubic")
    with pytest.raises(RLGraphSpecError, match="non-zero"):
        Divide(0)
    with pytest.raises(RLGraphSpecError, match="greater than max_value"):
        Clip(1, 0)
    with pytest.raises(RLGraphSpecError, match=r"^ConvertType\.to_dtype: expected a dtype, one of float16"):
        ConvertType("complex64")
    with pytest.raises(RLGraphSpecError, match=r"preprocessing_spec\[1\].*unknown key 'factr'"):
        PreprocessorStack(preprocessing_spec=[{"type": "divide", "divisor": 2}, {"type": "multiply", "factr": 2}])


def test_transpose_moves_channels_last(backend):
    from rlgraph.components.preprocessing import Transpose
    from rlgraph.spaces import IntBox
    from rlgraph.tests import ComponentTest
    from rlgraph.utils.errors import RLGraphSpaceError
    space = IntBox(256, shape=(4, 6, 5), dtype="uint8", add_batch_rank=True)
    test = ComponentTest(Transpose([1, 2, 0]), dict(inputs=space), backend=backend)
    x = space.sample(3)
    test.test(("preprocess", [x]), expected_outputs=np.transpose(x, (0, 2, 3, 1)))
    with pytest.raises(RLGraphSpaceError, match="rank 2"):
        ComponentTest(Transpose([1, 0]), dict(inputs=space), backend=backend)
