"""Learner update throughput of rlgraph's agents against a bare training pass written directly in the backend.

For APPO and DQN on CartPole (their configs' networks, batch sizes and optimizers), prints per backend the
samples per second of one ``agent.update(batch)`` with a fixed batch (APPO: one unroll of ``unroll_length``
x ``num_envs``, learned from in ``num_epochs`` passes of ``num_minibatches`` optimizer steps, so samples are
sample-passes; DQN: one step on ``batch_size`` transitions) against a hand-written equivalent of the same
network, loss, batch and Adam:

- PyTorch: ``nn.Sequential`` + ``torch.optim.Adam`` (``--bare-optimizer``: its default per-parameter loop,
  ``foreach`` or ``fused``), eager, V-trace as a reverse loop over time under ``no_grad`` (as torchbeast).
- TensorFlow: a ``tf.function`` (input signature, no Keras) over ``tf.Variable``s with ``tf.GradientTape``
  and Adam's update written out per variable, V-trace with a reverse ``tf.scan`` (as scalable_agent).

Both sides start from the same weights, take numpy batches and return numpy results; the first update's
mean loss of both is printed as a check that they do the same work. Repetitions are interleaved (ours, bare,
ours, bare, ...) and the table holds medians, so machine noise cancels in the ratio. Warm-up is excluded.
Math threads: ``OMP_NUM_THREADS`` (default 1, as ``rlgraph train`` sets it).

Run: .venv/bin/python benchmarks/learner_throughput.py [--backend tf|pytorch] [--agent appo|dqn]
     [--rounds 15] [--seconds 0.3]
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from rlgraph.agents import Agent  # noqa: E402
from rlgraph.spaces import FloatBox, IntBox  # noqa: E402

STATE_DIM, NUM_ACTIONS = 4, 2


def load_config(name):
    with open(os.path.join(ROOT, "configs", f"{name}_cartpole.json")) as f:
        return json.load(f)


# --- fixed batches ----------------------------------------------------------------------------------------------
def appo_batch(config, rng):
    t, b = config["unroll_length"], config["environment_spec"]["num_envs"]
    unroll = dict(states=rng.normal(size=(t, b, STATE_DIM)).astype(np.float32),
                  actions=rng.integers(0, NUM_ACTIONS, size=(t, b)).astype(np.int32),
                  rewards=np.ones((t, b), np.float32), terminals=rng.random((t, b)) < 0.03,
                  truncation_values=np.zeros((t, b), np.float32),
                  behaviour_log_probs=np.full((t, b), np.log(0.5), np.float32),
                  behaviour_values=rng.normal(size=(t, b)).astype(np.float32))
    # No "policy_versions": no policy-lag bookkeeping (nor dropped columns) in a benchmark of repeated updates.
    return dict(unroll=unroll, bootstrap=dict(states=rng.normal(size=(b, STATE_DIM)).astype(np.float32)))


def dqn_batch(config, rng):
    n = config["update_spec"]["batch_size"]
    return dict(states=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
                actions=rng.integers(0, NUM_ACTIONS, size=n).astype(np.int32),
                rewards=rng.normal(size=n).astype(np.float32), terminals=rng.random(n) < 0.05,
                next_states=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
                importance_weights=rng.uniform(0.5, 1.0, size=n).astype(np.float32))


def samples_per_update(name, config):
    if name == "appo":
        return config["unroll_length"] * config["environment_spec"]["num_envs"] * config["num_epochs"]
    return config["update_spec"]["batch_size"]


def minibatch_columns(rng, n, num_epochs, num_minibatches):
    """The columns of each optimizer step of one APPO update, drawn as ``IMPALALearner`` draws them."""
    out = []
    for _ in range(num_epochs):
        if num_minibatches > 1:
            out.extend(np.array_split(rng.permutation(n), num_minibatches))
        else:
            out.append(np.arange(n))
    return out


def layer_weights(weights, scope, names):
    """[(kernel [in, out], bias)] of the dense layers ``names`` under ``scope`` of an agent's weights."""
    return [(weights[f"{scope}/{n}/kernel"], weights[f"{scope}/{n}/bias"]) for n in names]


