"""Backend-free variable initializers.

Initial values are computed with numpy from a generator seeded by the executor's seed and the variable's
full name, then handed to the backend. The same component built with the same seed therefore starts
with identical weights on every backend.

An initializer is a name (``"orthogonal"``), a name with keywords (``{"type": "orthogonal", "gain": 0.01}``, as
a config writes the scaled orthogonal initialization of PPO's policy head: Saxe et al. 2014; Andrychowicz et
al. 2021, "What matters in on-policy reinforcement learning"), a number, an array or a callable.
"""
import inspect
import zlib

import numpy as np

from rlgraph.utils.errors import RLGraphSpecError


def variable_rng(seed, name):
    """A numpy Generator determined by ``seed`` and a variable's full name."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode("utf-8"))])


def _fans(shape):
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


def glorot_uniform(shape, rng, gain=1.0):
    fan_in, fan_out = _fans(shape)
    limit = gain * np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape)


def glorot_normal(shape, rng, gain=1.0):
    fan_in, fan_out = _fans(shape)
    return rng.normal(0.0, gain * np.sqrt(2.0 / (fan_in + fan_out)), size=shape)


def he_uniform(shape, rng, gain=1.0):
    fan_in, _ = _fans(shape)
    limit = gain * np.sqrt(6.0 / fan_in)
    return rng.uniform(-limit, limit, size=shape)


def lecun_normal(shape, rng, gain=1.0):
    fan_in, _ = _fans(shape)
    return rng.normal(0.0, gain * np.sqrt(1.0 / fan_in), size=shape)


def orthogonal(shape, rng, gain=1.0):
    """A (semi-)orthogonal matrix times ``gain`` over the kernel flattened to ``[prod(shape[:-1]), shape[-1]]``
    (Saxe et al. 2014; as ``torch.nn.init.orthogonal_`` up to the flattening axis)."""
    if len(shape) < 2:
        return gain * rng.normal(size=shape)
    rows, cols = int(np.prod(shape[:-1])), shape[-1]
    a = rng.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return gain * q[:rows, :cols].reshape(shape)


INITIALIZERS = {
    "zeros": lambda shape, rng: np.zeros(shape),
    "ones": lambda shape, rng: np.ones(shape),
    "glorot_uniform": glorot_uniform, "xavier_uniform": glorot_uniform,
    "glorot_normal": glorot_normal, "xavier_normal": glorot_normal,
    "he_uniform": he_uniform, "lecun_normal": lecun_normal,
    "orthogonal": orthogonal,
    "normal": lambda shape, rng, mean=0.0, stddev=1.0: rng.normal(mean, stddev, size=shape),
    "truncated_normal": lambda shape, rng, mean=0.0, stddev=1.0: mean + stddev * np.clip(
        rng.normal(0.0, 1.0, size=shape), -2.0, 2.0),
}


def _named(key, initializer, shape, rng, kwargs):
    key = key.lower().replace("-", "_")
    if key not in INITIALIZERS:
        raise RLGraphSpecError(f"Unknown initializer '{key}' in {initializer!r}; known: "
                               f"{', '.join(sorted(INITIALIZERS))}.")
    fn = INITIALIZERS[key]
    accepted = [n for n in inspect.signature(fn).parameters if n not in ("shape", "rng")]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise RLGraphSpecError(f"Initializer {initializer!r}: '{key}' takes no {', '.join(map(repr, unknown))} "
                               f"(it takes {', '.join(map(repr, accepted)) or 'no keywords'}).")
    for k, v in kwargs.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise RLGraphSpecError(f"Initializer {initializer!r}: '{k}' must be a finite number, got {v!r}.")
    return fn(shape, rng, **kwargs)


def initial_value(initializer, shape, dtype, rng):
    """Computes an initial value.

    Args:
        initializer: None (zeros), a name from ``INITIALIZERS``, a dict ``{"type": name, **keywords}`` (e.g.
            ``{"type": "orthogonal", "gain": 0.01}``), a number (constant), an array-like of the right shape, or
            a callable ``(shape, rng) -> array``.
        shape: The variable's shape.
        dtype: The numpy dtype of the result.
        rng: A numpy Generator (see ``variable_rng``).

    Returns:
        A numpy array of ``shape`` and ``dtype``.
    """
    shape = tuple(int(s) for s in shape)
    if initializer is None:
        value = np.zeros(shape)
    elif isinstance(initializer, str):
        value = _named(initializer, initializer, shape, rng, {})
    elif isinstance(initializer, dict):
        kwargs = dict(initializer)
        name = kwargs.pop("type", None)
        if not isinstance(name, str):
            raise RLGraphSpecError(f"Initializer {initializer!r}: a dict initializer needs a 'type' naming one of "
                                   f"{', '.join(sorted(INITIALIZERS))}.")
        value = _named(name, initializer, shape, rng, kwargs)
    elif callable(initializer):
        value = initializer(shape, rng)
    else:
        value = np.asarray(initializer)
        if value.ndim == 0:
            value = np.full(shape, value)
        elif value.shape != shape:
            raise RLGraphSpecError(f"Initializer value of shape {value.shape} does not match variable shape {shape}.")
    return np.asarray(value).astype(dtype, copy=False)
