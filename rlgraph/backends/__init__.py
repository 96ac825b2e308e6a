"""Backend helpers used by the build and the executors (variables, conversion, devices)."""
from rlgraph.backends.backend import Backend
from rlgraph.utils.backend import normalize_backend

_instances = {}


def get_backend(name):
    """The ``Backend`` object for ``name`` ("tf", "pytorch" or "jax", aliases accepted).

    "jax" serves its operations table (``.ops``), functional variables and the JAX executor's build. Without JAX
    installed it raises ``RLGraphBackendError`` naming ``pip install 'rlgraph[jax]'``.
    """
    name = normalize_backend(name, graphs=False)
    if name not in _instances:
        if name == "tf":
            from rlgraph.backends.tf_backend import TFBackend
            _instances[name] = TFBackend()
        elif name == "jax":
            from rlgraph.backends.jax_backend import JaxBackend
            _instances[name] = JaxBackend()
        else:
            from rlgraph.backends.pytorch_backend import PyTorchBackend
            _instances[name] = PyTorchBackend()
    return _instances[name]


__all__ = ["Backend", "get_backend"]
