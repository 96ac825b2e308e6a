"""Each executor's random ops draw from its own generator (``rlgraph.backends.op_generator``), on both backends.

An executor's draws are the same whatever other executors in the process draw, in this thread or another, and
whatever the program draws from the backend's default generator; its state is saved and restored with
``get_rng_state``/``set_rng_state`` (a checkpoint's ``backend_rng``); a PyTorch state stored before executors
had their own generator (the default generator's) goes on as it would have.
"""
import threading

import numpy as np
import pytest

from rlgraph.components.distributions import Categorical
from rlgraph.components.memories import ReplayMemory
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

LOGITS = np.zeros((64, 10), np.float32)  # Uniform over 10 categories: 64 draws per call.
PARAMETERS = FloatBox(shape=(10,), add_batch_rank=True)
SPACES = dict(parameters=PARAMETERS, other_parameters=PARAMETERS, values=IntBox(10, add_batch_rank=True),
              deterministic=BoolBox(add_batch_rank=True))


def sampler(backend, seed=5):
    return ComponentTest(Categorical(), SPACES, backend=backend, seed=seed)


def draw(test, n=3):
    return [test.test(("sample_stochastic", LOGITS)) for _ in range(n)]


def test_draws_do_not_depend_on_other_executors(backend):
    alone = draw(sampler(backend))
    first, other = sampler(backend), sampler(backend, seed=6)
    interleaved = []
    for _ in range(3):
        interleaved.append(first.test(("sample_stochastic", LOGITS)))
        draw(other, 2)
    np.testing.assert_array_equal(np.stack(interleaved), np.stack(alone))
    assert len({d.tobytes() for d in alone}) == 3  # Real draws: a stream, not one repeated sample.


def test_draws_in_two_threads_are_those_of_each_alone(backend):
    tests = [sampler(backend, seed) for seed in (5, 6)]
    for test in tests:
        test.test(("sample_stochastic", LOGITS))  # TF traces before the threads start.
    expected = [draw(sampler(backend, seed), 201)[1:] for seed in (5, 6)]
    results, errors = [None, None], []

    def run(i):
        try:
            results[i] = draw(tests[i], 200)
        except Exception as e:  # Reported below, with the thread's index.
            errors.append((i, e))
    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert not errors and not any(t.is_alive() for t in threads), errors
    for i in range(2):
        np.testing.assert_array_equal(np.stack(results[i]), np.stack(expected[i]), err_msg=f"thread {i}")


def test_restored_state_draws_the_stored_continuation(backend):
    test = sampler(backend)
    draw(test, 2)
    state = test.executor.get_rng_state()
    after = draw(test)
    draw(test, 5)
    test.executor.set_rng_state(state)
    np.testing.assert_array_equal(np.stack(draw(test)), np.stack(after))


def test_pytorch_draws_leave_the_default_generator_alone():
    import torch
    test = sampler("pytorch")
    torch.manual_seed(123)
    default_state = torch.get_rng_state()
    first = draw(test)
    assert torch.equal(torch.get_rng_state(), default_state)
    # Reseeding the default generator (as user code may) does not change the executor's stream.
    again = sampler("pytorch")
    torch.manual_seed(7)
    np.testing.assert_array_equal(np.stack(draw(again)), np.stack(first))


def _uniform_categories(generator_state):
    """The categorical samples of ``draw`` by the Gumbel-max reference: with equal logits, each row's argmax of
    the uniforms drawn from a generator in ``generator_state``."""
    import torch
    generator = torch.Generator()
    generator.set_state(generator_state)
    return [torch.rand(64, 10, generator=generator).argmax(-1).numpy() for _ in range(3)]


def test_pytorch_executor_starts_where_the_default_generator_stands_after_its_build():
    """A single executor draws what graph functions drew from torch's default generator before executors had
    their own: runs keep their numbers."""
    import torch
    test = sampler("pytorch")
    built = torch.get_rng_state()
    np.testing.assert_array_equal(np.stack(draw(test)), np.stack(_uniform_categories(built)))


def test_pytorch_state_stored_without_an_executor_generator_goes_on_from_the_default_one():
    import torch
    test = sampler("pytorch")
    stored = torch.Generator().manual_seed(99).get_state()
    test.executor.set_rng_state(dict(cpu=stored.numpy()))  # An older checkpoint's backend_rng: no "generator".
    np.testing.assert_array_equal(np.stack(draw(test)), np.stack(_uniform_categories(stored)))
    assert torch.equal(torch.get_rng_state(), stored)


def test_uniform_replay_samples_from_the_executor_generator(backend):
    """A uniform replay's indices: the same sample indices after a restore, whatever is drawn elsewhere."""
    records = Dict(x=FloatBox(), add_batch_rank=True)
    test = ComponentTest(ReplayMemory(capacity=100), dict(records=records, num_records=int), backend=backend, seed=2)
    test.test(("insert_records", [dict(x=np.arange(100, dtype=np.float32))]))
    state = test.executor.get_rng_state()
    first = test.test(("get_records", [32]))["x"]
    draw(sampler(backend), 2)  # Another executor draws meanwhile.
    test.executor.set_rng_state(state)
    np.testing.assert_array_equal(test.test(("get_records", [32]))["x"], first)
    assert len(set(first.tolist())) > 16


def test_tf_executors_keep_their_own_generators():
    """TF: two executors of the same seed draw the same stream; one's draws do not move the other's state."""
    a, b = sampler("tf"), sampler("tf")
    before = b.executor.get_rng_state()
    draw(a, 2)
    after = b.executor.get_rng_state()
    np.testing.assert_array_equal(before["state"], after["state"])
    np.testing.assert_array_equal(np.stack(draw(b, 2)), np.stack(draw(sampler("tf"), 2)))


def test_jax_draws_do_not_depend_on_the_users_random_bits_setting():
    """The JAX executor's programs draw with the non-partitionable threefry whatever the process's
    ``jax_threefry_partitionable`` (faster to compile), and leave the user's setting alone."""
    from rlgraph.utils.backend import backend_available
    if not backend_available("jax"):
        pytest.skip("JAX is not installed")
    import jax
    draws = []
    for partitionable in (True, False):
        with jax.threefry_partitionable(partitionable):
            draws.append(np.stack(draw(sampler("jax"))))
            assert jax.config.jax_threefry_partitionable is partitionable
    np.testing.assert_array_equal(draws[0], draws[1])