# --- bare PyTorch -------------------------------------------------------------------------------------------------
def torch_linear(kernel, bias):
    import torch
    layer = torch.nn.Linear(*kernel.shape)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
        layer.bias.copy_(torch.from_numpy(bias))
    return layer


def torch_adam(params, lr, kind):
    import torch
    extra = dict(foreach=True) if kind == "foreach" else dict(fused=True) if kind == "fused" else {}
    return torch.optim.Adam(params, lr=lr, eps=1e-8, **extra)


def bare_appo_torch(config, weights, batch, seed, optimizer_kind):
    import torch
    activation = dict(tanh=torch.nn.Tanh, relu=torch.nn.ReLU)[config["network_spec"][0]["activation"]]
    (k0, b0), (k1, b1), (ka, ba), (kv, bv) = layer_weights(
        weights, "appo/policy", ["neural-network/dense", "neural-network/dense-1", "action-adapter", "value-head"])
    trunk = torch.nn.Sequential(torch_linear(k0, b0), activation(), torch_linear(k1, b1), activation())
    return bare_appo_torch_update(config, trunk, torch_linear(ka, ba), torch_linear(kv, bv), torch.from_numpy,
                                  (STATE_DIM,), batch, seed, optimizer_kind)


def bare_appo_torch_update(config, trunk, pi, vf, to_input, state_shape, batch, seed, optimizer_kind):
    """``update()`` of a bare eager PyTorch APPO learner: ``trunk``, policy head ``pi`` and value head ``vf``
    (modules) on ``to_input(numpy states [N, *state_shape])``, V-trace as a reverse loop over time under
    ``no_grad`` (as torchbeast), PPO clipping, ``torch.optim.Adam``; one step per minibatch of columns."""
    import torch
    params = [*trunk.parameters(), *pi.parameters(), *vf.parameters()]
    c = appo_settings(config)
    optimizer = torch_adam(params, c["lr"], optimizer_kind)
    clip_norm, gamma, scale, clip, w_v, w_e = c["clip_norm"], c["gamma"], c["scale"], c["clip"], c["w_v"], c["w_e"]
    rng = np.random.default_rng(seed)
    unroll, bootstrap = batch["unroll"], batch["bootstrap"]
    n = unroll["rewards"].shape[1]

    def step(u, boot_states):
        actions = torch.from_numpy(u["actions"]).long()
        t, b = actions.shape
        h = trunk(to_input(u["states"].reshape((t * b,) + tuple(state_shape))))
        logits, values = pi(h).reshape(t, b, -1), vf(h).reshape(t, b)
        boot_values = vf(trunk(to_input(boot_states))).reshape(b)
        log_pis = torch.log_softmax(logits, -1)
        log_probs = log_pis.gather(-1, actions[..., None])[..., 0]
        entropy = -(log_pis.exp() * log_pis).sum(-1)
        rewards = torch.from_numpy(u["rewards"])
        rewards = scale * (rewards.clamp(-1.0, 1.0) if c["clamp"] else rewards)
        rewards = rewards + gamma * torch.from_numpy(u["truncation_values"])
        discounts = gamma * (1.0 - torch.from_numpy(u["terminals"]).float())
        behaviour = torch.from_numpy(u["behaviour_log_probs"])
        with torch.no_grad():  # V-trace (Espeholt et al. 2018), rho_bar = c_bar = rho_bar_pg = 1.
            rhos = torch.exp(log_probs - behaviour).clamp(max=1.0)
            next_values = torch.cat([values[1:], boot_values[None]])
            deltas = rhos * (rewards + discounts * next_values - values)
            acc, vs_minus_v = torch.zeros(b), [None] * t
            for i in range(t - 1, -1, -1):
                acc = deltas[i] + discounts[i] * rhos[i] * acc
                vs_minus_v[i] = acc
            vs = torch.stack(vs_minus_v) + values
            next_vs = torch.cat([vs[1:], boot_values[None]])
            advantages = rhos * (rewards + discounts * next_vs - values)
            if c["normalize"]:
                advantages = (advantages - advantages.mean()) / (advantages.std(correction=0) + 1e-8)
        ratio = torch.exp(log_probs - behaviour)
        policy = -torch.minimum(ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages)
        loss = (policy + w_v * 0.5 * (values - vs) ** 2 - w_e * entropy).mean()
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip_norm) if clip_norm else torch.zeros(())
        optimizer.step()
        return loss.item(), norm.item(), entropy.detach().mean().item(), values.detach().mean().item()

    def update():
        losses = []
        for cols in minibatch_columns(rng, n, config["num_epochs"], config["num_minibatches"]):
            losses.append(step({k: v[:, cols] for k, v in unroll.items()}, bootstrap["states"][cols])[0])
        return float(np.mean(losses))
    return update


