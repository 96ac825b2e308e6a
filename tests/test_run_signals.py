"""SIGTERM and SIGHUP stop `rlgraph train` as Ctrl-C (SIGINT) does: a checkpoint, the summary, one line on stderr,
exit status 128 + the signal's number. The checkpoint written then is of one moment (the trainer's counters are
those of the model and replay it holds), so a run stopped by a signal and resumed ends with the very weights of an
uninterrupted run of the same length; also for two Ctrl-C in quick succession, and for a Python program that
calls ``rlgraph.engines.runner.train`` itself."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rlgraph.training import stop_signals
from rlgraph.training.checkpoint_store import CheckpointStore
from rlgraph.utils.backend import backend_available
from rlgraph.utils.run_state import load_run_state

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
ENV = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
#: Seconds a run of these tests may take (start-up included) before it counts as hung.
TIMEOUT = 120
#: The budget of the runs compared (a multiple of CHUNK, several chunks).
STEPS = 6000
CHUNK = 256

needs_tf = pytest.mark.skipif(not backend_available("tf"), reason="needs TensorFlow")


def _config(tmp_path):
    """A small DQN on CartPole: 256-step chunks (a stop signal lands inside one), no evaluations, no periodic
    checkpoint (the only one of an interrupted run is the one its signal made)."""
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    config["train_spec"] = dict(chunk_steps=CHUNK, eval_episodes=0, stop_at_target=False,
                                checkpoint_every_seconds=3600)
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 8}
    config["network_spec"] = [{"type": "dense", "units": 16, "activation": "relu"}]
    config["memory_spec"]["capacity"] = 4000
    config["update_spec"] = dict(batch_size=16, update_interval=16, steps_before_update=500, sync_interval=500)
    path = tmp_path / "dqn.json"
    path.write_text(json.dumps(config))
    return str(path)


def _default_signals():
    """(In the child, before exec.) The stop signals at their defaults, whatever the test runner inherited
    (``nohup`` ignores SIGHUP)."""
    for signum in stop_signals.STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def _train_cmd(config, logdir, steps, *extra):
    return [sys.executable, "-m", "rlgraph.cli", "train", config, "--backend", "tf", "--seed", "0", "--steps",
            str(steps), "--logdir", logdir, "--quiet", *extra]


def _run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=ENV, preexec_fn=_default_signals)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def signal_run(cmd, logdir, signals, seed, gap=0.3):
    """Starts ``cmd`` (an ``rlgraph train``), waits until it trains (its first chunk wrote ``graph.txt``), waits a
    seeded random fraction of a second more, then sends ``signals`` to the run's process only (as ``kill`` does),
    ``gap`` seconds apart. Returns ``(returncode, stdout, stderr)``; the process is killed if it outlives the
    test."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_default_signals, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(os.path.join(logdir, "graph.txt")):
            assert proc.poll() is None, f"the run ended before it trained: {proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "the run did not start training"
            time.sleep(0.02)
        time.sleep(random.Random(seed).uniform(0.05, 0.6))
        assert proc.poll() is None, "the run ended before the signal"
        for i, signum in enumerate(signals):
            if i:
                time.sleep(gap)
            os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, out, err


def check_one_moment(logdir):
    """The run's current checkpoint is of one moment: the trainer's counters are the model's and replay's own.
    Returns its trainer state."""
    path, state = CheckpointStore(logdir).latest()
    counters = state["state"]
    agent = load_run_state(os.path.join(path, "model"))["agent"]
    assert counters["env_steps"] == agent["learner"]["timesteps"] == agent["actor"]["timesteps"], \
        (counters["env_steps"], agent["learner"]["timesteps"], agent["actor"]["timesteps"])
    assert counters["updates"] == agent["learner"]["updates"], (counters["updates"], agent["learner"]["updates"])
    return counters


def _weights(logdir):
    with np.load(os.path.join(logdir, "checkpoint", "model", "variables.npz"), allow_pickle=False) as stored:
        return {k: stored[k] for k in stored.files}


def _our_lines(err):
    return [line for line in err.splitlines() if line.startswith("rlgraph train: Interrupted")]


# --------------------------------------------------------------------------------------------- the command line


@needs_tf
@pytest.mark.parametrize("name, status", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_stop_a_run_as_ctrl_c_does(tmp_path, name, status):
    logdir = str(tmp_path / "run")
    code, out, err = signal_run(_train_cmd(_config(tmp_path), logdir, 10 ** 6), logdir, [getattr(signal, name)],
                                seed=name)
    assert code == status, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = _our_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"rlgraph train: Interrupted by {name} during training at env "
                                                   f"step "), err[-3000:]
    counters = check_one_moment(logdir)
    assert 0 < counters["env_steps"] < 10 ** 6 and counters["env_steps"] % CHUNK == 0, counters["env_steps"]
    assert f"(env step {counters['env_steps']:,}) in {logdir} is intact; continue with --resume" in lines[0]
    summary = json.loads(out)  # The summary on stdout, as after Ctrl-C ...
    assert summary["interrupted"] and summary["interrupted_by"] == name
    assert summary["env_steps"] == counters["env_steps"]
    with open(os.path.join(logdir, "summary.json")) as f:  # ... and beside the run.
        assert json.load(f)["interrupted_by"] == name


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
    """An uninterrupted run of STEPS steps (the reference of the resumed ones)."""
    tmp_path = tmp_path_factory.mktemp("straight")
    logdir = str(tmp_path / "straight")
    _run(_train_cmd(_config(tmp_path), logdir, STEPS))
    return logdir


