"""``rlgraph export``: a run's greedy policy as a file that loads without rlgraph.

Formats: ``torchscript`` (PyTorch runs), ``saved_model`` (TensorFlow runs, signature ``serving_default``),
``onnx`` (both: ``torch.onnx`` and tf2onnx) and ``jax_export`` (JAX runs: a ``jax.export`` program and its
``policy.json`` in a directory, run with ``jax`` alone; see ``rlgraph.export.jax_export``). Every exported policy
takes ``observations`` (float32, batch first, the config's preprocessing inside) and returns ``actions`` (int64)
and the action scores (``q_values`` for DQN, Ape-X and R2D2, ``logits`` for IMPALA and APPO); a recurrent policy
(R2D2) also takes its state (``state_0``, ``state_1``: zeros at an episode's start) and returns the next one
(``next_state_0``, ...).
Backends are imported only by the format that needs them.

An export never writes into a run's checkpoints, a stored model or over the files a run keeps in its logdir
(``config.json``, ``summary.json``, ...; beside them, a new name of its own is fine), and replaces an existing
output only when asked to (``--overwrite``); it writes to a temporary name beside the output and renames it into
place once complete, so that a failed export leaves what was there.
"""
import logging
import os
import shutil
import uuid

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
#: A file every directory of those formats holds (an existing directory without it is not replaced).
DIRECTORY_MARKERS = {"saved_model": "saved_model.pb", "jax_export": "policy.json"}

#: What a run keeps at the top of its logdir (names, and prefixes of names): an export writes neither over nor
#: into them.
RUN_NAMES = ("checkpoint", "checkpoints", "config.json", "summary.json", "processes.json", "learning_curve.png",
             "graph.txt", "graphs", "mlruns", "mlflow_run.json", "wandb", "wandb_run.json")
RUN_NAME_PREFIXES = ("events.out.tfevents", ".checkpoint-", "config.json.", "processes.json.", ".lock")


