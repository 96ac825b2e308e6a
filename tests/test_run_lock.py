"""One writer per run directory: a run holds the lock of its logdir (``LOGDIR/.lock``) while it writes there; a
second ``rlgraph train`` into it (``--resume`` or ``--overwrite``) is refused in one line naming the directory and
the pid that holds it. The lock ends with its process however it ends (SIGKILL too), and forked children do not
keep it."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rlgraph.training import run_lock
from rlgraph.training.run_lock import LOCK_FILE, RunDirectoryInUse
from rlgraph.utils.backend import backend_available

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
ENV = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
TIMEOUT = 120

#: Holds a logdir's lock from another process: prints "held" once it has it, then sleeps (forking a child first
#: that outlives it, with "fork").
HOLDER = r"""
import os, sys, time
from rlgraph.training import run_lock
lock = run_lock.acquire(sys.argv[1])  # (Held while referenced.)
if sys.argv[2] == "fork":
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    print("held", flush=True)
    os._exit(0)  # The parent ends at once (no release: only the OS lets the lock go); its child lives on.
print("held", flush=True)
time.sleep(60)
"""


def _hold(logdir, mode="sleep"):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, logdir, mode], stdout=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _stop(proc):
    """Kills the holder's process group (its forked child too, which outlives it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate(timeout=30)


def test_a_lock_held_elsewhere_is_refused_and_ends_with_its_process(tmp_path):
    logdir = str(tmp_path / "run")
    os.mkdir(logdir)
    holder = _hold(logdir)
    try:
        with pytest.raises(RunDirectoryInUse) as refused:
            run_lock.acquire(logdir)
        assert refused.value.pid == holder.pid
        message = str(refused.value)
        assert f"logdir '{logdir}' is in use: the run of pid {holder.pid}" in message and "\n" not in message
        holder.send_signal(signal.SIGKILL)  # No release: the OS ends the lock with the process.
        holder.wait(timeout=30)
        lock = run_lock.acquire(logdir)  # Not stale: free at once.
        with open(os.path.join(logdir, LOCK_FILE)) as f:
            assert f.read().strip() == str(os.getpid())
        again = run_lock.acquire(logdir)  # (Shared within a process: the runner and its trainer.)
        lock.release()
        assert os.path.exists(os.path.join(logdir, LOCK_FILE))
        again.release()
        again.release()  # (Idempotent.)
        assert os.listdir(logdir) == []  # The last holder leaves no file behind.
    finally:
        _stop(holder)


def test_forked_children_do_not_keep_the_lock(tmp_path):
    logdir = str(tmp_path / "run")
    os.mkdir(logdir)
    holder = _hold(logdir, "fork")
    try:
        holder.wait(timeout=30)  # The parent is gone; its forked child sleeps on.
        run_lock.acquire(logdir).release()
    finally:
        _stop(holder)  # (Its process group: the child too.)


def _config(tmp_path):
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    config["train_spec"] = dict(chunk_steps=256, eval_episodes=0, stop_at_target=False, checkpoint_every_seconds=0.5)
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 8}
    config["network_spec"] = [{"type": "dense", "units": 16, "activation": "relu"}]
    config["memory_spec"]["capacity"] = 4000
    path = tmp_path / "dqn.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")
def test_a_second_writer_of_a_running_run_is_refused_in_one_line(tmp_path):
    """Two real ``rlgraph train`` processes: while the first trains (after its first checkpoint), a second
    ``--resume`` (or ``--overwrite``) into its logdir is refused, naming the directory and the first's pid, and
    the first goes on undisturbed."""
    logdir = str(tmp_path / "run")
    config = _config(tmp_path)
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", config, "--backend", "pytorch", "--steps", str(10 ** 7),
           "--logdir", logdir, "--quiet"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(os.path.join(logdir, "checkpoint")):
            assert first.poll() is None, first.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the first run wrote no checkpoint"
            time.sleep(0.05)
        for flag in ("--resume", "--overwrite"):
            second = subprocess.run(cmd + [flag], capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
            lines = [line for line in second.stderr.splitlines() if line.strip()]
            assert second.returncode == 2 and len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
            assert lines[0] == (f"rlgraph train: error: logdir '{logdir}' is in use: the run of pid {first.pid} "
                                f"writes into it (one run per run directory); wait for it to end or stop it "
                                f"(kill {first.pid}), or choose another --logdir."), lines[0]
        assert first.poll() is None  # Undisturbed.
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=TIMEOUT)
        assert first.returncode == 143 and "Traceback" not in err, err[-3000:]
        assert not os.path.exists(os.path.join(logdir, LOCK_FILE))  # Released as it ended.
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate()
