"""Soak figures: one long CartPole run per engine, sampling the memory, file descriptors and threads of every
process of the run.

Each run is ``rlgraph train`` (APPO on CartPole, ``train_spec.stop_at_target`` off, so it trains for its whole
budget) in a fresh process group. Every ``--interval`` seconds the sampler reads, for the learner process and
every process below it (Ray's GCS, raylet and workers, central inference's actor processes, distributed learners),
its resident memory (RSS), open file descriptors and threads (psutil where installed, else ``/proc``); for the Ray
engine also the object store's bytes in use (asked from the run's raylet); and the run's env steps per second
(from its TensorBoard events). It writes one CSV row per process and sample, and prints per process the
first / middle / last RSS, the maximum, the slope in MB per hour (least squares) and the growth after the
warm-up (the first 10 minutes, or the first fifth of a shorter run).

Everything the run started is ended afterwards: processes still alive 30 s after the run ended are named in the
table ("left behind") and killed.

Run: .venv/bin/python benchmarks/soak.py [--engines local ray central distributed] [--minutes 60]
     [--interval 60] [--out soak.csv]
"""
import argparse
import csv
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from rlgraph.utils.process_watchdog import descendants  # noqa: E402

#: Engines a benchmark can run: config file, ``rlgraph train`` flags, config changes (execution_spec).
ENGINES = {
    "local": ("appo_cartpole", [], {"learner_thread": True}),
    "ray": ("appo_cartpole", ["--engine", "ray", "--num-actors", "2"], {}),
    "ray-apex": ("apex_cartpole", ["--engine", "ray", "--num-actors", "2"], {"num_replay_shards": 2}),
    "central": ("appo_cartpole", ["--engine", "central", "--num-actors", "2", "--transport", "shm"], {}),
    "central-grpc": ("appo_cartpole", ["--engine", "central", "--num-actors", "2", "--transport", "grpc"], {}),
    "distributed": ("appo_cartpole", ["--engine", "distributed", "--num-learners", "2"], {"learner_thread": False}),
}
ENGINES["central-shm"] = ENGINES["central"]

#: Seconds the processes of a run get to end by themselves after its learner ended.
LEFT_BEHIND_WAIT_S = 30.0

#: Environments of every run (split over actors or learners), and the chunk between two recorded points.
NUM_ENVS, CHUNK_STEPS = {"appo_cartpole": 64, "apex_cartpole": 64}, {"appo_cartpole": 4096, "apex_cartpole": 2000}


# --- the runs -------------------------------------------------------------------------------------------------
def write_config(engine, directory, eval_episodes=4, checkpoint_every_seconds=60.0, execution=None):
    """Writes ``engine``'s config for a long run (no stop at the target, no periodic evaluation) into
    ``directory`` and returns its path."""
    name, _, engine_execution = ENGINES[engine]
    with open(os.path.join(ROOT, "configs", f"{name}.json")) as f:
        config = json.load(f)
    config["environment_spec"] = dict(config["environment_spec"], num_envs=NUM_ENVS[name])
    config["train_spec"] = dict(config.get("train_spec", {}), stop_at_target=False, eval_every_steps=None,
                                eval_episodes=eval_episodes, chunk_steps=CHUNK_STEPS[name],
                                checkpoint_every_seconds=checkpoint_every_seconds)
    config["execution_spec"] = dict(config.get("execution_spec", {}), **engine_execution, **(execution or {}))
    if engine not in ("local", "distributed"):
        config["execution_spec"].pop("learner_thread", None)
    path = os.path.join(directory, f"{engine}.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def train_command(engine, config_path, logdir, seconds, seed=0, backend="pytorch", extra=()):
    """The ``rlgraph train`` command line of a run of ``engine`` for ``seconds`` of training."""
    return [sys.executable, "-m", "rlgraph.cli", "train", config_path, "--backend", backend, "--seconds",
            str(seconds), "--logdir", logdir, "--seed", str(seed), "--quiet"] + ENGINES[engine][1] + list(extra)


def run_env():
    """The environment of a benchmark run: one math thread per process, no Ray usage reports."""
    return dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=ROOT)


def start_run(cmd, stderr_path):
    """Starts ``cmd`` in its own process group (signals reach the whole run, as Ctrl-C in a terminal does)."""
    err = open(stderr_path, "w")
    try:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=run_env(), cwd=ROOT,
                                start_new_session=True)
    finally:
        err.close()


def alive_of(processes):
    """The pids of ``processes`` ({pid: start time}) that still run the same process (no zombie, no reuse)."""
    from rlgraph.utils.process_watchdog import _start_time
    return {pid for pid, started in processes.items() if _start_time(pid) == started}


