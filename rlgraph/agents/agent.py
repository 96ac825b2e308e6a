"""The agent base class: an algorithm's root component, built on one backend, behind a small numpy API."""
import copy
import hashlib
import json
import logging
import os

import numpy as np

from rlgraph.executors.graph_executor import GraphExecutor
from rlgraph.spaces import Space
from rlgraph.utils.backend import get_default_backend, normalize_backend
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.specifiable import Specifiable, load_json

logger = logging.getLogger(__name__)

AGENT_FILE = "rlgraph_agent.json"


class Agent(Specifiable):
    """An RL agent: builds its algorithm's root component and a graph executor for the configured backend.

    Subclasses implement ``build_root()`` (returning the root component and its input spaces) and the
    numpy-side logic of ``get_actions``, ``observe`` and ``update``. An agent runs no environment loop and
    knows nothing of processes or machines; workers and execution engines drive it.

    Args:
        state_space: The (single-environment) state space: a Space, a spec, or a gymnasium space.
        action_space: The action space (same forms).
        backend: "tf" or "pytorch" (default ``$RLGRAPH_BACKEND``, else what is installed).
        seed: Seeds initial weights and the backend's random ops.
        discount: The discount factor.
        preprocessing_spec: A list of (stateless) preprocessor specs applied to states inside the graph.
        network_spec: The network: a list of layer specs or a network spec.
        optimizer_spec: The optimizer spec (e.g. ``{"type": "adam", "learning_rate": 1e-3}``).
        device: The device of the root component (e.g. "cpu", "gpu:0").
        name: A name for logs.
    """

    #: Keys of a training config that belong to the run, not to the agent; ``from_spec`` leaves them out.
    RUN_KEYS = ("environment_spec", "train_spec", "description")
    #: Agent arguments that do not change what a stored model means (left out of ``config_hash``).
    RUNTIME_KEYS = ("backend", "seed", "device", "name")

    def __init__(self, state_space, action_space, backend=None, seed=0, discount=0.99, preprocessing_spec=None,
                 network_spec=None, optimizer_spec=None, device=None, name=None):
        self.state_space = _to_space(state_space, "state_space").strip_ranks()
        self.action_space = _to_space(action_space, "action_space").strip_ranks()
        self.backend = normalize_backend(backend or get_default_backend())
        self.seed = int(seed)
        if not 0.0 <= float(discount) <= 1.0:
            raise RLGraphSpecError(f"{type(self).__name__}.discount: expected a number in [0, 1], got {discount!r}.")
        self.discount = float(discount)
        self.preprocessing_spec = preprocessing_spec
        self.network_spec = network_spec
        self.optimizer_spec = optimizer_spec or {"type": "adam", "learning_rate": 1e-3}
        self.device = device
        self.name = name or type(self).__name__
        self.config = None  # The spec it was built from (set by from_spec), for checkpoints.
        self.timesteps = 0
        self.updates = 0
        self.root, input_spaces = self.build_root()
        self.executor = GraphExecutor.create(backend=self.backend, root_component=self.root,
                                             input_spaces=input_spaces, action_space=self.action_space,
                                             seed=self.seed, device=device)

    # --- construction -------------------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec=None, state_space=None, action_space=None, _path=None, **overrides):
        """Builds an agent from a dict or JSON config whose ``"type"`` names it ("dqn", "apex", ...).

        Run keys (``environment_spec``, ``train_spec``) are ignored here; every other key must be an
        argument of the agent. ``overrides`` replace config values (e.g. ``backend="pytorch"``).
        """
        path = _path or "agent"
        if isinstance(spec, (str, os.PathLike)):
            spec = load_json(spec, path)
        if not isinstance(spec, dict):
            raise RLGraphSpecError(f"{path}: expected a config dict or JSON file, got {spec!r}.")
        config = {k: v for k, v in copy.deepcopy(spec).items() if k not in cls.RUN_KEYS}
        config.update({k: v for k, v in overrides.items() if v is not None})
        if state_space is not None:
            config["state_space"] = state_space
        if action_space is not None:
            config["action_space"] = action_space
        for key in ("state_space", "action_space"):
            if key not in config:
                raise RLGraphSpecError(f"{path}: no {key}; pass it to from_spec or put it into the config.")
        agent = super().from_spec(config, _path=path)
        agent.config = {k: v for k, v in config.items() if k not in ("state_space", "action_space")}
        return agent

    def build_root(self):
        """Returns ``(root component, input spaces of its API methods)``."""
        raise NotImplementedError

    # --- acting and learning ---------------------------------------------------------------------------
    def get_actions(self, states, explore=True, internal_states=None, return_extras=False):
        """Actions for a batch of states (one row per environment).

        Args:
            states: A batch of states.
            explore: Whether to explore (sample / epsilon-greedy) or act greedily.
            internal_states: Recurrent state per environment (recurrent agents).
            return_extras: Also return a dict of what ``observe`` needs besides the transition (behaviour
                log-probabilities, next internal states, ...).

        Returns:
            The actions (and the extras dict with ``return_extras``).
        """
        raise NotImplementedError

    def observe(self, states, actions, rewards, next_states, terminals, truncations=None, **extras):
        """Takes one step of transitions for a batch of environments."""
        raise NotImplementedError

    def ready_to_update(self):
        """Whether ``update()`` should be called now (enough new data per the update schedule)."""
        return False

    def update(self, batch=None):
        """One learning step, from the agent's own data or from ``batch``; returns a dict of named results."""
        raise NotImplementedError

    def reset(self):
        """Drops partial per-environment buffers (e.g. after the environments were reset)."""

    # --- weights and models --------------------------------------------------------------------------------
    def get_weights(self):
        """The trainable weights: an ordered dict full variable name -> numpy array."""
        return self.executor.get_weights()

    def set_weights(self, weights):
        """Sets weights as ``get_weights`` returns them (all names and shapes checked first)."""
        self.executor.set_weights(weights)

    def config_hash(self):
        """A hash of the agent's config and spaces: checkpoints of another config are refused."""
        config = {k: v for k, v in (self.config or {}).items() if k not in self.RUNTIME_KEYS}
        blob = json.dumps({"type": type(self).__name__, "config": config, "state": repr(self.state_space),
                           "action": repr(self.action_space)}, sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def store_model(self, path):
        """Stores all variables and the agent's counters in directory ``path``."""
        self.executor.store_model(path)
        with open(os.path.join(path, AGENT_FILE), "w") as f:
            json.dump({"agent": type(self).__name__, "backend": self.backend, "config_hash": self.config_hash(),
                       "timesteps": self.timesteps, "updates": self.updates}, f, indent=1)
        return path

    def load_model(self, path):
        """Restores a model stored by ``store_model``; refuses one of another agent, config or backend."""
        meta_path = os.path.join(path, AGENT_FILE)
        if not os.path.isfile(meta_path):
            raise RLGraphError(f"'{path}' holds no rlgraph agent model ({AGENT_FILE} missing).")
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("agent") != type(self).__name__:
            raise RLGraphError(f"Model in '{path}' belongs to a {meta.get('agent')}, not a {type(self).__name__}.")
        if meta.get("backend") != self.backend:
            raise RLGraphError(f"Model in '{path}' was stored by backend '{meta.get('backend')}'; this agent runs "
                               f"'{self.backend}'.")
        if meta.get("config_hash") != self.config_hash():
            raise RLGraphError(f"Model in '{path}' was stored by an agent with another config (or other spaces).")
        self.executor.load_model(path)
        self.timesteps, self.updates = int(meta.get("timesteps", 0)), int(meta.get("updates", 0))
        self.on_load()

    def on_load(self):
        """Called after ``load_model``: re-align schedules and counters with the restored timesteps."""

    def terminate(self):
        self.executor.terminate()

    def __repr__(self):
        return f"{type(self).__name__}(backend={self.backend}, state_space={self.state_space!r}, " \
               f"action_space={self.action_space!r})"


def _to_space(space, where):
    if isinstance(space, Space):
        return space
    if type(space).__module__.startswith("gymnasium"):
        return Space.from_gymnasium(space)
    return Space.from_spec(space, _path=where)


def batch_size_of(states):
    """The number of rows of a (possibly nested) batch of states."""
    while isinstance(states, (dict, tuple, list)):
        states = next(iter(states.values())) if isinstance(states, dict) else states[0]
    return int(np.shape(states)[0])
