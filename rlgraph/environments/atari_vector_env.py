"""Vector of Atari games on ale-py's C++ vector env."""
from rlgraph.environments.atari import AtariEnv
from rlgraph.environments.vector_env import VectorEnv


class AtariVectorEnv(VectorEnv):
    """``VectorEnv({"type": "atari", "game": game, **atari_kwargs}, num_envs, seed, vectorization, step_delay_ms)``.

    Same step, auto-reset and statistics semantics as :class:`VectorEnv`. With ``episodic_life=True`` a lost
    life sets ``terminals[i]`` while the game goes on (no reset, ``final_obs[i] is obs[i]``); episode
    statistics and ``finished_env_ids`` count whole games. ``infos["lives"]`` holds the lives per env.

    Args:
        game: The game (``"pong"``, ``"MsPacman"``, ``"ALE/Breakout-v5"``, ...).
        num_envs: Number of games.
        seed: Seed of the first ``reset()`` (game ``i`` gets ``seed + i``).
        vectorization: "auto"/"ale" (ale-py's ``AtariVectorEnv``, C++ threads), "sync" or "async"
            (gymnasium vector envs over the single-env wrapper stack).
        step_delay_ms: Milliseconds of sleep added to every vector step (``VectorEnv``; 0: none).
        **atari_kwargs: ``AtariEnv``'s keywords, plus ``num_threads`` and ``fire_reset`` for "ale".
    """

    __aliases__ = ("atari-vector", "ale-vector")

    def __init__(self, game, num_envs=1, seed=None, vectorization="auto", step_delay_ms=0.0, **atari_kwargs):
        super().__init__(dict(atari_kwargs, type=AtariEnv, game=game), num_envs=num_envs, seed=seed,
                         vectorization=vectorization, step_delay_ms=step_delay_ms)