def end_left_behind(processes, wait_s=LEFT_BEHIND_WAIT_S):
    """Waits up to ``wait_s`` for ``processes`` ({pid: start time}) to end by themselves; returns
    ``{pid: cmdline}`` of those that did not, after killing them (SIGCONT first, for a stopped one)."""
    deadline = time.monotonic() + wait_s
    while alive_of(processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {pid: cmdline(pid)[:160] for pid in alive_of(processes)}
    for pid in left:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return left


def stop_group(proc):
    """Ends process group ``proc`` (a run) if it still runs."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


# --- what a process is and what it holds -----------------------------------------------------------------------
def cmdline(pid):
    """Process ``pid``'s command line ("" if gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def role_of(line):
    """A short name of what a process of a run is, from its command line: "actor" (a Ray sampler or a central
    inference actor process), "replay-shard", "learner-rank" (a distributed learner of rank > 0), "reaper",
    "ray:<name>" for Ray's own processes, else the program's name."""
    if line.startswith("ray::"):
        name = re.split(r"[.\s]", line[5:], maxsplit=1)[0]
        return {"RaySampler": "actor", "ReplayShard": "replay-shard"}.get(name, f"ray:{name}")
    if "rlgraph-env-actor" in line:
        return "actor"
    if "learner_process" in line:
        return "learner-rank"
    if "reaper_main" in line:
        return "reaper"
    if "resource_tracker" in line:
        return "resource-tracker"
    words = line.split()
    if not words:
        return "?"
    program = os.path.basename(words[0])
    if program in ("gcs_server", "raylet"):
        return f"ray:{program}"
    for word in words[1:]:
        if word.endswith(".py"):
            return f"ray:{os.path.basename(word)[:-3]}" if "/ray/" in word else os.path.basename(word)
        if word.startswith("ray.") or word.startswith("ray/"):
            return f"ray:{word.rsplit('.', 1)[-1]}"
    return program


def process_stats(pid):
    """``dict(rss_mb, fds, threads)`` of process ``pid`` (psutil where installed, else /proc), or None when it
    is gone."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                return dict(rss_mb=p.memory_info().rss / 2 ** 20, fds=p.num_fds(), threads=p.num_threads())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        return None
    if fields.get("State", "").strip().startswith("Z") or "VmRSS" not in fields:
        return None  # (Ending: its memory is being released.)
    return dict(rss_mb=int(fields["VmRSS"].split()[0]) / 1024.0, fds=fds, threads=int(fields["Threads"]))


def gcs_address(processes):
    """``host:port`` of the Ray GCS of the processes ``processes`` (pids), from the ``--gcs-address`` that Ray's
    own processes (raylet, monitor, workers) are started with; None if none of them has it yet."""
    for pid in processes:
        found = re.search(r"--gcs[-_]address[= ]([\w.:\[\]-]+)", cmdline(pid))
        if found and not found.group(1).endswith(":0"):
            return found.group(1)
    return None


class ObjectStore:
    """Bytes in use in a Ray cluster's object store, asked from its raylet through the GCS at ``address``
    (Ray's ``ray memory --stats-only``), without joining the cluster as a driver."""

    def __init__(self, address):
        self.address = address
        self.state = None

    def used_mb(self):
        """MB in use, or None where Ray does not answer (e.g. while it shuts down)."""
        try:
            from ray._private import internal_api
            if self.state is None:
                # A local Ray of Ray 2.60 takes a token (~/.ray/auth_token) from every client: use it too.
                from ray._private.authentication.authentication_token_setup import \
                    maybe_enable_token_auth_if_token_available
                maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
                self.state = internal_api.get_state_from_address(self.address)
            reply = internal_api.get_memory_info_reply(self.state, timeout_seconds=10.0)
            return reply.store_stats.object_store_bytes_used / 2 ** 20
        except Exception:  # noqa: BLE001 - a sample missed, not a failed benchmark.
            self.state = None
            return None


def run_progress(logdir):
    """``(wall time, env steps)`` of the last scalar a run's TensorBoard events hold, or None."""
    from rlgraph.training.run_records import read_scalars
    last = None
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        try:
            scalars = read_scalars(path)
        except Exception:  # noqa: BLE001 - a file being written.
            continue
        for wall, step, tag, _ in scalars:
            if tag is not None and (last is None or wall >= last[0]):
                last = (wall, step)
    return last


class Sampler:
    """Samples a process tree (a run's learner ``root`` and every process below it) and the run's progress.

    Args:
        root: The learner's pid.
        logdir: The run's logdir (its env steps; None: not read).
        object_store: Whether to ask Ray's object store (the Ray engine's runs).
    """

    def __init__(self, root, logdir=None, object_store=False):
        self.root, self.logdir, self.want_store = root, logdir, object_store
        self.seen = {}  # {pid: start time} of every process ever seen below root
        self.roles = {}
        self.store = None
        self.last_progress = None
        self.start = time.monotonic()

    def sample(self):
        """One sample: ``(process rows, run row)``; a process row is ``dict(t, pid, role, rss_mb, fds,
        threads)``, the run row ``dict(t, processes, env_steps, steps_per_s, object_store_mb)``."""
        t = time.monotonic() - self.start
        below = descendants(self.root)
        self.seen.update(below)
        rows = []
        for pid in [self.root] + sorted(below):
            if pid == self.root:
                self.roles[pid] = "learner"
            else:  # (A Ray worker names its actor class once the actor runs in it: the last name but IDLE.)
                role = role_of(cmdline(pid))
                if pid not in self.roles or role not in ("ray:IDLE", "?"):
                    self.roles[pid] = role
            stats = process_stats(pid)
            if stats is not None:
                rows.append(dict(t=round(t, 1), pid=pid, role=self.roles[pid], **{k: round(v, 2) if
                                                                              isinstance(v, float) else v
                                                                              for k, v in stats.items()}))
        run = dict(t=round(t, 1), processes=len(rows), env_steps=None, steps_per_s=None, object_store_mb=None)
        if self.logdir is not None:
            progress = run_progress(self.logdir)
            if progress is not None:
                run["env_steps"] = progress[1]
                if self.last_progress is not None and progress[0] > self.last_progress[0]:
                    run["steps_per_s"] = round((progress[1] - self.last_progress[1]) /
                                               (progress[0] - self.last_progress[0]), 1)
                self.last_progress = progress
        if self.want_store:
            if self.store is None:
                address = gcs_address(below)
                self.store = ObjectStore(address) if address else None
            if self.store is not None:
                used = self.store.used_mb()
                run["object_store_mb"] = None if used is None else round(used, 2)
        return rows, run


# --- the figures -----------------------------------------------------------------------------------------------
def slope_per_hour(ts, values):
    """Least-squares slope of ``values`` over ``ts`` (seconds), per hour; 0.0 with fewer than 2 points."""
    ts, values = np.asarray(ts, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if len(ts) < 2 or np.ptp(ts) == 0:
        return 0.0
    return float(np.polyfit(ts, values, 1)[0] * 3600.0)


def summarize(rows, warmup_s):
    """Per process (``role pid``): first, middle, last and maximum RSS (MB), slope (MB/h, least squares over the
    samples after ``warmup_s``, all samples where fewer than 2 come after it), growth after ``warmup_s`` (% of the
    value at the first sample after it), fds and threads first/last."""
    by_pid, roles = {}, {}
    for row in rows:
        if row["role"] not in ("ray:IDLE", "?") or row["pid"] not in roles:
            roles[row["pid"]] = row["role"]
    for row in rows:
        by_pid.setdefault((roles[row["pid"]], row["pid"]), []).append(row)
    out = []
    for (role, pid), series in sorted(by_pid.items(), key=lambda item: (item[0][0] != "learner", item[0])):
        ts = [r["t"] for r in series]
        rss = [r["rss_mb"] for r in series]
        after = [r["rss_mb"] for r in series if r["t"] >= ts[0] + warmup_s]
        growth = 100.0 * (after[-1] - after[0]) / after[0] if len(after) >= 2 and after[0] > 0 else None
        out.append(dict(process=f"{role} {pid}", samples=len(series), seconds=round(ts[-1] - ts[0], 1),
                        rss_first=rss[0], rss_middle=rss[len(rss) // 2], rss_last=rss[-1], rss_max=max(rss),
                        mb_per_hour=round(slope_per_hour(*zip(*[(r["t"], r["rss_mb"]) for r in series
                                                                 if r["t"] >= ts[0] + warmup_s]))
                                          if len(after) >= 2 else slope_per_hour(ts, rss), 1),
                        growth_after_warmup_pct=None if growth is None else round(growth, 1),
                        fds=f"{series[0]['fds']}->{series[-1]['fds']}",
                        threads=f"{series[0]['threads']}->{series[-1]['threads']}"))
    return out


def _fmt(value):
    return "-" if value is None else (f"{value:.1f}" if isinstance(value, float) else str(value))


def print_table(title, table, columns):
    print(f"\n{title}")
    widths = [max(len(c), *(len(_fmt(row.get(c))) for row in table)) if table else len(c) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in table:
        print("  ".join(_fmt(row.get(c)).ljust(w) for c, w in zip(columns, widths)))


def soak(engine, minutes, interval, workdir, seed=0, backend="pytorch"):
    """One soak run of ``engine``: returns ``(process rows, run rows, result)``."""
    os.makedirs(workdir, exist_ok=True)
    config = write_config(engine, workdir)
    logdir = os.path.join(workdir, f"run-{engine}")
    proc = start_run(train_command(engine, config, logdir, minutes * 60.0, seed=seed, backend=backend),
                     os.path.join(workdir, f"{engine}.stderr"))
    sampler = Sampler(proc.pid, logdir, object_store=engine.startswith("ray"))
    rows, runs = [], []
    try:
        next_sample = time.monotonic()
        deadline = time.monotonic() + minutes * 60.0 + 600.0  # (Start-up and the final evaluation.)
        while proc.poll() is None and time.monotonic() < deadline:
            if time.monotonic() >= next_sample:
                process_rows, run = sampler.sample()
                rows += [dict(engine=engine, **r) for r in process_rows]
                runs.append(dict(engine=engine, **run))
                next_sample = max(next_sample + interval, time.monotonic())
            else:
                sampler.seen.update(descendants(proc.pid))
                time.sleep(min(1.0, max(0.0, next_sample - time.monotonic())))
        timed_out = proc.poll() is None
    finally:  # (Also on Ctrl-C or an error here: nothing the run started stays.)
        stop_group(proc)
        left = end_left_behind(sampler.seen)
    with open(os.path.join(workdir, f"{engine}.stderr")) as f:
        err = f.read()
    summary = {}
    if os.path.isfile(os.path.join(logdir, "summary.json")):
        with open(os.path.join(logdir, "summary.json")) as f:
            summary = json.load(f)
    return rows, runs, dict(engine=engine, rc=proc.returncode, timed_out=timed_out, left_behind=left,
                            traceback="Traceback" in err, env_steps=summary.get("env_steps"),
                            env_steps_per_second=summary.get("env_steps_per_second"),
                            stderr_tail=err[-1500:] if proc.returncode else "")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=["local", "ray", "central", "distributed"],
                        choices=sorted(ENGINES))
    parser.add_argument("--minutes", type=float, default=60.0, help="training minutes per engine (default 60)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between two samples (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="pytorch", choices=["pytorch", "tf", "jax"])
    parser.add_argument("--out", default="soak.csv", help="CSV of every sample (a .json summary is written beside)")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="rlgraph-soak-")
    print(f"soak: {args.minutes:g} min per engine, a sample every {args.interval:g} s; runs in {workdir}")
    all_rows, all_runs, results = [], [], []
    for engine in args.engines:
        rows, runs, result = soak(engine, args.minutes, args.interval, os.path.join(workdir, engine),
                                  seed=args.seed, backend=args.backend)
        all_rows += rows
        all_runs += runs
        warmup = min(600.0, args.minutes * 60.0 / 5.0)
        result["processes"] = summarize(rows, warmup)
        results.append(result)
        print_table(f"{engine}: rc {result['rc']}, {_fmt(result['env_steps'])} env steps, "
                    f"{_fmt(result['env_steps_per_second'])} env steps/s, left behind: "
                    f"{len(result['left_behind'])}, traceback: {result['traceback']} (growth after {warmup:.0f} s)",
                    result["processes"], ["process", "samples", "rss_first", "rss_middle", "rss_last", "rss_max",
                                          "mb_per_hour", "growth_after_warmup_pct", "fds", "threads"])
        points = [r for r in runs if r["steps_per_s"] is not None or r["object_store_mb"] is not None]
        if points:
            picks = [points[0], points[len(points) // 2], points[-1]]
            print_table(f"{engine}: the run (first / middle / last sample)",
                        picks, ["t", "processes", "env_steps", "steps_per_s", "object_store_mb"])
    with open(args.out, "w", newline="") as f:
        columns = ["engine", "t", "pid", "role", "rss_mb", "fds", "threads", "processes", "env_steps",
                   "steps_per_s", "object_store_mb"]
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        for row in all_rows + [dict(r, role="run") for r in all_runs]:
            writer.writerow(row)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(dict(minutes=args.minutes, interval=args.interval, results=results), f, indent=1)
    print(f"\nwrote {args.out}")
    return 0 if all(r["rc"] == 0 and not r["left_behind"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
