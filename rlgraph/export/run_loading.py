"""The trained agent of a run, rebuilt from what its logdir holds: the effective config and a checkpoint."""
import json
import logging
import os

from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError

logger = logging.getLogger(__name__)


def find_model(path):
    """``(model directory, run logdir or None)`` of a run's logdir, one of its checkpoints (``ckpt-N``) or a stored
    model directory (``store_model``).

    Raises:
        RLGraphCheckpointError: ``path`` is not a directory, or holds no (undamaged) checkpoint.
    """
    from rlgraph.agents.agent import AGENT_FILE
    from rlgraph.training.checkpoint_store import CheckpointStore
    if not os.path.isdir(path):
        raise RLGraphCheckpointError(f"'{path}' is not a directory (a run's logdir, one of its checkpoints or a "
                                     f"stored model).")
    store = CheckpointStore(path)
    if store.exists():
        found = store.latest()
        if found is None:
            raise RLGraphCheckpointError(f"'{path}' holds no complete checkpoint.")
        return os.path.join(found[0], "model"), path
    for model in (path, os.path.join(path, "model")):
        if os.path.isfile(os.path.join(model, AGENT_FILE)):
            return model, _logdir_above(model)
    raise RLGraphCheckpointError(f"'{path}' holds no checkpoint: give a run's logdir after its first checkpoint, "
                                 f"one of its checkpoints/ckpt-N directories or a stored model.")


def _logdir_above(model):
    """The run logdir that holds a model directory (``LOGDIR/checkpoints/ckpt-N/model``), if any."""
    here = os.path.abspath(model)
    for _ in range(4):
        if os.path.isfile(os.path.join(here, "config.json")) or os.path.isfile(os.path.join(here, "summary.json")):
            return here
        here = os.path.dirname(here)
    return None


def run_config(logdir):
    """The effective config of the run in ``logdir``: its ``config.json``, else (runs written before it existed) the
    config file its ``summary.json`` names, with the environment and backend the run used.

    Raises:
        RLGraphError: Neither is there.
    """
    from rlgraph.engines.runner import load_config
    path = os.path.join(logdir, "config.json") if logdir else None
    if path and os.path.isfile(path):
        return load_config(path, name=path)[0]
    summary = _read_json(os.path.join(logdir, "summary.json")) if logdir else None
    if summary and summary.get("config") and os.path.isfile(summary["config"]):
        config = dict(load_config(summary["config"], name=summary["config"])[0])
        if isinstance(summary.get("environment"), dict):
            config["environment_spec"] = summary["environment"]
        config.setdefault("backend", summary.get("backend"))
        return config
    raise RLGraphError(f"cannot tell the config of the model: no config.json (written by `rlgraph train`) "
                       f"{'in ' + repr(logdir) if logdir else 'in a run logdir above it'}.")


def load_run_agent(path, backend=None):
    """The agent of a run's newest checkpoint (or of a checkpoint or model directory), its weights loaded.

    Args:
        path: A run's logdir, one of its ``checkpoints/ckpt-N`` or a model directory inside a run's logdir.
        backend: The backend to load it on (default: the one that stored the model; models are backend-neutral).

    Returns:
        ``(agent, config, model directory)``.
    """
    from rlgraph.engines.runner import env_kwargs_of, make_agent, make_vector_env
    model, logdir = find_model(path)
    config = run_config(logdir)
    backend = backend or stored_backend(model) or config.get("backend")
    env = make_vector_env(env_kwargs_of(config, num_envs=1))
    try:
        agent = make_agent(config, env, backend)
    finally:
        env.close()
    agent.load_model(model)
    logger.info("Loaded the %s model in %s (%s).", type(agent).__name__, model, agent.backend)
    return agent, config, model


def stored_backend(model):
    """The backend that stored a model directory (None if its agent file cannot be read)."""
    from rlgraph.agents.agent import AGENT_FILE
    return (_read_json(os.path.join(model, AGENT_FILE)) or {}).get("backend")


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
