"""``execution_spec.math_threads``: the backend's intra-op threads during a local training run.

Each check runs in a fresh process (started with ``OMP_NUM_THREADS=1``, as ``rlgraph train`` does), because
TensorFlow fixes its pools when it first runs and PyTorch's count is process-wide.
"""
import json
import os
import subprocess
import sys

import pytest

from rlgraph.engines import ExecutionSpec
from rlgraph.utils.errors import RLGraphSpecError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Trains DQN on CartPole for 64 steps with the given execution_spec and engine; prints the backend's thread count
#: during the run (when the worker first runs) and after it.
PROBE = """
import json, logging, sys, tempfile
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
from rlgraph.engines.runner import load_config, make_engine, train
from rlgraph.workers import VectorWorker
backend, execution, later, how = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
if backend == "pytorch":
    import torch
    threads = torch.get_num_threads
else:
    import tensorflow as tf
    threads = tf.config.threading.get_intra_op_parallelism_threads
seen = []
run = VectorWorker.run
def recording_run(self, *args, **kwargs):
    seen.append(threads())
    return run(self, *args, **kwargs)
VectorWorker.run = recording_run
config, _ = load_config("configs/dqn_cartpole.json")
config["environment_spec"] = dict(config["environment_spec"], num_envs=4)
config["train_spec"] = dict(steps=64, chunk_steps=64, eval_episodes=0)
if execution is not None:
    config["execution_spec"] = execution
if how == "train":
    train(config, backend=backend, seed=1, logdir=tempfile.mkdtemp(), progress=False)
else:
    make_engine(config, backend=backend, seed=1)[0].run(64)
if later is not None:
    from rlgraph.engines import ExecutionSpec
    ExecutionSpec(math_threads=later).apply_math_threads(backend)
print("THREADS", seen[0], threads())
"""


def probe(backend, execution, later=None, how="train"):
    """``(threads during the run, threads after it, stderr)`` of a fresh process (one math thread, as ``rlgraph
    train`` starts) that trained with ``execution`` (``how``: "train", or "make_engine" to only build the engine)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", PROBE, backend, json.dumps(execution), json.dumps(later), how],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [l for l in out.stdout.splitlines() if l.startswith("THREADS")][-1]
    during, after = map(int, line.split()[1:])
    return during, after, out.stderr


def test_pytorch_takes_the_configs_threads_for_a_local_run_and_gives_them_back():
    assert probe("pytorch", None)[:2] == (1, 1)  # The process's own setting without the key.
    assert probe("pytorch", {"math_threads": 3})[:2] == (3, 1)


def test_tensorflow_takes_the_configs_threads_before_it_starts():
    assert probe("tf", None)[:2] == (0, 0)  # TensorFlow's own choice without the key.
    assert probe("tf", {"math_threads": 3})[:2] == (3, 3)  # Fixed for the process once TensorFlow runs.


def test_one_count_per_backend():
    assert probe("pytorch", {"math_threads": {"pytorch": 2, "tf": 1}})[0] == 2
    assert probe("tf", {"math_threads": {"pytorch": 2, "tf": 1}})[0] == 1
    assert probe("tf", {"math_threads": {"pytorch": 2}})[0] == 0  # Left out: TensorFlow's default.


def test_building_an_engine_alone_leaves_the_threads_alone():
    """Only ``train``'s local runs apply the key (engines share their cores with other processes)."""
    assert probe("pytorch", {"math_threads": 3}, how="make_engine")[:2] == (1, 1)


def test_tensorflow_already_running_keeps_its_pools_and_says_so():
    during, after, err = probe("tf", {"math_threads": 2}, later=3)
    assert (during, after) == (2, 2)
    assert "math_threads 3 not applied: TensorFlow has already started" in err


WHAT = "a positive int, or a dict {\"tf\": N, \"pytorch\": N} of them or null"


@pytest.mark.parametrize("value", [0, "2", 1.5, {"torch": 2}, {"tf": 0}, [2]])
def test_bad_values_are_refused(value):
    with pytest.raises(RLGraphSpecError) as e:
        ExecutionSpec.from_config({"execution_spec": {"math_threads": value}})
    assert str(e.value).startswith(f"execution_spec.math_threads: expected {WHAT}, got")


def test_r2d2_cartpole_config_gives_pytorch_two_and_tensorflow_one():
    spec = ExecutionSpec.from_config(json.load(open(os.path.join(ROOT, "configs", "r2d2_cartpole.json"))))
    assert (spec.math_threads_for("pytorch"), spec.math_threads_for("tf")) == (2, 1)
