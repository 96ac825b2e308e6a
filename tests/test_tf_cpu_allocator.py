"""``execution_spec.tf_cpu_allocator``: TensorFlow's allocator for CPU tensors in a training process.

Each check runs in a fresh process, because TensorFlow creates its CPU allocator once, at its first op. Which
allocator a process has is read from TensorFlow itself: its profiler names the allocator of each pooled
allocation, "bfc_cpu_allocator_for_gpu" for the BFC allocator. TensorFlow's default allocator is the system's
(no such events) or, where TensorFlow turns oneDNN on by default (CPUs with AVX-512 VNNI/BF16 or AMX), oneDNN's
pooling "mklcpu" allocator. (Its memory statistics cannot tell them apart: oneDNN's allocator keeps them too.)
"""
import json
import os
import subprocess
import sys

import pytest

from rlgraph.engines import ExecutionSpec
from rlgraph.engines.execution_spec import TF_CPU_ALLOCATOR_VARIABLE
from rlgraph.utils.errors import RLGraphSpecError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Trains DQN on CartPole for 64 steps with the given execution_spec (after one TensorFlow op when asked);
#: prints the allocator TensorFlow uses for CPU tensors and the variable's value.
PROBE = """
import json, logging, os, sys, tempfile
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
from rlgraph.engines.runner import load_config, train
backend, execution, op_first = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
if op_first:
    import tensorflow as tf
    tf.constant(1.0) + 1.0
config, _ = load_config("configs/dqn_cartpole.json")
config["environment_spec"] = dict(config["environment_spec"], num_envs=4)
config["train_spec"] = dict(steps=64, chunk_steps=64, eval_episodes=0)
if execution is not None:
    config["execution_spec"] = execution
summary = train(config, backend=backend, seed=1, logdir=tempfile.mkdtemp(), progress=False)
assert summary["env_steps"] >= 64, summary
allocator = "none"
if "tensorflow" in sys.modules:
    import glob
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    trace = tempfile.mkdtemp()
    tf.profiler.experimental.start(trace)
    tf.ones((512, 512)) * 2.0  # 1 MB: a pooling allocator traces it with its name; the system one does not.
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    for path in glob.glob(os.path.join(trace, "**", "*.xplane.pb"), recursive=True):
        with open(path, "rb") as f:
            space.MergeFromString(f.read())
    names = {(p.stat_metadata[s.ref_value].name if s.ref_value else s.str_value)
             for p in space.planes for line in p.lines for e in line.events for s in e.stats
             if p.stat_metadata[s.metadata_id].name == "allocator_name"}
    allocator = "bfc" if "bfc_cpu_allocator_for_gpu" in names else "default"
print("ALLOCATOR", allocator, os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "unset"))
"""


def probe(execution, backend="tf", variable=None, op_first=False):
    """``(allocator, the variable's value, stderr)`` of a fresh process that trained with ``execution``, started
    with ``TF_CPU_ALLOCATOR_USE_BFC`` set to ``variable`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != TF_CPU_ALLOCATOR_VARIABLE}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    if variable is not None:
        env[TF_CPU_ALLOCATOR_VARIABLE] = variable
    out = subprocess.run([sys.executable, "-c", PROBE, backend, json.dumps(execution), "1" if op_first else "0"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [l for l in out.stdout.splitlines() if l.startswith("ALLOCATOR")][-1]
    allocator, value = line.split()[1:]
    return allocator, value, out.stderr


def test_bfc_is_taken_by_a_run_on_tensorflow():
    assert probe({"tf_cpu_allocator": "bfc"})[:2] == ("bfc", "true")


def test_without_the_key_the_process_environment_decides():
    assert probe(None)[:2] == ("default", "unset")
    assert probe(None, variable="true")[:2] == ("bfc", "true")


def test_default_overrides_the_variable_set_for_the_process():
    assert probe({"tf_cpu_allocator": "default"}, variable="true")[:2] == ("default", "false")


def test_tensorflow_already_running_keeps_its_allocator_and_says_so():
    allocator, value, err = probe({"tf_cpu_allocator": "bfc"}, op_first=True)
    assert allocator == "default"
    assert "tf_cpu_allocator 'bfc' not applied: TensorFlow has already run in this process" in err


def test_a_pytorch_run_with_the_key_does_not_start_tensorflow():
    assert probe({"tf_cpu_allocator": "bfc"}, backend="pytorch")[0] == "none"


@pytest.mark.parametrize("value", ["BFC", "pool", 1, True])
def test_bad_values_are_refused(value):
    with pytest.raises(RLGraphSpecError) as e:
        ExecutionSpec.from_config({"execution_spec": {"tf_cpu_allocator": value}})
    assert str(e.value).startswith("execution_spec.tf_cpu_allocator: expected one of")


@pytest.mark.parametrize("name", ["r2d2_cartpole", "appo_pong", "impala_pong"])
def test_configs_measured_faster_with_bfc_take_it(name):
    spec = ExecutionSpec.from_config(json.load(open(os.path.join(ROOT, "configs", f"{name}.json"))))
    assert spec.tf_cpu_allocator == "bfc"