@needs_tf
@pytest.mark.parametrize("signals", [("SIGTERM",), ("SIGINT", "SIGINT")], ids=["sigterm", "two-ctrl-c"])
def test_a_run_stopped_by_a_signal_resumes_exactly(tmp_path, straight_run, signals):
    """Stopped at a random moment inside a chunk, then resumed to STEPS steps: the same updates, episodes and
    weights as the uninterrupted run."""
    logdir = str(tmp_path / "stopped")
    config = _config(tmp_path)
    code, _, err = signal_run(_train_cmd(config, logdir, STEPS), logdir, [getattr(signal, s) for s in signals],
                              seed="-".join(signals))
    assert code == stop_signals.exit_status(getattr(signal, signals[0])), err[-3000:]
    assert len(_our_lines(err)) == 1 and "Traceback" not in err, err[-3000:]
    # A second signal changes nothing; it is said at most once (not at all where the run had already stopped).
    assert sum("rlgraph train: still stopping" in line for line in err.splitlines()) <= len(signals) - 1, err[-3000:]
    stopped_at = check_one_moment(logdir)["env_steps"]
    assert 0 < stopped_at < STEPS, stopped_at
    _run(_train_cmd(config, logdir, STEPS, "--resume"))
    summaries = [json.load(open(os.path.join(d, "summary.json"))) for d in (straight_run, logdir)]
    for key in ("env_steps", "updates", "episodes"):
        assert summaries[0][key] == summaries[1][key], (key, summaries[0][key], summaries[1][key])
    a, b = _weights(straight_run), _weights(logdir)
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@needs_tf
def test_a_signal_before_the_run_trains_writes_nothing(tmp_path):
    """SIGTERM while the run is still being built (its imports): one line, exit status 143, no logdir left."""
    logdir = str(tmp_path / "early")
    proc = subprocess.Popen(_train_cmd(_config(tmp_path), logdir, 10 ** 6), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=_default_signals,
                            start_new_session=True)
    try:
        time.sleep(1.0)
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 143 and "Traceback" not in err, err[-3000:]
    lines = _our_lines(err)
    assert len(lines) == 1 and lines[0].startswith("rlgraph train: Interrupted by SIGTERM "), err[-3000:]
    assert not CheckpointStore(logdir).exists()


# -------------------------------------------------------------------------------------------- the Python API

#: A Python program training through ``rlgraph.engines.runner.train`` (with ``handling_stop_signals`` around it
#: where its first argument says so); prints the summary it gets back.
PROGRAM = r"""
import contextlib, json, sys
from rlgraph.engines.runner import train
from rlgraph.training.stop_signals import handling_stop_signals
around = handling_stop_signals() if sys.argv[1] == "handled" else contextlib.nullcontext()
with around:
    summary = train(sys.argv[2], backend="tf", steps=10 ** 6, logdir=sys.argv[3], progress=False)
print(json.dumps({k: summary.get(k) for k in ("interrupted", "interrupted_by", "env_steps")}))
"""


@needs_tf
@pytest.mark.parametrize("around, name", [("plain", "SIGINT"), ("handled", "SIGTERM")])
def test_a_python_program_gets_a_checkpoint_of_one_moment(tmp_path, around, name):
    """A program's Ctrl-C (Python's default handler) stops ``train`` at the end of the chunk it landed in; with
    ``handling_stop_signals`` SIGTERM does too. ``train`` returns the summary."""
    logdir = str(tmp_path / "api")
    cmd = [sys.executable, "-c", PROGRAM, around, _config(tmp_path), logdir]
    code, out, err = signal_run(cmd, logdir, [getattr(signal, name)], seed=name)
    assert code == 0 and "Traceback" not in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"] and summary["interrupted_by"] == name
    assert summary["env_steps"] == check_one_moment(logdir)["env_steps"] > 0


