"""PyTorch backend helpers."""
import numpy as np

from rlgraph.backends.backend import Backend
from rlgraph.backends.op_generator import current_op_generator
from rlgraph.utils.backend import torch


class PyTorchBackend(Backend):
    name = "pytorch"

    def _make_ops(self):
        from rlgraph.backends.pytorch_ops import PyTorchOps
        return PyTorchOps()

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

    def _leaf_to_backend(self, value):
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "US":
                return value
            return torch.from_numpy(value)
        return torch.as_tensor(value)

    def _leaf_to_numpy(self, value):
        if isinstance(value, torch.nn.Parameter):
            return value.detach().cpu().numpy().copy()  # Never hand out views of live weights.
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
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

    def gradients(self, loss, variables, owner):
        keys = list(variables)
        if not keys:
            return {}
        grads = torch.autograd.grad(loss, [variables[k] for k in keys], allow_unused=True)
        return {k: torch.zeros_like(variables[k]) if g is None else g for k, g in zip(keys, grads)}

    def apply_gradients(self, optimizer, variables, gradients, learning_rate):
        """The update on flat buffers of the variables' slots (``FlatSlots``), with a fused kernel of the
        optimizer's rule where ATen has one: the per-variable Python loop cost more than the backward pass of
        small networks."""
        from rlgraph.backends.pytorch_flat_slots import apply_flat
        return apply_flat(optimizer, variables, gradients, learning_rate)

    def set_math_threads(self, threads):
        previous = torch.get_num_threads()
        torch.set_num_threads(int(threads))
        return previous


def _numpy_dtype(torch_dtype):
    return torch.empty((), dtype=torch_dtype).numpy().dtype


# --- random ops with a saveable state -----------------------------------------------------------------------
def _generator_on(device):
    """The calling executor's generator (``rlgraph.backends.op_generator``) where it can draw on ``device``, else
    None: torch's default generator of that device."""
    generator = current_op_generator()
    if not isinstance(generator, torch.Generator):
        return None
    return generator if generator.device == torch.device("cpu" if device is None else device) else None


class _TorchRandom:
    """``torch.rand``/``randn``/``randint`` drawn from the calling executor's generator (``PyTorchExecutor.
    op_generator``), or from torch's default generator outside an executor's calls and on another device.
    Graph functions use ``torch_random.rand(shape, device=...)`` like ``torch.rand``: an executor's draws then
    neither depend on nor change what other executors in the process (an actor's and a learner's in two
    threads) and the rest of the program draw."""

    @staticmethod
    def rand(shape, dtype=None, device=None):
        return torch.rand(tuple(shape), dtype=dtype, device=device, generator=_generator_on(device))

    @staticmethod
    def randn(shape, dtype=None, device=None):
        return torch.randn(tuple(shape), dtype=dtype, device=device, generator=_generator_on(device))

    @staticmethod
    def randint(low, high, shape, dtype=None, device=None):
        kwargs = {} if dtype is None else dict(dtype=dtype)
        return torch.randint(low, high, tuple(shape), device=device, generator=_generator_on(device), **kwargs)


#: Random ops for PyTorch graph functions whose state the executor saves (see ``_TorchRandom``).
torch_random = _TorchRandom()