def bare_dqn_torch(config, weights, batch, optimizer_kind):
    import torch
    names = ["neural-network/dense", "neural-network/dense-1", "action-adapter", "state-value"]
    activation = dict(tanh=torch.nn.Tanh, relu=torch.nn.ReLU)[config["network_spec"][0]["activation"]]

    def net(scope):
        (k0, b0), (k1, b1), (ka, ba), (kv, bv) = layer_weights(weights, scope, names)
        trunk = torch.nn.Sequential(torch_linear(k0, b0), activation(), torch_linear(k1, b1), activation())
        return torch.nn.ModuleList([trunk, torch_linear(ka, ba), torch_linear(kv, bv)])

    online, target = net("dqn/policy"), net("dqn/target-policy/target-policy-net")
    target.requires_grad_(False)

    def q_values(model, states):
        h = model[0](states)
        advantages = model[1](h)
        return model[2](h) + advantages - advantages.mean(-1, keepdim=True)

    optimizer = torch_adam(list(online.parameters()), config["optimizer_spec"]["learning_rate"], optimizer_kind)
    gamma_n = config["discount"] ** config["n_step"]

    def update():
        s, s2 = torch.from_numpy(batch["states"]), torch.from_numpy(batch["next_states"])
        actions = torch.from_numpy(batch["actions"]).long()
        q = q_values(online, s).gather(-1, actions[:, None])[:, 0]
        with torch.no_grad():  # Double Q (van Hasselt et al. 2016) with n-step returns.
            best = q_values(online, s2).argmax(-1, keepdim=True)
            not_done = 1.0 - torch.from_numpy(batch["terminals"]).float()
            targets = torch.from_numpy(batch["rewards"]) + gamma_n * not_done * q_values(target, s2).gather(
                -1, best)[:, 0]
        td = targets - q
        huber = torch.nn.functional.huber_loss(q, targets, reduction="none", delta=1.0)
        loss = (torch.from_numpy(batch["importance_weights"]) * huber).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), td.detach().numpy()
    return lambda: update()[0]


# --- bare TensorFlow ----------------------------------------------------------------------------------------------
class TFAdam:
    """Adam (Kingma & Ba 2015), epsilon on the bias-corrected sqrt(v) as ``torch.optim.Adam``, per variable."""

    def __init__(self, variables, lr):
        import tensorflow as tf
        self.lr, self.variables = lr, variables
        self.m = [tf.Variable(tf.zeros_like(v)) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v)) for v in variables]
        self.t = tf.Variable(0.0)

    def apply(self, grads):
        t = self.t.assign_add(1.0)
        for var, g, m, v in zip(self.variables, grads, self.m, self.v):
            m_new = m.assign(0.9 * m + 0.1 * g)
            v_new = v.assign(0.999 * v + 0.001 * g * g)
            var.assign_sub(self.lr * (m_new / (1.0 - 0.9 ** t)) / ((v_new / (1.0 - 0.999 ** t)) ** 0.5 + 1e-8))


def tf_dense_stack(weights, scope, names):
    import tensorflow as tf
    return [(tf.Variable(k), tf.Variable(b)) for k, b in layer_weights(weights, scope, names)]


