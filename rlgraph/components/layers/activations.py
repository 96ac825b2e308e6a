"""Activation functions by name, for each backend."""
from rlgraph.utils.backend import jax, normalize_backend, tf, torch
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import OneOf, any_case, check

_NAMES = ("linear", "relu", "tanh", "sigmoid", "elu", "selu", "softplus", "swish", "gelu", "leaky_relu", "softmax")


def _key(name):
    return str(name).lower().replace("-", "_")


class ActivationName(OneOf):
    """A rule (``rlgraph.utils.validation``): an activation name in any case, "-" for "_" (``"relu"``,
    ``"Leaky-ReLU"``), or None (linear)."""

    def __init__(self):
        super().__init__(*_NAMES, None)

    def describe(self):
        return f"an activation name (one of {', '.join(_NAMES)}) or null"

    def ok(self, value):
        if value is None or (isinstance(value, str) and _key(value) in _NAMES):
            return True, value
        return False, None

    def json(self):
        alternatives = "|".join(any_case(n).replace("_", "[-_]") for n in _NAMES)
        return {"anyOf": [{"type": "string", "pattern": f"^(?:{alternatives})$"}, {"type": "null"}]}


def get_activation(name, backend):
    """The activation function ``name`` (None or "linear" is the identity) on ``backend``."""
    if name is None or _key(name) == "linear":
        return None
    key = _key(name)
    if key not in _NAMES:
        raise RLGraphSpecError(f"Unknown activation '{name}'; known: {', '.join(_NAMES)}.")
    if normalize_backend(backend) == "tf":
        return {"relu": tf.nn.relu, "tanh": tf.tanh, "sigmoid": tf.sigmoid, "elu": tf.nn.elu, "selu": tf.nn.selu,
                "softplus": tf.nn.softplus, "swish": tf.nn.silu, "gelu": lambda x: tf.nn.gelu(x, approximate=False),
                "leaky_relu": lambda x: tf.nn.leaky_relu(x, 0.2), "softmax": tf.nn.softmax}[key]
    if normalize_backend(backend) == "jax":
        nn = jax.nn
        return {"relu": nn.relu, "tanh": jax.numpy.tanh, "sigmoid": nn.sigmoid, "elu": nn.elu, "selu": nn.selu,
                "softplus": nn.softplus, "swish": nn.silu, "gelu": lambda x: nn.gelu(x, approximate=False),
                "leaky_relu": lambda x: nn.leaky_relu(x, 0.2), "softmax": lambda x: nn.softmax(x, axis=-1)}[key]
    F = torch.nn.functional
    return {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "elu": F.elu, "selu": F.selu,
            "softplus": F.softplus, "swish": F.silu, "gelu": F.gelu,
            "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "softmax": lambda x: torch.softmax(x, dim=-1)}[key]


def check_activation(name, owner="Layer", key="activation"):
    """The activation name ``name`` if it is known (``ActivationName``), without touching a backend.

    Raises:
        RLGraphSpecError: "<owner>.<key>: expected an activation name ..." for an unknown name.
    """
    return check(owner, key, name, ActivationName())
