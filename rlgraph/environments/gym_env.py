"""Adapter for any environment registered with gymnasium."""
import inspect
import logging

from rlgraph.environments.cartpole_same_step import CartPoleSameStep
from rlgraph.environments.environment import Environment
from rlgraph.environments.registry import gym_spec, make_gym_env
from rlgraph.spaces.space_utils import space_from_gymnasium
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.validation import OneOf, check, spec_error

logger = logging.getLogger(__name__)

VECTORIZATIONS = ("auto", "native", "sync", "async")
ALE_VECTOR_ENTRY_POINT = "ale_py.vector_env:AtariVectorEnv"

# Native vector envs with next-step auto-reset only, and the wrapper that makes them reset in the same step.
NEXT_STEP_ADAPTERS = {
    "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv": CartPoleSameStep,
}


def _native_plan(spec, gym_kwargs):
    """Returns (how, reason): how is "autoreset_kwarg", "same_step", an adapter class, or None (reason why)."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator
    from gymnasium.vector import AutoresetMode

    entry = spec.vector_entry_point
    if entry is None:
        return None, "it has no vector_entry_point"
    if "wrappers" in gym_kwargs or spec.additional_wrappers:
        return None, "wrappers do not apply to a native vector env"
    try:
        creator = entry if callable(entry) else load_env_creator(entry)
    except (ImportError, AttributeError, gym.error.Error) as e:
        return None, f"its vector entry point {entry!r} cannot be loaded ({e})"
    try:
        params = inspect.signature(creator).parameters
    except (TypeError, ValueError):
        params = {}
    if "autoreset_mode" in params:
        return "autoreset_kwarg", None
    mode = getattr(creator, "metadata", {}).get("autoreset_mode")
    if mode == AutoresetMode.SAME_STEP:
        return "same_step", None
    adapter = NEXT_STEP_ADAPTERS.get(entry) if isinstance(entry, str) else None
    if adapter is not None:
        return adapter, None
    return None, f"its native vector env auto-resets in mode {mode} and rlgraph has no same-step adapter for it"


class GymEnv(Environment):
    """A gymnasium environment with rlgraph spaces.

    Args:
        env_id: A registered gymnasium id (e.g. ``"CartPole-v1"``, ``"rlgraph/Chain-v0"``).
        seed: Seed of the first ``reset()``.
        **gym_kwargs: Keywords for ``gymnasium.make`` (e.g. ``max_episode_steps``).

    Raises:
        RLGraphSpecError: For an unknown id (with the closest registered ids) or bad keywords.
    """

    __aliases__ = ("gym", "gymnasium")

    def __init__(self, env_id, seed=None, **gym_kwargs):
        self.env_id = env_id
        self._setup(make_gym_env(env_id, **gym_kwargs), seed)

    def _setup(self, gym_env, seed):
        """Stores the gymnasium env and converts its spaces."""
        self.gym_env = gym_env
        self._set_spaces(space_from_gymnasium(gym_env.observation_space),
                         space_from_gymnasium(gym_env.action_space), seed=seed)
        self._seeded = False

    def reset(self, seed=None):
        """Starts an episode and returns its first observation (see ``Environment.reset``)."""
        if seed is not None:
            self._seed = seed
        elif not self._seeded:
            seed = self._seed
        self._seeded = True
        obs, self.last_info = self.gym_env.reset(seed=seed)
        return obs

    def step(self, actions):
        """Returns (obs, reward, terminated, truncated, info) of the gymnasium env."""
        obs, reward, terminated, truncated, info = self.gym_env.step(actions)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self):
        """Closes the gymnasium env."""
        self.gym_env.close()

    @classmethod
    def make_vector_backend(cls, num_envs, vectorization="auto", env_id=None, **gym_kwargs):
        """Builds a gymnasium vector env with same-step auto-reset (see ``Environment.make_vector_backend``).

        Args:
            num_envs: Number of environments.
            vectorization: "native" (the id's ``vector_entry_point``: one env object stepping all copies as
                arrays), "sync" (``SyncVectorEnv``), "async" (``AsyncVectorEnv``, one process per env) or
                "auto" (native where it exists and can reset in the same step, else sync).
            env_id: The gymnasium id.
            **gym_kwargs: Keywords for ``gymnasium.make_vec``/``gymnasium.make``.
        """
        import gymnasium as gym
        from gymnasium.vector import AutoresetMode

        vectorization = check(cls.__name__, "vectorization", vectorization, OneOf(*VECTORIZATIONS))
        spec = gym_spec(env_id, cls.__name__)
        requested, how = vectorization, None
        if vectorization in ("auto", "native"):
            how, reason = _native_plan(spec, gym_kwargs)
            if how is None:
                if vectorization == "native":
                    raise spec_error(cls.__name__, "vectorization", f"'{env_id}' cannot run as a native vector env: "
                                     f"{reason}.")
                logger.debug("'%s': no native vector form used (%s); using SyncVectorEnv.", env_id, reason)
                vectorization = "sync"
            else:
                vectorization = "native"
        try:
            if vectorization == "native":
                kwargs = dict(gym_kwargs)
                if how == "autoreset_kwarg":
                    kwargs["autoreset_mode"] = AutoresetMode.SAME_STEP
                if spec.vector_entry_point == ALE_VECTOR_ENTRY_POINT:
                    kwargs.setdefault("reward_clipping", False)  # clipping is the agent's choice
                vec = gym.make_vec(spec, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
                if isinstance(how, type):
                    if how.supports(vec.unwrapped):
                        vec = how(vec)
                    else:
                        vec.close()
                        reason = (f"{type(vec.unwrapped).__name__} lacks the attributes {how.__name__} resets "
                                  f"(another gymnasium version?)")
                        if requested == "native":
                            raise spec_error(cls.__name__, "vectorization", f"'{env_id}' cannot run as a native "
                                             f"vector env: {reason}.")
                        logger.warning("'%s': %s; using SyncVectorEnv.", env_id, reason)
                        vectorization = "sync"
            if vectorization != "native":
                vec = gym.make_vec(spec, num_envs=num_envs, vectorization_mode=vectorization,
                                   vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **gym_kwargs)
        except (gym.error.DependencyNotInstalled, ImportError) as e:
            raise RLGraphError(f"gymnasium environment '{env_id}' needs a package that is not installed: {e}") from e
        except (TypeError, gym.error.Error) as e:
            raise RLGraphSpecError(f"{cls.__name__}: cannot make a {vectorization} vector env of '{env_id}' with "
                                   f"{gym_kwargs}: {e}") from e
        return vec, vectorization
