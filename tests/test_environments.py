"""Tests of rlgraph.environments: spaces, seeding, same-step auto-reset, episode statistics, Atari."""
import gymnasium as gym
import numpy as np
import pytest

from rlgraph.environments import (AtariEnv, AtariVectorEnv, ChainEnv, ChainVectorEnv, Environment, GymEnv,
                                  VectorEnv)
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError, RLGraphSpecError


def random_actions(num_steps, num_envs, seed, p_right=0.5):
    """A fixed [T, N] array of binary actions."""
    return (np.random.default_rng(seed).random((num_steps, num_envs)) < p_right).astype(np.int64)


def reference_run(env_id, seed, actions, **gym_kwargs):
    """Hand-rolled single-env loops: per step the (obs, reward, terminated, truncated, s') of every env, and
    the finished episodes ordered by (step, env)."""
    num_steps, num_envs = actions.shape
    obs = np.zeros((num_steps + 1, num_envs) + gym.make(env_id, **gym_kwargs).observation_space.shape)
    next_obs, rewards = np.zeros_like(obs[1:]), np.zeros((num_steps, num_envs))
    terms, truncs = np.zeros((num_steps, num_envs), bool), np.zeros((num_steps, num_envs), bool)
    finished = []
    for i in range(num_envs):
        env = gym.make(env_id, **gym_kwargs)
        obs[0, i], _ = env.reset(seed=seed + i)
        ret, length = 0.0, 0
        for t in range(num_steps):
            next_obs[t, i], rewards[t, i], terms[t, i], truncs[t, i], _ = env.step(actions[t, i])
            ret, length = ret + rewards[t, i], length + 1
            obs[t + 1, i] = next_obs[t, i]
            if terms[t, i] or truncs[t, i]:
                finished.append((t, i, ret, length))
                obs[t + 1, i], _ = env.reset()
                ret, length = 0.0, 0
    finished = [(r, n) for _, _, r, n in sorted(finished)]
    return obs, next_obs, rewards, terms, truncs, finished


def run_vector(venv, actions):
    """Steps ``venv`` through ``actions``; returns the same arrays as ``reference_run``."""
    num_steps, num_envs = actions.shape
    obs = [venv.reset()]
    next_obs, rewards, terms, truncs = [], [], [], []
    for t in range(num_steps):
        o, r, te, tr = venv.step(actions[t])
        assert r.dtype == np.float32 and te.dtype == np.bool_ and tr.dtype == np.bool_
        done = te | tr
        if not done.any():
            assert venv.final_obs is o
        np.testing.assert_array_equal(venv.finished_env_ids, np.flatnonzero(done))
        obs.append(o), next_obs.append(venv.final_obs), rewards.append(r), terms.append(te), truncs.append(tr)
    return (np.array(obs), np.array(next_obs), np.array(rewards), np.array(terms), np.array(truncs),
            venv.pop_finished_episodes())


# ------------------------------------------------------------------ single environments

def test_gym_env_spaces_and_step():
    env = GymEnv("CartPole-v1", seed=3)
    assert isinstance(env.state_space, FloatBox) and env.state_space.shape == (4,)
    assert isinstance(env.action_space, IntBox) and env.action_space.num_categories == 2
    obs = env.reset()
    assert env.state_space.contains(obs) and env.seed == 3
    obs, reward, terminated, truncated, info = env.step(1)
    assert env.state_space.contains(obs) and reward == 1.0 and terminated is False and truncated is False
    env.close()
    chain = GymEnv("rlgraph/Chain-v0")
    assert isinstance(chain.state_space, IntBox) and chain.state_space.num_categories == 5
    chain_float = GymEnv("rlgraph/ChainFloat-v0", length=7)
    assert isinstance(chain_float.state_space, FloatBox) and chain_float.state_space.shape == (7,)
    np.testing.assert_array_equal(chain_float.reset(), np.eye(7, dtype=np.float32)[0])


def test_environment_from_spec_type_lookup():
    for type_name in ("gym", "GymEnv", "gymnasium"):
        env = Environment.from_spec({"type": type_name, "env_id": "CartPole-v1", "seed": 1})
        assert isinstance(env, GymEnv) and env.env_id == "CartPole-v1"
    env = Environment.from_spec({"type": "gym", "env_id": "rlgraph/Chain-v0", "length": 3})
    assert env.state_space.num_categories == 3


