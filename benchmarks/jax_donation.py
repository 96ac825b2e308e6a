"""What buffer donation saves on JAX: the same programs with and without donation, in one run.

Two programs, each built twice on the JAX backend (``JaxExecutor.donate`` on and off), timed alternately:
- a ``ReplayMemory`` on Atari-sized frames (42x42x4 float32 records, ``--capacity`` of them) inserting 32 records:
  without donation every insert writes a new copy of the whole storage; with donation, into the storage in place;
- an update of ``configs/appo_pong_42.json``'s network (its convolutions, a dense head) with Adam on a batch of 256
  frames: the weights and Adam's slots written in place instead of into new buffers.

Prints the median seconds per call and the ratio (without / with donation) per program.

Run: .venv/bin/python benchmarks/jax_donation.py [--capacity 10000] [--repeats 30]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from rlgraph import graph_fn, rlgraph_api  # noqa: E402
from rlgraph.components import Component, NeuralNetwork, ReplayMemory  # noqa: E402
from rlgraph.components.optimizers import AdamOptimizer  # noqa: E402
from rlgraph.spaces import FloatBox  # noqa: E402
from rlgraph.tests import ComponentTest  # noqa: E402

FRAME = (42, 42, 4)


class Memorizer(Component):
    def __init__(self, capacity):
        super().__init__(scope="memorizer")
        self.memory = ReplayMemory(capacity)
        self.add_components(self.memory)

    @rlgraph_api
    def observe(self, states):
        return self.memory.insert_records(states)


class Regression(Component):
    """The Pong network with a one-unit head, an MSE loss and Adam."""

    def __init__(self, layers):
        super().__init__(scope="regression")
        self.network = NeuralNetwork(*layers, {"type": "dense", "units": 1})
        self.optimizer = AdamOptimizer(5e-4)
        self.add_components(self.network, self.optimizer)

    @rlgraph_api
    def update(self, x, y):
        return self.optimizer.step(self.network.variables(), self._graph_fn_loss(self.network.call(x), y))

    @graph_fn
    def _graph_fn_loss(self, predictions, y):
        return self.ops.mean(self.ops.square(predictions[:, 0] - y))


def timed(calls, repeats):
    """Median seconds per call of each of ``calls`` (name -> fn), called alternately ``repeats`` times."""
    times = {k: [] for k in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def pair(make, spaces):
    tests = {}
    for donate in (True, False):
        tests[donate] = ComponentTest(make(), spaces, backend="jax")
        tests[donate].executor.donate = donate  # Read when a program is first made.
    return tests


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    memories = pair(lambda: Memorizer(args.capacity), dict(states=FloatBox(shape=FRAME, add_batch_rank=True)))
    records = rng.random((32,) + FRAME, dtype=np.float32)
    for test in memories.values():
        test.test(("observe", [records]))  # Compiles.
    seconds = timed({d: (lambda t=t: t.test(("observe", [records]))) for d, t in memories.items()}, args.repeats)
    rows.append((f"ReplayMemory insert of 32 records, capacity {args.capacity} "
                 f"({args.capacity * np.prod(FRAME) * 4 / 2 ** 20:.0f} MiB)", seconds))

    with open(os.path.join(ROOT, "configs", "appo_pong_42.json")) as f:
        layers = json.load(f)["network_spec"]
    updates = pair(lambda: Regression(layers), dict(x=FloatBox(shape=FRAME, add_batch_rank=True),
                                                    y=FloatBox(add_batch_rank=True)))
    x, y = rng.random((256,) + FRAME, dtype=np.float32), rng.normal(size=256).astype(np.float32)
    for test in updates.values():
        test.test(("update", [x, y]))
    seconds = timed({d: (lambda t=t: t.test(("update", [x, y]))) for d, t in updates.items()}, args.repeats)
    params = sum(v.size for v in updates[True].executor.get_weights().values())
    rows.append((f"Pong-42 network + Adam update, batch 256 ({params / 1e6:.2f}M weights)", seconds))

    print(f"{'program':<66} {'donated':>10} {'copied':>10} {'ratio':>6}")
    for name, s in rows:
        print(f"{name:<66} {s[True] * 1e3:>8.2f}ms {s[False] * 1e3:>8.2f}ms {s[False] / s[True]:>6.2f}")


if __name__ == "__main__":
    main()
