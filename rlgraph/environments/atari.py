"""Atari 2600 games through ale-py, with the standard (Nature DQN) preprocessing.

Observations are uint8 arrays of shape ``(stack_frames, screen_size, screen_size)`` (grayscale): each
agent step repeats the action for ``frame_skip`` frames and max-pools the last two, up to ``noop_max``
random no-ops start each game, and ``stack_frames`` observations are stacked. Rewards are NOT clipped
(that is the agent's choice). Sticky actions are off by default (``repeat_action_probability=0``).
"""
import difflib
import functools
import logging

from rlgraph.environments.episodic_life import EpisodicLifeVectorWrapper
from rlgraph.environments.gym_env import GymEnv
from rlgraph.environments.registry import register_ale
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.validation import Int, Number, OneOf, Str, check, check_args, spec_error

logger = logging.getLogger(__name__)

VECTORIZATIONS = ("auto", "ale", "sync", "async")
#: What the numeric arguments of the Atari environments must be (``rlgraph.utils.validation``).
ATARI_RULES = dict(frame_skip=Int(min=1), screen_size=Int(min=1), stack_frames=Int(min=1), noop_max=Int(min=0),
                   repeat_action_probability=Number(min=0.0, max=1.0), max_num_frames_per_episode=Int(min=0))


def _import_ale():
    try:
        import ale_py
    except ImportError as e:
        raise RLGraphError("Atari environments need ale-py: pip install 'ale-py>=0.10'.") from e
    return ale_py


def normalize_game(game):
    """Returns ale-py's ROM id (``"ms_pacman"``) for a game named ``"ms_pacman"``, ``"MsPacman"``,
    ``"ALE/MsPacman-v5"`` or ``"MsPacmanNoFrameskip-v4"``.

    Raises:
        RLGraphSpecError: For an unknown game (with close matches among the installed ROMs).
    """
    ale_py = _import_ale()
    check("AtariEnv", "game", game, Str(what="an Atari game name (a non-empty string such as \"pong\")"))
    rom_ids = list(ale_py.roms.get_all_rom_ids())
    name = game.split("/")[-1].split("-v")[0]
    for suffix in ("NoFrameskip", "Deterministic"):
        name = name.removesuffix(suffix)
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    table = {"".join(ch for ch in rom if ch.isalnum()): rom for rom in rom_ids}
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=5, cutoff=0.6)
    hint = f" Did you mean: {', '.join(table[c] for c in close)}?" if close else ""
    raise spec_error("AtariEnv", "game", f"unknown Atari game '{game}' (no such ROM in ale-py).{hint}")


def _gym_id(rom):
    """The gymnasium ``ALE/...-v5`` id of a ROM id."""
    import gymnasium as gym

    register_ale()
    for env_id, spec in gym.registry.items():
        if spec.namespace == "ALE" and spec.version == 5 and spec.kwargs.get("game") == rom:
            return env_id
    raise RLGraphSpecError(f"ale-py registered no gymnasium id for the Atari ROM '{rom}'.")


def make_atari_gym_env(game, frame_skip=4, screen_size=84, stack_frames=4, noop_max=30, grayscale=True,
                       repeat_action_probability=0.0, full_action_space=False, max_num_frames_per_episode=108000):
    """The single-env stack: ``ALE/<Game>-v5`` (frameskip 1) + ``AtariPreprocessing`` + ``FrameStackObservation``.

    Arguments as for :class:`AtariEnv`.
    """
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    env = gym.make(_gym_id(normalize_game(game)), frameskip=1, repeat_action_probability=repeat_action_probability,
                   full_action_space=full_action_space, max_num_frames_per_episode=max_num_frames_per_episode)
    try:
        env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip, screen_size=screen_size,
                                 terminal_on_life_loss=False, grayscale_obs=grayscale, scale_obs=False)
    except gym.error.DependencyNotInstalled as e:
        env.close()
        raise RLGraphError(f"single-env Atari (gymnasium's AtariPreprocessing) needs OpenCV: pip install "
                           f"opencv-python-headless. The 'ale' vector form needs no OpenCV. ({e})") from e
    return FrameStackObservation(env, stack_frames)