def test_unknown_id_and_bad_keywords():
    with pytest.raises(RLGraphSpecError, match=r"CartPol-v1.*Did you mean.*CartPole-v1"):
        GymEnv("CartPol-v1")
    with pytest.raises(RLGraphSpecError, match="CartPole-v1"):
        VectorEnv("CartPole-v9", 2)
    with pytest.raises(RLGraphSpecError, match="no_such_kwarg"):
        GymEnv("rlgraph/Chain-v0", no_such_kwarg=1)
    with pytest.raises(RLGraphSpecError, match="length"):
        GymEnv("rlgraph/Chain-v0", length=1)
    with pytest.raises(RLGraphSpecError, match="unknown Environment type 'gymm'"):
        VectorEnv({"type": "gymm", "env_id": "CartPole-v1"}, 2)


def test_gym_env_seeding_reproducible():
    def rollout(env, seed=None):
        obs = [env.reset(seed=seed)]
        for a in random_actions(30, 1, seed=0)[:, 0]:
            o, _, te, tr, _ = env.step(a)
            obs.append(o if not (te or tr) else env.reset())
        return np.array(obs)

    a, b = GymEnv("CartPole-v1", seed=5), GymEnv("CartPole-v1", seed=5)
    first = rollout(a)
    np.testing.assert_array_equal(first, rollout(b))
    np.testing.assert_array_equal(first, rollout(a, seed=5))
    assert not np.array_equal(first, rollout(GymEnv("CartPole-v1", seed=6)))


def test_chain_env_optimal_return_and_truncation():
    env = ChainEnv(length=6, start=1, step_reward=-0.1)
    assert env.optimal_length == 4 and env.optimal_return == pytest.approx(0.7)
    env.reset()
    ret, steps, terminated = 0.0, 0, False
    while not terminated:
        _, r, terminated, truncated, _ = env.step(1)
        ret, steps = ret + r, steps + 1
    assert steps == env.optimal_length and ret == pytest.approx(env.optimal_return)
    limited = GymEnv("rlgraph/Chain-v0", max_episode_steps=3)
    assert limited.reset() == 0
    results = [limited.step(0) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True] and not any(r[2] for r in results)


# ------------------------------------------------------------------ vector environments

@pytest.mark.parametrize("env_id, vectorization, gym_kwargs", [
    ("CartPole-v1", "sync", dict(max_episode_steps=25)),
    ("rlgraph/Chain-v0", "native", dict(max_episode_steps=6)),
    ("rlgraph/Chain-v0", "sync", dict(max_episode_steps=6)),
    ("rlgraph/ChainFloat-v0", "native", dict(max_episode_steps=4)),   # goal at step 4 = terminal and truncated
    ("rlgraph/ChainFloat-v0", "sync", dict(max_episode_steps=4)),
])
def test_vector_env_matches_single_env_reference(env_id, vectorization, gym_kwargs):
    num_envs, num_steps, seed = 6, 120, 11
    actions = random_actions(num_steps, num_envs, seed=3, p_right=0.7)
    venv = VectorEnv(env_id, num_envs, seed=seed, vectorization=vectorization, **gym_kwargs)
    assert venv.vectorization == vectorization
    got = run_vector(venv, actions)
    want = reference_run(env_id, seed, actions, **gym_kwargs)
    for name, g, w in zip(("obs", "final_obs", "rewards", "terminals", "truncations"), got[:5], want[:5]):
        np.testing.assert_allclose(g, w.astype(g.dtype), err_msg=name)
    assert len(got[5]) == len(want[5]) > 0
    np.testing.assert_allclose(np.array(got[5]), np.array(want[5]))
    assert want[4].any() and want[3].any(), "the case must exercise both truncation and termination"
    venv.close()


def test_vector_env_async_matches_sync():
    actions = random_actions(40, 2, seed=1)
    results = [run_vector(VectorEnv("rlgraph/Chain-v0", 2, seed=0, vectorization=v, max_episode_steps=5), actions)
               for v in ("sync", "async")]
    for g, w in zip(results[0][:5], results[1][:5]):
        np.testing.assert_array_equal(g, w)
    assert results[0][5] == results[1][5]


