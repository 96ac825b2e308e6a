"""A plain single-file PyTorch PPO on gymnasium's native vector CartPole-v1: the comparison point of rlgraph.

CleanRL-style and written for speed, not slowed down: 256 environments of gymnasium's native vector CartPole
(``make_vec(..., vectorization_mode="vector_entry_point")``, numpy-stepped) x 16 steps per rollout, GAE
(gamma 0.99, lambda 0.95), 4 epochs x 4 minibatches, clipped surrogate (0.2) with value clipping, entropy
0.01, value 0.5, gradient norm 0.5, Adam lr 1e-3 (eps 1e-5), separate 64x64 tanh MLPs for actor and critic
(orthogonal init), ``torch.set_num_threads(2)``. Rollouts run under ``torch.inference_mode``.

The native vector CartPole resets an environment on the step AFTER its episode ended (gymnasium's
next-step autoreset): that step ignores its action and returns the first observation with reward 0. Such
steps are masked out of the loss, and the step that ended the episode bootstraps (truncation) or not
(termination) from the value of the final observation, which the next step's rollout computes anyway.
Every row of every ``step`` counts as an environment step (as CleanRL counts them).

Importable: ``run(seconds=20, target=450)`` returns the env steps per second with learning and, with a
target, the seconds (from the start of ``run``) to a greedy mean return of ``target`` over 20 evaluation
episodes (evaluated every 32768 env steps, confirmed by a second evaluation, evaluation time included).
As a script it prints that dict (and the seconds from process launch): ``.venv/bin/python
benchmarks/ppo_single_file.py [--seconds 60] [--target 450]``.
"""
import argparse
import json
import os
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

NUM_ENVS, NUM_STEPS = 256, 16
NUM_EPOCHS, NUM_MINIBATCHES = 4, 4
LR, ADAM_EPS = 1e-3, 1e-5
GAMMA, GAE_LAMBDA = 0.99, 0.95
CLIP, ENT_COEF, VF_COEF, MAX_GRAD_NORM = 0.2, 0.01, 0.5, 0.5
EVAL_EVERY_STEPS, EVAL_EPISODES = 32768, 20


