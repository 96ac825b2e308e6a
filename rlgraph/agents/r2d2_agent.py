"""The R2D2 agent: recurrent replay DQN on stored sequences with burn-in (Kapturowski et al. 2019)."""
import numpy as np

from rlgraph.agents.agent import Agent, check_update_spec
from rlgraph.agents.r2d2_actor import STATE_KEY, R2D2Actor, zero_lstm_states
from rlgraph.agents.r2d2_learner import R2D2Learner
from rlgraph.components.algorithms.r2d2_algorithm_component import R2D2AlgorithmComponent
from rlgraph.spaces import BoolBox, BoxSpace, Dict, FloatBox, IntBox, Tuple
from rlgraph.trajectories import SequenceBuilder
from rlgraph.utils.validation import AnyOf, Bool, Int, ListOf, Mapping, Number, OneOf, Optional, check_args, spec_error

DEFAULT_UPDATE_SPEC = dict(batch_size=64, update_interval=16, updates_per_interval=1, steps_before_update=2000,
                           sync_interval=2500)
#: Without an ``overlap``, sequences overlap by ``burn_in_length + n_step`` (every step trained once).
DEFAULT_MEMORY_SPEC = dict(type="sequence-replay", capacity=10000, burn_in_length=40, train_length=40, alpha=0.9,
                           beta=0.6)
#: What ``actor_epsilons`` accepts (see ``R2D2Agent``).
ACTOR_EPSILONS = Optional(AnyOf(
    OneOf("apex"), Mapping(dict(type=OneOf("apex"), base=Number(min=0.0, max=1.0), alpha=Number())),
    ListOf(Number(min=0.0, max=1.0), min_items=1),
    what="\"apex\", an Ape-X dict {\"base\": ..., \"alpha\": ...} (base in [0, 1]) or a list of epsilons in [0, 1]"))


