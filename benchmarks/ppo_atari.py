"""A single-file PyTorch PPO for Atari on rlgraph's Atari pipeline: the yardstick of rlgraph's APPO and IMPALA.

CleanRL's ``ppo_atari`` (Huang et al. 2022, "The 37 implementation details of PPO") written out in one file, on
the same environment and network as rlgraph's Pong configs: rlgraph's ``VectorEnv({"type": "atari", ...})``
(ale-py's ``AtariVectorEnv``: frame skip 4 with max-pooling, 84x84 grayscale, 4 stacked frames, up to 30 no-op
starts, no sticky actions, same-step auto-reset) and the Nature CNN (Mnih et al. 2015) on observations / 255.
Settings are CleanRL's Atari defaults: 8 environments x 128 steps, GAE (gamma 0.99, lambda 0.95), 4 epochs x 4
minibatches, clipped surrogate (0.1) with value clipping, advantages normalized per minibatch, entropy 0.01,
value 0.5, gradient norm 0.5, Adam lr 2.5e-4 (eps 1e-5) annealed linearly to 0 over ``total_steps``, rewards
clipped to their sign, orthogonal initialization (policy head std 0.01, value head 1).

The environments reset in the step that ends an episode (rlgraph's same-step auto-reset): a truncated episode
bootstraps from V(final observation), a terminated one from 0, and GAE's chain is cut there. Every row of every
``step`` is one agent step (4 frames).

Importable: ``run(total_steps, seconds, seed, on_episodes)`` trains and returns a dict; ``on_episodes(env_steps,
seconds, returns)`` is called with every batch of finished episodes' (unclipped) returns. As a script
(``.venv/bin/python benchmarks/ppo_atari.py --game pong --steps 3000000 --seconds 3600 --out curve.csv``) it
writes the curve (env steps, seconds, mean of the last 100 returns) as CSV and prints the summary as JSON.
"""
import argparse
import collections
import csv
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rlgraph.environments.vector_env import VectorEnv  # noqa: E402

NUM_ENVS, NUM_STEPS = 8, 128
NUM_EPOCHS, NUM_MINIBATCHES = 4, 4
LR, ADAM_EPS = 2.5e-4, 1e-5
GAMMA, GAE_LAMBDA = 0.99, 0.95
CLIP, ENT_COEF, VF_COEF, MAX_GRAD_NORM = 0.1, 0.01, 0.5, 0.5


def layer(module, std=np.sqrt(2.0)):
    nn.init.orthogonal_(module.weight, std)
    nn.init.constant_(module.bias, 0.0)
    return module


