"""Chaos figures: training runs on each engine while a seeded fault injector kills and stops their processes.

Each run is ``rlgraph train`` (CartPole, ``train_spec.stop_at_target`` off) in its own process group for
``--minutes`` of training. From the moment the run records its first env steps, the injector follows a seeded
plan (``make_plan``): every 20-40 s one fault the engine documents that it survives (docs/engines/*.md, "Faults"):

- ``kill-actor``: SIGKILL of a random actor process (Ray samplers, central inference's actor processes);
- ``kill-shard``: SIGKILL of a random replay shard (Ape-X on Ray);
- ``hang-actor`` / ``hang-learner`` / ``hang-run``: SIGSTOP of an actor, a distributed learner of rank > 0 or the
  whole local run for 3-8 s (shorter than the engine's timeouts), then SIGCONT;

and near the end (85% of the budget) the run's last fault:

- ``interrupt``: SIGINT to the run's process group, as Ctrl-C in a terminal (exit status 130 and one line saying
  what was kept), on every engine but the distributed one;
- ``kill-learner`` (distributed): SIGKILL of learner 1, which a synchronous group documents it does not survive:
  the run must end with one line naming the learner (``RLGraphLearnerGroupError``), no traceback.

Then the run is resumed from its last checkpoint (``--resume``) and trains to the end of its budget. Recorded per
engine: the faults injected, the replacements and lost steps the engine counted (``summary.json`` of both
sessions), each session's exit status and last line, env steps/s before the first fault, from it to the last
fault and in the resumed session (from the TensorBoard events), the mean return (last 100 episodes) before the
first fault and at the end (and the final greedy evaluation's), and the processes of the run left behind 30 s
after each session (they are then killed). Prints a table and writes JSON.

Run: .venv/bin/python benchmarks/chaos.py [--engines ray ray-apex central-shm central-grpc local distributed]
     [--minutes 10] [--seed 0] [--out chaos.json]
"""
import argparse
import glob
import json
import os
import random
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import soak  # noqa: E402  (the runs, the process tree and its roles)
from rlgraph.training.checkpoint_store import CheckpointStore  # noqa: E402  (soak put the repository on the path)
from rlgraph.utils.errors import RLGraphSpecError  # noqa: E402
from rlgraph.utils.process_watchdog import descendants  # noqa: E402

#: The faults each engine survives (injected during the run) and its last fault (near the end).
FAULTS = {
    "local": (("hang-run",), "interrupt"),
    "ray": (("kill-actor", "kill-actor", "hang-actor"), "interrupt"),
    "ray-apex": (("kill-actor", "kill-shard", "hang-actor"), "interrupt"),
    "central-shm": (("kill-actor", "kill-actor", "hang-actor"), "interrupt"),
    "central-grpc": (("kill-actor", "kill-actor", "hang-actor"), "interrupt"),
    "distributed": (("hang-learner",), "kill-learner"),
}
#: The role (``soak.role_of``) of each fault's target; None: the learner (the run's main process).
TARGETS = {"kill-actor": "actor", "hang-actor": "actor", "kill-shard": "replay-shard", "hang-learner": "learner-rank",
           "kill-learner": "learner-rank", "hang-run": None, "interrupt": None}
#: Seconds between two faults, seconds a hang lasts, and where in the budget the last fault comes.
GAP_S, HANG_S, FINAL_AT = (20.0, 40.0), (3.0, 8.0), 0.85
#: The line an interrupted run ends with (rlgraph/cli.py).
INTERRUPT_LINE = "rlgraph train: Interrupted during "
#: Config changes of every chaos run: enough restarts for a 10-minute run, a checkpoint every 15 s, and a sample
#: timeout that the injected hangs stay under (a hang is survived without a replacement).
EXECUTION = dict(max_actor_restarts=100, sample_timeout_s=60.0)