def appo_settings(config):
    """What a bare APPO pass takes from a config: loss weights, reward handling and the optimizer's settings."""
    loss_spec, opt = config["loss_spec"], config["optimizer_spec"]
    return dict(gamma=config["discount"], scale=config.get("reward_scale", 1.0), clip=loss_spec["clip_ratio"],
                w_v=loss_spec["weight_baseline"], w_e=loss_spec["weight_entropy"],
                normalize=loss_spec.get("normalize_advantages", False),
                clamp=config.get("reward_clipping") == "clamp_one", lr=opt["learning_rate"],
                clip_norm=opt.get("clip_grad_norm"))


def bare_appo_tf(config, weights, batch, seed):
    import tensorflow as tf
    act = dict(tanh=tf.tanh, relu=tf.nn.relu)[config["network_spec"][0]["activation"]]
    (k0, b0), (k1, b1), (ka, ba), (kv, bv) = layers = tf_dense_stack(
        weights, "appo/policy", ["neural-network/dense", "neural-network/dense-1", "action-adapter", "value-head"])

    def forward(x):
        h = act(tf.matmul(act(tf.matmul(x, k0) + b0), k1) + b1)
        return tf.matmul(h, ka) + ba, (tf.matmul(h, kv) + bv)[:, 0]
    return bare_appo_tf_update(config, [x for layer in layers for x in layer], forward,
                               tf.TensorSpec([STATE_DIM], tf.float32), tf.int32, NUM_ACTIONS, batch, seed)


def bare_appo_tf_update(config, variables, forward, state_spec, action_dtype, num_actions, batch, seed):
    """``update()`` of a bare TF APPO learner over ``variables``: a ``tf.function`` (input signature, no Keras)
    with ``GradientTape``, V-trace as a reverse ``tf.scan`` (as scalable_agent), PPO clipping and Adam written
    out; ``forward(flat states) -> (logits [N, A], values [N])``; one call per minibatch of columns."""
    import tensorflow as tf
    c = appo_settings(config)
    adam = TFAdam(variables, c["lr"])
    gamma, scale, clip, w_v, w_e = c["gamma"], c["scale"], c["clip"], c["w_v"], c["w_e"]
    shape = list(state_spec.shape)
    spec = lambda shape, dtype=tf.float32: tf.TensorSpec(shape, dtype)  # noqa: E731
    signature = [spec([None, None, *shape], state_spec.dtype), spec([None, None], action_dtype), spec([None, None]),
                 spec([None, None], tf.bool), spec([None, None]), spec([None, None]),
                 spec([None, *shape], state_spec.dtype)]

    @tf.function(input_signature=signature, autograph=False)
    def traced(states, actions, rewards, terminals, truncation_values, behaviour, boot_states):
        t, b = tf.shape(actions)[0], tf.shape(actions)[1]
        with tf.GradientTape() as tape:
            logits, values = forward(tf.reshape(states, [-1, *shape]))
            log_pis = tf.reshape(tf.nn.log_softmax(logits), [t, b, num_actions])
            values = tf.reshape(values, [t, b])
            boot_values = tf.reshape(forward(boot_states)[1], [b])
            log_probs = tf.reduce_sum(log_pis * tf.one_hot(actions, num_actions), -1)
            entropy = -tf.reduce_sum(tf.exp(log_pis) * log_pis, -1)
            r = scale * (tf.clip_by_value(rewards, -1.0, 1.0) if c["clamp"] else rewards) + gamma * truncation_values
            discounts = gamma * (1.0 - tf.cast(terminals, tf.float32))
            rhos = tf.minimum(1.0, tf.exp(log_probs - behaviour))
            v_sg, boot_sg = tf.stop_gradient(values), tf.stop_gradient(boot_values)
            next_values = tf.concat([v_sg[1:], boot_sg[None]], 0)
            deltas = tf.stop_gradient(rhos * (r + discounts * next_values - v_sg))
            decays = tf.stop_gradient(discounts * rhos)
            vs_minus_v = tf.scan(lambda acc, x: x[0] + x[1] * acc, (deltas, decays), initializer=tf.zeros([b]),
                                 reverse=True)
            vs = vs_minus_v + v_sg
            advantages = tf.stop_gradient(rhos * (r + discounts * tf.concat([vs[1:], boot_sg[None]], 0) - v_sg))
            if c["normalize"]:
                mean, variance = tf.nn.moments(advantages, axes=[0, 1])
                advantages = (advantages - mean) / (tf.sqrt(variance) + 1e-8)
            ratio = tf.exp(log_probs - behaviour)
            policy = -tf.minimum(ratio * advantages, tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip) * advantages)
            loss = tf.reduce_mean(policy + w_v * 0.5 * tf.square(values - vs) - w_e * entropy)
        grads = tape.gradient(loss, variables)
        norm = tf.linalg.global_norm(grads)
        if c["clip_norm"]:
            grads, _ = tf.clip_by_global_norm(grads, c["clip_norm"], use_norm=norm)
        adam.apply(grads)
        return loss, norm, tf.reduce_mean(entropy), tf.reduce_mean(values)

    step = traced.get_concrete_function()  # Called directly: no signature dispatch per call.
    rng = np.random.default_rng(seed)
    unroll, bootstrap = batch["unroll"], batch["bootstrap"]
    n = unroll["rewards"].shape[1]
    keys = ("states", "actions", "rewards", "terminals", "truncation_values", "behaviour_log_probs")

    def update():
        losses = []
        for cols in minibatch_columns(rng, n, config["num_epochs"], config["num_minibatches"]):
            out = step(*[unroll[k][:, cols] for k in keys], bootstrap["states"][cols])
            losses.append(float(out[0].numpy()))
            [o.numpy() for o in out[1:]]
        return float(np.mean(losses))
    return update