class R2D2Agent(Agent):
    """Recurrent Replay Distributed DQN (Kapturowski et al. 2019).

    Roles: ``R2D2Actor`` (epsilon-greedy with one LSTM state per environment, which the worker passes back
    through ``internal_states``), ``SequenceBuilder`` (fixed-length, overlapping sequences per environment
    id, each with the recurrent state the actor had at its first step and the "resets" flag where an episode
    starts after its zero padding) and ``R2D2Learner`` (``SequenceReplay`` by priority; burn-in of the LSTM over
    the first ``burn_in_length`` steps from the stored state without gradient; n-step double-Q targets under
    the value rescaling h; priorities ``eta max|delta| + (1 - eta) mean|delta|`` written back;
    ``R2D2AlgorithmComponent``).

    Args:
        memory_spec: The ``SequenceReplay``: ``capacity`` (sequences), ``burn_in_length``, ``train_length``,
            ``overlap``, ``alpha``, ``beta`` (R2D2: 40, 40, 40, 0.9, 0.6). A sequence trains on its
            ``train_length - n_step`` steps after the burn-in; the default ``overlap``, ``burn_in_length +
            n_step``, starts a sequence where the previous one's trained steps end, so every step is trained once.
        exploration_spec: The epsilon schedule used when ``actor_epsilons`` is None, e.g.
            ``{"epsilon_spec": ["linear", 1.0, 0.02]}``.
        actor_epsilons: None (the schedule), "apex" (Ape-X epsilons over the environments), a dict
            ``{"base": 0.4, "alpha": 7.0}`` for other Ape-X constants, or a list with one epsilon per env.
        update_spec: ``batch_size`` (sequences), ``update_interval`` (env steps between updates),
            ``updates_per_interval``, ``steps_before_update`` (env steps before the first update),
            ``sync_interval`` (env steps between target-network syncs).
        schedule_timesteps: Env steps over which schedules (epsilon, learning rate) run from start to end.
        dueling: Dueling Q-heads.
        n_step: The n of the n-step targets (R2D2: 5).
        eta: Priority mix (R2D2: 0.9).
        rescaling_epsilon: The epsilon of the value rescaling (R2D2: 1e-3).
        huber_loss: Huber instead of squared TD errors.
        value_rescaling: Targets under R2D2's value rescaling h (default); False: plain n-step double-Q targets
            (as Ape-X's, e.g. with clipped rewards).
        pad_episode_starts: Precede each episode by ``burn_in_length`` zero steps, its first step flagged in
            ``resets`` (the learner zeroes the LSTM state there), so the first window trains from the episode's
            first step on with the actor's exact (zero) state; without it the first ``burn_in_length`` steps of
            every episode only ever serve as burn-in.
        **kwargs: See ``Agent`` (``discount`` defaults to R2D2's 0.997 here).
    """

    __aliases__ = ("r2d2",)
    algorithm_class = R2D2AlgorithmComponent
    actor_class = R2D2Actor
    learner_class = R2D2Learner
    actor_api_methods = ("get_q_values", "get_greedy_actions", "get_actions", "get_actions_with_epsilon")

    #: What the checked constructor arguments accept (``n_step``, ``eta`` and ``rescaling_epsilon`` as the algorithm
    #: component takes them).
    ARG_RULES = dict(memory_spec=Optional(Mapping()), actor_epsilons=ACTOR_EPSILONS, schedule_timesteps=Int(min=1),
                     dueling=Bool(), huber_loss=Bool(), pad_episode_starts=Bool(),
                     **{k: R2D2AlgorithmComponent.ARG_RULES[k] for k in ("n_step", "eta", "rescaling_epsilon",
                                                                         "value_rescaling")})

    def __init__(self, state_space, action_space, memory_spec=None, exploration_spec=None, actor_epsilons="apex",
                 update_spec=None, schedule_timesteps=100000, dueling=True, n_step=5, eta=0.9, rescaling_epsilon=1e-3,
                 huber_loss=False, pad_episode_starts=True, value_rescaling=True, **kwargs):
        kwargs.setdefault("discount", 0.997)
        if isinstance(actor_epsilons, tuple):
            actor_epsilons = list(actor_epsilons)
        args = check_args("R2D2Agent", R2D2Agent.ARG_RULES, dict(
            memory_spec=memory_spec, actor_epsilons=actor_epsilons, schedule_timesteps=schedule_timesteps,
            dueling=dueling, huber_loss=huber_loss, pad_episode_starts=pad_episode_starts, n_step=n_step, eta=eta,
            rescaling_epsilon=rescaling_epsilon, value_rescaling=value_rescaling))
        self.memory_spec = dict(DEFAULT_MEMORY_SPEC, **(memory_spec or {}))
        burn_in, train = self.memory_spec["burn_in_length"], self.memory_spec["train_length"]
        if "overlap" not in self.memory_spec and isinstance(burn_in, int) and isinstance(train, int) \
                and args["n_step"] < train:  # (else R2D2AlgorithmComponent refuses train_length)
            self.memory_spec["overlap"] = burn_in + args["n_step"]
        self.exploration_spec = exploration_spec or {"epsilon_spec": ["linear", 1.0, 0.05]}
        self.update_spec = check_update_spec("R2D2Agent", update_spec, DEFAULT_UPDATE_SPEC)
        self.schedule_timesteps = args["schedule_timesteps"]
        self.actor_epsilons_spec = _actor_epsilons(args["actor_epsilons"])
        self.dueling, self.n_step, self.eta = args["dueling"], args["n_step"], args["eta"]
        self.rescaling_epsilon, self.huber_loss = args["rescaling_epsilon"], args["huber_loss"]
        self.pad_episode_starts, self.value_rescaling = args["pad_episode_starts"], args["value_rescaling"]
        super().__init__(state_space, action_space, **kwargs)

    def build_root(self):
        if not isinstance(self.action_space, IntBox) or self.action_space.num_categories is None \
                or self.action_space.shape != ():
            raise spec_error("R2D2Agent", "action_space", f"R2D2 needs a discrete scalar (IntBox(n)) action space, "
                             f"got {self.action_space!r}.")
        root = self.algorithm_class(
            self.network_spec, self.action_space, self.memory_spec, self.exploration_spec, self.optimizer_spec,
            preprocessing_spec=self.preprocessing_spec, dueling=self.dueling, n_step=self.n_step,
            discount=self.discount, eta=self.eta, rescaling_epsilon=self.rescaling_epsilon,
            huber_loss=self.huber_loss, value_rescaling=self.value_rescaling)
        self.lstm_units = units = root.lstm_units
        length = root.memory.sequence_length
        lstm_state = Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)))
        step_spaces = dict(states=self.state_space, actions=self.action_space, rewards=FloatBox(), terminals=BoolBox(),
                           bootstrap=BoolBox(), resets=BoolBox())
        self.record_space = Dict({k: _sequence_space(v, length, k) for k, v in step_spaces.items()},
                                 mask=BoolBox(shape=(length,)), **{STATE_KEY: lstm_state}, add_batch_rank=True)
        sequence = self.state_space.with_batch_rank().with_time_rank(time_major=False)
        spaces = dict(states=sequence, internal_states=lstm_state.with_batch_rank(), time_percentage=float,
                      epsilon=FloatBox(add_batch_rank=True), records=self.record_space, batch_size=int,
                      sequences=Dict(step_spaces, mask=BoolBox(), add_batch_rank=True, add_time_rank=True),
                      initial_states=lstm_state.with_batch_rank(),
                      indices=IntBox(shape=(), dtype="int64", add_batch_rank=True),
                      importance_weights=FloatBox(add_batch_rank=True))
        if root.burn_in > 0:
            spaces["burn_in_states"] = sequence
            spaces["burn_in_resets"] = BoolBox(add_batch_rank=True, add_time_rank=True)
        return root, spaces

    def make_trajectory_builder(self):
        memory = self.root.memory
        return SequenceBuilder(memory.sequence_length, memory.stride,
                               start_padding=memory.burn_in_length if self.pad_episode_starts else 0,
                               state_key=STATE_KEY, reset_key="resets")

    # --- conveniences of the roles ------------------------------------------------------------------------
    def set_actor_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row; None returns to the configured behaviour."""
        self._role("actor", "set_actor_epsilons").set_epsilons(epsilons)

    def initial_internal_states(self, num_envs):
        """Zero LSTM states ``(h, c)`` for ``num_envs`` environments."""
        return zero_lstm_states(num_envs, self.lstm_units)

    def get_q_values(self, states, internal_states=None):
        """Q-values ``[N, T, A]`` of state sequences ``[N, T, ...]`` and the LSTM states after them."""
        if internal_states is None:
            internal_states = self.initial_internal_states(len(states))
        return self.executor.execute("get_q_values", states, tuple(internal_states))

    def get_loss_and_gradients(self, sequences, initial_states, importance_weights=None):
        """``(loss, priorities, gradients)`` of sampled-style sequences without an update (``R2D2Learner``)."""
        return self._role("learner", "get_loss_and_gradients").get_loss_and_gradients(sequences, initial_states,
                                                                                     importance_weights)

    def sync_target(self):
        self._role("learner", "sync_target").sync_target()


def _sequence_space(space, length, key):
    """The space of ``length`` consecutive values of the (Box) space ``space``: shape ``(length,) + shape``."""
    def lengthen(flat_key, s):
        if not isinstance(s, BoxSpace):
            raise spec_error("R2D2Agent", "state_space", f"'{key}' has a {type(s).__name__} space; sequences of it "
                             f"cannot be stored.")
        shape = (length,) + tuple(s.shape)
        if isinstance(s, BoolBox):
            return BoolBox(shape=shape)
        if isinstance(s, IntBox):
            return IntBox(low=np.broadcast_to(s.low, shape), high=np.broadcast_to(s.high, shape), shape=shape,
                          dtype=s.dtype)
        return FloatBox(shape=shape, dtype=s.dtype)
    return space.map(lengthen)


def _actor_epsilons(spec):
    """The checked ``actor_epsilons`` (``ACTOR_EPSILONS``) as None, ``{"base", "alpha"}`` (Ape-X; "apex" is
    Ape-X's 0.4 and 7) or a float32 array."""
    if spec is None:
        return None
    if isinstance(spec, str):
        return dict(base=0.4, alpha=7.0)
    if isinstance(spec, dict):
        return dict(base=float(spec.get("base", 0.4)), alpha=float(spec.get("alpha", 7.0)))
    return np.asarray(spec, np.float32)
