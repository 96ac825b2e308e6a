"""In-process vector of environments with same-step auto-reset and episode statistics."""
import logging
import time

import numpy as np
import optree

from rlgraph.environments.environment import Environment
from rlgraph.environments.gym_env import GymEnv
from rlgraph.spaces.space_utils import space_from_gymnasium
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError, RLGraphSpecError
from rlgraph.utils.specifiable import Specifiable
from rlgraph.utils.validation import Int, Number, check, spec_error

logger = logging.getLogger(__name__)

_NO_IDS = np.zeros(0, dtype=np.int64)

#: The config path of ``VectorEnv``'s keywords (a training config's ``environment_spec``), for messages.
SPEC_PATH = "environment_spec"
#: The most environments one ``VectorEnv`` steps (more: spread them over actors, ``execution_spec``).
MAX_NUM_ENVS = 65536
#: What ``step_delay_ms`` accepts: a finite number of milliseconds >= 0.
STEP_DELAY_MS = Number(min=0)


def resolve_env_spec(env_spec, env_kwargs=None):
    """Splits an environment spec into (Environment subclass, constructor keywords, seed or None).

    Args:
        env_spec: A gymnasium id (str; ``"my_envs:MyEnv-v0"`` imports ``my_envs`` first), an ``Environment``
            subclass, an environment creator (a callable without arguments returning a ``gymnasium.Env``, or a
            ``gymnasium.Env`` subclass: ``CreatorEnv``), or a dict with an optional ``"type"`` (looked up among
            ``Environment`` subclasses, default ``"gym"``) and constructor keywords.
        env_kwargs: Keywords that override the spec's.
    """
    from rlgraph.environments.creator_env import CreatorEnv, is_env_creator

    kwargs = dict(env_kwargs or {})
    if isinstance(env_spec, str):
        return GymEnv, dict(kwargs, env_id=env_spec), None
    if is_env_creator(env_spec):
        return CreatorEnv, dict(kwargs, creator=env_spec), None
    if isinstance(env_spec, type):
        return Environment.lookup_class(env_spec, "env_spec"), kwargs, None
    if isinstance(env_spec, dict):
        spec = dict(env_spec)
        spec.update(kwargs)
        type_name = spec.pop("type", None)
        seed = spec.pop("seed", None)
        if type_name is None:
            if "env_id" not in spec:
                raise RLGraphSpecError(f"env_spec {env_spec!r} has neither a 'type' nor an 'env_id'.")
            return GymEnv, spec, seed
        return Environment.lookup_class(type_name, "env_spec.type"), spec, seed
    raise RLGraphSpecError(
        f"env_spec must be a gymnasium id, an Environment class, an environment creator or a dict spec, got {type(env_spec).__name__}: "
        f"{env_spec!r}."
    )


def _async_methods(backend):
    """(send, receive) of a backend that can step in the background (ale-py, AsyncVectorEnv), else (None, None)."""
    for send, receive in (("send", "recv"), ("step_async", "step_wait")):
        if callable(getattr(backend, send, None)) and callable(getattr(backend, receive, None)):
            return getattr(backend, send), getattr(backend, receive)
    return None, None


def _clip_bounds(space):
    """``(low, high)`` of a float gymnasium ``Box`` with a finite bound, else None (nothing to clip)."""
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    dtype = getattr(space, "dtype", None)
    if low is None or high is None or dtype is None or np.dtype(dtype).kind != "f":
        return None
    if not (np.isfinite(low).any() or np.isfinite(high).any()):
        return None
    return np.asarray(low, dtype), np.asarray(high, dtype)


def _set_rows(out, ids, rows):
    out[ids] = rows