def test_native_cartpole_transitions_follow_single_env_dynamics():
    num_envs, max_steps = 16, 40
    venv = VectorEnv("CartPole-v1", num_envs, seed=2, max_episode_steps=max_steps)
    assert venv.vectorization == "native"
    single = gym.make("CartPole-v1").unwrapped
    single.reset(seed=0)
    obs = venv.reset()
    lengths, truncated_seen = np.zeros(num_envs, int), False
    for a in random_actions(300, num_envs, seed=4):
        new_obs, rewards, terms, truncs = venv.step(a)
        final = venv.final_obs
        for i in range(num_envs):
            single.state, single.steps_beyond_terminated = obs[i].astype(np.float64), None
            s, r, te, _, _ = single.step(int(a[i]))
            np.testing.assert_allclose(final[i], s, rtol=1e-5, atol=1e-6)
            assert (r, te) == (rewards[i], terms[i])
        lengths += 1
        np.testing.assert_array_equal(truncs, lengths >= max_steps)
        done = terms | truncs
        truncated_seen |= bool((truncs & ~terms).any())
        assert np.all(np.abs(new_obs[done]) <= 0.05) and np.array_equal(new_obs[~done], final[~done])
        np.testing.assert_array_equal(venv.episode_lengths, np.where(done, 0, lengths))
        lengths[done] = 0
        obs = new_obs
    episodes = venv.pop_finished_episodes()
    assert truncated_seen and len(episodes) > num_envs and venv.pop_finished_episodes() == []
    assert all(ret == length <= max_steps for ret, length in episodes)


@pytest.mark.parametrize("vectorization", ["native", "sync"])
def test_vector_env_seeding_reproducible(vectorization):
    actions = random_actions(60, 8, seed=9)
    make = lambda seed: VectorEnv("CartPole-v1", 8, seed=seed, vectorization=vectorization)  # noqa: E731
    venv = make(5)
    first = run_vector(venv, actions)
    second = run_vector(make(5), actions)
    for g, w in zip(first, second):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    again = run_vector(venv, actions)  # run_vector resets without a seed: the generators continue
    assert not np.array_equal(first[0], again[0])
    venv.reset(seed=5)
    assert np.array_equal(venv.obs, first[0][0])
    assert not np.array_equal(run_vector(make(6), actions)[0], first[0])


def test_vector_env_specs_and_errors():
    venv = VectorEnv.from_spec({"type": "vector-env", "env_spec": {"type": "gym", "env_id": "rlgraph/Chain-v0",
                                                                   "seed": 4}, "num_envs": 3})
    assert venv.num_envs == 3 and venv.seed == 4 and venv.vectorization == "native"
    assert isinstance(venv.state_space, IntBox) and not venv.state_space.has_batch_rank
    with pytest.raises(RLGraphError, match="before reset"):
        venv.step(np.zeros(3, int))
    venv.reset()
    with pytest.raises(RLGraphSpaceError, match="leading dim 3"):
        venv.step(np.zeros(2, int))
    venv.step(np.ones(3, np.int32))  # actions are cast to the backend's dtype
    for bad in (0, 2.0, True):
        with pytest.raises(RLGraphSpecError, match="num_envs"):
            VectorEnv("CartPole-v1", bad)
    with pytest.raises(RLGraphSpecError, match="native vector env.*vector_entry_point"):
        VectorEnv("Acrobot-v1", 2, vectorization="native")
    assert VectorEnv("Acrobot-v1", 2).vectorization == "sync"
    with pytest.raises(RLGraphSpecError, match=r"^GymEnv\.vectorization: expected one of 'auto', 'native', "
                                               r"'sync', 'async', got 'threads'"):
        VectorEnv("CartPole-v1", 2, vectorization="threads")
    with pytest.raises(RLGraphSpecError, match="neither a 'type' nor an 'env_id'"):
        VectorEnv({"length": 3}, 2)
    direct = ChainVectorEnv(num_envs=2, max_episode_steps=3)
    assert direct.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP


def test_vector_env_chain_optimal_episode_statistics():
    venv = VectorEnv("rlgraph/Chain-v0", 4, length=6, step_reward=-0.5)
    venv.reset()
    for _ in range(10):
        venv.step(np.ones(4, int))
    episodes = venv.pop_finished_episodes()
    assert episodes == [(-1.0, 5)] * 8  # 2 optimal episodes per env, env-id order within a step
    np.testing.assert_array_equal(venv.episode_lengths, 0)


# ------------------------------------------------------------------ Atari (ale-py)

def _have_rom(game):
    try:
        from ale_py import roms
    except ImportError:
        return False
    return roms.get_rom_path(game) is not None


needs_pong = pytest.mark.skipif(not _have_rom("pong"), reason="ale-py or its Pong ROM is not installed")
needs_breakout = pytest.mark.skipif(not _have_rom("breakout"), reason="ale-py or its Breakout ROM is not installed")


