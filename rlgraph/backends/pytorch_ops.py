"""The backend operations table on PyTorch (see ``rlgraph.backends.ops``)."""
import functools
import numbers

import numpy as np

from rlgraph.backends.ops import BackendOps, area_weights, numpy_dtype, same_padding
from rlgraph.backends.pytorch_backend import torch_random
from rlgraph.utils.backend import torch
from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError


#: dtype (name, numpy dtype, Python type) -> torch dtype: numpy's ``dtype.name`` costs microseconds per call, which
#: the per-step graph functions (random draws, casts) would pay at every call.
_TORCH_DTYPES = {}


#: torch dtype -> numpy dtype.
_NUMPY_DTYPES = {}


def _torch_dtype(dtype):
    if isinstance(dtype, torch.dtype):
        return dtype
    out = _TORCH_DTYPES.get(dtype)
    if out is None:
        name = numpy_dtype(dtype).name
        out = _TORCH_DTYPES[dtype] = torch.bool if name == "bool" else getattr(torch, name)
    return out


def _device(like):
    return getattr(like, "device", None)


def _sizes(shape):
    """A shape's sizes as Python ints; under ``torch.jit.trace`` as they are, so that sizes read from a traced
    tensor (``ops.shape(x)``: 0-dim tensors there) stay symbolic in the trace instead of being frozen as the example
    input's constants (a traced policy then runs at any batch size)."""
    if torch.jit.is_tracing():
        return tuple(shape)
    return tuple(int(s) for s in shape)


def _dims(axis):
    return tuple(axis) if isinstance(axis, (tuple, list)) else axis


