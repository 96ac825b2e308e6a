"""The parts of ``benchmarks/chaos.py`` and ``benchmarks/soak.py`` that decide and measure, on small dummy
processes (no training run): the seeded fault plan, the injector's signals to the right processes, the
sampler's memory / descriptor / thread figures against what the processes hold, the rates and returns read back
from TensorBoard events, and the clean-up of processes left behind."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

import chaos  # noqa: E402
import soak  # noqa: E402

from rlgraph.utils.errors import RLGraphSpecError  # noqa: E402
from rlgraph.utils.process_watchdog import pid_alive  # noqa: E402

#: A process that looks like a central inference actor (its command line names it) and sleeps.
ACTOR = "import time; name = 'rlgraph-env-actor'; time.sleep(60)"
#: A "learner" that starts two such actors and waits for them; SIGINT ends it with exit status 130.
ROOT = ("import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *a: sys.exit(130))\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', {ACTOR!r}]) for _ in range(2)]\n"
        "time.sleep(60)\n")


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_plan_is_seeded_spaced_and_ends_with_the_engines_last_fault():
    for engine, (kinds, final) in chaos.FAULTS.items():
        plan = chaos.make_plan(engine, 600.0, seed=3)
        assert plan == chaos.make_plan(engine, 600.0, seed=3)
        assert plan[-1] == dict(t=510.0, kind=final, hang_s=None)
        times = [0.0] + [f["t"] for f in plan[:-1]]
        gaps = np.diff(times)
        assert len(gaps) >= 12 and np.all(gaps >= 20.0) and np.all(gaps <= 40.0)
        assert {f["kind"] for f in plan[:-1]} <= set(kinds)
        # Every kind comes in each round of len(kinds) faults, even in a 3-minute run.
        short = [f["kind"] for f in chaos.make_plan(engine, 180.0, seed=3)[:-1]]
        assert len(short) >= len(kinds) and sorted(short[:len(kinds)]) == sorted(kinds)
        for fault in plan[:-1]:
            assert (fault["hang_s"] is not None) == fault["kind"].startswith("hang")
            if fault["hang_s"] is not None:
                assert 3.0 <= fault["hang_s"] <= 8.0
    assert chaos.make_plan("ray", 600.0, seed=3) != chaos.make_plan("ray", 600.0, seed=4)
    assert "kill-shard" in {f["kind"] for f in chaos.make_plan("ray-apex", 120.0, seed=0)}
    # A distributed group documents that it does not survive a dead learner: never killed before the end.
    assert [f["kind"] for f in chaos.make_plan("distributed", 600.0, 0)].count("kill-learner") == 1


def test_plan_refuses_an_unknown_engine_and_an_empty_budget():
    with pytest.raises(RLGraphSpecError, match="unknown engine 'rey'"):
        chaos.make_plan("rey", 60.0, 0)
    with pytest.raises(RLGraphSpecError, match="positive seconds"):
        chaos.make_plan("ray", 0.0, 0)


def test_injector_stops_continues_kills_and_interrupts_the_right_processes():
    root = subprocess.Popen([sys.executable, "-c", ROOT], start_new_session=True)
    try:
        assert _wait_for(lambda: len([p for p in soak.descendants(root.pid)
                                      if soak.role_of(soak.cmdline(p)) == "actor"]) == 2)
        actors = sorted(soak.descendants(root.pid))
        plan = [dict(t=0.0, kind="hang-actor", hang_s=0.5), dict(t=0.1, kind="kill-actor", hang_s=None),
                dict(t=0.2, kind="kill-shard", hang_s=None), dict(t=5.0, kind="interrupt", hang_s=None)]
        injector = chaos.Injector(plan, root.pid, seed=0)
        hung = injector.step(0.0)["pid"]
        assert hung in actors and _wait_for(lambda: _state(hung) == "T")
        killed = injector.step(0.1)["pid"]
        assert killed in actors and killed != hung and _wait_for(lambda: not pid_alive(killed))
        missing = injector.step(0.2)
        assert missing["pid"] is None and missing["note"] == "no replay-shard running"
        injector.step(0.3)
        assert _state(hung) == "T"  # (Still within its 0.5 s.)
        injector.step(0.6)
        assert _wait_for(lambda: _state(hung) in ("S", "R"))
        assert injector.pending()
        assert injector.step(5.0)["kind"] == "interrupt"
        assert root.wait(10) == 130
        assert [f["kind"] for f in injector.done] == ["hang-actor", "kill-actor", "kill-shard", "interrupt"]
        assert not injector.pending()
    finally:
        seen = soak.descendants(root.pid)
        soak.stop_group(root)
    left = soak.end_left_behind(seen, wait_s=0.5)  # The actors outlive the dummy root: named and killed.
    assert set(left) <= set(seen) and all("rlgraph-env-actor" in line for line in left.values())
    assert not soak.alive_of(seen)


def test_sampler_reads_memory_descriptors_and_threads_of_a_process_tree(tmp_path):
    code = ("import threading, time, subprocess, sys\n"
            "block = bytearray(64 * 2 ** 20)\n"
            "block[::4096] = b'x' * len(block[::4096])\n"
            f"files = [open({str(tmp_path)!r} + f'/f{{i}}', 'w') for i in range(20)]\n"
            "for _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            f"kid = subprocess.Popen([sys.executable, '-c', {ACTOR!r}])\n"
            # (Popen returns once exec has begun; the kernel sets the new command line a moment later.)
            "for _ in range(1000):  # (At most 10 s; the test's assertions say what is missing after that.)\n"
            "    if b'rlgraph-env-actor' in open(f'/proc/{kid.pid}/cmdline', 'rb').read(): break\n"
            "    time.sleep(0.01)\n"
            "print('ready', flush=True); time.sleep(60)\n")
    root = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert root.stdout.readline().strip() == "ready"
        sampler = soak.Sampler(root.pid)
        rows, run = sampler.sample()
        by_role = {row["role"]: row for row in rows}
        assert set(by_role) == {"learner", "actor"} and run["processes"] == 2
        learner = by_role["learner"]
        assert learner["pid"] == root.pid
        assert 64 <= learner["rss_mb"] < 200
        assert learner["fds"] >= 20 + 3 and learner["threads"] == 4
        assert by_role["actor"]["threads"] == 1 and by_role["actor"]["rss_mb"] < learner["rss_mb"]
        with open(f"/proc/{root.pid}/status") as f:
            vm_rss = [int(line.split()[1]) for line in f if line.startswith("VmRSS")][0] / 1024
        assert abs(learner["rss_mb"] - vm_rss) < 8
    finally:
        seen = soak.descendants(root.pid)
        soak.stop_group(root)
        root.stdout.close()
    soak.end_left_behind(seen, wait_s=0.0)


def test_roles_from_command_lines():
    assert soak.role_of("ray::RaySampler.sample") == "actor"
    assert soak.role_of("ray::ReplayShard") == "replay-shard"
    assert soak.role_of("ray::IDLE") == "ray:IDLE"
    assert soak.role_of("/venv/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=x") == \
        "ray:gcs_server"
    assert soak.role_of("/usr/bin/python -m rlgraph.engines.distributed.learner_process c.json --rank 1") == \
        "learner-rank"
    assert soak.role_of("python -c import sys; sys.argv[0] = 'rlgraph-env-actor'; ...") == "actor"
    assert soak.gcs_address([os.getpid()]) is None


def test_slope_growth_and_rates_against_closed_forms(tmp_path):
    ts = np.arange(0, 3600, 60.0)
    assert soak.slope_per_hour(ts, 100.0 + 0.01 * ts) == pytest.approx(36.0)
    rows = [dict(t=t, pid=7, role="learner", rss_mb=100.0 + (0.0 if t < 600 else 0.01 * (t - 600)), fds=5,
                 threads=2) for t in ts]
    row, = soak.summarize(rows, warmup_s=600.0)
    assert row["rss_first"] == 100.0 and row["rss_max"] == row["rss_last"] == pytest.approx(129.4)
    assert row["mb_per_hour"] == pytest.approx(36.0)
    assert row["growth_after_warmup_pct"] == pytest.approx(29.4, abs=0.05)
    from tensorboardX import SummaryWriter
    writer = SummaryWriter(str(tmp_path))
    for i in range(11):  # 1000 env steps a second; the mean return climbs from 10 to 110.
        writer.add_scalar("episode/mean_return_100", 10.0 + 10 * i, 1000 * i, walltime=1000.0 + i)
    writer.close()
    points, = chaos.session_points(str(tmp_path))
    assert chaos.rate(points) == pytest.approx(1000.0)
    assert chaos.rate(points, end_wall=1004.5) == pytest.approx(1000.0)
    assert chaos.last_return(points, end_wall=1004.5) == 50.0 and chaos.last_return(points) == 110.0
    assert chaos.rate(points[:1]) is None
    assert soak.run_progress(str(tmp_path)) == (1010.0, 10000)


def test_a_runs_last_message_is_its_own_line_not_a_log_tail():
    err = ("WARNING x: actor 0 died; replacing it (restart 1).\n"
           "rlgraph train: error: learner 1 (pid 7) died (exit code -9); ... its log ends:\n"
           "  learner 1 2026-11-27 INFO Joined the learner group: learner 1 of 2.\n")
    assert chaos._last_line(err).startswith("rlgraph train: error: learner 1 (pid 7) died")
    assert chaos._last_line("a\nb\n\n") == "b" and chaos._last_line("") == ""