class VectorEnv(Specifiable):
    """``num_envs`` copies of an environment stepped in-process as arrays, with same-step auto-reset.

    Backends: the environment's native vector form (one object stepping all copies with numpy, e.g.
    CartPole's ``vector_entry_point``; next-step-only native forms get an rlgraph same-step adapter),
    ale-py's ``AtariVectorEnv`` for Atari specs, else gymnasium's ``SyncVectorEnv`` (or ``AsyncVectorEnv``).
    The per-step cost is a fixed number of numpy operations; Python loops only over envs that finished.

    Step semantics (``obs, rewards, terminals, truncations = env.step(actions)``; arrays with leading dim N)::

        obs[i]           observation to act on next. For an env that finished in this step (terminated or
                         truncated) it is already the first observation of its NEXT episode (auto-reset in
                         the same call; no action is ever spent on a reset).
        rewards[i]       float32 reward of the transition from the previous obs[i] under actions[i].
        terminals[i]     the transition reached a terminal state: do not bootstrap.
        truncations[i]   the episode was cut (time limit): bootstrap from ``final_obs[i]`` unless
                         ``terminals[i]`` is set too (gymnasium sets both when the limit hits a terminal step).
        env.final_obs    s' of every transition: for envs in ``finished_env_ids`` the last observation of the
                         episode that just ended, else ``obs[i]``. When no env finished it IS ``obs`` (no
                         copy); else a copy built lazily on first access. ``finished_final_obs`` holds just
                         the finished envs' rows.

    So an agent stores ``(s=prev_obs, a=actions, r=rewards, s'=env.final_obs, terminal=terminals)`` for every
    env every step, bootstraps truncated episodes from ``V(final_obs)``, and acts next on ``obs``. An env
    may set ``terminals[i]`` without finishing (Atari's optional episodic life: a life is lost, the game
    goes on); then ``final_obs[i]`` equals ``obs[i]`` and no episode is recorded. Returned arrays belong to
    the caller until the next ``step``; do not modify ``obs`` in place while you still need ``final_obs``.

    Episode statistics: ``episode_returns``/``episode_lengths`` hold the running sums of the current episodes
    (undiscounted rewards, steps). When an env finishes, its (return, length) is queued: by step, then by
    env id within a step; ``pop_finished_episodes()`` returns and clears the queue. ``reset()`` discards the
    running episodes (not the queue). ``infos`` is the backend's info dict of the last call.

    Seeding: the first ``reset()`` uses ``seed`` (gymnasium convention: sub-env ``i`` of a sync/async or
    ALE backend gets ``seed + i``; a native backend seeds its one generator with ``seed``); later auto-resets
    continue each env's generator, so equal seeds and actions reproduce the same episodes.

    Args:
        env_spec: A gymnasium id (``"CartPole-v1"``, or module-qualified ``"my_envs:MyEnv-v0"``), an
            ``Environment`` subclass, an environment creator (``CreatorEnv``), or a dict spec such as
            ``{"type": "gym", "env_id": "CartPole-v1"}`` or ``{"type": "atari", "game": "pong"}``. None: the
            spec's ``type`` (or ``env_id``) and keywords are given as keywords of their own, so that a config's
            ``environment_spec`` may read ``{"type": "atari", "game": "pong", "num_envs": 8}``.
        num_envs: Number of environments (an int in [1, ``MAX_NUM_ENVS``]).
        seed: Seed of the first ``reset()`` (a ``"seed"`` in a dict spec is used when this is None).
        vectorization: "auto" (default), "native", "sync" or "async" for gymnasium ids; "auto", "ale",
            "sync" or "async" for Atari.
        step_delay_ms: A stand-in for a slow simulator: milliseconds of sleep (not computation) added to every
            vector step, once for all ``num_envs`` environments together (0: none). The model is a vector of
            slow simulators that step in parallel (each in its own process or thread, as a real vector of
            simulators does), so one vector step costs one simulator's step time whatever ``num_envs`` is, and
            the sleep leaves the core free, as waiting on a simulator does. ``step`` sleeps after the backend's
            step; ``step_async`` starts the clock, so that the delay overlaps the acting until ``step_wait``.
        **env_kwargs: Constructor keywords of the environment (e.g. ``max_episode_steps`` for gym ids).

    Raises:
        RLGraphSpecError: For a bad spec, unknown id or keyword, or a vectorization the env lacks.
    """

    __aliases__ = ("vector", "vectorenv")

    def __init__(self, env_spec=None, num_envs=1, seed=None, vectorization="auto", step_delay_ms=0.0,
                 **env_kwargs):
        num_envs = check(SPEC_PATH, "num_envs", num_envs, Int(min=1, max=MAX_NUM_ENVS))
        self.step_delay_ms = check(SPEC_PATH, "step_delay_ms", step_delay_ms, STEP_DELAY_MS)
        self._step_delay_s = self.step_delay_ms / 1000.0
        self._step_deadline = None
        if env_spec is None:
            # The environment spec's own keys at the top level: {"type": "atari", "game": "pong", "num_envs": 8}.
            env_spec = {k: env_kwargs.pop(k) for k in ("type", "env_id") if k in env_kwargs}
            if not env_spec:
                raise spec_error(SPEC_PATH, "env_spec", "missing: give a gymnasium id (\"env_spec\": \"CartPole-v1\")"
                                 " or an environment type (\"type\": \"atari\", \"game\": \"pong\").")
        env_class, kwargs, spec_seed = resolve_env_spec(env_spec, env_kwargs)
        self.env_class = env_class
        self.env_kwargs = kwargs
        backend, self.vectorization = env_class.make_vector_backend(int(num_envs), vectorization=vectorization,
                                                                    **kwargs)
        self._setup(backend, spec_seed if seed is None else seed)

    def _setup(self, backend, seed):
        """Stores the gymnasium vector backend and initializes the bookkeeping."""
        import gymnasium.vector.utils as vector_utils

        self.backend = backend
        self.num_envs = int(backend.num_envs)
        self._single_obs_space = backend.single_observation_space
        self.state_space = space_from_gymnasium(backend.single_observation_space)
        self.action_space = space_from_gymnasium(backend.single_action_space)
        self._action_dtype = getattr(backend.action_space, "dtype", None)
        self._action_bounds = _clip_bounds(backend.single_action_space)
        self._concatenate = vector_utils.concatenate
        self._create_empty_array = vector_utils.create_empty_array
        self._seed = seed
        self._seeded = False
        self._obs = None
        self.infos = {}
        self._pending = None
        self._send, self._recv = _async_methods(backend)
        self._episode_returns = np.zeros(self.num_envs, dtype=np.float64)
        self._episode_lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._finished = []
        self._clear_step_results()

    def _clear_step_results(self):
        self._finished_ids = _NO_IDS
        self._final_rows = None
        self._final_obs = None

    @property
    def seed(self):
        """The seed of the latest seeded reset (or the one the first ``reset()`` will use)."""
        return self._seed

    def reset(self, seed=None):
        """Resets all envs and returns the batch of first observations.

        Args:
            seed: Re-seeds (sub-env ``i`` gets ``seed + i`` where the backend has one generator per env);
                None continues the generators (the first reset uses the constructor's seed).
        """
        if self._pending is not None:
            self.step_wait()
        if seed is not None:
            self._seed = seed
        elif not self._seeded:
            seed = self._seed
        self._seeded = True
        obs, self.infos = self.backend.reset(seed=None if seed is None else int(seed))
        self._obs = obs
        self._episode_returns[:] = 0.0
        self._episode_lengths[:] = 0
        self._clear_step_results()
        return obs

    def step(self, actions):
        """Steps all envs; returns (obs, rewards, terminals, truncations) as in the class docstring.

        Args:
            actions: One action per env (leading dimension ``num_envs``).
        """
        results = self.backend.step(self._prepare(actions))
        if self._step_delay_s:
            time.sleep(self._step_delay_s)
        return self._process(results)

    def step_async(self, actions):
        """Starts a step and returns at once; ``step_wait()`` returns its results (as ``step`` would).

        The backend steps in the background where it can (ale-py's C++ threads, gymnasium's
        ``AsyncVectorEnv`` processes); other backends step inside ``step_wait()``. So with two VectorEnvs
        holding half of the environments each, one half steps while the policy acts on the other.
        """
        actions = self._prepare(actions)
        if self._step_delay_s:
            self._step_deadline = time.perf_counter() + self._step_delay_s
        if self._send is not None:
            self._send(actions)
            self._pending = True
        else:
            self._pending = actions

    def step_wait(self):
        """Finishes the step started by ``step_async``; returns (obs, rewards, terminals, truncations)."""
        if self._pending is None:
            raise RLGraphError("VectorEnv.step_wait() called without a pending step_async().")
        pending, self._pending = self._pending, None
        results = self._recv() if pending is True else self.backend.step(pending)
        if self._step_deadline is not None:
            # The simulated simulator started at step_async: only what is left of its delay is waited for.
            left, self._step_deadline = self._step_deadline - time.perf_counter(), None
            if left > 0:
                time.sleep(left)
        return self._process(results)

    def _prepare(self, actions):
        """Checks the env state and the actions' leading dim; casts them to the backend's dtype."""
        if self._obs is None:
            raise RLGraphError("VectorEnv.step() called before reset().")
        if self._pending is not None:
            raise RLGraphError("VectorEnv: a step_async() is pending; call step_wait() first.")
        actions = np.asarray(actions)
        if actions.shape[:1] != (self.num_envs,):
            raise RLGraphSpaceError(
                f"VectorEnv.step: expected one action per env (leading dim {self.num_envs}), got an array of "
                f"shape {actions.shape}."
            )
        if self._action_dtype is not None and actions.dtype != self._action_dtype:
            actions = actions.astype(self._action_dtype)
        if self._action_bounds is not None:
            # A continuous policy's samples may leave the box (a Gaussian's tails): the environment gets them
            # clipped; the agent keeps what it sampled (and its log-probability).
            actions = np.clip(actions, *self._action_bounds)
        return actions

    def _process(self, results):
        """Turns a backend step's results into the step's return values; updates the statistics."""
        obs, rewards, terminals, truncations, infos = results
        rewards = np.asarray(rewards, dtype=np.float32)
        terminals = np.asarray(terminals, dtype=np.bool_)
        truncations = np.asarray(truncations, dtype=np.bool_)
        self._episode_returns += rewards
        self._episode_lengths += 1
        self._final_obs = None
        ids = infos.get("final_obs_ids")
        if ids is None:
            finished = infos.get("_final_obs")
            if finished is None:
                finished = terminals | truncations
            ids = np.flatnonzero(finished) if finished.any() else _NO_IDS
            if ids.size:
                self._final_rows = self._rows_of(infos, ids)
        elif ids.size:
            self._final_rows = infos["final_obs"]
        if ids.size:
            # Whole arrays per step; pop_finished_episodes() turns them into tuples.
            self._finished.append((self._episode_returns[ids], self._episode_lengths[ids]))
            self._episode_returns[ids] = 0.0
            self._episode_lengths[ids] = 0
        else:
            self._final_rows = None
        self._finished_ids = ids
        self._obs = obs
        self.infos = infos
        return obs, rewards, terminals, truncations

    def _rows_of(self, infos, ids):
        """The final observations of envs ``ids`` from a backend's ``infos["final_obs"]``."""
        final = infos.get("final_obs")
        if final is None:
            raise RLGraphError(f"{type(self.backend).__name__} auto-reset envs {ids.tolist()} without reporting "
                               f"their final observations (infos['final_obs']).")
        if isinstance(final, np.ndarray):
            if final.dtype == object and final.shape == (self.num_envs,):
                # Gymnasium's sync/async form: an object array of single observations.
                return self._concatenate(self._single_obs_space, [final[i] for i in ids],
                                         self._create_empty_array(self._single_obs_space, n=len(ids)))
            return final[ids]
        return optree.tree_map(lambda x: np.asarray(x)[ids], final)

    @property
    def final_obs(self):
        """s' of the last step's transitions: final observations of finished envs, else ``obs`` (read-only)."""
        if self._final_obs is None:
            if self._finished_ids.size == 0:
                self._final_obs = self._obs
            elif isinstance(self._obs, np.ndarray):
                self._final_obs = self._obs.copy()
                self._final_obs[self._finished_ids] = self._final_rows
            else:
                out = optree.tree_map(np.copy, self._obs)
                optree.tree_map(lambda o, r: _set_rows(o, self._finished_ids, r), out, self._final_rows)
                self._final_obs = out
        return self._final_obs

    @property
    def finished_env_ids(self):
        """Sorted int array of the envs whose episode ended (and that auto-reset) in the last step."""
        return self._finished_ids

    @property
    def finished_final_obs(self):
        """Final observations of just the envs in ``finished_env_ids`` (in that order), or None."""
        return self._final_rows

    @property
    def obs(self):
        """The current observations (what the last ``reset``/``step`` returned)."""
        return self._obs

    @property
    def episode_returns(self):
        """Running undiscounted returns of the current episodes (float64, one per env; read-only)."""
        return self._episode_returns

    @property
    def episode_lengths(self):
        """Running lengths in steps of the current episodes (int64, one per env; read-only)."""
        return self._episode_lengths

    def pop_finished_episodes(self):
        """Returns the (return, length) of every episode finished since the last call, and forgets them."""
        chunks, self._finished = self._finished, []
        return [(ret, length) for returns, lengths in chunks for ret, length in zip(returns.tolist(), lengths.tolist())]

    # --- run state ----------------------------------------------------------------------------------------
    @property
    def state_saveable(self):
        """Whether ``get_state`` can capture the environments (a backend with ``get_state``/``set_state``,
        e.g. the native vector CartPole)."""
        cls = type(self.backend)
        return callable(getattr(cls, "get_state", None)) and callable(getattr(cls, "set_state", None))

    def get_state(self):
        """The environments' state (backend state, current observations, running episode statistics), or
        None where the backend cannot give it (see ``state_saveable``) or nothing was reset yet."""
        if not self.state_saveable or self._obs is None or self._pending is not None:
            return None
        backend = self.backend.get_state()
        if backend is None:
            return None
        obs = optree.tree_map(np.array, self._obs)
        return dict(backend=backend, obs=obs, episode_returns=self._episode_returns.copy(),
                    episode_lengths=self._episode_lengths.copy(), seed=self._seed, seeded=bool(self._seeded),
                    finished=[[np.array(r), np.array(n)] for r, n in self._finished])

    def set_state(self, state):
        """Restores what ``get_state`` returned; the next ``step`` continues where the stored run stopped.

        Raises:
            RLGraphCheckpointError: The backend cannot take a state, or the state does not fit these envs.
        """
        from rlgraph.utils.errors import RLGraphCheckpointError
        if not self.state_saveable:
            raise RLGraphCheckpointError(f"{self!r}: its backend cannot restore a stored environment state.")
        try:
            returns = np.array(state["episode_returns"], np.float64)
            lengths = np.array(state["episode_lengths"], np.int64)
            if returns.shape != (self.num_envs,) or lengths.shape != (self.num_envs,):
                raise ValueError(f"episode statistics of shape {returns.shape} for {self.num_envs} envs")
            self.backend.set_state(state["backend"])
        except (KeyError, TypeError, ValueError) as e:
            raise RLGraphCheckpointError(f"{self!r}: the stored environment state does not fit: "
                                         f"{type(e).__name__}: {e}.") from None
        if self._pending is not None:
            self._pending = None
        self._obs = state["obs"]
        self._episode_returns[:] = returns
        self._episode_lengths[:] = lengths
        self._seed, self._seeded = state["seed"], bool(state["seeded"])
        self._finished = [(np.asarray(r), np.asarray(n)) for r, n in state["finished"]]
        self._clear_step_results()
        return self._obs

    def close(self):
        """Closes the backend."""
        self.backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        delay = f", step_delay_ms={self.step_delay_ms:g}" if self.step_delay_ms else ""
        return (f"{type(self).__name__}({self.env_class.__name__}{self.env_kwargs}, num_envs={self.num_envs}, "
                f"vectorization={self.vectorization!r}{delay})")
