"""Shared helpers of command-line tests: small configs written to a test's tmp_path, runs of `rlgraph train`."""
import contextlib
import json
import os
import subprocess
import sys

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def small_dqn_config(tmp_path, **changes):
    """The DQN CartPole config on 4 environments, learning after 200 steps; ``changes`` replace top-level keys.

    Returns:
        The path of the JSON file written.
    """
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        cfg = json.load(f)
    cfg["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 4}
    cfg["train_spec"] = {"eval_episodes": 2, "chunk_steps": 400}
    cfg["update_spec"] = dict(cfg["update_spec"], steps_before_update=200)
    cfg.update(changes)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    return str(path)

#: The least mean return a learning test accepts from the run's final, independent 20-episode greedy evaluation,
#: after the target of 450 was reached and confirmed over 40 episodes. Policies on CartPole that just reached 450
#: still lose some episodes early (returns of 100-500), so a 20-episode mean has a standard error of about 30:
#: 350 is about three standard errors below the target, so the test fails only on a real collapse, not by chance.
FINAL_EVAL_FLOOR = 350


def _cli(args):
    cmd = [sys.executable, "-m", "rlgraph.cli", "train"] + list(args)
    return cmd, dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0")


def run_cli(args, timeout=400):
    """``rlgraph train ARGS`` in a fresh process (one math thread, no Ray usage stats)."""
    cmd, env = _cli(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@contextlib.contextmanager
def cli_process(args):
    """``rlgraph train ARGS`` started in the background (as ``run_cli``), text pipes; killed on leaving if it is
    still running, so that no test leaves a process behind."""
    cmd, env = _cli(args)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def train_on_engine(executor, name, backend, tmp_path, max_steps, seed=1, extra=()):
    """Trains ``configs/NAME.json`` on ``executor`` with 2 actors for at most ``max_steps``; returns the summary."""
    logdir = str(tmp_path / f"{name}-{backend}")
    proc = run_cli([os.path.join(CONFIGS, f"{name}.json"), "--backend", backend, "--executor", executor,
                    "--num-actors", "2", "--steps", str(max_steps), "--seed", str(seed), "--logdir", logdir]
                   + list(extra), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        return json.load(f)
