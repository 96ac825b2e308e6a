"""The agent base class: an algorithm's root component, built on one backend, behind a small numpy API."""
import copy
import hashlib
import json
import logging
import os

import numpy as np

from rlgraph.agents import agent_checkpoint
from rlgraph.agents.agent_checkpoint import AGENT_FILE  # noqa: F401 (its public home was here)
from rlgraph.agents.plain_loop import PlainLoop, batched_action_hint, refuse_vector_env_spaces
from rlgraph.agents.step_check import StepCheck
from rlgraph.executors.graph_executor import GraphExecutor
from rlgraph.spaces import BoxSpace, Space
from rlgraph.utils.backend import get_default_backend, normalize_backend
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError, RLGraphSpecError
from rlgraph.utils.specifiable import Specifiable, load_json
from rlgraph.utils.validation import Int, Number, OneOf, check, check_args, check_spec, spec_error

logger = logging.getLogger(__name__)


#: What ``Agent.from_spec(..., role=...)`` builds: the actor alone, the learner alone, or both in one process.
ROLES = ("both", "actor", "learner")

class Agent(Specifiable):
    """An RL algorithm on one backend: its actor, trajectory builder and learner, built by role.

    The three roles are separate objects that share nothing but the config and the graph executor:

    - ``agent.actor`` (an ``Actor``) acts: batched actions for the rows of a vector of environments, with the
      extras its algorithm's trajectories need (behaviour log-probs, values, recurrent state, the weights
      version that acted), and turns each environment step into the row dict its trajectory builder takes.
    - ``agent.make_trajectory_builder()`` gives a fresh, backend-free builder (``rlgraph.trajectories``),
      keyed by environment id, that cuts those rows into items (n-step transitions, unrolls, sequences).
    - ``agent.learner`` (a ``Learner``) takes items (into its memory, where the algorithm has one), updates,
      counts its weights version and reports the policy lag of what it learns from.

    ``role="actor"`` builds only the API methods acting needs (no memory, optimizer, loss variables or target
    network), ``role="learner"`` the whole graph without an actor, ``role="both"`` (default; its earlier name
    ``"local"`` is still accepted) everything in one process: then ``observe`` runs the step through the builder into the learner and actor and learner
    share one executor, so the actor always acts with the learner's current weights. Subclasses implement
    ``build_root()`` and name their ``actor_class``, ``learner_class`` and ``actor_api_methods``.

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
        role: "both", "actor" or "learner" (see above).
        device_strategy: How the executor places the learner's graph on devices (not used by an actor-only
            build): None (one device) or ``{"type": "multi_device_sync", "devices": ["gpu:0", "gpu:1"]}``,
            one tower per device on a slice of each update batch, gradients averaged, one step
            (``rlgraph.executors.multi_device_sync``). ``from_spec`` reads it from a config's
            ``execution_spec`` (``"device_strategy"`` and ``"devices"``).
    """

    #: Keys of a training config that belong to the run, not to the agent; ``from_spec`` leaves them out.
    RUN_KEYS = ("environment_spec", "train_spec", "execution_spec", "description")
    #: Agent arguments that do not change what a stored model means (left out of ``config_hash``).
    RUNTIME_KEYS = ("backend", "seed", "device", "name", "role", "device_strategy")
    #: What the checked constructor arguments accept (``rlgraph.utils.validation``; also the config's JSON Schema).
    ARG_RULES = dict(seed=Int(min=0), discount=Number(min=0.0, max=1.0), role=OneOf(*ROLES))
    #: The role classes (subclasses set them).
    actor_class = None
    learner_class = None
    #: The root API methods an actor-only build holds.
    actor_api_methods = ()

    def __init__(self, state_space, action_space, backend=None, seed=0, discount=0.99, preprocessing_spec=None,
                 network_spec=None, optimizer_spec=None, device=None, name=None, role="both", device_strategy=None):
        checked = check_args(type(self).__name__, Agent.ARG_RULES, dict(seed=seed, discount=discount, role=role))
        self.role = checked["role"]
        refuse_vector_env_spaces(type(self).__name__, state_space, action_space)
        self.state_space = _to_space(state_space, "state_space").strip_ranks()
        self.action_space = _to_space(action_space, "action_space").strip_ranks()
        self.backend = normalize_backend(backend or get_default_backend())
        self.seed, self.discount = checked["seed"], checked["discount"]
        self.preprocessing_spec = preprocessing_spec
        self.network_spec = network_spec
        self.optimizer_spec = optimizer_spec or {"type": "adam", "learning_rate": 1e-3}
        self.device = device
        self.name = name or type(self).__name__
        self.config = None  # The spec it was built from (set by from_spec), for checkpoints.
        try:
            self.root, input_spaces = self.build_root()
            api_methods = self.actor_api_methods if role == "actor" else self.learner_api_methods()
            self.executor = GraphExecutor.create(backend=self.backend, root_component=self.root,
                                                 input_spaces=input_spaces, action_space=self.action_space,
                                                 seed=self.seed, device=device, api_methods=api_methods,
                                                 device_strategy=None if role == "actor" else device_strategy)
        except RLGraphError as e:  # A vector env's action space passed for one environment's: say so.
            hint = batched_action_hint(action_space)
            if hint is None:
                raise
            raise RLGraphSpaceError(f"{e} ({hint})") from e
        self.actor = self.actor_class.from_agent(self) if role != "learner" else None
        self.learner = self.learner_class.from_agent(self) if role != "actor" else None
        if role == "both":  # One executor: the actor acts with the learner's weights, of the learner's version.
            self.actor.share_learner(self.learner)
        self.builder = self.make_trajectory_builder() if role == "both" else None
        #: Checks the arguments of a step (``observe``, a worker's ``ActorLoop``; role "both", else None).
        self.step_check = None
        # The plain loop (role "both", see the class docstring): the step sequence and what it keeps between
        # get_actions and observe.
        self._plain = None
        if role == "both":
            self.step_check = StepCheck(self.name, self.state_space, self.action_space, self.actor.extras_keys)
            self._plain = PlainLoop(self.name, self.actor, self.builder, self.learner, self.step_check)

    # --- construction -------------------------------------------------------------------------------------
    def learner_api_methods(self):
        """The root API methods a learner (or local) agent builds, after ``build_root``; None: all."""
        return None

    @classmethod
    def from_spec(cls, spec=None, state_space=None, action_space=None, _path=None, **overrides):
        """Builds an agent from a dict or JSON config whose ``"type"`` names it ("dqn", "apex", ...).

        Run keys (``environment_spec``, ``train_spec``, ``execution_spec``) are ignored here, except the
        device strategy of ``execution_spec`` (``"device_strategy"``, ``"devices"``), which becomes the
        agent's ``device_strategy``; every other key must be an argument of the agent. ``overrides`` replace
        config values (e.g. ``backend="pytorch"``, ``role="actor"``).
        """
        path = _path or "agent"
        if isinstance(spec, (str, os.PathLike)):
            spec = load_json(spec, path)
        if not isinstance(spec, dict):
            raise RLGraphSpecError(f"{path}: expected a config dict or JSON file, got {spec!r}.")
        config = {k: v for k, v in copy.deepcopy(spec).items() if k not in cls.RUN_KEYS}
        strategy = _device_strategy_of(spec.get("execution_spec"), path)
        if strategy is not None and "device_strategy" not in config:
            config["device_strategy"] = strategy
        config.update({k: v for k, v in overrides.items() if v is not None})
        if state_space is not None:
            config["state_space"] = state_space
        if action_space is not None:
            config["action_space"] = action_space
        for key in ("state_space", "action_space"):
            if key not in config:
                raise spec_error(path, key, "missing: pass it to from_spec or put it into the config.")
        agent = super().from_spec(config, _path=path)
        agent.config = {k: v for k, v in config.items() if k not in ("state_space", "action_space")}
        return agent

    def build_root(self):
        """Returns ``(root component, input spaces of its API methods)``."""
        raise NotImplementedError

    def make_trajectory_builder(self):
        """A new trajectory builder (``rlgraph.trajectories``) for this algorithm's items."""
        raise NotImplementedError

    def _role(self, name, needed):
        obj = getattr(self, name)
        if obj is None:
            raise RLGraphError(f"{self.name} was built with role='{self.role}'; {needed} needs the {name} "
                               f"(role='both' or '{name}').")
        return obj

    # --- acting ---------------------------------------------------------------------------------------------
    def get_actions(self, states, explore=True, internal_states=None, return_extras=False):
        """Actions for a batch of states (one row per environment).

        A local agent remembers the extras of an exploring call until ``observe`` takes them (so ``observe``
        needs no extras), and, where ``internal_states`` is None, acts from the recurrent state it threads per
        row itself (zero at the start and after an episode's end). Greedy calls (``explore=False``) neither use
        nor change that state: pass ``internal_states`` to evaluate a recurrent agent.

        Args:
            states: A batch of states (a numpy array, or a list that numpy converts, one row per environment).
            explore: Whether to explore (sample / epsilon-greedy) or act greedily.
            internal_states: Recurrent state per environment (recurrent agents; None: a new episode, or, for an
                exploring call of a local agent, the state it threads itself).
            return_extras: Also return the dict of what the trajectory needs besides the transition
                (behaviour log-probabilities, the next internal states, the weights version, ...).

        Returns:
            The actions (and the extras dict with ``return_extras``).
        """
        actor = self._role("actor", "get_actions")
        if type(states) is list:
            states = self._states_from_list(states)
        if explore and self._plain is not None:
            actions, extras = self._plain.get_actions(states, internal_states)
        else:
            actions, extras = actor.get_actions(states, explore, internal_states)
        return (actions, extras) if return_extras else actions

    def _states_from_list(self, states):
        """A list of states as the array of the state space's dtype (``get_actions(obs.tolist())``)."""
        space = self.state_space
        if not isinstance(space, BoxSpace):
            raise RLGraphSpaceError(f"{self.name}.get_actions(): states of {space!r} come as a dict or tuple of "
                                    f"arrays with one row per environment, got a list.")
        try:
            return np.asarray(states, dtype=space.dtype)
        except (TypeError, ValueError) as e:
            raise RLGraphSpaceError(f"{self.name}.get_actions(): the list of states cannot be converted to an array "
                                    f"of {space!r} ({e}); pass a numpy array of shape (N,) + "
                                    f"{tuple(space.shape)}.") from None

    def next_internal_states(self, extras, rewards, dones):
        """The internal states to pass to the next ``get_actions``: the extras' next states, zeroed for
        environments whose episode ended (``dones``), and completed with this step's rewards where the
        network sees previous rewards. None for agents without internal states."""
        return self._role("actor", "next_internal_states").next_internal_states(extras, rewards, dones)

    # --- observing and learning ---------------------------------------------------------------------------
    def observe(self, states, actions, rewards, next_states, terminals, truncations=None, env_ids=None, **extras):
        """Takes one step of a batch of environments (role "both"): actor row dict -> builder -> learner, through
        the ``ActorLoop`` (``rlgraph.workers``) that the workers and engines use too.

        Args:
            states, actions, rewards, next_states, terminals, truncations: The step. ``next_states`` are the
                observations the actions led to, i.e. an ended episode's final observation: rlgraph's
                ``env.final_obs``; with gymnasium's vector envs, ``next_obs`` in next-step auto-reset mode (the
                default; the reset step after an episode's end, reward 0 from the final observation, is
                recognised and left out of the trajectories), and ``next_obs`` with the ended rows replaced by
                ``info["final_obs"]`` in same-step mode. Checked at the call
                (``rlgraph.agents.step_check.StepCheck``): a bad argument raises an ``RLGraphSpaceError`` and
                changes nothing.
            env_ids: The environments' ids (default: the row positions 0..N-1).
            **extras: What ``get_actions(..., return_extras=True)`` returned for this step; none: the extras the
                agent remembered from its last exploring ``get_actions``, which must have been for these rows.
                DQN and Ape-X also take steps they did not act on (demonstrations, another policy's data): observed
                without extras and with no exploring ``get_actions`` since the last ``observe``, they are learned
                from and count in no policy-lag figure.
        """
        for role in ("actor", "learner"):
            self._role(role, "observe")
        self._plain.observe(states, actions, rewards, next_states, terminals, truncations, env_ids, extras)

    def ready_to_update(self):
        """Whether ``update()`` should be called now (enough new data per the update schedule)."""
        return self._role("learner", "ready_to_update").ready_to_update()

    def update(self, batch=None):
        """One learning step, from the learner's own data or from ``batch``; returns a dict of named results."""
        return self._role("learner", "update").update(batch)

    def reset(self):
        """Drops partial trajectories, unrolls held back and what the plain loop remembered (see ``observe``), e.g.
        after the environments were reset."""
        if self._plain is not None:
            self._plain.reset()

    # --- counters ----------------------------------------------------------------------------------------
    @property
    def timesteps(self):
        """Environment steps: the learner's count where there is one, else the actor's."""
        return (self.learner or self.actor).timesteps

    @property
    def updates(self):
        """The learner's optimizer updates (0 for an actor)."""
        return self.learner.updates if self.learner is not None else 0

    @property
    def weights_version(self):
        """The version of the weights: the learner's update count, or the version an actor was last given."""
        return self.learner.weights_version if self.learner is not None else self.actor.weights_version

    # --- weights and models --------------------------------------------------------------------------------
    def get_weights(self):
        """The trainable weights: an ordered dict full variable name -> numpy array (see ``weights_version``)."""
        return self.executor.get_weights()

    def set_weights(self, weights, version=None):
        """Sets weights as ``get_weights`` returns them (all names and shapes checked first).

        Args:
            weights: The weights dict.
            version: The learner version these weights have (an actor stamps it on what it acts; a learner
                continues counting from it). None leaves the version as it is.
        """
        self.executor.set_weights(weights)
        if version is not None:
            version = int(version)
            if self.actor is not None:
                self.actor.weights_version = version
            if self.learner is not None:
                self.learner.updates = version

    def config_hash(self):
        """A hash of the agent's config and spaces: checkpoints of another config are refused."""
        config = {k: v for k, v in (self.config or {}).items() if k not in self.RUNTIME_KEYS}
        blob = json.dumps({"type": type(self).__name__, "config": config, "state": repr(self.state_space),
                           "action": repr(self.action_space)}, sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def store_model(self, path):
        """Stores all variables and the agent's counters in directory ``path`` (``agent_checkpoint.store_model``)."""
        return agent_checkpoint.store_model(self, path)

    def load_model(self, path):
        """Restores a model stored by ``store_model`` on any backend; refuses one of another agent or config."""
        agent_checkpoint.load_model(self, path)

    def get_run_state(self, include_replay=True):
        """What the agent's future depends on besides its variables (``agent_checkpoint.get_run_state``)."""
        return agent_checkpoint.get_run_state(self, include_replay)

    def set_run_state(self, state):
        """Restores what ``get_run_state`` returned (``agent_checkpoint.set_run_state``)."""
        agent_checkpoint.set_run_state(self, state)

    def terminate(self):
        self.executor.terminate()

    def __repr__(self):
        return f"{type(self).__name__}(role={self.role}, backend={self.backend}, " \
               f"state_space={self.state_space!r}, action_space={self.action_space!r})"


def _device_strategy_of(execution_spec, path):
    """The ``device_strategy`` agent argument from a config's ``execution_spec`` (None: not set there)."""
    if not isinstance(execution_spec, dict) or execution_spec.get("device_strategy") is None:
        if isinstance(execution_spec, dict) and execution_spec.get("devices") is not None:
            raise RLGraphSpecError(f"{path}.execution_spec.devices: devices need a device_strategy (e.g. "
                                   f"\"multi_device_sync\").")
        return None
    strategy = execution_spec["device_strategy"]
    if isinstance(strategy, str):
        strategy = {"type": strategy}
        if execution_spec.get("devices") is not None:
            strategy["devices"] = execution_spec["devices"]
    return strategy


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


def check_positive_int(owner, key, value, minimum=1):
    """``value`` if it is an int >= ``minimum``, else an RLGraphSpecError naming ``owner.key``."""
    return check(owner, key, value, Int(min=minimum))


def check_update_spec(owner, spec, defaults):
    """The ``update_spec`` of a replay agent: ``defaults`` updated by ``spec``, every key known and an int >= 1
    (``steps_before_update`` >= 0)."""
    schema = {key: Int(min=0 if key == "steps_before_update" else 1) for key in defaults}
    if spec is not None and not isinstance(spec, dict):
        raise spec_error(owner, "update_spec", f"expected a dict, got {spec!r}.")
    try:
        return check_spec(spec, schema, "update_spec", defaults=defaults)
    except RLGraphSpecError as e:
        raise spec_error(owner, e.key and f"update_spec.{e.key}", e.reason) from None