def _have_cv2():
    try:
        import cv2  # noqa: F401
    except ImportError:
        return False
    return True


needs_cv2 = pytest.mark.skipif(not _have_cv2(), reason="gymnasium's AtariPreprocessing needs opencv-python")


@needs_pong
@pytest.mark.parametrize("vectorization", ["ale", pytest.param("sync", marks=needs_cv2)])
def test_atari_vector_env_truncation_and_final_obs(vectorization):
    venv = AtariVectorEnv("Pong", num_envs=2, seed=0, vectorization=vectorization, max_num_frames_per_episode=200,
                          num_threads=1) if vectorization == "ale" else \
        VectorEnv({"type": "atari", "game": "ALE/Pong-v5", "max_num_frames_per_episode": 200}, 2, seed=0,
                  vectorization="sync")
    assert venv.vectorization == vectorization
    assert venv.state_space.shape == (4, 84, 84) and venv.state_space.dtype == np.uint8
    assert venv.action_space.num_categories == 6
    obs = venv.reset()
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    finished_steps = 0
    for _ in range(60):
        prev = obs
        obs, rewards, terms, truncs = venv.step(np.full(2, 2))
        if truncs.any():
            finished_steps += 1
            ids = venv.finished_env_ids
            np.testing.assert_array_equal(ids, np.flatnonzero(truncs))
            final = venv.final_obs
            # The final observation continues the old frame stack; the reset one starts a new game.
            np.testing.assert_array_equal(final[ids, :-1], prev[ids, 1:])
            assert not np.array_equal(final[ids], obs[ids])
    episodes = venv.pop_finished_episodes()
    assert finished_steps >= 1 and len(episodes) >= 2 and all(n <= 50 for _, n in episodes)
    venv.close()


@needs_breakout
def test_atari_vector_episodic_life():
    venv = AtariVectorEnv("breakout", num_envs=2, seed=1, episodic_life=True, num_threads=1)
    venv.reset()
    rng = np.random.default_rng(0)
    life_terminals = 0
    for _ in range(300):
        obs, _, terms, _ = venv.step(rng.integers(0, 4, size=2))
        life_terminals += int((terms & venv.infos["life_lost"]).sum())
        assert not (venv.infos["life_lost"] & np.isin(np.arange(2), venv.finished_env_ids)).any()
    assert life_terminals >= 2


@needs_breakout
@needs_cv2
def test_atari_single_env_episodic_life():
    venv = AtariVectorEnv("breakout", num_envs=1, num_threads=1)
    rng = np.random.default_rng(0)
    env = AtariEnv("breakout", seed=1, episodic_life=True)
    assert env.state_space == venv.state_space and env.action_space == venv.action_space
    env.reset()
    lives = env.last_info["lives"]
    for _ in range(500):
        obs, _, terminated, truncated, info = env.step(int(rng.integers(0, 4)))
        if terminated:
            break
    assert terminated and info["lives"] == lives - 1
    np.testing.assert_array_equal(env.reset(), obs)  # the game goes on
    assert env.step(1)[4]["lives"] == lives - 1


def test_atari_unknown_game():
    pytest.importorskip("ale_py")
    with pytest.raises(RLGraphSpecError, match="Did you mean: pong"):
        AtariEnv("pongg")


@pytest.mark.parametrize("spec, vectorization", [
    ("rlgraph/Chain-v0", "native"),
    ("rlgraph/Chain-v0", "async"),
    pytest.param({"type": "atari", "game": "pong", "max_num_frames_per_episode": 120, "num_threads": 1}, "ale",
                 marks=needs_pong),
    pytest.param({"type": "atari", "game": "breakout", "episodic_life": True, "num_threads": 1}, "ale",
                 marks=needs_breakout),
])
def test_step_async_matches_step(spec, vectorization):
    num_envs, num_steps = 2, 40
    actions = random_actions(num_steps, num_envs, seed=2)
    plain, split = (VectorEnv(spec, num_envs, seed=3, vectorization=vectorization) for _ in range(2))
    np.testing.assert_array_equal(plain.reset(), split.reset())
    with pytest.raises(RLGraphError, match="without a pending"):
        split.step_wait()
    for t in range(num_steps):
        want = plain.step(actions[t])
        split.step_async(actions[t])
        with pytest.raises(RLGraphError, match="pending"):
            split.step(actions[t])
        got = split.step_wait()
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(split.final_obs, plain.final_obs)
    assert split.pop_finished_episodes() == plain.pop_finished_episodes()
    plain.close(), split.close()