def test_the_rule_of_stop_signals_in_one_process():
    """Outside a safe-point region a stop signal raises at once; inside it waits for the code's check; an
    evaluation inside is interrupted at once; the handlers found are restored; an ignored SIGHUP stays ignored."""
    before = {s: signal.getsignal(s) for s in stop_signals.STOP_SIGNALS}
    hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals.handling_stop_signals():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # (nohup's choice kept.)
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
            assert stop_signals.received() == signal.SIGTERM and stop_signals.requested() is None
        with stop_signals.handling_stop_signals():
            assert stop_signals.received() is None  # (A new run starts afresh.)
            with stop_signals.safe_points(lambda: "the test"):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                assert stop_signals.requested() == signal.SIGTERM  # Recorded, nothing raised.
                os.kill(os.getpid(), signal.SIGTERM)  # A repeat right away: ignored.
                time.sleep(0.05)
                assert stop_signals.take() == (signal.SIGTERM, "the test")
                assert stop_signals.requested() is None and not stop_signals.forced()
            stop_signals.new_run()  # A program's next run: the answered signal is forgotten ...
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)  # ... so this one stops it (not ignored as a repeat).
                time.sleep(1)
        with stop_signals.handling_stop_signals():
            with stop_signals.safe_points():
                with pytest.raises(KeyboardInterrupt):
                    with stop_signals.interruptible():  # (An evaluation.)
                        os.kill(os.getpid(), signal.SIGINT)
                        time.sleep(1)
            # (Answered by the interruption: the region's end raises nothing more.)
        with stop_signals.handling_stop_signals():
            with pytest.raises(KeyboardInterrupt):
                with stop_signals.safe_points():  # A signal nobody answered: raised at the region's end.
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)
        assert {s: signal.getsignal(s) for s in stop_signals.STOP_SIGNALS if s != signal.SIGHUP} == \
            {s: h for s, h in before.items() if s != signal.SIGHUP}
    finally:
        signal.signal(signal.SIGHUP, hup)
    assert [stop_signals.exit_status(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, None)] == \
        [130, 143, 129, 130]


#: A trainer over an engine whose chunks take ``argv[3]`` seconds each (it prints "chunk" as each starts), in
#: ``handling_stop_signals`` with ``FORCE_AFTER_SECONDS`` = ``argv[2]``; its checkpoints hold the engine's own step
#: count. With ``argv[4]`` "fail", a chunk during which a stop signal came fails (as an engine whose actor
#: processes got the signal too). Prints the summary.
SLOW_PROGRAM = r"""
import json, logging, os, sys, time
from rlgraph.training import Trainer, stop_signals
logging.basicConfig(level=logging.WARNING)
stop_signals.FORCE_AFTER_SECONDS = float(sys.argv[2])

class SlowEngine:
    agent = None
    steps = 0
    def run(self, n):
        print("chunk", flush=True)
        time.sleep(float(sys.argv[3]))
        if sys.argv[4] == "fail" and stop_signals.requested():
            raise RuntimeError("an actor process died of the signal")
        self.steps += n
        return dict(env_steps=n, episodes=[], results=[])
    def store(self, path):
        os.makedirs(path)
        with open(os.path.join(path, "engine.json"), "w") as f:
            json.dump({"steps": self.steps}, f)
    def load(self, path):
        pass

with stop_signals.handling_stop_signals():
    summary = Trainer(SlowEngine(), sys.argv[1], max_steps=10 ** 6, chunk_steps=100, progress=False,
                      checkpoint_every_seconds=3600).train()
print(json.dumps(summary))
"""


@pytest.mark.parametrize("force, fail", [(False, False), (True, False), (False, True)],
                         ids=["waits-for-the-chunk", "forced-by-a-late-repeat", "the-chunk-fails"])
def test_a_slow_chunk_is_finished_unless_a_late_repeat_forces_the_stop(tmp_path, force, fail):
    """A signal inside a chunk waits for its end (the checkpoint then holds the engine's state of that moment);
    a repeat right away changes nothing, one FORCE_AFTER_SECONDS later stops the run at once, without a
    checkpoint of the half-done chunk. A chunk that fails after the signal ends the run as stopped (not failed),
    without a checkpoint of it."""
    logdir = str(tmp_path / "slow")
    chunk_seconds = 60 if force else 1.5
    proc = subprocess.Popen([sys.executable, "-c", SLOW_PROGRAM, logdir, "1.0", str(chunk_seconds),
                             "fail" if fail else "finish"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_default_signals, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "chunk"  # Inside the first chunk now.
        start = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)  # Right away: ignored.
        if force:
            time.sleep(1.2)
            os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"] and summary["interrupted_by"] == "SIGTERM"
    if force or fail:
        assert took < 10, took  # Not the chunk's 60 s.
        assert ("again: stopping at once, without a new checkpoint" if force else
                "After SIGTERM, the chunk of training in progress failed (RuntimeError: an actor process died of "
                "the signal)") in err, err
        assert not CheckpointStore(logdir).exists()  # Nothing of the half-done chunk.
        assert summary["env_steps"] == 0  # Whole chunks only.
    else:
        assert took >= 1.0, took  # The chunk ran to its end (1.5 s) ...
        path, state = CheckpointStore(logdir).latest()
        with open(os.path.join(path, "model", "engine.json")) as f:
            assert json.load(f)["steps"] == state["state"]["env_steps"] == summary["env_steps"] == 100  # ... of now.
    assert err.count("still stopping") == 1, err
