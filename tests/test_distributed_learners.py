"""Distributed learners (``--executor distributed``): real learner processes on the loopback address.

Equivalence: two learner processes, each updating on half of a batch with its gradients all-reduced, end with
the same variables as one learner updating on the whole batch (every agent, both backends). Exact resume
with two learners, learning with two learners (slow), and the errors for learners that never come or die.
Every test bounds its time and leaves no process behind.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rlgraph.engines.distributed.control import free_port
from rlgraph.utils.backend import backend_available
from small_configs import FINAL_EVAL_FLOOR, cli_process, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "configs")
WORKER = os.path.join(HERE, "distributed_learner_worker.py")
KINDS = ("dqn", "apex", "impala", "appo", "r2d2")


def _need(backend):
    if not backend_available(backend):
        pytest.skip(f"backend {backend} is not installed")


def _run_workers(backend, kind, optimizer, world, outdir, timeout=240):
    """Runs ``world`` worker processes (ranks) to the end; kills them all if one fails or time runs out."""
    addresses = ",".join(f"127.0.0.1:{free_port()}" for _ in range(world))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, WORKER, backend, kind, optimizer, str(rank), str(world), addresses,
                               str(outdir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
             for rank in range(world)]
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        for rank, p in enumerate(procs):
            assert p.returncode == 0, f"rank {rank}:\n" + p.stdout.read().decode(errors="replace")[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()


def _load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("kind", KINDS)
def test_two_learners_update_like_one_learner_on_the_union_of_their_batches(kind, backend, tmp_path):
    """Each learner updates on its half of every batch; gradients are all-reduced: both end with the variables
    (weights, optimizer slots, step counters) one learner gets from the whole batches, to 1e-5, and with the
    very same variables as each other. Plain SGD with clipping shows any difference in the averaged gradients."""
    _run_workers(backend, kind, "sgd", 1, tmp_path)
    _run_workers(backend, kind, "sgd", 2, tmp_path)
    single, initial = _load(tmp_path / "single.npz"), _load(tmp_path / "initial.npz")
    ranks = [_load(tmp_path / f"rank{r}.npz") for r in range(2)]
    moved = max(float(np.max(np.abs(single[k] - initial[k]))) for k in single if "steps" not in k)
    assert moved > 1e-3, "the updates must move the weights for the comparison to mean anything"
    for key, value in single.items():
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=key)
        np.testing.assert_allclose(ranks[0][key], value, atol=1e-5, rtol=0, err_msg=key)
    describe = (tmp_path / "describe.txt").read_text()
    assert "all-reduced over 2 learner processes" in describe


def _train_in_a_process(args):
    proc = run_cli(args, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("kind,backend_name", [("dqn", "pytorch"), ("appo", "pytorch"),
                                               pytest.param("dqn", "tf", marks=pytest.mark.slow)])
def test_two_learners_resume_exactly(kind, backend_name, tmp_path):
    """8000 steps straight == 4000 steps, stored, resumed to 8000, with two learners: learner 0's checkpoint
    holds learner 1's run state (replay, partial trajectories, counters, RNG and environment states), so the
    same updates happen and the weights end equal."""
    _need(backend_name)
    sys.path.insert(0, HERE)
    from test_exact_resume import _check_straight_equals_resumed
    summaries = _check_straight_equals_resumed(kind, backend_name, tmp_path, train=_train_in_a_process,
                                               extra=["--executor", "distributed", "--num-learners", "2"])
    assert os.path.isdir(tmp_path / "resumed" / "checkpoint" / "model" / "learner1")
    assert summaries[0]["learner_env_steps"] == summaries[1]["learner_env_steps"] == [4000, 4000]


@pytest.mark.slow
def test_appo_with_two_learners_learns_cartpole(backend, tmp_path):
    """APPO with 2 learner processes (32 environments each, gradients all-reduced) reaches a greedy 450."""
    logdir = str(tmp_path / "run")
    proc = run_cli([os.path.join(CONFIGS, "appo_cartpole.json"), "--backend", backend, "--executor", "distributed",
                    "--num-learners", "2", "--steps", "1000000", "--seed", "1", "--logdir", logdir], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.load(open(os.path.join(logdir, "summary.json")))
    assert summary["num_learners"] == 2
    assert summary["learner_env_steps"][0] == summary["learner_env_steps"][1] > 0
    assert summary["steps_to_target"] is not None, summary
    assert summary["eval_mean_return"] >= FINAL_EVAL_FLOOR, summary


def _small_appo(tmp_path, **execution):
    with open(os.path.join(CONFIGS, "appo_cartpole.json")) as f:
        config = json.load(f)
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 8}
    config["network_spec"] = [{"type": "dense", "units": 16, "activation": "tanh"}]
    config["execution_spec"] = execution
    path = tmp_path / "appo.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_a_learner_that_never_connects_is_a_clear_error(tmp_path):
    """Learner 0 waits learner_timeout_s for the learners at learner_addresses, then fails with one line."""
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    config = _small_appo(tmp_path, num_learners=2, learner_addresses=addresses, learner_timeout_s=2)
    start = time.monotonic()
    proc = run_cli([config, "--backend", "pytorch", "--executor", "distributed", "--steps", "1000",
                    "--logdir", str(tmp_path / "run")], timeout=120)
    assert proc.returncode != 0
    assert time.monotonic() - start < 60
    assert "learners [1] did not connect" in proc.stderr and "within 2 s" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_a_follower_whose_learner_0_never_answers_is_a_clear_error(tmp_path):
    """A learner of rank 1 started by hand gives up on an absent learner 0 after learner_timeout_s."""
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    config = _small_appo(tmp_path, num_learners=2, learner_addresses=addresses, learner_timeout_s=2)
    proc = run_cli([config, "--backend", "pytorch", "--executor", "distributed", "--learner-rank", "1"],
                   timeout=120)
    assert proc.returncode != 0
    assert "did not answer within 2 s" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def kill_learner_1_mid_run(tmp_path, backend, settle_s):
    """Starts a 2-learner distributed run, SIGKILLs learner 1 ``settle_s`` after it is listed; returns (learner 0's
    exit status, its stderr, learner 1's pid, the run's logdir)."""
    config = _small_appo(tmp_path, learner_timeout_s=10)
    logdir = tmp_path / "run"
    with cli_process([config, "--backend", backend, "--engine", "distributed", "--num-learners", "2",
                      "--seconds", "300", "--logdir", str(logdir)]) as proc:
        deadline = time.monotonic() + 120
        pid = None
        while pid is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                pid = json.load(open(logdir / "processes.json"))["learners"]["1"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.2)
        assert pid is not None, "the run never listed its learners"
        time.sleep(settle_s)  # Let the learners train a little.
        os.kill(pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=90)
    return proc.returncode, stderr, pid, logdir


def test_a_learner_that_dies_ends_the_run_with_its_name(tmp_path):
    """SIGKILL of learner 1 mid-run: learner 0 stops within the timeout with an error naming learner 1."""
    returncode, stderr, pid, logdir = kill_learner_1_mid_run(tmp_path, "pytorch", settle_s=2.0)
    assert returncode != 0
    assert "learner 1" in stderr and "died" in stderr, stderr[-3000:]
    assert not (logdir / "checkpoint").exists()  # A failing run writes no checkpoint.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_execution_spec_checks_its_learner_keys():
    from rlgraph.engines.execution_spec import ExecutionSpec
    from rlgraph.utils.errors import RLGraphSpecError
    cases = [({"num_learners": 2, "learner_addresses": ["127.0.0.1:1234"]}, "1 addresses for num_learners=2"),
             ({"num_learners": 2, "learner_rank": 2, "learner_addresses": ["a:1", "b:2"]}, "not below num_learners"),
             ({"num_learners": 2, "learner_rank": 1}, "learner_addresses, which are not given"),
             ({"num_learners": 0}, "execution_spec.num_learners: expected a positive int"),
             ({"learner_addresses": ["nohost"]}, "execution_spec.learner_addresses"),
             ({"learner_timeout_s": 0}, "execution_spec.learner_timeout_s")]
    for spec, message in cases:
        with pytest.raises(RLGraphSpecError, match=message.replace("[", r"\[").replace(".", r"\.")):
            ExecutionSpec.from_config({"execution_spec": spec})


def test_several_learners_need_the_distributed_engine(tmp_path):
    from rlgraph.engines.runner import make_engine
    from rlgraph.utils.errors import RLGraphSpecError
    config = json.load(open(_small_appo(tmp_path)))
    with pytest.raises(RLGraphSpecError, match="several learners need --engine distributed"):
        make_engine(config, "local", num_learners=2)


def test_distributed_sync_needs_a_learner_group():
    """The strategy outside a learner process says how to start one (no group is created behind the user's back)."""
    from rlgraph.agents import Agent
    from rlgraph.spaces import FloatBox, IntBox
    from rlgraph.utils.errors import RLGraphSpecError
    config = json.load(open(os.path.join(CONFIGS, "appo_cartpole.json")))
    with pytest.raises(RLGraphSpecError, match="--executor distributed"):
        Agent.from_spec(config, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend="pytorch",
                        device_strategy={"type": "distributed_sync"})


def test_horovod_adapter_all_reduces_like_the_native_group():
    """The optional Horovod adapter, where Horovod imports (with a single process: the mean is the value)."""
    try:
        import horovod.torch  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means the adapter cannot run here.
        pytest.skip(f"horovod does not import here ({type(e).__name__}): its last release (0.28.1) builds "
                    f"against neither PyTorch 2.13 nor TensorFlow 2.21; the native all-reduce "
                    f"(torch.distributed / tf.distribute) is the working path")
    import torch
    from rlgraph.executors.process_group import HorovodProcessGroup
    group = HorovodProcessGroup("pytorch", 0, 1, ["127.0.0.1:1"], 30)
    out = group.all_reduce_mean({"a": torch.ones(3) * 2})
    np.testing.assert_allclose(out["a"].numpy(), [2.0, 2.0, 2.0])


def test_horovod_without_horovod_names_the_working_path():
    try:
        import horovod.torch  # noqa: F401
        pytest.skip("horovod imports here")
    except ImportError:
        pass
    from rlgraph.executors.process_group import init_process_group
    from rlgraph.utils.errors import RLGraphBackendError
    with pytest.raises(RLGraphBackendError, match=r"rlgraph\[horovod\].*all_reduce 'native'"):
        init_process_group("pytorch", 0, 1, ["127.0.0.1:1"], 5, all_reduce="horovod")


def test_learner_addresses_must_leave_learner_0s_control_port_free(tmp_path):
    from rlgraph.engines.runner import make_engine
    from rlgraph.utils.errors import RLGraphSpecError
    config = json.load(open(_small_appo(tmp_path, num_learners=2,
                                        learner_addresses=["127.0.0.1:29700", "127.0.0.1:29701"])))
    with pytest.raises(RLGraphSpecError, match=r"control channel uses its port \+ 1 \(127\.0\.0\.1:29701\)"):
        make_engine(config, "distributed", backend="pytorch")


def test_learners_started_by_hand_at_given_addresses_train_together(tmp_path):
    """The multi-machine form on the loopback address: learner 1 started with --learner-rank 1, learner 0 trains;
    both step the same number of environment steps and learner 1 ends when learner 0 stops it."""
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    config = _small_appo(tmp_path, num_learners=2, learner_addresses=addresses, learner_timeout_s=60)
    with cli_process([config, "--backend", "pytorch", "--executor", "distributed", "--learner-rank", "1"]) as follower:
        proc = run_cli([config, "--backend", "pytorch", "--executor", "distributed", "--steps", "4000",
                        "--logdir", str(tmp_path / "run")], timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err[-3000:]
    assert json.loads(out[out.index("{"):out.rindex("}") + 1])["learner_rank"] == 1
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["learner_env_steps"] == [2000, 2000]
    assert summary["learner_addresses"] == addresses


def test_a_failed_all_reduce_names_a_learner_whose_exit_shows_late():
    """A killed learner's sockets close before the OS reports its exit: the all-reduce error comes first.
    Learner 0 waits a moment for an exit, so that the error names the learner (this raced under load)."""
    import types

    from rlgraph.engines.distributed.distributed_engine import DistributedEngine
    from rlgraph.utils.errors import RLGraphLearnerGroupError
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); raise SystemExit(9)"])
    try:
        engine = types.SimpleNamespace(processes_={1: late}, _tmp=None)
        engine._log_tail = lambda rank, lines=5: "."
        error = DistributedEngine._failure(engine, RLGraphLearnerGroupError("learner 0: the all-reduce failed"))
        assert "learner 1" in str(error) and "died (exit code 9)" in str(error), error
        alone = types.SimpleNamespace(processes_={}, _tmp=None)
        start = time.monotonic()
        general = DistributedEngine._failure(alone, RuntimeError("reset by peer"))
        assert isinstance(general, RLGraphLearnerGroupError) and "reset by peer" in str(general)
        assert time.monotonic() - start < 0.5  # No learners started here: nothing to wait for.
    finally:
        late.kill()
        late.wait()
