"""Distributed JAX learners: ``jax.distributed`` processes whose update programs all-reduce their gradients.

Two learner processes on the loopback address, each updating on its half of fixed batches, end with the very same
variables, equal to one process's update on the whole batches (``tests/distributed_learner_worker.py``, as for
TensorFlow and PyTorch in ``test_distributed_learners.py``); ``rlgraph train --engine distributed --backend jax``
trains with two learners and leaves no process behind; a dead learner fails the other's next all-reduce at once, and
ends a run with its name; a stopped one fails it after the group's timeout; the learner group must be made before
JAX runs anything. Every test bounds its time. Run as a script (``python tests/test_jax_distributed.py RANK
ADDRESSES die|stop``), this file is one learner of the dead- and stopped-learner checks.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("jax")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from small_configs import run_cli, small_dqn_config  # noqa: E402
from test_distributed_learners import _load, _run_workers, _small_appo, kill_learner_1_mid_run  # noqa: E402

from rlgraph.engines.distributed.control import free_port  # noqa: E402


@pytest.mark.parametrize("kind", ["dqn", pytest.param("apex", marks=pytest.mark.slow),
                                  pytest.param("impala", marks=pytest.mark.slow),
                                  pytest.param("appo", marks=pytest.mark.slow),
                                  pytest.param("r2d2", marks=pytest.mark.slow)])
def test_two_jax_learners_update_like_one_learner_on_the_union_of_their_batches(kind, tmp_path):
    """Two updates (SGD with momentum and clipping) of two learners on halves of the batches: both learners hold
    identical variables (weights, optimizer slots, step counters), within 1e-6 of one learner on the whole
    batches; the update programs say they are all-reduced over the two processes."""
    _run_workers("jax", kind, "sgd", 1, tmp_path, timeout=120)
    _run_workers("jax", kind, "sgd", 2, tmp_path, timeout=120)
    single, initial = _load(tmp_path / "single.npz"), _load(tmp_path / "initial.npz")
    ranks = [_load(tmp_path / f"rank{r}.npz") for r in range(2)]
    moved = max(float(np.max(np.abs(single[k] - initial[k]))) for k in single if "steps" not in k)
    assert moved > 1e-3, "the updates must move the weights for the comparison to mean anything"
    assert sorted(ranks[0]) == sorted(ranks[1]) == sorted(single)
    for key, value in single.items():
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=key)
        np.testing.assert_allclose(ranks[0][key], value, atol=1e-6, rtol=0, err_msg=key)
    steps = [k for k in single if k.endswith("/steps")]
    assert steps and all(int(ranks[0][k]) == int(single[k]) == 2 for k in steps), steps
    assert "all-reduced over 2 learner processes" in (tmp_path / "describe.txt").read_text()


def test_dqn_trains_with_two_jax_learners(tmp_path):
    """`rlgraph train --engine distributed --num-learners 2 --backend jax`: both learners step and update (DQN
    samples each learner's own replay inside its update program), the updates are all-reduced, and the learner
    process is gone at the end."""
    logdir = tmp_path / "run"
    start = time.monotonic()
    proc = run_cli([small_dqn_config(tmp_path), "--backend", "jax", "--engine", "distributed", "--num-learners", "2",
                    "--steps", "2000", "--seed", "1", "--logdir", str(logdir)], timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - start < 120
    summary = json.load(open(logdir / "summary.json"))
    assert summary["backend"] == "jax" and summary["num_learners"] == 2, summary
    assert summary["learner_env_steps"] == [1000, 1000], summary
    assert summary["updates"] > 0, summary
    assert "all-reduced over 2 learner processes" in (logdir / "graph.txt").read_text()
    pid = json.load(open(logdir / "processes.json"))["learners"]["1"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


#: The learner group's timeout in the stopped-learner check (seconds).
STOP_TIMEOUT_S = 15


def _learner_that_may_die(rank, addresses, mode):
    """Script mode: one DQN learner of two; both make one update on a batch of their own, then learner 1 dies
    (``mode`` "die") or stops (SIGSTOP, "stop") and learner 0 tries a second update. Prints learner 0's outcome as
    JSON."""
    import device_towers_worker as towers
    from rlgraph.agents import Agent
    from rlgraph.executors.process_group import init_process_group
    from rlgraph.spaces import FloatBox, IntBox
    init_process_group("jax", rank, 2, addresses.split(","), timeout_s=60 if mode == "die" else STOP_TIMEOUT_S)
    agent = Agent.from_spec(towers.small_config("dqn", "sgd"), state_space=FloatBox(shape=(4,)),
                            action_space=IntBox(2), backend="jax", seed=3, device_strategy={"type": "distributed_sync"})
    _, (records, weights, time_percentage), _ = towers.update_call(agent, "dqn", np.random.default_rng(rank))
    loss, td_errors = agent.executor.execute("update_from_batch", records, weights, time_percentage)
    if rank == 1:
        if mode == "die":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGSTOP)  # The test kills it.
    time.sleep(1.0)
    start = time.monotonic()
    try:
        agent.executor.execute("update_from_batch", records, weights, time_percentage)
        error = None
    except Exception as e:  # noqa: BLE001 - reported to the test.
        error = f"{type(e).__name__}: {e}"
    print(json.dumps(dict(error=error, seconds=time.monotonic() - start, td_errors=list(np.shape(td_errors)),
                          loss=float(loss))))


def _two_learners(mode):
    """Learner 0's JSON outcome and learner 1's exit code of ``_learner_that_may_die`` in two processes."""
    addresses = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), str(rank), addresses, mode], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    try:
        out, err = procs[0].communicate(timeout=150)
        if mode == "stop":
            procs[1].kill()
        procs[1].wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert procs[0].returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), procs[1].returncode


def test_a_dead_jax_learner_fails_the_all_reduce_at_once():
    """Learner 1 exits after an update: learner 0's next update raises RLGraphLearnerGroupError within seconds
    (JAX's runtime is recoverable: its coordinator does not abort learner 0); each learner's outputs are its own
    batch's."""
    result, code = _two_learners("die")
    assert code == 3, code
    assert result["error"] and result["error"].startswith(
        "RLGraphLearnerGroupError: learner 0: the gradient all-reduce over 2 JAX learners failed"), result
    assert result["seconds"] < 10, result
    # Each learner gets the outputs of its own batch (towers.BATCH = 12 rows each), not of the two learners' union.
    assert result["td_errors"] == [12] and np.isfinite(result["loss"]), result


@pytest.mark.slow
def test_a_stopped_jax_learner_fails_the_all_reduce_after_the_timeout():
    """Learner 1 stops (SIGSTOP) after an update: XLA's all-reduce has no deadline, so learner 0's update waits in a
    helper thread and raises RLGraphLearnerGroupError after the group's timeout instead of hanging."""
    result, _ = _two_learners("stop")
    assert result["error"] and result["error"].startswith(
        "RLGraphLearnerGroupError: learner 0: the gradient all-reduce over 2 JAX learners did not complete within "
        f"{STOP_TIMEOUT_S} s"), result
    assert STOP_TIMEOUT_S - 1 < result["seconds"] < STOP_TIMEOUT_S + 30, result


@pytest.mark.slow
def test_a_dead_jax_learner_ends_the_run_with_its_name(tmp_path):
    """SIGKILL of learner 1 mid-run: learner 0's all-reduce fails at once (JAX's runtime is recoverable, so its
    coordinator does not abort learner 0), and the run stops with an error naming learner 1."""
    returncode, stderr, _, logdir = kill_learner_1_mid_run(tmp_path, "jax", settle_s=6.0)  # Builds, compiles.
    assert returncode != 0
    assert "learner 1" in stderr and "died" in stderr, stderr[-3000:]
    assert "Check failure" not in stderr and "Terminating process" not in stderr, stderr[-3000:]
    assert not (logdir / "checkpoint").exists()


def test_the_jax_learner_group_comes_before_jax_runs_anything():
    """jax.distributed.initialize is too late once JAX ran: a clear error, and this process joins no group."""
    import jax
    from rlgraph.executors.process_group import check_group_backend, current_process_group, init_process_group
    from rlgraph.utils.errors import RLGraphSpecError
    jax.numpy.zeros(1).block_until_ready()  # JAX has run in this process.
    for check in (lambda: check_group_backend("jax"),
                  lambda: init_process_group("jax", 0, 2, ["127.0.0.1:1", "127.0.0.1:2"], timeout_s=5)):
        with pytest.raises(RLGraphSpecError, match="jax.distributed.initialize must come before JAX runs anything"):
            check()
    with pytest.raises(RLGraphSpecError, match="Horovod has no JAX binding"):
        init_process_group("jax", 0, 2, ["127.0.0.1:1", "127.0.0.1:2"], timeout_s=5, all_reduce="horovod")
    assert current_process_group() is None


if __name__ == "__main__":
    _learner_that_may_die(int(sys.argv[1]), sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    os._exit(0)  # Skips the runtime's shutdown handshake with the learner that is gone.
