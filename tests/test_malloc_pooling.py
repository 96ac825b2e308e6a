"""``execution_spec.malloc_pooling``: glibc's malloc keeps freed buffers of up to 32 MiB for reuse.

Each check runs in a fresh process (the setting is the process's). What it changes is measured as the kernel
counts it: the minor page faults (``ru_minflt``) of allocating, touching and freeing the same buffers again and
again, as a learner's update does with its intermediates.
"""
import json
import os
import subprocess
import sys

import pytest

from rlgraph.engines import ExecutionSpec
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.malloc_pooling import VARIABLES, glibc_library

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(glibc_library() is None, reason="glibc's malloc only")

#: Rounds of 40 buffers of 4 MiB, each written, all freed at the end of the round; prints the page faults of
#: the rounds after the first (the first faults everything in either way).
PATTERN = """
import ctypes, ctypes.util, resource, sys
if sys.argv[1] == "pooling":
    from rlgraph.utils.malloc_pooling import enable_malloc_pooling
    assert enable_malloc_pooling()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 4 * 1024 * 1024
def one_round():
    buffers = [libc.malloc(size) for _ in range(40)]
    for b in buffers:
        ctypes.memset(b, 1, size)
    for b in buffers:
        libc.free(b)
one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    one_round()
print("FAULTS", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

#: Trains DQN on CartPole for 64 steps with the given execution_spec; prints the glibc variables it leaves.
RUN = """
import json, os, sys, tempfile
from rlgraph.engines.runner import load_config, train
config, _ = load_config("configs/dqn_cartpole.json")
config["environment_spec"] = dict(config["environment_spec"], num_envs=4)
config["train_spec"] = dict(steps=64, chunk_steps=64, eval_episodes=0)
config["execution_spec"] = json.loads(sys.argv[1])
summary = train(config, backend="pytorch", seed=1, logdir=tempfile.mkdtemp(), progress=False)
assert summary["env_steps"] >= 64, summary
print("VARIABLES", json.dumps({k: os.environ.get(k) for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}))
"""


def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    return env


def _run(code, *args):
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=_clean_env(), capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def faults(mode):
    line = [l for l in _run(PATTERN, mode).splitlines() if l.startswith("FAULTS")][-1]
    return int(line.split()[1])


def test_pooling_keeps_freed_buffers_for_reuse():
    """Without pooling glibc hands the freed 160 MiB back at each round's end and faults it in again (a
    page per 4 KiB, or per 2 MiB with transparent huge pages); with it the pages stay."""
    default, pooled = faults("default"), faults("pooling")
    assert default >= 4 * 40 * 2, default  # At least a huge page per buffer and round: the pattern does fault.
    assert pooled * 10 < default, (pooled, default)


@pytest.mark.parametrize("execution, expected", [
    ({"malloc_pooling": True}, {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}),
    ({}, {"MALLOC_MMAP_THRESHOLD_": None, "MALLOC_TRIM_THRESHOLD_": None}),
])
def test_a_run_applies_it_only_when_asked(execution, expected):
    """A run with the key sets glibc's thresholds for itself and (through the environment) its children."""
    line = [l for l in _run(RUN, json.dumps(execution)).splitlines() if l.startswith("VARIABLES")][-1]
    assert json.loads(line.split(" ", 1)[1]) == expected


def test_a_value_that_is_not_a_bool_is_named():
    with pytest.raises(RLGraphSpecError, match=r"execution_spec\.malloc_pooling"):
        ExecutionSpec.from_config({"execution_spec": {"malloc_pooling": "yes"}})
