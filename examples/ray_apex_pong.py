"""Ape-X on Atari Pong on a Ray cluster: actors step their own ale-py vector envs and compute priorities,
replay is sharded over Ray actors, the learner runs here.

    ray start --head --port 6379                 # on the head node; `ray start --address HEAD:6379` on the others
    python examples/ray_apex_pong.py HEAD:6379 16   # cluster address, number of actors

Without an address a local Ray is started (actors on this machine).
"""
import json
import sys

import ray

from rlgraph.execution import train

address = sys.argv[1] if len(sys.argv) > 1 else None
num_actors = int(sys.argv[2]) if len(sys.argv) > 2 else 2
if address:
    ray.init(address=address)  # the engine uses this connection
summary = train("configs/apex_pong.json", executor="ray", num_actors=num_actors, progress=True)
print(json.dumps({k: summary[k] for k in ("env_steps", "env_steps_per_second", "final_mean_return", "actor_restarts",
                                          "actors", "logdir")}, indent=1))