def bare_dqn_tf(config, weights, batch):
    import tensorflow as tf
    act = dict(tanh=tf.tanh, relu=tf.nn.relu)[config["network_spec"][0]["activation"]]
    names = ["neural-network/dense", "neural-network/dense-1", "action-adapter", "state-value"]
    online = tf_dense_stack(weights, "dqn/policy", names)
    target = tf_dense_stack(weights, "dqn/target-policy/target-policy-net", names)
    variables = [x for layer in online for x in layer]
    adam = TFAdam(variables, config["optimizer_spec"]["learning_rate"])
    gamma_n = config["discount"] ** config["n_step"]

    def q_values(net, x):
        (k0, b0), (k1, b1), (ka, ba), (kv, bv) = net
        h = act(tf.matmul(act(tf.matmul(x, k0) + b0), k1) + b1)
        advantages = tf.matmul(h, ka) + ba
        return tf.matmul(h, kv) + bv + advantages - tf.reduce_mean(advantages, -1, keepdims=True)

    spec = tf.TensorSpec
    signature = [spec([None, STATE_DIM], tf.float32), spec([None], tf.int32), spec([None], tf.float32),
                 spec([None], tf.bool), spec([None, STATE_DIM], tf.float32), spec([None], tf.float32)]

    @tf.function(input_signature=signature, autograph=False)
    def traced(states, actions, rewards, terminals, next_states, weights_):
        best = tf.one_hot(tf.argmax(q_values(online, next_states), -1), NUM_ACTIONS)
        qt = tf.reduce_sum(q_values(target, next_states) * best, -1)
        targets = tf.stop_gradient(rewards + gamma_n * (1.0 - tf.cast(terminals, tf.float32)) * qt)
        with tf.GradientTape() as tape:
            q = tf.reduce_sum(q_values(online, states) * tf.one_hot(actions, NUM_ACTIONS), -1)
            td = targets - q
            abs_td = tf.abs(td)
            huber = tf.where(abs_td <= 1.0, 0.5 * tf.square(td), abs_td - 0.5)
            loss = tf.reduce_mean(weights_ * huber)
        adam.apply(tape.gradient(loss, variables))
        return loss, td

    step = traced.get_concrete_function()
    keys = ("states", "actions", "rewards", "terminals", "next_states", "importance_weights")

    def update():
        loss, td = step(*[batch[k] for k in keys])
        td.numpy()
        return float(loss.numpy())
    return update


