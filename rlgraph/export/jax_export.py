"""JAX runs' policies as serialized ``jax.export`` programs (StableHLO), which run with JAX alone.

``export_jax(greedy, output)`` writes a directory:

- ``policy.bin``: ``jax.export.export(jax.jit(policy))(...).serialize()``: the greedy policy (the config's
  preprocessing, the network, the argmax) as one program of the observations, with a symbolic batch dimension
  (``b``: any batch size runs) and the agent's weights baked in as constants, so that the file is self-contained
  as a TorchScript file or a SavedModel is. It is lowered for CPU and CUDA (``PLATFORMS``); JAX runs it on the
  platform of its default device (only the CPU lowering has been run so far).
- ``policy.json``: what the program takes and returns (names, shapes with ``"b"`` for the batch, dtypes), the
  observation and action spaces, the agent, and the JAX version and calling convention that wrote it.

Running it needs only ``jax`` and ``numpy`` (``load_policy`` below imports nothing else and is meant to be copied;
``tests/test_export_jax.py`` runs its source in a process where rlgraph cannot be imported)::

    import jax, numpy as np
    with open("policy/policy.bin", "rb") as f:
        policy = jax.export.deserialize(bytearray(f.read()))
    out = policy.call(np.zeros((5, 4), np.float32))  # {"actions": int64 [5], "q_values": float32 [5, 2]}

A recurrent policy (R2D2) takes ``(observations, state_0, state_1)`` and also returns ``next_state_0``,
``next_state_1``. A serialized program runs on JAX versions that still support its calling convention (JAX keeps
at least six months of them: ``jax.export``'s compatibility guarantees).
"""
import json
import math
import os

import numpy as np

from rlgraph.utils.errors import RLGraphBackendError

#: The files of an exported policy's directory.
PROGRAM_FILE = "policy.bin"
METADATA_FILE = "policy.json"
#: The version of ``policy.json``'s layout.
FORMAT_VERSION = 1
#: The platforms the program is lowered for (one program; JAX picks the lowering of the device it runs on).
PLATFORMS = ("cpu", "cuda")


def export_jax(greedy, output, platforms=PLATFORMS):
    """Writes the policy as a ``jax.export`` program and its ``policy.json`` into the directory ``output``.

    Args:
        greedy: A ``GreedyPolicy`` of a JAX agent.
        output: The directory to write (created if missing; its two files are replaced).
        platforms: The platforms to lower the program for.

    Returns:
        ``output``.

    Raises:
        RLGraphBackendError: The policy cannot be exported as one program (e.g. it calls the host).
    """
    import jax

    exported = _exported(greedy, platforms)
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, PROGRAM_FILE), "wb") as f:
        f.write(exported.serialize())
    metadata = dict(
        format="jax_export", format_version=FORMAT_VERSION, agent=type(greedy.agent).__name__,
        jax_version=jax.__version__, calling_convention_version=exported.calling_convention_version,
        platforms=list(exported.platforms), batch_dimension="b",
        inputs=[_tensor_json(n, a) for n, a in zip(input_names(greedy), exported.in_avals)],
        outputs=[_tensor_json(n, a) for n, a in zip(output_names(greedy), exported.out_avals)],
        observation_space=_space_json(greedy.state_space), action_space=_space_json(greedy.agent.action_space))
    with open(os.path.join(output, METADATA_FILE), "w") as f:
        json.dump(metadata, f, indent=1)
    return output


def input_names(greedy):
    """``observations``, and for a recurrent policy ``state_i`` per part of its state."""
    return ["observations"] + greedy.state_names


def output_names(greedy):
    """``actions``, the scores' name, and for a recurrent policy ``next_state_i`` per part of its state."""
    return ["actions", greedy.scores_name] + [f"next_{n}" for n in greedy.state_names]