def layer(n_in, n_out, std=np.sqrt(2.0)):
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim, num_actions):
        super().__init__()
        self.critic = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
        self.actor = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
                                   layer(64, num_actions, 0.01))

    def value(self, x):
        return self.critic(x).squeeze(-1)

    def act(self, x):
        """(actions, log-probs, values) for a batch of observations (sampling)."""
        logp_all = torch.log_softmax(self.actor(x), dim=-1)
        actions = torch.multinomial(logp_all.exp(), 1).squeeze(-1)
        return actions, logp_all.gather(-1, actions[:, None]).squeeze(-1), self.value(x)

    def evaluate(self, x, actions):
        """(log-probs of ``actions``, entropies, values)."""
        logp_all = torch.log_softmax(self.actor(x), dim=-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp_all.gather(-1, actions[:, None]).squeeze(-1), entropy, self.value(x)


def greedy_returns(agent, num_episodes, seed):
    """Returns of the first episode of each of ``num_episodes`` environments under the greedy policy."""
    env = gym.make_vec("CartPole-v1", num_envs=num_episodes, vectorization_mode="vector_entry_point")
    obs, _ = env.reset(seed=seed)
    returns, running = np.full(num_episodes, np.nan), np.zeros(num_episodes)
    with torch.inference_mode():
        while np.isnan(returns).any():
            actions = agent.actor(torch.from_numpy(obs)).argmax(-1).numpy()
            obs, rewards, term, trunc, _ = env.step(actions)
            running += rewards
            ended = (term | trunc) & np.isnan(returns)
            returns[ended] = running[ended]
    env.close()
    return returns


def run(seconds=60.0, target=450, seed=0, stop_at_target=True, threads=2):
    """Trains for ``seconds`` (or until a greedy mean of ``target``) with ``threads`` torch threads (the
    caller's thread count is restored afterwards).

    Returns:
        dict: ``env_steps``, ``wall_seconds``, ``env_steps_per_second`` (with learning and any evaluations),
        ``updates``, and with a target ``seconds_to_target``, ``steps_to_target`` (None if not reached),
        ``target_reached_unix`` and ``evaluations`` [(env steps, seconds, mean return)].
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _train(seconds, target, seed, stop_at_target)
    finally:
        torch.set_num_threads(previous_threads)


def _train(seconds, target, seed, stop_at_target):
    torch.manual_seed(seed)
    np.random.seed(seed)
    start = time.perf_counter()
    env = gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="vector_entry_point")
    obs_dim, num_actions = env.single_observation_space.shape[0], env.single_action_space.n
    agent = Agent(obs_dim, num_actions)
    optimizer = torch.optim.Adam(agent.parameters(), lr=LR, eps=ADAM_EPS)

    obs_buf = torch.zeros((NUM_STEPS, NUM_ENVS, obs_dim))
    act_buf = torch.zeros((NUM_STEPS, NUM_ENVS), dtype=torch.long)
    logp_buf = torch.zeros((NUM_STEPS, NUM_ENVS))
    val_buf = torch.zeros((NUM_STEPS + 1, NUM_ENVS))
    rew_buf = np.zeros((NUM_STEPS, NUM_ENVS), np.float32)
    term_buf = np.zeros((NUM_STEPS, NUM_ENVS), np.float32)
    done_buf = np.zeros((NUM_STEPS, NUM_ENVS), np.float32)
    valid_buf = np.zeros((NUM_STEPS, NUM_ENVS), bool)

    obs, _ = env.reset(seed=seed)
    autoreset = np.zeros(NUM_ENVS, bool)  # This step only resets the env (next-step autoreset).
    env_steps, updates, evaluations = 0, 0, []
    steps_to_target = seconds_to_target = reached_unix = None
    next_eval = EVAL_EVERY_STEPS
    while time.perf_counter() - start < seconds:
        with torch.inference_mode():
            for t in range(NUM_STEPS):
                x = torch.from_numpy(obs)
                actions, logp, values = agent.act(x)
                obs_buf[t] = x
                act_buf[t], logp_buf[t], val_buf[t] = actions, logp, values
                valid_buf[t] = ~autoreset
                obs, rewards, term, trunc, _ = env.step(actions.numpy())
                rew_buf[t], term_buf[t] = rewards, term
                done_buf[t] = term | trunc
                autoreset = term | trunc
            val_buf[NUM_STEPS] = agent.value(torch.from_numpy(obs))
            # GAE; an episode's last step bootstraps from V(final obs) = the next row's value unless terminal;
            # the chain is cut after it (the next row is an autoreset step, masked out).
            values = val_buf.numpy()
            adv = np.zeros((NUM_STEPS, NUM_ENVS), np.float32)
            last = np.zeros(NUM_ENVS, np.float32)
            for t in reversed(range(NUM_STEPS)):
                delta = rew_buf[t] + GAMMA * values[t + 1] * (1.0 - term_buf[t]) - values[t]
                last = delta + GAMMA * GAE_LAMBDA * (1.0 - done_buf[t]) * last
                adv[t] = last
            returns = adv + values[:-1]
        env_steps += NUM_STEPS * NUM_ENVS

        valid = torch.from_numpy(valid_buf.reshape(-1))
        b_obs = obs_buf.reshape(-1, obs_dim)[valid]
        b_act, b_logp = act_buf.reshape(-1)[valid], logp_buf.reshape(-1)[valid]
        b_adv = torch.from_numpy(adv.reshape(-1))[valid]
        b_ret = torch.from_numpy(returns.reshape(-1))[valid]
        b_val = val_buf[:-1].reshape(-1)[valid]
        n = b_obs.shape[0]
        for _ in range(NUM_EPOCHS):
            for mb in torch.randperm(n).chunk(NUM_MINIBATCHES):
                new_logp, entropy, new_val = agent.evaluate(b_obs[mb], b_act[mb])
                ratio = (new_logp - b_logp[mb]).exp()
                mb_adv = b_adv[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - CLIP, 1 + CLIP)).mean()
                v_clipped = b_val[mb] + (new_val - b_val[mb]).clamp(-CLIP, CLIP)
                v_loss = 0.5 * torch.max((new_val - b_ret[mb]) ** 2, (v_clipped - b_ret[mb]) ** 2).mean()
                loss = pg_loss - ENT_COEF * entropy.mean() + VF_COEF * v_loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), MAX_GRAD_NORM)
                optimizer.step()
                updates += 1

        if target is not None and steps_to_target is None and env_steps >= next_eval:
            next_eval += EVAL_EVERY_STEPS
            returns_ = greedy_returns(agent, EVAL_EPISODES, seed + 10_000 + env_steps)
            if returns_.mean() >= target:  # Confirmed by a second evaluation, as rlgraph's trainer does.
                returns_ = np.concatenate([returns_, greedy_returns(agent, EVAL_EPISODES, seed + 20_000 + env_steps)])
            evaluations.append((env_steps, round(time.perf_counter() - start, 3), float(returns_.mean())))
            if returns_.mean() >= target:
                steps_to_target, seconds_to_target = env_steps, time.perf_counter() - start
                reached_unix = time.time()
                if stop_at_target:
                    break
    wall = time.perf_counter() - start
    env.close()
    out = dict(env_steps=env_steps, wall_seconds=round(wall, 3), env_steps_per_second=round(env_steps / wall, 1),
               updates=updates)
    if target is not None:
        out.update(target_return=target, seconds_to_target=seconds_to_target, steps_to_target=steps_to_target,
                   target_reached_unix=reached_unix, evaluations=evaluations)
    return out


def _process_start_unix():
    """The wall time at which this process was launched (Linux ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--target", type=float, default=450.0, help="greedy mean return to reach (<0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = run(seconds=args.seconds, target=None if args.target < 0 else args.target, seed=args.seed)
    launched = _process_start_unix()
    if out.get("target_reached_unix") is not None and launched is not None:
        out["seconds_to_target_from_launch"] = round(out["target_reached_unix"] - launched, 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
