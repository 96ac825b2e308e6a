"""Benchmark of prioritized replay (Schaul et al. 2016) on one core.

Times `sample(512)` + `update(indices, 512 new priorities)` on a buffer of capacity 2**20 filled with
CartPole-like records, and a naive reference (np.random.Generator.choice with p=priorities/total over the whole
array) in the same run. Then the same step through the `PrioritizedReplay` component, i.e.
`executor.execute("get_records", 512)` + `executor.execute("update_records", indices, priorities)`, on the
PyTorch executor (and, for comparison, the TensorFlow one: `tf.numpy_function` inside `tf.function`).

Run: .venv/bin/python benchmarks/memories.py [--no-tf]
"""
import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rlgraph.components.memories.prioritized_replay_buffer import PrioritizedReplayBuffer  # noqa: E402

CAPACITY = 2 ** 20
BATCH = 512
REPEATS = 200
NAIVE_REPEATS = 20
ALPHA, BETA = 0.6, 0.4


def cartpole_records(rng, n):
    """Returns n CartPole-like transitions."""
    states = rng.standard_normal((n, 4)).astype(np.float32)
    return {
        "states": states,
        "actions": rng.integers(0, 2, size=n),
        "rewards": np.ones(n, dtype=np.float32),
        "terminals": rng.random(n) < 0.05,
        "next_states": states + 0.01 * rng.standard_normal((n, 4)).astype(np.float32),
    }


def median_seconds(fn, repeats):
    times = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return float(np.median(times))


def main():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    rng = np.random.default_rng(0)
    records = cartpole_records(rng, CAPACITY)
    raw_priorities = rng.exponential(1.0, size=CAPACITY)

    buffer = PrioritizedReplayBuffer(CAPACITY, alpha=ALPHA, beta=BETA, seed=1)
    start = time.perf_counter()
    buffer.insert(records)
    buffer.update(np.arange(CAPACITY), raw_priorities)
    fill_s = time.perf_counter() - start

    def tree_step():
        _, indices, _ = buffer.sample(BATCH)
        buffer.update(indices, rng.exponential(1.0, size=BATCH))

    def tree_sample():
        buffer.sample(BATCH)

    indices = buffer.sample(BATCH)[1]

    def tree_update():
        buffer.update(indices, rng.exponential(1.0, size=BATCH))

    # Naive reference: a flat array of priorities ** alpha, O(N) per sample.
    naive_priorities = raw_priorities ** ALPHA
    naive_rng = np.random.default_rng(2)

    def naive_step():
        probabilities = naive_priorities / naive_priorities.sum()
        idx = naive_rng.choice(CAPACITY, size=BATCH, p=probabilities)
        weights = ((probabilities[idx] / probabilities.min()) ** -BETA).astype(np.float32)
        batch = {key: value[idx] for key, value in records.items()}
        naive_priorities[idx] = rng.exponential(1.0, size=BATCH) ** ALPHA
        return batch, weights

    for fn in (tree_step, naive_step):  # Warm-up.
        fn()
    tree_s = median_seconds(tree_step, REPEATS)
    sample_s = median_seconds(tree_sample, REPEATS)
    update_s = median_seconds(tree_update, REPEATS)
    naive_s = median_seconds(naive_step, NAIVE_REPEATS)

    print("PrioritizedReplayBuffer, capacity 2**20 (filled in {:.2f} s), batch {}, one core".format(fill_s, BATCH))
    print("  sample({0}) + update({0}):  {1:8.1f} us  (median of {2})".format(BATCH, tree_s * 1e6, REPEATS))
    print("    sample only:              {:8.1f} us".format(sample_s * 1e6))
    print("    update only:              {:8.1f} us".format(update_s * 1e6))
    print("  naive choice(p=...) step:   {:8.1f} us  (median of {})".format(naive_s * 1e6, NAIVE_REPEATS))
    print("  speed-up vs naive:          {:8.1f}x".format(naive_s / tree_s))
    print("  target < 1 ms: {}".format("met" if tree_s < 1e-3 else "MISSED"))
    del buffer
    for backend in ("pytorch",) + (() if "--no-tf" in sys.argv else ("tf",)):
        component_benchmark(backend, records, raw_priorities, rng)


def component_benchmark(backend, records, raw_priorities, rng):
    """The same step through the PrioritizedReplay component and a graph executor."""
    from rlgraph.components.memories import PrioritizedReplay
    from rlgraph.executors.graph_executor import GraphExecutor
    from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox

    spaces = dict(
        records=Dict(states=FloatBox(shape=(4,)), actions=IntBox(2, dtype="int64"), rewards=FloatBox(),
                     terminals=BoolBox(), next_states=FloatBox(shape=(4,)), add_batch_rank=True),
        num_records=int, indices=IntBox(shape=(), dtype="int64", add_batch_rank=True),
        priorities=FloatBox(add_batch_rank=True))
    start = time.perf_counter()
    executor = GraphExecutor.create(backend=backend, root_component=PrioritizedReplay(CAPACITY, alpha=ALPHA, beta=BETA,
                                                                                        seed=1),
                                    input_spaces=spaces, seed=1)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    executor.execute("insert_records", records)
    executor.execute("update_records", np.arange(CAPACITY, dtype=np.int64), raw_priorities.astype(np.float32))
    fill_s = time.perf_counter() - start
    new_priorities = [rng.exponential(1.0, size=BATCH).astype(np.float32) for _ in range(REPEATS)]
    state = {"i": 0, "indices": None}

    def get():
        state["indices"] = executor.execute("get_records", BATCH)[1]

    def update():
        state["i"] = (state["i"] + 1) % REPEATS
        executor.execute("update_records", state["indices"], new_priorities[state["i"]])

    def step():
        get()
        update()

    for _ in range(5):  # Warm-up.
        step()
    step_s = median_seconds(step, REPEATS)
    get_s = median_seconds(get, REPEATS)
    update_s = median_seconds(update, REPEATS)
    print("PrioritizedReplay component on the {} executor, capacity 2**20 (build {:.2f} s, fill {:.2f} s)".format(
        backend, build_s, fill_s))
    print("  get_records({0}) + update_records({0}): {1:8.1f} us  (median of {2})".format(BATCH, step_s * 1e6,
                                                                                          REPEATS))
    print("    get_records only:                {:8.1f} us".format(get_s * 1e6))
    print("    update_records only:             {:8.1f} us".format(update_s * 1e6))


if __name__ == "__main__":
    main()
