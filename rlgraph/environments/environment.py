"""The base class of all single environments."""
import abc

from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.specifiable import Specifiable


class Environment(Specifiable, metaclass=abc.ABCMeta):
    """One environment with rlgraph spaces.

    ``Environment.from_spec({"type": "gym", "env_id": "CartPole-v1"})`` builds a subclass by type name.
    A subclass's constructor calls :meth:`_set_spaces` (the base defines no ``__init__``, so that a
    subclass's ``**kwargs`` stay open for ``from_spec``). A subclass that has an in-process vector form
    overrides :meth:`make_vector_backend`, which :class:`~rlgraph.environments.VectorEnv` calls.
    """

    _state_space = None
    _action_space = None
    _seed = None

    def _set_spaces(self, state_space, action_space, seed=None):
        """Sets the spaces and the seed.

        Args:
            state_space: The rlgraph space of one observation (no batch rank).
            action_space: The rlgraph space of one action (no batch rank).
            seed: The seed the first ``reset()`` uses (None: unseeded).
        """
        self._state_space = state_space
        self._action_space = action_space
        self._seed = seed

    @property
    def state_space(self):
        """The rlgraph space of one observation."""
        return self._state_space

    @property
    def action_space(self):
        """The rlgraph space of one action."""
        return self._action_space

    @property
    def seed(self):
        """The seed of the latest seeded reset (or the one the next ``reset()`` will use)."""
        return self._seed

    @abc.abstractmethod
    def reset(self, seed=None):
        """Starts a new episode and returns its first observation.

        Args:
            seed: Re-seeds the environment's random generator; None continues its current stream (the
                first reset uses the constructor's seed).
        """

    @abc.abstractmethod
    def step(self, actions):
        """Applies an action.

        Returns:
            tuple: (obs, reward, terminated, truncated, info) as in gymnasium. No automatic reset: call
            :meth:`reset` after ``terminated or truncated``.
        """

    def close(self):
        """Releases the environment's resources."""

    @classmethod
    def make_vector_backend(cls, num_envs, vectorization="auto", **kwargs):
        """Builds an in-process gymnasium vector env of ``num_envs`` copies with same-step auto-reset.

        The returned env's ``step`` gives ``(obs, rewards, terminations, truncations, infos)``; envs that
        auto-reset in that step already hold their reset observation in ``obs``, their final observation is
        in ``infos["final_obs"]`` (a batched structure, or gymnasium's object array of single observations)
        and ``infos["_final_obs"]`` (optional; default ``terminations | truncations``) marks them. A backend
        may instead give ``infos["final_obs_ids"]`` (int array, every step) and just those envs' final
        observations in ``infos["final_obs"]``.

        Args:
            num_envs: Number of environments.
            vectorization: Subclass-specific vectorization mode.
            **kwargs: This class's constructor keywords (without ``seed``).

        Returns:
            tuple: (gymnasium vector env, name of the vectorization used).
        """
        raise RLGraphSpecError(f"{cls.__name__}: has no vector form; VectorEnv cannot build it.")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
