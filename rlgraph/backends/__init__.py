"""Backend helpers used by the build and the executors (variables, conversion, devices)."""
from rlgraph.backends.backend import Backend
from rlgraph.utils.backend import normalize_backend

_instances = {}


def get_backend(name):
    """The ``Backend`` object for ``name`` ("tf" or "pytorch", aliases accepted)."""
    name = normalize_backend(name)
    if name not in _instances:
        if name == "tf":
            from rlgraph.backends.tf_backend import TFBackend
            _instances[name] = TFBackend()
        else:
            from rlgraph.backends.pytorch_backend import PyTorchBackend
            _instances[name] = PyTorchBackend()
    return _instances[name]


__all__ = ["Backend", "get_backend"]
