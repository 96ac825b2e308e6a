"""Start-up: launch to the first environment step of ``rlgraph train``, against a bare backend import.

For each backend, launches in fresh processes (interleaved, ``--repeats`` times each):

- ``python -c "import torch"`` (or ``import tensorflow``): the floor, the framework's own import;
- ``python -m rlgraph.cli train configs/appo_cartpole.json --backend B --steps 1`` with
  ``RLGRAPH_STARTUP_PROBE=FILE``: the worker writes the wall time of its first environment step to FILE
  (``rlgraph.workers.vector_worker``), so the figure is launch to first step, not launch to exit (the end of a
  run writes a checkpoint, evaluates and plots its learning curve);
- the same run's launch to exit, for reference.

Prints the medians as a markdown table with the difference to the bare import and the aims (at most
+0.5 s on PyTorch, +1.5 s on TensorFlow).

Run: .venv/bin/python benchmarks/startup.py [--backends pytorch tf] [--repeats 5] [--config ...]
[--compare DIR] (DIR: another checkout, e.g. the last commit, measured interleaved with this one)
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
IMPORT = {"pytorch": "import torch", "tf": "import tensorflow"}
AIM = {"pytorch": 0.5, "tf": 1.5}


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("RLGRAPH_STARTUP_PROBE", None)
    return env


def bare_import(backend, root=ROOT):
    """Seconds from launch to exit of ``python -c "import <backend>"``."""
    start = time.time()
    subprocess.run([sys.executable, "-c", IMPORT[backend]], cwd=root, env=_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.time() - start


def train_first_step(backend, config, root=ROOT):
    """``(launch to first env step, launch to exit)`` in seconds of ``rlgraph train CONFIG --steps 1``."""
    workdir = tempfile.mkdtemp(prefix=f"startup-{backend}-")
    probe = os.path.join(workdir, "first_step")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", config, "--backend", backend, "--steps", "1",
           "--logdir", os.path.join(workdir, "run")]
    start = time.time()
    proc = subprocess.run(cmd, cwd=root, env=dict(_env(), RLGRAPH_STARTUP_PROBE=probe), capture_output=True,
                          text=True)
    end = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    with open(probe) as f:
        first = float(f.read())
    return first - start, end - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["pytorch", "tf"], choices=sorted(IMPORT))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--config", default=os.path.join("configs", "appo_cartpole.json"),
                        help="the config, relative to the checkout")
    parser.add_argument("--compare", metavar="DIR", default=None,
                        help="another checkout of rlgraph (e.g. `git archive HEAD` unpacked) measured interleaved "
                             "with this one (its vector_worker.py needs the RLGRAPH_STARTUP_PROBE lines)")
    args = parser.parse_args()
    roots = [("this checkout", ROOT)] + ([("compared", os.path.abspath(args.compare))] if args.compare else [])
    rows = []
    for backend in args.backends:
        bare, first, total = [], {n: [] for n, _ in roots}, {n: [] for n, _ in roots}
        for _ in range(args.repeats):  # Interleaved, so that load drifts hit all alike.
            bare.append(bare_import(backend))
            for name, root in roots:
                f, t = train_first_step(backend, args.config, root)
                first[name].append(f)
                total[name].append(t)
        for name, _ in roots:
            rows.append((backend, name, statistics.median(bare), statistics.median(first[name]),
                         statistics.median(total[name])))
    print(f"Start-up of `rlgraph train {args.config} --steps 1` (medians of {args.repeats} fresh processes)\n")
    print("| backend | checkout | bare import (s) | launch to first env step (s) | over the import (s) | aim (s) | "
          "launch to exit (s) |")
    print("|---|---|---|---|---|---|---|")
    for backend, name, bare, first, total in rows:
        over = first - bare
        mark = "ok" if over <= AIM[backend] else "MISSED"
        print(f"| {backend} | {name} | {bare:.2f} | {first:.2f} | {over:+.2f} | <= +{AIM[backend]:.1f} ({mark}) | "
              f"{total:.2f} |")


if __name__ == "__main__":
    main()