def make_plan(engine, seconds, seed, gap_s=GAP_S, hang_s=HANG_S, final_at=FINAL_AT):
    """The seeded fault plan of one run: a list of ``dict(t, kind, hang_s)``, ``t`` in seconds after the run's
    first recorded env steps, one fault every ``gap_s`` (uniform range) seconds before ``final_at`` x
    ``seconds`` (the kinds of ``FAULTS[engine]`` in shuffled rounds), then the engine's last fault at
    ``final_at`` x ``seconds``."""
    if engine not in FAULTS:
        raise RLGraphSpecError(f"chaos: unknown engine {engine!r}; engines: {', '.join(sorted(FAULTS))}.")
    if not seconds > 0:
        raise RLGraphSpecError(f"chaos: the run's budget must be positive seconds, got {seconds!r}.")
    kinds, final = FAULTS[engine]
    rng = random.Random(f"chaos-{engine}-{seed}")
    plan, t, bag = [], 0.0, []
    while True:
        t += rng.uniform(*gap_s)
        if t >= final_at * seconds:
            break
        if not bag:  # (Drawn from a shuffled bag of the kinds: each comes once a round, even in a short run.)
            bag = list(kinds)
            rng.shuffle(bag)
        kind = bag.pop()
        plan.append(dict(t=round(t, 2), kind=kind, hang_s=round(rng.uniform(*hang_s), 2) if kind.startswith("hang")
                         else None))
    plan.append(dict(t=round(final_at * seconds, 2), kind=final, hang_s=None))
    return plan


def pick_target(kind, root, rng):
    """The pid a fault of ``kind`` hits in the run below ``root`` (chosen with ``rng``), or None when no process
    of that role runs now (e.g. while one is being replaced)."""
    role = TARGETS[kind]
    if role is None:
        return root
    candidates = sorted(pid for pid in descendants(root) if soak.role_of(soak.cmdline(pid)) == role)
    if kind == "kill-learner":  # (Learner 1: the documented fatal fault.)
        candidates = candidates[:1]
    return rng.choice(candidates) if candidates else None