class AtariEnv(GymEnv):
    """One Atari game with the standard preprocessing (see the module docstring).

    Its vector form (``VectorEnv({"type": "atari", ...}, n)`` or ``AtariVectorEnv``) uses ale-py's
    ``AtariVectorEnv`` (C++ threads) by default.

    Args:
        game: The game (``"pong"``, ``"MsPacman"``, ``"ALE/Breakout-v5"``, ...).
        seed: Seed of the first ``reset()``.
        frame_skip: Frames per agent step (the action repeats; the last two frames are max-pooled).
        screen_size: Height and width of the resized screen.
        stack_frames: Number of stacked observations.
        noop_max: Maximum number of random no-op steps at the start of a game.
        grayscale: Grayscale (True) or RGB (channels last) screens.
        episodic_life: Report a lost life as terminal; the next ``reset()`` then continues the game.
        repeat_action_probability: Sticky-action probability (0: deterministic actions).
        full_action_space: Use all 18 actions instead of the game's minimal set.
        max_num_frames_per_episode: Time limit in frames (a game is truncated after it).
    """

    __aliases__ = ("atari", "ale")
    #: What the constructor's numeric arguments must be (``rlgraph.utils.validation``; ``game`` is looked up).
    ARG_RULES = ATARI_RULES

    def __init__(self, game, seed=None, frame_skip=4, screen_size=84, stack_frames=4, noop_max=30, grayscale=True,
                 episodic_life=False, repeat_action_probability=0.0, full_action_space=False,
                 max_num_frames_per_episode=108000):
        check_args("AtariEnv", ATARI_RULES, dict(
            frame_skip=frame_skip, screen_size=screen_size, stack_frames=stack_frames, noop_max=noop_max,
            repeat_action_probability=repeat_action_probability, max_num_frames_per_episode=max_num_frames_per_episode))
        self.game = normalize_game(game)
        self.env_id = _gym_id(self.game)
        self.episodic_life = bool(episodic_life)
        self._setup(make_atari_gym_env(self.game, frame_skip=frame_skip, screen_size=screen_size,
                                       stack_frames=stack_frames, noop_max=noop_max, grayscale=grayscale,
                                       repeat_action_probability=repeat_action_probability,
                                       full_action_space=full_action_space,
                                       max_num_frames_per_episode=max_num_frames_per_episode), seed)
        self._lives = 0
        self._life_lost = False
        self._last_obs = None

    def reset(self, seed=None):
        """Starts a new game; after a life-loss terminal (episodic life) it continues the current one."""
        if self._life_lost and seed is None:
            self._life_lost = False
            return self._last_obs
        self._life_lost = False
        self._last_obs = super().reset(seed=seed)
        self._lives = self.last_info.get("lives", 0)
        return self._last_obs

    def step(self, actions):
        """Returns (obs, reward, terminated, truncated, info); ``terminated`` includes life losses with
        episodic life."""
        obs, reward, terminated, truncated, info = super().step(actions)
        if self.episodic_life:
            lives = info.get("lives", 0)
            self._life_lost = lives < self._lives and not (terminated or truncated)
            self._lives = lives
            terminated = terminated or self._life_lost
        self._last_obs = obs
        return obs, reward, terminated, truncated, info

    @classmethod
    def make_vector_backend(cls, num_envs, vectorization="auto", game=None, frame_skip=4, screen_size=84,
                            stack_frames=4, noop_max=30, grayscale=True, episodic_life=False,
                            repeat_action_probability=0.0, full_action_space=False,
                            max_num_frames_per_episode=108000, num_threads=0, fire_reset=False):
        """Builds a same-step vector backend (see ``Environment.make_vector_backend``).

        Args:
            num_envs: Number of games.
            vectorization: "ale" (ale-py's ``AtariVectorEnv``, C++ threads), "sync"/"async" (gymnasium
                vector envs over ``make_atari_gym_env``) or "auto" ("ale").
            num_threads: ale-py's worker threads (0: one per core); "ale" only.
            fire_reset: Press FIRE after each reset in games that need it; "ale" only.
            Others: as for :class:`AtariEnv`.
        """
        import gymnasium as gym
        from gymnasium.vector import AutoresetMode

        vectorization = check("AtariEnv", "vectorization", vectorization, OneOf(*VECTORIZATIONS))
        check_args("AtariEnv", ATARI_RULES, dict(
            frame_skip=frame_skip, screen_size=screen_size, stack_frames=stack_frames, noop_max=noop_max,
            repeat_action_probability=repeat_action_probability, max_num_frames_per_episode=max_num_frames_per_episode))
        rom = normalize_game(game)
        if vectorization in ("auto", "ale"):
            from ale_py.vector_env import AtariVectorEnv as ALEVectorEnv

            vectorization = "ale"
            backend = ALEVectorEnv(
                rom, num_envs, num_threads=num_threads, max_num_frames_per_episode=max_num_frames_per_episode,
                repeat_action_probability=repeat_action_probability, full_action_space=full_action_space,
                autoreset_mode=AutoresetMode.SAME_STEP, img_height=screen_size, img_width=screen_size,
                grayscale=grayscale, stack_num=stack_frames, frameskip=frame_skip, maxpool=True,
                noop_max=noop_max, episodic_life=False, life_loss_info=False, reward_clipping=False,
                use_fire_reset=fire_reset,
            )
        else:
            if fire_reset:
                raise spec_error("AtariEnv", "fire_reset", "only available with vectorization 'ale' (or 'auto').")
            make = functools.partial(
                make_atari_gym_env, rom, frame_skip=frame_skip, screen_size=screen_size, stack_frames=stack_frames,
                noop_max=noop_max, grayscale=grayscale, repeat_action_probability=repeat_action_probability,
                full_action_space=full_action_space, max_num_frames_per_episode=max_num_frames_per_episode,
            )
            vector_class = gym.vector.SyncVectorEnv if vectorization == "sync" else gym.vector.AsyncVectorEnv
            backend = vector_class([make] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
        if episodic_life:
            backend = EpisodicLifeVectorWrapper(backend)
        return backend, vectorization
