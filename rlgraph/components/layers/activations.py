"""Activation functions by name, for each backend."""
from rlgraph.utils.backend import normalize_backend, tf, torch
from rlgraph.utils.errors import RLGraphSpecError

_NAMES = ("linear", "relu", "tanh", "sigmoid", "elu", "selu", "softplus", "swish", "gelu", "leaky_relu", "softmax")


def get_activation(name, backend):
    """The activation function ``name`` (None or "linear" is the identity) on ``backend``."""
    if name is None or name == "linear":
        return None
    key = str(name).lower().replace("-", "_")
    if key not in _NAMES:
        raise RLGraphSpecError(f"Unknown activation '{name}'; known: {', '.join(_NAMES)}.")
    if normalize_backend(backend) == "tf":
        return {"relu": tf.nn.relu, "tanh": tf.tanh, "sigmoid": tf.sigmoid, "elu": tf.nn.elu, "selu": tf.nn.selu,
                "softplus": tf.nn.softplus, "swish": tf.nn.silu, "gelu": lambda x: tf.nn.gelu(x, approximate=False),
                "leaky_relu": lambda x: tf.nn.leaky_relu(x, 0.2), "softmax": tf.nn.softmax}[key]
    F = torch.nn.functional
    return {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "elu": F.elu, "selu": F.selu,
            "softplus": F.softplus, "swish": F.silu, "gelu": F.gelu,
            "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "softmax": lambda x: torch.softmax(x, dim=-1)}[key]


def check_activation(name):
    """Raises for an unknown activation name, without touching a backend."""
    if name is not None and name != "linear" and str(name).lower().replace("-", "_") not in _NAMES:
        raise RLGraphSpecError(f"Unknown activation '{name}'; known: {', '.join(_NAMES)}.")
