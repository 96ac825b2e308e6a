"""Small training configs written to a test's tmp_path, for command-line tests."""
import json
import os

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