class Injector:
    """Carries out a plan (``make_plan``) on the run whose main process is ``root``: ``step(now)`` injects what
    is due at ``now`` (seconds after the run's first env steps) and ends the hangs that are over."""

    def __init__(self, plan, root, seed, kill=os.kill, killpg=os.killpg):
        self.plan, self.root = list(plan), root
        self.rng = random.Random(f"targets-{seed}")
        self.kill, self.killpg = kill, killpg
        self.stopped = {}  # {pid: second to continue it}
        self.done = []  # the faults injected: dict(t, kind, pid, role, wall, note)

    def step(self, now):
        for pid, until in list(self.stopped.items()):
            if now >= until:
                self._signal(pid, signal.SIGCONT)
                del self.stopped[pid]
        while self.plan and self.plan[0]["t"] <= now:
            fault = self.plan.pop(0)
            kind = fault["kind"]
            record = dict(t=round(now, 1), kind=kind, wall=time.time(), pid=None, note="")
            if kind == "interrupt":
                record["pid"] = self.root
                try:
                    self.killpg(self.root, signal.SIGINT)
                except (ProcessLookupError, PermissionError) as e:
                    record["note"] = f"not sent: {e}"
            else:
                pid = pick_target(kind, self.root, self.rng)
                record["pid"] = pid
                if pid is None:
                    record["note"] = f"no {TARGETS[kind]} running"
                elif kind.startswith("kill"):
                    self._signal(pid, signal.SIGKILL)
                else:
                    if self._signal(pid, signal.SIGSTOP):
                        self.stopped[pid] = now + fault["hang_s"]
                        record["note"] = f"stopped for {fault['hang_s']:.1f} s"
            self.done.append(record)
            return record
        return None

    def release(self):
        """Continues every process still stopped (a run that ended during a hang)."""
        for pid in list(self.stopped):
            self._signal(pid, signal.SIGCONT)
        self.stopped.clear()

    def pending(self):
        return bool(self.plan)

    def _signal(self, pid, sig):
        try:
            self.kill(pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


# --- what the run recorded ---------------------------------------------------------------------------------------
def session_points(logdir):
    """Per TensorBoard event file (one per session, in order): ``[(wall, env steps, mean return or None)]``."""
    from rlgraph.training.run_records import read_scalars
    sessions = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")), key=os.path.getmtime):
        points = {}
        for wall, step, tag, value in read_scalars(path):
            if tag is None:
                continue
            entry = points.setdefault(step, [wall, step, None])
            entry[0] = max(entry[0], wall)
            if tag == "episode/mean_return_100":
                entry[2] = value
        sessions.append(sorted((tuple(p) for p in points.values()), key=lambda p: p[1]))
    return [s for s in sessions if s]


def rate(points, start_wall=None, end_wall=None):
    """Env steps per second over ``points`` (``session_points``) between the two wall times, None with fewer
    than two points."""
    sel = [p for p in points if (start_wall is None or p[0] >= start_wall) and (end_wall is None or p[0] <= end_wall)]
    if len(sel) < 2 or sel[-1][0] <= sel[0][0]:
        return None
    return (sel[-1][1] - sel[0][1]) / (sel[-1][0] - sel[0][0])


def last_return(points, end_wall=None):
    values = [p[2] for p in points if p[2] is not None and (end_wall is None or p[0] <= end_wall)]
    return values[-1] if values else None


def _summary(logdir):
    path = os.path.join(logdir, "summary.json")
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def _last_line(text):
    """The run's own last message (the last line that starts with "rlgraph train:", which may be followed by a
    learner's log tail), else the last line of ``text``."""
    lines = [line for line in text.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("rlgraph train:")]
    return (ours or lines or [""])[-1][:300]


# --- one engine ------------------------------------------------------------------------------------------------
def run_session(cmd, workdir, name, injector=None, budget_s=600.0):
    """Runs one session of a run; with an ``injector``, faults follow its plan from the session's first env steps.
    Returns ``dict(rc, seconds, stderr, left_behind, timed_out)``."""
    logdir = cmd[cmd.index("--logdir") + 1]
    stderr_path = os.path.join(workdir, f"{name}.stderr")
    start = time.monotonic()
    before = {os.path.basename(p) for p in glob.glob(os.path.join(logdir, "events.out.tfevents.*"))}
    proc = soak.start_run(cmd, stderr_path)
    seen, trained_at, timed_out = {}, None, False
    if injector is not None:
        injector.root = proc.pid
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now - start > budget_s:
                timed_out = True
                break
            seen.update(descendants(proc.pid))
            if injector is not None:
                if trained_at is None:
                    new = [p for p in glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
                           if os.path.basename(p) not in before and os.path.getsize(p) > 200]
                    if new and soak.run_progress(logdir) is not None:
                        trained_at = now
                if trained_at is not None:
                    injector.step(now - trained_at)
            time.sleep(0.1)
    finally:  # (Also on Ctrl-C or an error here: nothing the run started stays.)
        if injector is not None:
            injector.release()
        soak.stop_group(proc)
        left = soak.end_left_behind(seen)
    with open(stderr_path) as f:
        err = f.read()
    return dict(rc=proc.returncode, seconds=round(time.monotonic() - start, 1), stderr=err, left_behind=left,
                timed_out=timed_out)


def chaos(engine, minutes, seed, workdir, backend="pytorch"):
    """One chaos run of ``engine`` (``--minutes`` of training, faults, the last fault, a resume): its record."""
    os.makedirs(workdir, exist_ok=True)
    seconds = minutes * 60.0
    config = soak.write_config(engine, workdir, checkpoint_every_seconds=15.0,
                               execution=EXECUTION if engine.startswith(("ray", "central")) else None)
    logdir = os.path.join(workdir, "run")
    plan = make_plan(engine, seconds, seed)
    injector = Injector(plan, None, seed)
    cmd = soak.train_command(engine, config, logdir, seconds, seed=seed, backend=backend)
    first = run_session(cmd, workdir, "session1", injector, budget_s=seconds + 420.0)
    summary1 = _summary(logdir)
    final = FAULTS[engine][1]
    try:
        has_checkpoint = CheckpointStore(logdir).latest() is not None
    except Exception:  # noqa: BLE001 - a damaged checkpoint: recorded as no resume.
        has_checkpoint = False
    second = run_session(cmd + ["--resume"], workdir, "session2", None, budget_s=seconds + 420.0) \
        if has_checkpoint else None
    summary2 = _summary(logdir) if second else {}
    sessions = session_points(logdir)
    faults = injector.done
    first_fault = faults[0]["wall"] if faults else None
    final_fault = next((f["wall"] for f in faults if f["kind"] == final), None)
    s1 = sessions[0] if sessions else []
    s2 = sessions[-1] if second and len(sessions) > 1 else []
    if final == "interrupt":
        first_ok = first["rc"] == 130 and sum(line.startswith(INTERRUPT_LINE)
                                              for line in first["stderr"].splitlines()) == 1
    else:  # The documented end of a synchronous group without learner 1: one line naming it.
        first_ok = first["rc"] not in (0, 130, None) and "learner 1" in _last_line(first["stderr"])
    counted = {key: summary1.get(key, 0) + summary2.get(key, 0) for key in
               ("actor_restarts", "env_steps_lost", "replay_shard_restarts", "replay_records_lost")}
    kills = {kind: sum(1 for f in faults if f["kind"] == kind and f["pid"] is not None) for kind in
             ("kill-actor", "kill-shard")}
    tracebacks = [name for name, s in (("session1", first), ("session2", second)) if s and "Traceback" in s["stderr"]]
    record = dict(
        engine=engine, minutes=minutes, seed=seed, plan=plan, faults=faults,
        faults_by_kind={k: sum(1 for f in faults if f["kind"] == k) for k in sorted({f["kind"] for f in faults})},
        counted=counted,
        session1=dict(rc=first["rc"], expected=("130 + one line" if final == "interrupt" else
                                                "an error naming learner 1"), ok=first_ok,
                      last_line=_last_line(first["stderr"]), seconds=first["seconds"],
                      left_behind=first["left_behind"], timed_out=first["timed_out"],
                      env_steps=summary1.get("env_steps")),
        session2=None if second is None else dict(rc=second["rc"], ok=second["rc"] == 0,
                                                  last_line=_last_line(second["stderr"]), seconds=second["seconds"],
                                                  left_behind=second["left_behind"], timed_out=second["timed_out"],
                                                  env_steps=summary2.get("env_steps")),
        steps_per_s=dict(before=rate(s1, end_wall=first_fault), after=rate(s1, start_wall=first_fault,
                                                                           end_wall=final_fault),
                         resumed=rate(s2)),
        mean_return=dict(before=last_return(s1, end_wall=first_fault),
                         end=last_return(s2) if s2 else last_return(s1),
                         greedy_end=(summary2 or summary1).get("eval_mean_return")),
        tracebacks=tracebacks, logdir=logdir)
    record["every_kill_counted"] = (counted["actor_restarts"] >= kills["kill-actor"] and
                                    counted["replay_shard_restarts"] >= kills["kill-shard"])
    record["ok"] = bool(first_ok and second is not None and second["rc"] == 0 and not first["left_behind"] and
                        not second["left_behind"] and not tracebacks and record["every_kill_counted"])
    return record


def _f(value, fmt="{:.0f}"):
    return "-" if value is None else fmt.format(value)


def print_table(records):
    columns = ["engine", "faults", "restarts (actor/shard)", "steps lost", "session 1 rc", "resumed rc",
               "steps/s before/after/resumed", "return before->end (greedy)", "left behind", "traceback", "ok"]
    rows = []
    for r in records:
        c, sps, ret = r["counted"], r["steps_per_s"], r["mean_return"]
        rows.append([r["engine"], " ".join(f"{k}x{v}" for k, v in r["faults_by_kind"].items()),
                     f"{c['actor_restarts']}/{c['replay_shard_restarts']}",
                     f"{c['env_steps_lost']}" + (f" (+{c['replay_records_lost']} records)"
                                                 if c["replay_records_lost"] else ""),
                     f"{r['session1']['rc']}" + (" ok" if r["session1"]["ok"] else " UNEXPECTED"),
                     "-" if r["session2"] is None else str(r["session2"]["rc"]),
                     f"{_f(sps['before'])}/{_f(sps['after'])}/{_f(sps['resumed'])}",
                     f"{_f(ret['before'], '{:.1f}')}->{_f(ret['end'], '{:.1f}')} "
                     f"({_f(ret.get('greedy_end'), '{:.1f}')})",
                     str(len(r["session1"]["left_behind"]) + len((r["session2"] or {}).get("left_behind", {}))),
                     ",".join(r["tracebacks"]) or "no", "yes" if r["ok"] else "NO"])
    widths = [max(len(columns[i]), *(len(row[i]) for row in rows)) for i in range(len(columns))]
    print(" | ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in rows:
        print(" | ".join(v.ljust(w) for v, w in zip(row, widths)))
    for r in records:
        print(f"{r['engine']}: last lines: session 1: {r['session1']['last_line']!r}; resumed: "
              f"{(r['session2'] or {}).get('last_line')!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=["ray", "ray-apex", "central-shm", "central-grpc", "local",
                                                         "distributed"], choices=sorted(FAULTS))
    parser.add_argument("--minutes", type=float, default=10.0, help="training minutes per engine (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="pytorch", choices=["pytorch", "tf", "jax"])
    parser.add_argument("--out", default="chaos.json")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="rlgraph-chaos-")
    print(f"chaos: {args.minutes:g} min per engine, seed {args.seed}; runs in {workdir}", flush=True)
    records = []
    for engine in args.engines:
        record = chaos(engine, args.minutes, args.seed, os.path.join(workdir, engine), backend=args.backend)
        records.append(record)
        print(f"{engine}: done, ok={record['ok']}", flush=True)
        with open(args.out, "w") as f:
            json.dump(dict(minutes=args.minutes, seed=args.seed, records=records), f, indent=1)
    print()
    print_table(records)
    print(f"\nwrote {args.out}")
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
