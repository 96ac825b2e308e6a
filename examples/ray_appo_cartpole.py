"""APPO on CartPole on a Ray cluster: actors send unrolls through a bounded queue to the learner here.

    python examples/ray_appo_cartpole.py                 # a local Ray, 2 actors
    python examples/ray_appo_cartpole.py HEAD:6379 8     # join a cluster with 8 actors

Stops when a greedy evaluation reaches a mean return of 450 (the config's train_spec).
"""
import json
import sys

import ray

from rlgraph.engines import train

address = sys.argv[1] if len(sys.argv) > 1 else None
num_actors = int(sys.argv[2]) if len(sys.argv) > 2 else 2
if address:
    ray.init(address=address)  # the engine uses this connection
summary = train("configs/appo_cartpole.json", executor="ray", num_actors=num_actors, progress=True)
print(json.dumps({k: summary[k] for k in ("env_steps", "wall_seconds", "seconds_to_target", "eval_mean_return",
                                          "actor_restarts", "actors", "logdir")}, indent=1))
