"""Catch from pixels (``rlgraph/Catch-v0``): dynamics against a plain-Python reference, scores in closed form,
single and vector forms, run state, bad arguments."""
import numpy as np
import pytest

from rlgraph.environments import CatchEnv, CatchVectorEnv, GymEnv, VectorEnv
from rlgraph.utils.errors import RLGraphSpecError


class ReferenceCatch:
    """One game written out step by step (no arrays), from a given first ball and the draws of later balls."""

    def __init__(self, height, width, balls, first_ball):
        self.height, self.width, self.balls_left = height, width, balls
        self.paddle = width // 2
        self.row, (self.col, self.dx) = 0, first_ball
        self.previous = self.screen()

    def screen(self):
        s = np.zeros((self.height, self.width), np.uint8)
        s[self.row, self.col] = 255
        s[self.height - 1, self.paddle] = 255
        return s

    def step(self, action, next_ball):
        self.paddle = min(max(self.paddle + action - 1, 0), self.width - 1)
        col = self.col + self.dx
        if col < 0 or col >= self.width:
            self.dx = -self.dx
            col = self.col + self.dx
        self.col, self.row = col, self.row + 1
        reward, done = 0.0, False
        if self.row == self.height - 1:
            reward = 1.0 if self.col == self.paddle else -1.0
            self.balls_left -= 1
            done = self.balls_left == 0
        frames = np.stack([self.previous, self.screen()])
        self.previous = frames[1]
        if reward and not done:
            self.row, (self.col, self.dx) = 0, next_ball
        return frames, reward, done


def test_steps_match_the_reference_game():
    env = CatchVectorEnv(num_envs=3, height=6, width=4, balls=3)
    obs, _ = env.reset(seed=7)
    g = env.games
    refs = [ReferenceCatch(6, 4, 3, (g.ball_col[i], g.ball_dx[i])) for i in range(3)]
    for i, ref in enumerate(refs):
        np.testing.assert_array_equal(obs[i], np.stack([ref.screen(), ref.screen()]))
    rng = np.random.default_rng(0)
    for _ in range(60):
        actions = rng.integers(0, 3, size=3)
        obs, rewards, terminated, truncated, infos = env.step(actions)
        assert not truncated.any()
        for i, ref in enumerate(refs):
            # The next ball is the one the env drew (read back after the step).
            frames, reward, done = ref.step(int(actions[i]), (g.ball_col[i], g.ball_dx[i]))
            assert (rewards[i], terminated[i]) == (reward, done)
            np.testing.assert_array_equal(infos["final_obs"][i] if done else obs[i], frames)
            if done:  # Same-step reset: a new game from its first ball.
                refs[i] = ReferenceCatch(6, 4, 3, (g.ball_col[i], g.ball_dx[i]))
                np.testing.assert_array_equal(obs[i], np.stack([refs[i].screen()] * 2))


def games_and_returns(env, policy, steps):
    returns, running = [], np.zeros(env.num_envs)
    obs = env.reset()
    for _ in range(steps):
        obs, rewards, terminals, truncations = env.step(policy(env))
        running += rewards
        returns.extend(running[terminals].tolist())
        running[terminals] = 0.0
    return np.array(returns)


def test_scores_in_closed_form():
    """A random paddle catches about 2/width of the balls (it ends on the ball's column or beside it: three
    columns reachable in its last step, two at the walls; in the limit 2/width); a paddle that follows the
    true landing column catches them all."""
    env = VectorEnv("rlgraph/Catch-v0", num_envs=64, seed=0)
    assert env.state_space.shape == (2, 10, 7) and env.action_space.num_categories == 3
    rng = np.random.default_rng(0)
    random_returns = games_and_returns(env, lambda e: rng.integers(0, 3, e.num_envs), 3000)
    assert len(random_returns) > 3000
    assert random_returns.mean() == pytest.approx(5 * (2 / 7 - 1), abs=0.15)

    def follow(e):
        g = e.backend.games
        col, dx = g.ball_col.copy(), g.ball_dx.copy()
        for _ in range(g.height - 1 - g.ball_row.max()):  # Simulate the ball to the bottom row.
            falling = g.ball_row < g.height - 1
            nxt = col + dx
            bounce = falling & ((nxt < 0) | (nxt >= g.width))
            dx = np.where(bounce, -dx, dx)
            col = np.where(falling, col + dx, col)
        return np.sign(col - g.paddle) + 1
    assert games_and_returns(env, follow, 1000).min() == 5.0


def test_single_and_vector_forms_agree_and_state_round_trips():
    single = GymEnv("rlgraph/Catch-v0", seed=3)
    vector = VectorEnv("rlgraph/Catch-v0", num_envs=1, seed=3)
    assert isinstance(single.gym_env.unwrapped, CatchEnv)
    a = single.reset()
    b = vector.reset()
    np.testing.assert_array_equal(a, b[0])
    rng = np.random.default_rng(1)
    for t in range(100):
        action = int(rng.integers(0, 3))
        step_a = single.step(action)
        obs_b, rewards_b, terminals_b, _ = vector.step(np.array([action]))
        assert step_a[1] == rewards_b[0] and step_a[2] == terminals_b[0]
        if not terminals_b[0]:
            np.testing.assert_array_equal(step_a[0], obs_b[0])
        else:
            single.reset()
    state = vector.get_state()
    tail = [vector.step(np.array([k % 3]))[:3] for k in range(60)]
    vector.set_state(state)
    for k, (obs, rewards, terminals) in enumerate(tail):
        again = vector.step(np.array([k % 3]))
        np.testing.assert_array_equal(again[0], obs)
        assert (again[1][0], again[2][0]) == (rewards[0], terminals[0])


def test_bad_arguments_are_refused():
    with pytest.raises(RLGraphSpecError, match=r"CatchVectorEnv\.width: expected an int <= height=5"):
        VectorEnv("rlgraph/Catch-v0", num_envs=2, height=5, width=6)
    with pytest.raises(RLGraphSpecError, match=r"CatchEnv\.balls: expected a positive int, got 0"):
        CatchEnv(balls=0)
