"""``rlgraph export``: a run's greedy policy as a file that loads without rlgraph.

Formats: ``torchscript`` (PyTorch runs), ``saved_model`` (TensorFlow runs, signature ``serving_default``),
``onnx`` (both: ``torch.onnx`` and tf2onnx) and ``jax_export`` (JAX runs: a ``jax.export`` program and its
``policy.json`` in a directory, run with ``jax`` alone; see ``rlgraph.export.jax_export``). Every exported policy
takes ``observations`` (float32, batch first, the config's preprocessing inside) and returns ``actions`` (int64)
and the action scores (``q_values`` for DQN, Ape-X and R2D2, ``logits`` for IMPALA and APPO); a recurrent policy
(R2D2) also takes its state (``state_0``, ``state_1``: zeros at an episode's start) and returns the next one
(``next_state_0``, ...).
Backends are imported only by the format that needs them.
"""
import logging
import os

from rlgraph.utils.errors import RLGraphError
from rlgraph.utils.backend import backend_available

logger = logging.getLogger(__name__)

#: ``{format: {backend: (module, function)}}``: which writer exports which run.
FORMATS = {
    "torchscript": {"pytorch": ("rlgraph.export.pytorch_export", "export_torchscript")},
    "onnx": {"pytorch": ("rlgraph.export.pytorch_export", "export_onnx"),
             "tf": ("rlgraph.export.tf_export", "export_onnx")},
    "saved_model": {"tf": ("rlgraph.export.tf_export", "export_saved_model")},
    "jax_export": {"jax": ("rlgraph.export.jax_export", "export_jax")},
}
#: The formats whose ``output`` is a directory: what they call it.
DIRECTORY_FORMATS = {"saved_model": "a SavedModel", "jax_export": "a jax_export policy"}


def export_policy(run, format, output):
    """Exports the greedy policy of a run's newest checkpoint.

    A run of any backend exports in any format: its model is loaded on the backend that writes the format
    (TorchScript: PyTorch, SavedModel: TensorFlow, jax_export: JAX, ONNX: the run's own where it is TF or PyTorch).

    Args:
        run: A run's logdir, one of its ``checkpoints/ckpt-N`` or a model directory inside a run's logdir.
        format: "torchscript", "onnx", "saved_model" or "jax_export".
        output: The file (TorchScript, ONNX) or directory (SavedModel, jax_export) to write.

    Returns:
        ``dict(output, format, backend, agent, scores, model, inputs, outputs)``: what was written, from which
        model, with the names of its inputs and outputs.

    Raises:
        RLGraphError: One line: an unknown format, one no installed backend writes, a run without a
            checkpoint, a policy that cannot be exported (fed previous actions and rewards, several actions), an output that exists
            as another kind of path or cannot be written.
    """
    import importlib

    from rlgraph.export.greedy_policy import GreedyPolicy
    from rlgraph.export.run_loading import find_model, load_run_agent, stored_backend

    if format not in FORMATS:
        raise RLGraphError(f"--format: expected one of {', '.join(FORMATS)}, got {format!r}.")
    model, _ = find_model(run)
    backend = stored_backend(model)
    if backend not in FORMATS[format]:  # Checkpoints are backend-neutral: load it on a backend that writes the format.
        writers = [b for b in FORMATS[format] if backend_available(b)]
        if not writers:
            raise RLGraphError(f"--format {format} is written by {_runs_of(format)}, which is not installed here.")
        backend = writers[0]
    _check_output(output, directory=DIRECTORY_FORMATS.get(format))
    agent, _, model = load_run_agent(run, backend=backend)
    greedy = GreedyPolicy(agent)
    if greedy.recurrent and format == "onnx" and agent.backend == "tf":
        raise RLGraphError("--format onnx: tf2onnx cannot convert TensorFlow's fused LSTM kernel (BlockLSTMV2) of a "
                           "recurrent policy; export this run as saved_model, or train with --backend pytorch for ONNX.")
    module, function = FORMATS[format][agent.backend]
    try:
        getattr(importlib.import_module(module), function)(greedy, output)
    except RLGraphError:
        raise
    except OSError as e:
        raise RLGraphError(f"--output '{output}' cannot be written: {e.strerror or e}.") from None
    logger.info("Exported the greedy policy of %s as %s to %s.", model, format, output)
    return dict(output=output, format=format, backend=agent.backend, agent=type(agent).__name__,
                scores=greedy.scores_name, model=model, inputs=["observations"] + greedy.state_names,
                outputs=["actions", greedy.scores_name] + [f"next_{n}" for n in greedy.state_names])


def _backend_name(backend):
    return {"tf": "TensorFlow", "pytorch": "PyTorch", "jax": "JAX"}.get(backend, backend)


def _runs_of(format):
    return " and ".join(_backend_name(b) for b in FORMATS[format])


def _check_output(output, directory):
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise RLGraphError(f"--output '{output}': its directory '{parent}' does not exist.")
    if directory and os.path.isfile(output):
        raise RLGraphError(f"--output '{output}' is a file; {directory} is a directory.")
    if not directory and os.path.isdir(output):
        raise RLGraphError(f"--output '{output}' is a directory; this format writes one file.")
