"""The learner's process killed with SIGKILL (Ray, central inference, distributed learners): every other process of
the run ends by itself within 30 s (nothing of the run's shared memory stays), and ``--resume`` from the last
checkpoint starts cleanly."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_interrupts import _config, _descendants, _engine_args, _left_behind

from rlgraph.training.checkpoint_store import CheckpointStore

#: Seconds the other processes of a run have to end after its learner was killed.
ORPHAN_LIMIT_S = 30.0


def _shm_segments():
    try:
        return {name for name in os.listdir("/dev/shm") if name.startswith("psm_")}
    except OSError:
        return set()


def _cli(config, engine, logdir, steps, *extra):
    return [sys.executable, "-m", "rlgraph.cli", "train", config, "--backend", "pytorch", "--engine", engine,
            "--steps", str(steps), "--logdir", logdir, "--quiet", "--set", "train_spec.eval_episodes=4"] + \
        _engine_args(engine) + list(extra)


@pytest.mark.parametrize("engine", [pytest.param("ray", marks=pytest.mark.slow), "central",
                                    pytest.param("distributed", marks=pytest.mark.slow)])
def test_killed_learner_leaves_nothing_behind_and_the_run_resumes(tmp_path, engine):
    config, logdir = _config(tmp_path, engine), str(tmp_path / "run")
    env = dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0")
    shm_before = _shm_segments()
    proc = subprocess.Popen(_cli(config, engine, logdir, 10 ** 7), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    seen = {}
    try:
        deadline = time.monotonic() + 150
        # Trains until its first checkpoints are written (all its processes run by then).
        while time.monotonic() < deadline and proc.poll() is None:
            seen.update(_descendants(proc.pid))
            found = CheckpointStore(logdir).latest() if os.path.isdir(os.path.join(logdir, "checkpoints")) else None
            if found is not None and found[1]["state"]["env_steps"] >= 512:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        seen.update(_descendants(proc.pid))
        shm_run = _shm_segments() - shm_before
        assert seen, "the run's other processes did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        left = _left_behind(seen, ORPHAN_LIMIT_S)
        assert not left, {pid: open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:150] for pid in left}
        deadline = time.monotonic() + 10  # (A resource tracker unlinks a dead process's shared memory.)
        while shm_run & _shm_segments() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not shm_run & _shm_segments()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        for pid in seen:  # (Only where the test failed: ends what it recorded.)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    kept = CheckpointStore(logdir).latest()[1]["state"]["env_steps"]
    resumed = subprocess.run(_cli(config, engine, logdir, kept + 1024, "--resume"), capture_output=True, text=True,
                             env=env, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        assert json.load(f)["env_steps"] >= kept + 1024
