"""APPO on CartPole with central inference (SEED RL style): actors only step environments, this process acts
for all of them in one batch and learns.

    python examples/central_inference_cartpole.py                          # 2 actor processes, shared memory
    python examples/central_inference_cartpole.py grpc                     # 2 actor processes over gRPC (loopback)
    python examples/central_inference_cartpole.py server 0.0.0.0:50051 2   # a server waiting for 2 remote actors
    python examples/central_inference_cartpole.py actor SERVER:50051 0 2   # remote actor 0 of 2 (on any machine)

Remote actors import no deep-learning backend (numpy, gymnasium, grpcio and rlgraph's environments only). Set
the same ``RLGRAPH_CENTRAL_TOKEN`` for the server and its actors to make the server refuse other clients (the
token travels in clear text: on untrusted networks use a VPN or an SSH tunnel). Stops when a greedy evaluation
reaches a mean return of 450 (the config's train_spec).
"""
import json
import os
import sys

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "appo_cartpole.json")
SEED = 0


def train_here(transport, execution=None):
    from rlgraph.engines import train
    from rlgraph.engines.runner import load_config

    config, _ = load_config(CONFIG)
    config["execution_spec"] = dict(config.get("execution_spec", {}), transport=transport, **(execution or {}))
    summary = train(config, executor="central", seed=SEED, progress=True, config_name="appo_cartpole-central")
    print(json.dumps({k: summary.get(k) for k in ("env_steps", "wall_seconds", "seconds_to_target",
                                                  "eval_mean_return", "mean_inference_batch_size",
                                                  "mean_inference_latency_ms", "actor_restarts", "logdir")},
                     indent=1))


def remote_actor(server, index, num_actors):
    """One actor of ``num_actors``: the environments the server expects of actor ``index``."""
    from rlgraph.engines import ExecutionSpec
    from rlgraph.engines.central_inference.grpc_transport import grpc_actor_main
    from rlgraph.engines.runner import load_config

    config, _ = load_config(CONFIG)
    spec = ExecutionSpec.from_config(config, num_actors=num_actors)
    num_envs = spec.envs_per_actor_for(config["environment_spec"].get("num_envs", 1))
    grpc_actor_main(["--server", server, "--index", str(index), "--config", CONFIG, "--num-envs", str(num_envs),
                     "--seed", str(SEED + 1000 * (index + 1))])


def main(argv):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mode = argv[0] if argv else "shm"
    token = os.environ.get("RLGRAPH_CENTRAL_TOKEN")
    if mode in ("shm", "grpc"):
        train_here(mode, dict(token=token) if mode == "grpc" and token else None)
    elif mode == "server":
        address, num_actors = argv[1], int(argv[2])
        print(f"Waiting for {num_actors} actors; on each machine run: python examples/central_inference_cartpole.py "
              f"actor HOST:{address.rpartition(':')[2]} INDEX {num_actors}")
        train_here("grpc", dict(server_address=address, num_actors=num_actors, local_actors=False, token=token))
    elif mode == "actor":
        remote_actor(argv[1], int(argv[2]), int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
