"""The command line keeps the backends' start-up notices out of a run's terminal unless -v; ``rlgraph demo``'s
mistakes are one line."""
import json
import os
import subprocess
import sys

import pytest

from rlgraph.cli import main as cli_main
from rlgraph.utils.backend import backend_available

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOISE = ("absl::InitializeLog", "oneDNN custom operations", "cpu_feature_guard")


def _train(tmp_path, *extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "RLGRAPH_QUIET_IMPORTS")}
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", os.path.join(ROOT, "configs", "dqn_cartpole.json"),
           "--backend", "tf", "--steps", "64", "--logdir", str(tmp_path / f"run{len(extra)}"), "--quiet",
           "--set", "train_spec.eval_episodes=0", "--set", "environment_spec.num_envs=2", *extra]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


@pytest.mark.skipif(not backend_available("tf"), reason="needs TensorFlow")
def test_tensorflow_notices_only_with_verbose(tmp_path):
    quiet = _train(tmp_path)
    assert not [n for n in NOISE if n in quiet], quiet
    verbose = _train(tmp_path, "-v")
    assert [n for n in NOISE if n in verbose], "with -v the backend's own notices are kept"


@pytest.mark.slow
def test_a_ray_run_prints_no_ray_notices(tmp_path):
    # Ray's start-up notices (token authentication, usage stats, the dashboard) are not the user's run's.
    pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", os.path.join(ROOT, "configs", "appo_cartpole.json"),
           "--backend", "pytorch", "--engine", "ray", "--num-actors", "1", "--steps", "2000", "--quiet",
           "--logdir", str(tmp_path / "run"), "--set", "train_spec.eval_episodes=0"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.strip() == "", proc.stderr[-3000:]


def _one_line(capsys, args, message):
    assert cli_main(["demo"] + [str(a) for a in args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_demo_mistakes_are_one_line(tmp_path, capsys):
    _one_line(capsys, [tmp_path / "missing.json"], "cannot be read")
    (tmp_path / "bad.json").write_text("{")
    _one_line(capsys, [tmp_path / "bad.json"], "is not JSON")
    _one_line(capsys, [os.path.join(ROOT, "configs", "dqn_cartpole.json")],
              "is an agent's training config (use rlgraph train)")
    (tmp_path / "half.json").write_text(json.dumps({"state_space": {"type": "float-box", "shape": [4]}, "stpes": 3}))
    _one_line(capsys, [tmp_path / "half.json"], "missing 'network', 'memory'; unknown 'stpes'")
