"""Catch from pixels: a small Atari-like task that a pixel agent learns in about a minute on 2 CPU cores.

Ids: ``"rlgraph/Catch-v0"`` (one game) with a native vector form
(:class:`~rlgraph.environments.catch_vector_env.CatchVectorEnv`, numpy-stepped, same-step auto-reset).

After bsuite's Catch (Osband et al. 2020), made Pong-like: a ball falls one row per step from a random column
of the top row with a random sideways velocity (-1, 0 or +1 columns per step, bouncing off the side walls); the
agent moves a paddle on the bottom row (actions 0: left, 1: stay, 2: right). When the ball reaches the bottom
row the agent gets +1 if the paddle is under it, else -1, and the next ball starts at the top. A game lasts
``balls`` balls (``balls * (height - 1)`` steps): returns lie in ``[-balls, balls]``; a random policy scores
about ``balls * (2 / width - 1)``, the optimal one ``balls``. Observations are uint8 frames ``(2, height,
width)``, 0 or 255, of the previous and the current screen (as Atari's stacked frames: the velocity is only
visible across the two), so the same preprocessing (transpose, divide by 255) and convolutional networks apply.
"""
import gymnasium as gym
import numpy as np

from rlgraph.utils.validation import Int, check_args, spec_error

#: What the game's arguments must be (``rlgraph.utils.validation``; ``width`` is also checked against ``height``).
CATCH_RULES = dict(height=Int(min=3), width=Int(min=2), balls=Int(min=1))
FRAMES = 2
LEFT, STAY, RIGHT = 0, 1, 2


def check_catch_args(height, width, balls, owner="CatchEnv"):
    """The checked arguments (``CATCH_RULES``) as a dict; the paddle must be able to reach every ball."""
    args = check_args(owner, CATCH_RULES, dict(height=height, width=width, balls=balls))
    if args["width"] > args["height"]:
        raise spec_error(owner, "width", f"expected an int <= height={args['height']} (the paddle must be able to "
                         f"reach every ball), got {width!r}.")
    return args


def catch_observation_space(height, width):
    """uint8 frames ``(2, height, width)``: the previous and the current screen."""
    return gym.spaces.Box(0, 255, shape=(FRAMES, height, width), dtype=np.uint8)


class CatchGames:
    """The state and dynamics of ``n`` games as arrays (shared by the single and the vector form).

    Args:
        n: Number of games.
        height, width, balls: See the module docstring.
        rng: The numpy generator that draws the balls.
    """

    def __init__(self, n, height, width, balls, rng):
        self.n, self.height, self.width, self.balls = n, height, width, balls
        self.rng = rng
        self.ball_row = np.zeros(n, np.int64)
        self.ball_col = np.zeros(n, np.int64)
        self.ball_dx = np.zeros(n, np.int64)
        self.paddle = np.full(n, width // 2, np.int64)
        self.balls_left = np.full(n, balls, np.int64)
        self.frames = np.zeros((n, FRAMES, height, width), np.uint8)
        self._rows = np.arange(n)

    def reset(self, ids):
        """Starts new games in the rows ``ids`` (an index array)."""
        self.paddle[ids] = self.width // 2
        self.balls_left[ids] = self.balls
        self._new_balls(ids)
        self.frames[ids] = 0
        self._draw(ids)
        self.frames[ids, 0] = self.frames[ids, 1]

    def _new_balls(self, ids):
        k = len(ids)
        self.ball_row[ids] = 0
        self.ball_col[ids] = self.rng.integers(0, self.width, size=k)
        self.ball_dx[ids] = self.rng.integers(-1, 2, size=k)

    def _draw(self, ids):
        """Writes the current screen of rows ``ids`` into the last frame."""
        screen = self.frames[ids, FRAMES - 1]
        screen[...] = 0
        k = np.arange(len(ids))
        screen[k, self.ball_row[ids], self.ball_col[ids]] = 255
        screen[k, self.height - 1, self.paddle[ids]] = 255
        self.frames[ids, FRAMES - 1] = screen

    def step(self, actions):
        """Moves paddles and balls; returns (rewards float32 [n], terminated bool [n]). Finished games keep
        their final screen until ``reset``."""
        actions = np.asarray(actions, np.int64)
        self.paddle = np.clip(self.paddle + actions - 1, 0, self.width - 1)
        col = self.ball_col + self.ball_dx
        bounce = (col < 0) | (col >= self.width)
        self.ball_dx = np.where(bounce, -self.ball_dx, self.ball_dx)
        self.ball_col = np.where(bounce, self.ball_col + self.ball_dx, col)
        self.ball_row += 1
        landed = self.ball_row == self.height - 1
        rewards = np.where(landed, np.where(self.ball_col == self.paddle, 1.0, -1.0), 0.0).astype(np.float32)
        self.balls_left -= landed
        terminated = self.balls_left == 0
        self.frames[:, :FRAMES - 1] = self.frames[:, 1:]
        self._draw(self._rows)
        again = np.flatnonzero(landed & ~terminated)
        if again.size:  # The next ball appears at the top; the screen showing the landing is what the agent sees.
            self._new_balls(again)
        return rewards, terminated

    def get_state(self):
        return dict(ball_row=self.ball_row.copy(), ball_col=self.ball_col.copy(), ball_dx=self.ball_dx.copy(),
                    paddle=self.paddle.copy(), balls_left=self.balls_left.copy(), frames=self.frames.copy(),
                    rng=self.rng.bit_generator.state)

    def set_state(self, state):
        for key in ("ball_row", "ball_col", "ball_dx", "paddle", "balls_left", "frames"):
            value = np.array(state[key], dtype=getattr(self, key).dtype)
            if value.shape != getattr(self, key).shape:
                raise ValueError(f"{key} of shape {value.shape}, expected {getattr(self, key).shape}")
            setattr(self, key, value)
        self.rng.bit_generator.state = state["rng"]


class CatchEnv(gym.Env):
    """One game of Catch (see the module docstring).

    Args:
        height: Rows of the screen (a ball falls ``height - 1`` steps).
        width: Columns of the screen (<= height).
        balls: Balls per game.
    """

    metadata = {"render_modes": []}
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = CATCH_RULES

    def __init__(self, height=10, width=7, balls=5):
        args = check_catch_args(height, width, balls)
        self.height, self.width, self.balls = args["height"], args["width"], args["balls"]
        self.observation_space = catch_observation_space(self.height, self.width)
        self.action_space = gym.spaces.Discrete(3)
        self.games = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.games is None or seed is not None:
            self.games = CatchGames(1, self.height, self.width, self.balls, self.np_random)
        self.games.reset(np.arange(1))
        return self.games.frames[0].copy(), {}

    def step(self, action):
        rewards, terminated = self.games.step(np.array([int(action)]))
        return self.games.frames[0].copy(), float(rewards[0]), bool(terminated[0]), False, {}


def register_catch_env():
    """Registers ``rlgraph/Catch-v0`` with gymnasium (once)."""
    if "rlgraph/Catch-v0" not in gym.registry:
        gym.register(id="rlgraph/Catch-v0", entry_point="rlgraph.environments.catch:CatchEnv",
                     vector_entry_point="rlgraph.environments.catch_vector_env:CatchVectorEnv")


register_catch_env()
