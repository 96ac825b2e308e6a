"""Storing and restoring an agent: its model (variables, counters, a checksum manifest) and its run state (what
exact resume needs besides the variables)."""
import json
import os

import numpy as np

from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphDivergenceError, RLGraphError
from rlgraph.utils.text import with_article

#: The file of a stored model that names its agent, backend, config hash and counters.
AGENT_FILE = "rlgraph_agent.json"


def store_model(agent, path):
    """Stores all variables and the agent's counters in directory ``path``."""
    from rlgraph.utils.checksums import write_manifest
    bad = [k for k, v in agent.get_weights().items() if not np.all(np.isfinite(v))]
    if bad:
        raise RLGraphDivergenceError(f"store_model: weights {bad[:3]} hold NaN or inf (training diverged; the "
                                     f"usual cause is a learning rate far too high); nothing was written to "
                                     f"'{path}'.")
    agent.executor.store_model(path)
    with open(os.path.join(path, AGENT_FILE), "w") as f:
        json.dump({"agent": type(agent).__name__, "backend": agent.backend, "config_hash": agent.config_hash(),
                   "timesteps": agent.timesteps, "updates": agent.updates}, f, indent=1)
    write_manifest(path)
    return path


def load_model(agent, path):
    """Restores a model stored by ``store_model`` on any backend; refuses one of another agent or config."""
    from rlgraph.utils.checksums import verify_manifest
    meta_path = os.path.join(path, AGENT_FILE)
    if not os.path.isfile(meta_path):
        raise RLGraphCheckpointError(f"'{path}' holds no rlgraph agent model ({AGENT_FILE} missing).")
    verify_manifest(path)
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise RLGraphCheckpointError(f"'{meta_path}' cannot be read: {e}") from None
    if meta.get("agent") != type(agent).__name__:
        raise RLGraphError(f"Model in '{path}' belongs to {with_article(meta.get('agent'))}, not to "
                           f"{with_article(type(agent).__name__)}.")
    if meta.get("config_hash") != agent.config_hash():
        raise RLGraphError(f"Model in '{path}' was stored by an agent with another config (or other spaces).")
    try:
        agent.executor.load_model(path)
    except RLGraphError:
        raise
    except Exception as e:  # A backend's own error about a file it cannot read.
        raise RLGraphCheckpointError(f"The model in '{path}' cannot be loaded: {type(e).__name__}: "
                                     f"{str(e).splitlines()[0] if str(e) else ''}") from None
    timesteps, updates = int(meta.get("timesteps", 0)), int(meta.get("updates", 0))
    for role in (agent.actor, agent.learner):
        if role is not None:
            role.restore_counters(timesteps, updates)
    agent.reset()

# --- run state (exact resume) ------------------------------------------------------------------------


def get_run_state(agent, include_replay=True):
    """What the agent's future depends on besides its variables, for ``set_run_state``.

    Args:
        include_replay: Include the replay memory's contents (False: a resumed learner starts with an empty
            memory and refills it before it learns again; for replays of many GB).

    Returns:
        A nested dict of numpy arrays and JSON scalars: the state its components keep outside backend
        variables (replay memories with their priority trees and sampling generators, queues), the
        trajectory builder's partial trajectories, the roles' counters and schedules, and the backend's
        random-number state (``GraphExecutor.tagged_rng_state``).
    """
    from rlgraph.components.memories.memory import Memory
    components = {}
    for component in agent.root.get_all_sub_components(include_self=True):
        if not include_replay and isinstance(component, Memory):
            continue
        state = component.get_state()
        if state is not None:
            components[component.global_scope] = state
    return dict(agent=type(agent).__name__, role=agent.role, components=components,
                builder=None if agent.builder is None else agent.builder.get_state(),
                actor=None if agent.actor is None else agent.actor.get_state(),
                learner=None if agent.learner is None else
                agent.learner.get_state() if include_replay else agent.learner.get_state_without_replay(),
                backend_rng=agent.executor.tagged_rng_state(), replay=bool(include_replay))


def set_run_state(agent, state):
    """Restores what ``get_run_state`` returned (after ``load_model``, whose counters it replaces).

    Raises:
        RLGraphCheckpointError: The state is of another agent or role, or does not fit this agent's graph.
    """
    where = f"{agent.name}: the stored run state"
    if not isinstance(state, dict) or state.get("agent") != type(agent).__name__ or state.get("role") != agent.role:
        found = (state.get("agent"), state.get("role")) if isinstance(state, dict) else type(state).__name__
        raise RLGraphCheckpointError(f"{where} belongs to {found}, not to {with_article(type(agent).__name__)} with "
                                     f"role '{agent.role}'.")
    by_scope = {c.global_scope: c for c in agent.root.get_all_sub_components(include_self=True)}
    try:
        unknown = [scope for scope in state["components"] if scope not in by_scope]
        if unknown:
            raise KeyError(f"no components {unknown[:3]} in this graph")
        for scope, component_state in state["components"].items():
            by_scope[scope].set_state(component_state)
        for name in ("builder", "actor", "learner"):
            part = agent.builder if name == "builder" else getattr(agent, name)
            if part is not None and state[name] is not None:
                part.set_state(state[name])
        agent.executor.restore_tagged_rng_state(state["backend_rng"])
        if not state.get("replay", True) and agent.learner is not None:
            agent.learner.forget_replay()
    except RLGraphCheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, RLGraphError) as e:
        raise RLGraphCheckpointError(f"{where} does not fit: {type(e).__name__}: {e}") from None