# --- measuring ---------------------------------------------------------------------------------------------------
def make_pair(name, backend, optimizer_kind, seed=0):
    config = load_config(name)
    rng = np.random.default_rng(seed)
    agent = Agent.from_spec(config, state_space=FloatBox(shape=(STATE_DIM,)), action_space=IntBox(NUM_ACTIONS),
                            backend=backend, seed=seed)
    weights = dict(network_weights(agent))
    if name == "appo":
        batch = appo_batch(config, rng)
        bare = (bare_appo_torch(config, weights, batch, seed, optimizer_kind) if backend == "pytorch"
                else bare_appo_tf(config, weights, batch, seed))
        ours = lambda: agent.update(batch)["loss"]  # noqa: E731
    else:
        batch = dqn_batch(config, rng)
        bare = (bare_dqn_torch(config, weights, batch, optimizer_kind) if backend == "pytorch"
                else bare_dqn_tf(config, weights, batch))
        ours = lambda: agent.update(batch)["loss"]  # noqa: E731
    return config, ours, bare


def network_weights(agent):
    """(full name, numpy value) of the online (and target) network's variables."""
    names = [k for k in agent.executor.variables() if "/policy/" in k or "/target-policy/" in k]
    return zip(names, agent.executor.read_variable_values(*names))


def timed(fn, seconds):
    """Seconds per call of ``fn`` over at least ``seconds`` (at least 2 calls)."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if calls >= 2 and elapsed >= seconds:
            return elapsed / calls


def measure(name, backend, rounds, seconds, optimizer_kind):
    config, ours, bare = make_pair(name, backend, optimizer_kind)
    first_ours, first_bare = ours(), bare()  # Same weights, batch and minibatch order: the same first update.
    for _ in range(3):
        ours(), bare()
    t_ours, t_bare = [], []
    for _ in range(rounds):
        t_ours.append(timed(ours, seconds))
        t_bare.append(timed(bare, seconds))
    n = samples_per_update(name, config)
    a, b = statistics.median(t_ours), statistics.median(t_bare)
    return dict(agent=name, backend=backend, samples=n, ours=n / a, bare=n / b, ratio=b / a, ms_ours=a * 1e3,
                ms_bare=b * 1e3, loss_ours=first_ours, loss_bare=first_bare)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["tf", "pytorch"], action="append")
    parser.add_argument("--agent", choices=["appo", "dqn"], action="append")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=0.3, help="minimum time of one repetition")
    parser.add_argument("--bare-optimizer", choices=["default", "foreach", "fused"], default="default",
                        help="PyTorch's bare Adam implementation (default: torch.optim.Adam's CPU default)")
    args = parser.parse_args()
    rows = []
    for backend in args.backend or ["pytorch", "tf"]:
        for name in args.agent or ["appo", "dqn"]:
            rows.append(measure(name, backend, args.rounds, args.seconds, args.bare_optimizer))
            r = rows[-1]
            print(f"[{backend}] {name}: ours {r['ours']:,.0f} samples/s ({r['ms_ours']:.2f} ms/update), bare "
                  f"{r['bare']:,.0f} ({r['ms_bare']:.2f} ms), ratio {r['ratio']:.2f}; first update loss ours "
                  f"{r['loss_ours']:.5f}, bare {r['loss_bare']:.5f}", flush=True)
    print(f"\nOMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, bare PyTorch Adam: {args.bare_optimizer}\n")
    print("| agent | backend | samples/update | rlgraph samples/s | bare samples/s | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['agent']} | {r['backend']} | {r['samples']} | {r['ours']:,.0f} | {r['bare']:,.0f} | "
              f"{r['ratio']:.2f} |")


if __name__ == "__main__":
    main()
