"""The ``rlgraph`` command line."""
import argparse
import json
import logging
import sys
import time

import numpy as np


def _demo(args):
    from rlgraph.components import Component, NeuralNetwork, ReplayMemory
    from rlgraph.executors import GraphExecutor
    from rlgraph.spaces import Space
    from rlgraph.utils.backend import backend_available
    from rlgraph.utils.decorators import rlgraph_api

    with open(args.config) as f:
        config = json.load(f)
    state_space = Space.from_spec(config["state_space"], _path="state_space")

    class DemoGraph(Component):
        """Stores transitions in a replay memory and evaluates a network on sampled states."""

        def __init__(self):
            self.network = NeuralNetwork.from_spec(config["network"], _path="network")
            self.memory = ReplayMemory.from_spec(config["memory"], _path="memory")
            super().__init__(self.network, self.memory, scope="demo")

        @rlgraph_api
        def observe(self, states):
            return self.memory.insert_records(states)

        @rlgraph_api
        def sample_and_evaluate(self, num_records):
            return self.network.call(self.memory.get_records(num_records))

        @rlgraph_api
        def evaluate(self, states):
            return self.network.call(states)

    backends = [args.backend] if args.backend else [b for b in ("tf", "pytorch") if backend_available(b)]
    rng = np.random.default_rng(args.seed)
    probe = state_space.with_batch_rank().sample(8, rng=rng)
    outputs = {}
    for backend in backends:
        start = time.perf_counter()
        executor = GraphExecutor.create(backend=backend, root_component=DemoGraph(), seed=args.seed,
                                        input_spaces=dict(states=state_space.with_batch_rank(), num_records=int))
        build = time.perf_counter() - start
        if backend == backends[0]:
            print("Meta graph:\n" + executor.meta_graph.describe())
        start = time.perf_counter()
        executor.execute("observe", state_space.with_batch_rank().sample(config.get("batch_size", 32), rng=rng))
        for _ in range(config.get("steps", 100)):
            executor.execute("observe", state_space.with_batch_rank().sample(16, rng=rng))
            out = executor.execute("sample_and_evaluate", config.get("batch_size", 32))
        run = time.perf_counter() - start
        outputs[backend] = executor.execute("evaluate", probe)
        print(f"[{backend}] built in {build * 1000:.1f} ms; {config.get('steps', 100)} x (observe + sample_and_evaluate)"
              f" in {run * 1000:.1f} ms; last output batch shape {out.shape}")
    if len(outputs) == 2:
        diff = float(np.max(np.abs(outputs["tf"] - outputs["pytorch"])))
        print(f"Same weights on both backends: max |tf - pytorch| of network outputs = {diff:.2e}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rlgraph", description="rlgraph command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build a small component graph from a JSON config on each backend and run it")
    demo.add_argument("config", help="path to a demo config, e.g. configs/demo_network.json")
    demo.add_argument("--backend", choices=["tf", "pytorch"], default=None)
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    if args.command == "demo":
        return _demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
