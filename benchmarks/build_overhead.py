"""Build time and per-call overhead of the graph executors, against the same computation written directly.

Prints, for each backend: the time to build one component and a graph of 40+ components (backend import
excluded), and the per-call time of an API method through the executor divided by the time of the same
computation hand-written in the backend (a ``tf.function`` with an input signature / plain torch ops),
at batch sizes 1 and 256. Ratios are measured in one run, interleaved, so machine noise cancels.

Run: .venv/bin/python benchmarks/build_overhead.py [--backend tf|pytorch] [--calls N]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from rlgraph import rlgraph_api  # noqa: E402
from rlgraph.components import Component, DenseLayer, NeuralNetwork  # noqa: E402
from rlgraph.executors import GraphExecutor  # noqa: E402
from rlgraph.spaces import FloatBox  # noqa: E402

IN, UNITS = 64, 64
SPACE = FloatBox(shape=(IN,), add_batch_rank=True)


class Tower(Component):
    """4 networks of 10 dense layers each under one root: 45 components."""

    def __init__(self):
        self.nets = [NeuralNetwork(*[DenseLayer(32, activation="relu") for _ in range(10)], scope=f"net-{i}")
                     for i in range(4)]
        super().__init__(*self.nets, scope="tower")

    @rlgraph_api
    def run(self, x):
        return tuple(net.call(x) for net in self.nets)


def build_time(backend, make, repeats):
    times = []
    for _ in range(repeats):
        root = make()
        start = time.perf_counter()
        arg = "x" if isinstance(root, Tower) else "inputs"
        GraphExecutor.create(backend=backend, root_component=root, input_spaces={arg: SPACE})
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(make().get_all_sub_components(include_self=True))


def direct_fn(backend, weights):
    kernel, bias = weights["dense/kernel"], weights["dense/bias"]
    if backend == "tf":
        import tensorflow as tf
        k, b = tf.Variable(kernel), tf.Variable(bias)
        f = tf.function(lambda x: tf.nn.relu(tf.nn.bias_add(tf.matmul(x, k), b)),
                        input_signature=[tf.TensorSpec([None, IN], tf.float32)])
        f.get_concrete_function()
        return lambda x: f(x).numpy()
    import torch
    k, b = torch.nn.Parameter(torch.from_numpy(kernel)), torch.nn.Parameter(torch.from_numpy(bias))
    return lambda x: torch.relu(torch.addmm(b, torch.from_numpy(x), k)).detach().numpy()


def per_call_ratio(backend, batch, calls, rounds=15):
    ex = GraphExecutor.create(backend=backend, root_component=DenseLayer(UNITS, activation="relu"),
                              input_spaces=dict(inputs=SPACE))
    direct = direct_fn(backend, ex.get_weights())
    x = np.random.default_rng(0).normal(size=(batch, IN)).astype(np.float32)
    np.testing.assert_allclose(ex.execute("call", x), direct(x), rtol=1e-5, atol=1e-6)
    ours = lambda: ex.execute("call", x)  # noqa: E731
    ref = lambda: direct(x)  # noqa: E731
    t_ours, t_ref = [], []
    for _ in range(rounds):
        for fn, out in ((ours, t_ours), (ref, t_ref)):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            out.append((time.perf_counter() - start) / calls)
    a, b = statistics.median(t_ours), statistics.median(t_ref)
    return a, b, a / b


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["tf", "pytorch"], action="append")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    for backend in args.backend or ["tf", "pytorch"]:
        __import__("tensorflow" if backend == "tf" else "torch")  # Exclude the import from the build times.
        GraphExecutor.create(backend=backend, root_component=DenseLayer(2), input_spaces=dict(inputs=SPACE))
        single, n1 = build_time(backend, lambda: DenseLayer(UNITS, activation="relu"), 7)
        tower, n45 = build_time(backend, Tower, 3)
        print(f"[{backend}] build: single component {single * 1000:.1f} ms; graph of {n45} components "
              f"{tower * 1000:.0f} ms")
        for batch in (1, 256):
            ours, ref, ratio = per_call_ratio(backend, batch, args.calls)
            print(f"[{backend}] per call, dense {IN}->{UNITS} relu, batch {batch}: executor {ours * 1e6:.1f} us, "
                  f"direct {ref * 1e6:.1f} us, ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