def _exported(greedy, platforms):
    """The ``jax.export.Exported`` of the greedy policy: float32 inputs with a symbolic batch ``b``; returns the dict
    ``{"actions": int64 [b], scores_name: float32 [b, n], "next_state_i": float32 [b, units]}``."""
    import jax
    import jax.numpy as jnp

    from rlgraph.backends.jax_backend import functional

    executor = greedy.agent.executor
    variables = list(executor.variables().values())
    values = [v.value for v in variables]  # Concrete arrays: constants of the program.
    key = executor.op_generator.key
    pure = functional(greedy, variables)
    dtype = np.dtype(greedy.state_space.dtype)
    names = output_names(greedy)

    def policy(observations, *states):
        # The key as a value of the trace (a greedy policy draws nothing; a draw would take this fixed key).
        traced_key = jax.random.wrap_key_data(jnp.asarray(jax.random.key_data(key)))
        out, _, _ = pure(traced_key, values, observations.astype(dtype), *states)
        actions, scores, *next_states = out
        return dict(zip(names, [actions.astype(jnp.int64), scores.astype(jnp.float32)]
                        + [s.astype(jnp.float32) for s in next_states]))

    batch, = jax.export.symbolic_shape("b")
    specs = [jax.ShapeDtypeStruct((batch,) + tuple(greedy.state_space.shape), jnp.float32)] + [
        jax.ShapeDtypeStruct((batch,) + tuple(shape), jnp.float32) for shape in greedy.state_shapes]
    try:
        return jax.export.export(jax.jit(policy), platforms=tuple(platforms))(*specs)
    except (ValueError, TypeError, NotImplementedError, jax.errors.JAXTypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RLGraphBackendError(f"export --format jax_export: the greedy policy of {type(greedy.agent).__name__} "
                                  f"cannot be exported as one JAX program ({type(e).__name__}: {first}).") from None


def _tensor_json(name, aval):
    return dict(name=name, shape=[d if isinstance(d, int) else str(d) for d in aval.shape],
                dtype=np.dtype(aval.dtype).name)


def _space_json(space):
    """A Box space as JSON: its type, shape, dtype, bounds (one number where all are equal; ``null`` for an
    unbounded side) and, for a discrete one, its number of categories."""
    out = dict(type=type(space).__name__, shape=list(space.shape), dtype=np.dtype(space.dtype).name)
    for side in ("low", "high"):
        bound = getattr(space, side, None)
        if bound is not None:
            out[side] = _bound_json(np.asarray(bound))
    if getattr(space, "num_categories", None) is not None and np.dtype(space.dtype).kind in "iu":
        out["num_categories"] = int(space.num_categories)
    return out


def _bound_json(bound):
    if bound.size and np.all(bound == bound.flat[0]):
        bound = bound.flat[0]
    return _finite(bound.tolist())


def _finite(value):
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value if math.isfinite(value) else None


def load_policy(directory):
    """Loads an exported policy with ``jax`` and ``numpy`` only (no rlgraph: copy this function to run one).

    Args:
        directory: What ``rlgraph export --format jax_export`` wrote.

    Returns:
        ``policy(observations, *states) -> dict`` of numpy arrays (``actions``, the scores, for a recurrent policy
        ``next_state_i``); ``observations`` a batch of any size; ``policy.metadata`` is ``policy.json``.

    Raises:
        ValueError: An input's shape or count does not fit the policy (one line naming it).
    """
    import json
    import os

    import jax
    import numpy as np

    with open(os.path.join(directory, "policy.json")) as f:
        metadata = json.load(f)
    with open(os.path.join(directory, "policy.bin"), "rb") as f:
        exported = jax.export.deserialize(bytearray(f.read()))
    inputs = metadata["inputs"]

    def policy(observations, *states):
        given = [observations] + list(states)
        if len(given) != len(inputs):
            raise ValueError(f"{directory}: the policy takes {', '.join(i['name'] for i in inputs)}; got "
                             f"{len(given)} array(s).")
        arrays = []
        for spec, value in zip(inputs, given):
            value = np.asarray(value, dtype=spec["dtype"])
            if value.ndim != len(spec["shape"]) or list(value.shape[1:]) != spec["shape"][1:]:
                raise ValueError(f"{directory}: input '{spec['name']}' has shape {list(value.shape)}; expected "
                                 f"{spec['shape']} (b: any batch size).")
            arrays.append(value)
        return {k: np.asarray(v) for k, v in exported.call(*arrays).items()}

    policy.metadata = metadata
    return policy