def export_policy(run, format, output, overwrite=False):
    """Exports the greedy policy of a run's newest checkpoint.

    A run of any backend exports in any format: its model is loaded on the backend that writes the format
    (TorchScript: PyTorch, SavedModel: TensorFlow, jax_export: JAX, ONNX: the run's own where it is TF or PyTorch).

    Args:
        run: A run's logdir, one of its ``checkpoints/ckpt-N`` or a model directory inside a run's logdir.
        format: "torchscript", "onnx", "saved_model" or "jax_export".
        output: The file (TorchScript, ONNX) or directory (SavedModel, jax_export) to write: not inside a run's
            checkpoints or a stored model, nor one of the files a run keeps in its logdir.
        overwrite: Replace an existing ``output`` (refused without it); a directory is replaced only where it
            holds an export of the same format.

    Returns:
        ``dict(output, format, backend, agent, scores, model, inputs, outputs)``: what was written, from which
        model, with the names of its inputs and outputs.

    Raises:
        RLGraphError: One line: an unknown format, one no installed backend writes, a run without a
            checkpoint, a policy that cannot be exported (fed previous actions and rewards, several actions), an
            output inside a run's checkpoints, over its files, that exists (without ``overwrite``), exists as
            another kind of path or cannot be written.
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
    _check_output(output, format, overwrite)
    agent, _, model = load_run_agent(run, backend=backend)
    greedy = GreedyPolicy(agent)
    if greedy.recurrent and format == "onnx" and agent.backend == "tf":
        raise RLGraphError("--format onnx: tf2onnx cannot convert TensorFlow's fused LSTM kernel (BlockLSTMV2) of a "
                           "recurrent policy; export this run as saved_model, or train with --backend pytorch for ONNX.")
    module, function = FORMATS[format][agent.backend]
    writer = getattr(importlib.import_module(module), function)
    try:
        _write_in_place(lambda path: writer(greedy, path), output)
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


def _check_output(output, format, overwrite):
    """Refuses, before anything is loaded, an output that would damage a run or a stored model, that exists
    (without ``overwrite``) or that cannot be written; one line each."""
    directory = DIRECTORY_FORMATS.get(format)
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise RLGraphError(f"--output '{output}': its directory '{parent}' does not exist.")
    _check_not_in_a_run(output)
    if directory and os.path.isfile(output):
        raise RLGraphError(f"--output '{output}' is a file; {directory} is a directory.")
    if not directory and os.path.isdir(output):
        raise RLGraphError(f"--output '{output}' is a directory; this format writes one file.")
    if os.path.lexists(output) and not (os.path.isdir(output) and not os.path.islink(output)
                                        and not os.listdir(output)):
        if not overwrite:
            raise RLGraphError(f"--output '{output}' already exists; add --overwrite to replace it.")
        if directory and not os.path.isfile(os.path.join(output, DIRECTORY_MARKERS[format])):
            raise RLGraphError(f"--output '{output}' is a directory that holds no {format} export (no "
                               f"{DIRECTORY_MARKERS[format]}); it is not replaced, even with --overwrite.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RLGraphError(f"--output '{output}' cannot be written: its directory '{parent}' is not writable.")


def _check_not_in_a_run(output):
    """Refuses an output inside a run's checkpoints or other directories, over one of a run's files, inside a
    stored model directory, or that is a run directory or a stored model itself (symbolic links followed)."""
    from rlgraph.agents.agent import AGENT_FILE
    real = os.path.realpath(output)
    placed = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(output))), os.path.basename(output))
    for path in dict.fromkeys((placed, real)):
        if os.path.isdir(path) and (_is_run_dir(path) or os.path.isfile(os.path.join(path, AGENT_FILE))):
            if _is_run_dir(path):
                raise RLGraphError(f"--output '{output}' is a run's logdir, which an export would replace; name a "
                                   f"new path (beside the run's files, e.g. '{os.path.join(output, 'policy')}', or "
                                   f"outside the run).")
            raise RLGraphError(f"--output '{output}' is a stored model, which an export would replace; name a new "
                               f"path outside it.")
        child, here = path, os.path.dirname(path)
        while True:
            if os.path.isfile(os.path.join(here, AGENT_FILE)):
                checkpoint = os.path.dirname(here)
                if os.path.basename(os.path.dirname(checkpoint)) == "checkpoints":
                    raise RLGraphError(f"--output '{output}' is inside the checkpoint '{checkpoint}' of the run "
                                       f"'{os.path.dirname(os.path.dirname(checkpoint))}', which it would damage; "
                                       f"export beside the run's files under a new name, or outside the run.")
                raise RLGraphError(f"--output '{output}' is inside the stored model '{here}', which it would "
                                   f"damage; export to a path outside it.")
            name = os.path.basename(child)
            if _is_run_dir(here) and (name in RUN_NAMES or name.startswith(RUN_NAME_PREFIXES)):
                kind = "one of its files" if child == path else f"its '{name}'"
                raise RLGraphError(f"--output '{output}' would write into the run '{here}' ({kind}: "
                                   f"{os.path.relpath(path, here)}), which keeps its checkpoints and records "
                                   f"there; export beside them under a new name, or outside the run.")
            up = os.path.dirname(here)
            if up == here:
                break
            child, here = here, up


def _is_run_dir(path):
    """Whether ``path`` is a run's logdir: it holds checkpoints, a run's lock, a summary, or a config beside
    TensorBoard events."""
    from rlgraph.training.checkpoint_store import CheckpointStore
    from rlgraph.training.run_lock import LOCK_FILE
    if not os.path.isdir(path):
        return False
    if CheckpointStore(path).exists() or os.path.exists(os.path.join(path, LOCK_FILE)) or \
            os.path.isfile(os.path.join(path, "summary.json")):
        return True
    if os.path.isfile(os.path.join(path, "config.json")):
        try:
            return any(name.startswith("events.out.tfevents") for name in os.listdir(path))
        except OSError:
            return False
    return False


def _write_in_place(write, output):
    """``write(path)`` to a temporary name beside ``output``, renamed into place once complete (an existing
    output is replaced only then: a directory moved aside and removed after the rename)."""
    parent, name = os.path.split(os.path.abspath(output))
    tag = uuid.uuid4().hex[:8]
    tmp = os.path.join(parent, f".{name}.tmp-{tag}")
    try:
        write(tmp)
        if os.path.isdir(output) and not os.path.islink(output):
            old = os.path.join(parent, f".{name}.old-{tag}")
            os.rename(output, old)
            os.rename(tmp, output)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, output)
    except BaseException:
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.lexists(tmp):
            os.unlink(tmp)
        raise
