"""The backend operations table on PyTorch (see ``rlgraph.backends.ops``)."""
import numbers

import numpy as np

from rlgraph.backends.ops import BackendOps, numpy_dtype
from rlgraph.backends.pytorch_backend import torch_random
from rlgraph.utils.backend import torch


def _torch_dtype(dtype):
    if isinstance(dtype, torch.dtype):
        return dtype
    name = numpy_dtype(dtype).name
    return torch.bool if name == "bool" else getattr(torch, name)


def _device(like):
    return getattr(like, "device", None)


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

    def dtype(self, x):
        return torch.empty((), dtype=x.dtype).numpy().dtype

    def shape(self, x):
        return tuple(x.shape)

    def reshape(self, x, shape):
        return torch.reshape(x, tuple(int(s) for s in shape))

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
        return torch.broadcast_to(x, tuple(int(s) for s in shape))

    def reverse(self, x, axis):
        return torch.flip(x, dims=(axis,))

    def zeros_like(self, x, dtype=None):
        return torch.zeros_like(x, dtype=None if dtype is None else _torch_dtype(dtype))

    def ones_like(self, x, dtype=None):
        return torch.ones_like(x, dtype=None if dtype is None else _torch_dtype(dtype))

    def full_like(self, x, value, dtype=None):
        return torch.full_like(x, value, dtype=None if dtype is None else _torch_dtype(dtype))

    def zeros(self, shape, dtype="float32", like=None):
        return torch.zeros(tuple(int(s) for s in shape), dtype=_torch_dtype(dtype), device=_device(like))

    def arange(self, n, dtype="int32", like=None):
        return torch.arange(int(n), dtype=_torch_dtype(dtype), device=_device(like))

    def exp(self, x):
        return torch.exp(x)

    def log(self, x):
        return torch.log(x)

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
        u = torch_random.rand(tuple(int(s) for s in shape), dtype=_torch_dtype(dtype), device=_device(like))
        return u if (low, high) == (0.0, 1.0) else low + (high - low) * u

    def random_normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", like=None):
        n = torch_random.randn(tuple(int(s) for s in shape), dtype=_torch_dtype(dtype), device=_device(like))
        return n if (mean, stddev) == (0.0, 1.0) else mean + stddev * n