class Agent(nn.Module):
    """Nature CNN trunk with a policy head and a value head (CleanRL's ``ppo_atari`` agent); for small screens
    (Catch) the small CNN of ``configs/appo_catch.json``."""

    def __init__(self, num_actions, obs_shape=(4, 84, 84)):
        super().__init__()
        stack, height, width = obs_shape
        if height == 42:  # RLlib's small Atari CNN, as in configs/appo_pong_42.json.
            convs, hidden = [layer(nn.Conv2d(stack, 16, 4, stride=2, padding=1)), nn.ReLU(),
                             nn.ZeroPad2d((1, 2, 1, 2)),  # TF's "same" padding of 21 -> 11.
                             layer(nn.Conv2d(16, 32, 4, stride=2)), nn.ReLU(),
                             layer(nn.Conv2d(32, 256, 11, stride=1)), nn.ReLU()], None
        elif height >= 36:
            convs, hidden = [layer(nn.Conv2d(stack, 32, 8, stride=4)), nn.ReLU(),
                             layer(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
                             layer(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU()], 512
        else:
            convs, hidden = [layer(nn.Conv2d(stack, 16, 3, stride=1, padding=1)), nn.ReLU(),
                             layer(nn.Conv2d(16, 32, 3, stride=2, padding=1)), nn.ReLU()], 128
        convs = nn.Sequential(*convs)
        flat = convs(torch.zeros((1,) + tuple(obs_shape))).numel()
        if hidden is None:  # The last convolution is the hidden layer (its output is 1x1).
            self.trunk, hidden = nn.Sequential(convs, nn.Flatten()), flat
        else:
            self.trunk = nn.Sequential(convs, nn.Flatten(), layer(nn.Linear(flat, hidden)), nn.ReLU())
        self.actor = layer(nn.Linear(hidden, num_actions), std=0.01)
        self.critic = layer(nn.Linear(hidden, 1), std=1.0)

    def forward(self, obs):
        """(log-probs of all actions, values) of uint8 observations [B, 4, 84, 84]."""
        hidden = self.trunk(obs.float() / 255.0)
        return torch.log_softmax(self.actor(hidden), dim=-1), self.critic(hidden).squeeze(-1)


def run(total_steps=3_000_000, seconds=None, seed=1, game="pong", threads=None, on_episodes=None, lr=LR,
        num_envs=NUM_ENVS, num_steps=NUM_STEPS, num_epochs=NUM_EPOCHS, num_minibatches=NUM_MINIBATCHES,
        anneal=True, screen_size=84):
    """Trains PPO for ``total_steps`` agent steps (or ``seconds``, whichever comes first).

    ``screen_size=42`` uses RLlib's small Atari CNN on 42x42 screens (``configs/appo_pong_42.json``'s network);
    ``anneal=False`` keeps the learning rate constant.

    Returns:
        dict: ``env_steps``, ``wall_seconds``, ``env_steps_per_second``, ``updates``, ``episodes`` and
        ``final_mean_return`` (mean of the last 100 episodes' unclipped returns).
    """
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    start = time.perf_counter()
    env_spec = game if "/" in game else {"type": "atari", "game": game, "screen_size": screen_size}
    env = VectorEnv(env_spec, num_envs=num_envs, seed=seed)
    obs = env.reset()
    num_actions = int(env.action_space.num_categories)
    agent = Agent(num_actions, obs.shape[1:])
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=ADAM_EPS)

    obs_buf = torch.zeros((num_steps, num_envs) + obs.shape[1:], dtype=torch.uint8)
    act_buf = torch.zeros((num_steps, num_envs), dtype=torch.long)
    logp_buf = torch.zeros((num_steps, num_envs))
    val_buf = np.zeros((num_steps + 1, num_envs), np.float32)
    rew_buf = np.zeros((num_steps, num_envs), np.float32)
    done_buf = np.zeros((num_steps, num_envs), np.float32)
    recent = collections.deque(maxlen=100)
    env_steps = updates = episodes = 0
    while env_steps < total_steps and (seconds is None or time.perf_counter() - start < seconds):
        for group in optimizer.param_groups:
            group["lr"] = lr * (1.0 - env_steps / total_steps) if anneal else lr
        with torch.inference_mode():
            for t in range(num_steps):
                x = torch.from_numpy(obs)
                logp_all, values = agent(x)
                actions = torch.multinomial(logp_all.exp(), 1).squeeze(-1)
                obs_buf[t], act_buf[t] = x, actions
                logp_buf[t] = logp_all.gather(-1, actions[:, None]).squeeze(-1)
                val_buf[t] = values.numpy()
                obs, rewards, terminals, truncations = env.step(actions.numpy())
                rew_buf[t] = np.sign(rewards)
                done_buf[t] = terminals | truncations
                cut = truncations & ~terminals
                if cut.any():  # A time limit: bootstrap from the value of the episode's final observation.
                    final = torch.from_numpy(np.asarray(env.final_obs)[cut])
                    rew_buf[t, cut] += GAMMA * agent(final)[1].numpy()
                finished = env.pop_finished_episodes()
                if finished:
                    returns = [r for r, _ in finished]
                    episodes += len(returns)
                    recent.extend(returns)
                    if on_episodes is not None:
                        on_episodes(env_steps + (t + 1) * num_envs, time.perf_counter() - start, returns)
            val_buf[num_steps] = agent(torch.from_numpy(obs))[1].numpy()
        adv = np.zeros((num_steps, num_envs), np.float32)
        last = np.zeros(num_envs, np.float32)
        for t in reversed(range(num_steps)):
            live = 1.0 - done_buf[t]
            delta = rew_buf[t] + GAMMA * val_buf[t + 1] * live - val_buf[t]
            last = delta + GAMMA * GAE_LAMBDA * live * last
            adv[t] = last
        env_steps += num_steps * num_envs

        b_obs = obs_buf.reshape((-1,) + obs_buf.shape[2:])
        b_act, b_logp = act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv = torch.from_numpy(adv.reshape(-1))
        b_val = torch.from_numpy(val_buf[:-1].reshape(-1))
        b_ret = b_adv + b_val
        for _ in range(num_epochs):
            for mb in torch.randperm(b_obs.shape[0]).chunk(num_minibatches):
                logp_all, new_val = agent(b_obs[mb])
                new_logp = logp_all.gather(-1, b_act[mb][:, None]).squeeze(-1)
                entropy = -(logp_all.exp() * logp_all).sum(-1)
                ratio = (new_logp - b_logp[mb]).exp()
                mb_adv = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - CLIP, 1 + CLIP)).mean()
                v_clipped = b_val[mb] + (new_val - b_val[mb]).clamp(-CLIP, CLIP)
                v_loss = 0.5 * torch.max((new_val - b_ret[mb]) ** 2, (v_clipped - b_ret[mb]) ** 2).mean()
                loss = pg_loss - ENT_COEF * entropy.mean() + VF_COEF * v_loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), MAX_GRAD_NORM)
                optimizer.step()
                updates += 1
    wall = time.perf_counter() - start
    env.close()
    return dict(env_steps=env_steps, wall_seconds=round(wall, 1), env_steps_per_second=round(env_steps / wall, 1),
                updates=updates, episodes=episodes,
                final_mean_return=float(np.mean(recent)) if recent else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="pong", help="an Atari game, or a gymnasium id such as rlgraph/Catch-v0")
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--steps", type=int, default=3_000_000, help="agent steps (also the lr annealing horizon)")
    parser.add_argument("--seconds", type=float, default=None, help="wall-clock limit")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", default=None, help="CSV of (env_steps, seconds, mean_return_100)")
    parser.add_argument("--screen-size", type=int, default=84, help="84 (Nature CNN) or 42 (RLlib's small CNN)")
    parser.add_argument("--envs", type=int, default=NUM_ENVS)
    parser.add_argument("--unroll", type=int, default=NUM_STEPS, help="steps per environment per update")
    parser.add_argument("--epochs", type=int, default=NUM_EPOCHS)
    parser.add_argument("--minibatches", type=int, default=NUM_MINIBATCHES)
    parser.add_argument("--no-anneal", action="store_true", help="keep the learning rate constant")
    args = parser.parse_args()
    rows, recent = [], collections.deque(maxlen=100)

    def on_episodes(steps, secs, returns):
        recent.extend(returns)
        rows.append((steps, round(secs, 2), float(np.mean(recent))))
        if args.out:
            with open(args.out, "w", newline="") as f:
                csv.writer(f).writerows([("env_steps", "seconds", "mean_return_100")] + rows)

    out = run(args.steps, args.seconds, args.seed, args.game, args.threads, on_episodes, args.lr, args.envs,
              args.unroll, args.epochs, args.minibatches, not args.no_anneal, args.screen_size)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
