"""Two XLA:CPU costs behind JAX's learning rate on Atari, each against the way rlgraph's JAX backend avoids it.

1. The last convolution of RLlib's small Atari CNN (``configs/*_pong_42.json``: 11x11x32 -> 256, "valid", one
   output pixel). XLA:CPU computes its input gradient as a transposed convolution over a (2*11-1)^2 zero-padded
   image, about 121 times the work of the equivalent matmul. rlgraph's ``conv2d`` runs a kernel that covers the
   whole image as a matmul over the flattened image (``JaxOps.conv2d``).
2. ``execute_steps`` (APPO's minibatch steps of one epoch in one program) as a ``lax.scan``: XLA:CPU runs the
   CNN's gradient step inside the while loop several times slower than outside one. rlgraph unrolls the scan on
   CPU (``JaxExecutor._make_steps_call``).

Prints, per case, the median milliseconds of both forms (interleaved repetitions, warm-up and compilation
excluded) and their ratio, plus the largest difference of their results as a check that both compute the same.

Run: .venv/bin/python benchmarks/jax_cpu_kernels.py [--batch 128] [--steps 4] [--rounds 7]
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

DIMS = ("NHWC", "HWIO", "NHWC")


def conv(x, w, stride, padding):
    return lax.conv_general_dilated(x, w, (stride, stride), padding, dimension_numbers=DIMS)


def timed(fn, seconds=0.5):
    jax.block_until_ready(fn())
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        jax.block_until_ready(fn())
        n += 1
    return 1000 * (time.perf_counter() - start) / n


def compare(name, slow, fast, rounds):
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree_util.tree_leaves(slow()), jax.tree_util.tree_leaves(fast())))
    times = {"xla": [], "rlgraph": []}
    for _ in range(rounds):
        times["xla"].append(timed(slow))
        times["rlgraph"].append(timed(fast))
    a, b = statistics.median(times["xla"]), statistics.median(times["rlgraph"])
    print(f"{name:<44} {a:9.2f} ms {b:9.2f} ms {a / b:7.1f}x   (max |diff| {diff:.1e})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.batch
    print(f"jax {jax.__version__} on {jax.default_backend()}, batch {n}")
    print(f"{'case':<44} {'as XLA':>12} {'as rlgraph':>12} {'ratio':>8}")

    # 1. The whole-image convolution's input gradient.
    x = jnp.asarray(rng.normal(size=(n, 11, 11, 32)).astype(np.float32))
    k = jnp.asarray(rng.normal(size=(11, 11, 32, 256)).astype(np.float32) * 0.01)
    dy = jnp.asarray(rng.normal(size=(n, 1, 1, 256)).astype(np.float32))
    as_conv = jax.jit(jax.grad(lambda x, k: jnp.sum(conv(x, k, 1, "VALID") * dy), (0, 1)))
    as_matmul = jax.jit(jax.grad(lambda x, k: jnp.sum(
        (x.reshape(n, -1) @ k.reshape(-1, 256)).reshape(n, 1, 1, 256) * dy), (0, 1)))
    compare("11x11 whole-image conv, both gradients", lambda: as_conv(x, k), lambda: as_matmul(x, k), args.rounds)

    # 2. Gradient steps of the small Atari CNN in a scan, rolled and unrolled.
    weights = [jnp.asarray(rng.normal(size=s).astype(np.float32) * 0.05)
               for s in ((4, 4, 4, 16), (4, 4, 16, 32), (11 * 11 * 32, 256), (256, 6))]
    data = jnp.asarray(rng.random(size=(n * args.steps, 42, 42, 4)).astype(np.float32))
    rows = jnp.asarray(np.stack(np.array_split(rng.permutation(n * args.steps), args.steps)))

    def loss(w, x):
        h = jax.nn.relu(conv(x, w[0], 2, "SAME"))
        h = jax.nn.relu(conv(h, w[1], 2, "SAME"))
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ w[2])
        return jnp.mean(jax.nn.logsumexp(h @ w[3], axis=-1))

    def step(w, r):
        grads = jax.grad(loss)(w, jnp.take(data, r, axis=0))
        return [a - 1e-3 * g for a, g in zip(w, grads)], None

    rolled = jax.jit(lambda w, rows: lax.scan(step, w, rows)[0])
    unrolled = jax.jit(lambda w, rows: lax.scan(step, w, rows, unroll=True)[0])
    compare(f"{args.steps} CNN gradient steps in one scan", lambda: rolled(weights, rows),
            lambda: unrolled(weights, rows), args.rounds)


if __name__ == "__main__":
    main()
