"""PyTorch backend helpers."""
import numpy as np

from rlgraph.backends.backend import Backend
from rlgraph.utils.backend import torch


class PyTorchBackend(Backend):
    name = "pytorch"

    def normalize_device(self, device):
        if device is None:
            return None
        d = str(device).lower().lstrip("/").replace("device:", "")
        if d.startswith("gpu"):
            d = "cuda" + d[3:]
        return d

    def create_variable(self, name, value, trainable, device=None):
        t = torch.from_numpy(np.array(value, copy=True, order="C"))  # Contiguous (initializers may give F order).
        if device:
            t = t.to(self.normalize_device(device))
        if trainable:
            return torch.nn.Parameter(t, requires_grad=True)
        return t

    def is_trainable(self, var):
        return isinstance(var, torch.nn.Parameter) and var.requires_grad

    def read_variable(self, var):
        return var.detach().cpu().numpy().copy()

    def assign_variable(self, var, value):
        with torch.no_grad():
            var.copy_(torch.as_tensor(np.asarray(value)).to(var.dtype))

    def to_backend(self, value):
        if isinstance(value, dict):
            return {k: self.to_backend(v) for k, v in value.items()}
        if isinstance(value, (tuple, list)):
            return tuple(self.to_backend(v) for v in value)
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "US":
                return value
            return torch.from_numpy(value)
        return torch.as_tensor(value)

    def to_numpy(self, value):
        if isinstance(value, torch.nn.Parameter):
            return value.detach().cpu().numpy().copy()  # Never hand out views of live weights.
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        if isinstance(value, dict):
            return {k: self.to_numpy(v) for k, v in value.items()}
        if isinstance(value, (tuple, list)):
            return tuple(self.to_numpy(v) for v in value)
        return value

    def shape_and_dtype(self, value):
        if isinstance(value, torch.Tensor):
            return tuple(value.shape), _numpy_dtype(value.dtype)
        return super().shape_and_dtype(value)

    def wrap_graph_fn_device(self, fn, device):
        if not device:
            return fn
        dev = torch.device(self.normalize_device(device))

        def on_device(*args, **kwargs):
            args = [a.to(dev) if isinstance(a, torch.Tensor) and a.device != dev else a for a in args]
            return fn(*args, **kwargs)
        return on_device

    def set_seed(self, seed):
        torch.manual_seed(seed)

    def no_gradient_recording(self):
        return torch.no_grad()

    def set_math_threads(self, threads):
        previous = torch.get_num_threads()
        torch.set_num_threads(int(threads))
        return previous


def _numpy_dtype(torch_dtype):
    return torch.empty((), dtype=torch_dtype).numpy().dtype
