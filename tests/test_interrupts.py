"""Ctrl-C at seeded random moments of `rlgraph train` on each engine (and once during the final greedy
evaluation): exit status 130, one line on stderr saying what was kept (no traceback), the last checkpoint intact,
and no process of the run left behind."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from rlgraph.training.checkpoint_store import CheckpointStore

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

#: The one line an interrupted run prints (then what was kept).
LINE = "rlgraph train: Interrupted during "


def _start_time(pid):
    """The start time (clock ticks after boot) of process ``pid``, or None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def _descendants(root):
    """{pid: start time} of every process below ``root`` (from /proc)."""
    from rlgraph.utils.process_watchdog import descendants
    return descendants(root)


def _left_behind(processes, wait_s):
    """The processes of ``processes`` ({pid: start time}) still alive after waiting up to ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = {pid for pid, started in processes.items() if _start_time(pid) == started}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _config(tmp_path, engine):
    """A small APPO CartPole config: quick chunks, a checkpoint every half second, a final evaluation."""
    with open(os.path.join(CONFIGS, "appo_cartpole.json")) as f:
        cfg = json.load(f)
    cfg["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 8}
    cfg["train_spec"] = dict(eval_episodes=1000, chunk_steps=256, checkpoint_every_seconds=0.5)
    cfg["execution_spec"] = {} if engine in ("ray", "central") else {"learner_thread": False}
    path = tmp_path / f"appo-{engine}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _engine_args(engine):
    return {"local": [], "ray": ["--num-actors", "2"], "central": ["--num-actors", "2"],
            "distributed": ["--num-learners", "2"]}[engine]


def interrupt_run(tmp_path, engine, moment, steps, tag, timeout=150):
    """Runs ``rlgraph train`` on ``engine`` and sends SIGINT to its process group (as Ctrl-C in a terminal does)
    ``moment`` seconds after the start, or, with ``moment="final evaluation"``, as soon as the training loop
    wrote its learning curve, its last act (the final evaluation runs then); checks all four promises and returns
    the line."""
    logdir = str(tmp_path / f"run-{tag}")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", _config(tmp_path, engine), "--backend", "pytorch",
           "--engine", engine, "--steps", str(steps), "--logdir", logdir, "--quiet"] + _engine_args(engine)
    env = dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    seen, start = {}, time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - start < timeout:
            seen.update(_descendants(proc.pid))
            if moment == "final evaluation":
                if os.path.exists(os.path.join(logdir, "learning_curve.png")):
                    time.sleep(0.5)  # (The curve is written; the evaluation of 1000 episodes takes seconds.)
                    break
            elif time.monotonic() - start >= moment:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before the interrupt at {moment}: {proc.stderr.read()[-2000:]}"
        seen.update(_descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    ours = [line for line in lines if line.startswith(LINE)]
    assert len(ours) == 1, err[-3000:]
    found = CheckpointStore(logdir).latest() if os.path.isdir(logdir) else None  # Raises if every one is damaged.
    if "is intact" in ours[0]:
        assert found is not None and f"(env step {found[1]['state']['env_steps']:,})" in ours[0], ours[0]
        assert os.path.isfile(os.path.join(found[0], "model", "rlgraph_agent.json"))
    else:
        assert found is None, ours[0]
    assert not _left_behind(seen, 30.0), (ours[0], {p: _cmdline(p) for p in _left_behind(seen, 0)})
    return ours[0]


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")[:200]
    except OSError:
        return None


def _moments(engine, low, high):
    """Two seeded random moments in [low, high] seconds after the start (the run's build and training)."""
    rng = random.Random(f"interrupts-{engine}")
    return sorted(round(rng.uniform(low, high), 2) for _ in range(2))


def _check_engine(tmp_path, engine, low, high, steps):
    """Two runs interrupted at random moments (their budget far away), one in its final evaluation (after
    ``steps``)."""
    lines = [interrupt_run(tmp_path, engine, moment, 10 ** 6, f"{engine}-{i}")
             for i, moment in enumerate(_moments(engine, low, high))]
    final = interrupt_run(tmp_path, engine, "final evaluation", steps, f"{engine}-final")
    assert final.startswith(LINE + "the final evaluation at env step"), final
    assert "is intact; continue with --resume" in final, final
    return lines


def test_ctrl_c_at_any_moment_on_the_local_engine(tmp_path):
    _check_engine(tmp_path, "local", 1.0, 9.0, 3000)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ray", "central", "distributed"])
def test_ctrl_c_at_any_moment_on_the_other_engines(tmp_path, engine):
    _check_engine(tmp_path, engine, 2.0, 20.0, 6000)


def test_second_ctrl_c_during_shutdown_leaves_nothing_behind(tmp_path):
    """Ctrl-C twice in quick succession: the run still stops its processes, writes its checkpoint and says so once."""
    logdir = str(tmp_path / "twice")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", _config(tmp_path, "central"), "--backend", "pytorch",
           "--engine", "central", "--num-actors", "2", "--steps", "100000", "--logdir", logdir, "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"), start_new_session=True)
    seen = {}
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(logdir, "checkpoint")) and time.monotonic() < deadline:
            seen.update(_descendants(proc.pid))
            time.sleep(0.05)
        seen.update(_descendants(proc.pid))
        assert len(seen) >= 2, "the actors did not start"
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert sum(line.startswith(LINE) for line in err.splitlines()) == 1, err[-3000:]
    assert CheckpointStore(logdir).latest() is not None
    assert not _left_behind(seen, 30.0)


def test_ctrl_c_during_a_checkpoint_write_keeps_the_previous_checkpoint(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=3)

    def write(path, value):
        os.makedirs(path)
        with open(os.path.join(path, "rlgraph_agent.json"), "w") as f:
            json.dump({"value": value}, f)

    first = store.save(lambda path: write(path, 1), {"state": {"env_steps": 100}})

    def interrupted(path):
        write(path, 2)
        raise KeyboardInterrupt  # (Ctrl-C half-way through the model.)

    with pytest.raises(KeyboardInterrupt):
        store.save(interrupted, {"state": {"env_steps": 200}})
    path, state = store.latest()
    assert path == first and state["state"]["env_steps"] == 100
    with open(os.path.join(path, "model", "rlgraph_agent.json")) as f:
        assert json.load(f) == {"value": 1}
    assert not [name for name in os.listdir(os.path.join(str(tmp_path), "checkpoints")) if name.startswith(".tmp")]


def test_interrupts_deferred_holds_ctrl_c_until_the_block_ends():
    from rlgraph.utils.process_watchdog import interrupts_deferred
    # Python's own handler, whatever an earlier test of this worker process left installed.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        finished = []
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                finished.append(True)
        assert finished == [True]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_the_command_line_gives_back_the_callers_ctrl_c_handler(tmp_path):
    """``rlgraph.cli.main`` called from a Python program leaves its SIGINT handler as it found it."""
    from rlgraph.cli import main as cli_main
    before = signal.getsignal(signal.SIGINT)
    assert cli_main(["train", str(tmp_path / "missing.json"), "--steps", "10"]) == 2
    assert signal.getsignal(signal.SIGINT) is before