class PyTorchOps(BackendOps):
    """``BackendOps`` on PyTorch."""

    name = "pytorch"

    def _tensor(self, value, like):
        if isinstance(value, torch.Tensor):
            return value
        return torch.as_tensor(value, dtype=like.dtype if isinstance(like, torch.Tensor) else None,
                               device=_device(like))

    def constant(self, value, dtype=None, like=None):
        return torch.as_tensor(value, dtype=None if dtype is None else _torch_dtype(dtype), device=_device(like))

    def cast(self, x, dtype):
        return x.to(_torch_dtype(dtype))

    def asarray(self, x, dtype=None, like=None):
        return torch.as_tensor(x, dtype=None if dtype is None else _torch_dtype(dtype), device=_device(like))

    def dtype(self, x):
        out = _NUMPY_DTYPES.get(x.dtype)
        if out is None:  # Read off an empty tensor once per dtype (not per call: under a trace it would warn).
            out = _NUMPY_DTYPES[x.dtype] = torch.empty((), dtype=x.dtype).numpy().dtype
        return out

    def ndim(self, x):
        return x.dim()

    def shape(self, x):
        return tuple(x.shape)

    def reshape(self, x, shape):
        # The sizes as given: ints, numpy ints, -1, or (under torch.jit.trace) the 0-dim tensors ops.shape gives
        # there, which keep the traced reshape symbolic in them (int() would freeze the example's batch size).
        return torch.reshape(x, tuple(shape))

    def transpose(self, x, perm):
        return x.permute(*perm)

    def expand_dims(self, x, axis):
        return torch.unsqueeze(x, axis)

    def squeeze(self, x, axis):
        return torch.squeeze(x, axis)

    def concat(self, xs, axis):
        return torch.cat(list(xs), dim=axis)

    def stack(self, xs, axis=0):
        return torch.stack(list(xs), dim=axis)

    def unstack(self, x, axis=0):
        return list(torch.unbind(x, dim=axis))

    def broadcast_to(self, x, shape):
        return torch.broadcast_to(x, _sizes(shape))

    def reverse(self, x, axis):
        return torch.flip(x, dims=(axis,))

    def zeros_like(self, x, dtype=None):
        return torch.zeros_like(x, dtype=None if dtype is None else _torch_dtype(dtype))

    def ones_like(self, x, dtype=None):
        return torch.ones_like(x, dtype=None if dtype is None else _torch_dtype(dtype))

    def full_like(self, x, value, dtype=None):
        return torch.full_like(x, value, dtype=None if dtype is None else _torch_dtype(dtype))

    def zeros(self, shape, dtype="float32", like=None):
        return torch.zeros(_sizes(shape), dtype=_torch_dtype(dtype), device=_device(like))

    def arange(self, n, dtype="int32", like=None):
        return torch.arange(n if torch.jit.is_tracing() else int(n), dtype=_torch_dtype(dtype), device=_device(like))

    def exp(self, x):
        return torch.exp(x)

    def log(self, x):
        return torch.log(x)

    def expm1(self, x):
        return torch.expm1(x)

    def sqrt(self, x):
        return torch.sqrt(x)

    def square(self, x):
        return torch.square(x)

    def abs(self, x):
        return torch.abs(x)

    def sign(self, x):
        return torch.sign(x)

    def tanh(self, x):
        return torch.tanh(x)

    def sigmoid(self, x):
        return torch.sigmoid(x)

    def softplus(self, x):
        return torch.nn.functional.softplus(x)

    def relu(self, x):
        return torch.relu(x)

    def huber(self, x, delta=1.0):  # One fused op (the same formula, forward and backward).
        return torch.nn.functional.huber_loss(x, torch.zeros_like(x), reduction="none", delta=delta)

    def minimum(self, a, b):
        if isinstance(b, numbers.Number):
            return torch.clamp(a, max=b)
        if isinstance(a, numbers.Number):
            return torch.clamp(b, max=a)
        return torch.minimum(a, b)

    def maximum(self, a, b):
        if isinstance(b, numbers.Number):
            return torch.clamp(a, min=b)
        if isinstance(a, numbers.Number):
            return torch.clamp(b, min=a)
        return torch.maximum(a, b)

    def clip(self, x, low=None, high=None):
        if low is None and high is None:
            return x
        return torch.clamp(x, min=low, max=high)

    def where(self, condition, a, b):
        like = a if isinstance(a, torch.Tensor) else b
        return torch.where(condition, self._tensor(a, like), self._tensor(b, like))

    def equal(self, a, b):
        return torch.eq(a, b)

    def logical_and(self, a, b):
        return torch.logical_and(a, b)

    def logical_or(self, a, b):
        return torch.logical_or(a, b)

    def logical_not(self, x):
        return torch.logical_not(x)

    def sum(self, x, axis=None, keepdims=False):
        return torch.sum(x) if axis is None else torch.sum(x, dim=_dims(axis), keepdim=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return torch.mean(x) if axis is None else torch.mean(x, dim=_dims(axis), keepdim=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return torch.amax(x) if axis is None else torch.amax(x, dim=_dims(axis), keepdim=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return torch.amin(x) if axis is None else torch.amin(x, dim=_dims(axis), keepdim=keepdims)

    def std(self, x, axis=None, keepdims=False):
        if axis is None and not keepdims:
            return torch.std(x, correction=0)
        return torch.std(x, dim=_dims(axis), correction=0, keepdim=keepdims)

    def all(self, x, axis=None):
        return torch.all(x) if axis is None else torch.all(x, dim=axis)

    def any(self, x, axis=None):
        return torch.any(x) if axis is None else torch.any(x, dim=axis)

    def argmax(self, x, axis=-1):
        return torch.argmax(x, dim=axis)

    def cumsum(self, x, axis=0, reverse=False):
        if not reverse:
            return torch.cumsum(x, dim=axis)
        return torch.flip(torch.cumsum(torch.flip(x, dims=(axis,)), dim=axis), dims=(axis,))

    def softmax(self, x, axis=-1):
        return torch.softmax(x, dim=axis)

    def log_softmax(self, x, axis=-1):
        return torch.log_softmax(x, dim=axis)

    def logsumexp(self, x, axis=-1, keepdims=False):
        return torch.logsumexp(x, dim=axis, keepdim=keepdims)

    def matmul(self, a, b):
        return torch.matmul(a, b)

    def one_hot(self, indices, depth, dtype="float32"):
        return torch.nn.functional.one_hot(indices.long(), int(depth)).to(_torch_dtype(dtype))

    def take_along_last(self, x, indices):
        return torch.gather(x, -1, indices.long().unsqueeze(-1)).squeeze(-1)

    def gather(self, x, indices, axis=0):
        return torch.index_select(x, axis, self._tensor(indices, None).long().reshape(-1)).reshape(
            tuple(x.shape[:axis % x.dim()]) + tuple(np.shape(indices) if not isinstance(indices, torch.Tensor)
                                                    else indices.shape) + tuple(x.shape[axis % x.dim() + 1:]))

    def stop_gradient(self, x):
        return x.detach()

    def random_uniform(self, shape, low=0.0, high=1.0, dtype="float32", like=None):
        u = torch_random.rand(_sizes(shape), dtype=_torch_dtype(dtype), device=_device(like))
        return u if (low, high) == (0.0, 1.0) else low + (high - low) * u

    def random_normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", like=None):
        n = torch_random.randn(_sizes(shape), dtype=_torch_dtype(dtype), device=_device(like))
        return n if (mean, stddev) == (0.0, 1.0) else mean + stddev * n

    def random_integers(self, shape, low, high, dtype="int64", like=None):
        return torch_random.randint(int(low), int(high), _sizes(shape), dtype=_torch_dtype(dtype),
                                    device=_device(like))

    def tensordot(self, a, b, axes=2):
        if axes == 1 and b.dim() <= 2:  # matmul: one BLAS call over all leading axes (what tensordot does).
            return torch.matmul(a, b)
        return torch.tensordot(a, b, dims=axes)

    def linear(self, x, weights, bias=None):
        if bias is None:
            return x @ weights
        if x.dim() == 2:
            return torch.addmm(bias, x, weights)
        # One fused addmm over the leading axes (time and batch ranks), not matmul + add.
        return torch.addmm(bias, x.reshape(-1, x.shape[-1]), weights).view(*x.shape[:-1], weights.shape[-1])

    def conv2d(self, images, kernel, bias=None, strides=(1, 1), padding="valid"):
        kh, kw, _, filters = kernel.shape
        if padding.lower() == "valid" and images.shape[1] == kh and images.shape[2] == kw:
            # A kernel that covers the whole image (e.g. the 11x11 layer of the small Atari CNN) is a dense
            # layer over the flattened NHWC image: one matmul, about 10x faster on CPU than torch's conv2d on
            # the permuted views (1x1 output, the same sum).
            out = self.linear(images.reshape(images.shape[0], -1), kernel.reshape(-1, filters), bias)
            return out.view(images.shape[0], 1, 1, filters)
        x = images.permute(0, 3, 1, 2)  # NCHW view of NHWC memory.
        if padding.lower() == "same":
            sh, sw = strides
            _, top, bottom = same_padding(x.shape[2], kh, sh)
            _, left, right = same_padding(x.shape[3], kw, sw)
            if top or bottom or left or right:
                x = torch.nn.functional.pad(x, (left, right, top, bottom))
        out = torch.nn.functional.conv2d(x, kernel.permute(3, 2, 0, 1), bias, stride=tuple(strides))
        return out.permute(0, 2, 3, 1)

    def resize_images(self, images, size, method="bilinear"):
        images = images.float()
        height, width = size
        if method.lower() == "bilinear":
            out = torch.nn.functional.interpolate(images.permute(0, 3, 1, 2), size=(height, width), mode="bilinear",
                                                  align_corners=False, antialias=False)
            return out.permute(0, 2, 3, 1)
        # "area": the exact box filter as two matrix products (torch's own "area" mode rounds footprints).
        area_h = self._area_weights(images.shape[1], height, images.device)
        area_w = self._area_weights(images.shape[2], width, images.device)
        return torch.einsum("ih,nhwc,jw->nijc", area_h, images, area_w)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def _area_weights(size_in, size_out, device):
        return torch.as_tensor(area_weights(size_in, size_out), device=device)

    def ascontiguousarray(self, x):
        return x.contiguous()

    def read_value(self, variable):
        return variable.detach().clone()

    def assign(self, variable, value):
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value, dtype=variable.dtype)
        if _records_gradient(variable, value):
            with torch.no_grad():
                variable.copy_(value)
        else:
            variable.copy_(value)

    def scatter_update(self, variable, indices, updates):
        updates = updates.to(variable.dtype)
        if _records_gradient(variable, updates):
            with torch.no_grad():
                _scatter_rows(variable, indices, updates)
        else:
            _scatter_rows(variable, indices, updates)

    def check(self, condition, message, value=None):
        if isinstance(condition, torch.Tensor):
            condition = bool(torch.all(condition))
        if not condition:
            raise RLGraphRuntimeError(message)
        return value

    def host_call(self, fn, inputs, output_specs, device=None, name=None):
        try:
            outs = fn(*[_to_numpy(x) for x in inputs])
        except RLGraphError as e:
            raise RLGraphRuntimeError(str(e)) from None
        return [_from_numpy(np.asarray(o, numpy_dtype(d)), device) for o, (d, _) in zip(outs, output_specs)]

    def multiply(self, a, b, dtype=None):
        if not _converts_in_place(a, b, dtype):
            return a * b if dtype is None else a.to(_torch_dtype(dtype)) * b
        return a.to(_torch_dtype(dtype)).mul_(b)  # In place on the fresh copy: one allocation (large image batches).

    def divide(self, a, b, dtype=None):
        if not _converts_in_place(a, b, dtype):
            return a / b if dtype is None else a.to(_torch_dtype(dtype)) / b
        return a.to(_torch_dtype(dtype)).div_(b)


def _converts_in_place(a, b, dtype):
    """Whether ``a op b`` in ``dtype`` may run in place on ``a``'s fresh copy in ``dtype`` (one allocation):
    ``a`` is of another dtype, and the result has ``a``'s shape."""
    if dtype is None or a.dtype == _torch_dtype(dtype):
        return False
    return not isinstance(b, torch.Tensor) or torch.broadcast_shapes(a.shape, b.shape) == a.shape


def _records_gradient(variable, value):
    """Whether writing ``value`` into ``variable`` in place would be recorded for a backward pass (then it runs
    under ``torch.no_grad``, whose context costs more than the write of a small value)."""
    return variable.requires_grad or (value.requires_grad and torch.is_grad_enabled())


def _scatter_rows(variable, indices, updates):
    """``variable[indices] = updates``. On the CPU, a few runs of consecutive indices (a ring buffer's write:
    one or two) are copied as slices: ``index_put_`` walks the elements, several times slower for large rows."""
    if variable.device.type == "cpu" and indices.numel() <= 64:
        idx = indices.tolist()
        runs, start, end = [], 0, len(idx)
        for i in range(1, end + 1):
            if i == end or idx[i] != idx[i - 1] + 1:
                runs.append((start, i))
                start = i
        if len(runs) <= 4 and all(0 <= idx[a] for a, _ in runs):
            for a, b in runs:
                variable[idx[a]:idx[a] + b - a] = updates[a:b]
            return
    variable[indices] = updates


def _to_numpy(value):
    """A numpy view of a CPU tensor (a copy for other devices); other values as ``np.asarray``."""
    if not isinstance(value, torch.Tensor):
        return np.asarray(value)
    if value.requires_grad:
        value = value.detach()
    return value.numpy() if value.device.type == "cpu" else value.cpu().numpy()


def _from_numpy(array, device=None):
    """A tensor sharing memory with a writable numpy array (copied if it is read-only), on ``device`` (a torch
    device or its name) where that is not the CPU."""
    if not array.flags.writeable:
        array = array.copy()
    tensor = torch.from_numpy(array)
    if device is not None and str(device) != "cpu":
        tensor = tensor.to(device)
    return tensor
