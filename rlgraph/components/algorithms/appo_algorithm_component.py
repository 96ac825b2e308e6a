"""The root component of APPO: PPO's clipped surrogate on V-trace advantages."""
from rlgraph.components.algorithms.impala_algorithm_component import IMPALAAlgorithmComponent
from rlgraph.components.loss_functions.appo_loss_function import APPOLossFunction
from rlgraph.utils.decorators import rlgraph_api


class APPOAlgorithmComponent(IMPALAAlgorithmComponent):
    """Asynchronous PPO as in Sample Factory (Petrenko et al. 2020): ``IMPALAAlgorithmComponent`` with
    ``APPOLossFunction`` (Schulman et al. 2017's clipped ratio on V-trace advantages, Espeholt et al. 2018).

    Same API as ``IMPALAAlgorithmComponent``; ``update``'s ``unroll`` also holds "behaviour_values" (``V(x_t)``
    as the actor computed it, ``act``'s "value"), used by the loss's optional value clipping. Several passes
    (epochs, minibatches of environment columns) over one unroll are several ``update`` calls; V-trace is
    recomputed with the current policy in each.

    Minibatches of samples (feed-forward networks): ``calc_targets`` computes V-trace's targets and advantages
    for whole unrolls with the current weights, and the learner's own log-likelihoods and values of them;
    ``update_samples`` then takes one optimizer step on any set of samples (time steps of any environment),
    given as [1, N], as PPO's minibatches are drawn (Schulman et al. 2017; Huang et al. 2022, "The 37
    implementation details of PPO"). Its clipped ratio is taken against the proximal policy given with the
    targets, the learner's policy before the update, not against the behaviour policy: decoupled PPO (Hilton
    et al. 2021, "Batch size-invariance for policy optimization"), whose importance weight of the behaviour
    policy is V-trace's clipped ``min(rho_bar_pg, pi/mu)`` inside the advantages. With actors a few updates
    behind (a learner thread, remote actors), a ratio against the behaviour policy would start each update
    outside the clip range, and the clipped samples would give no gradient; on-policy both are the same.

    API (besides ``IMPALAAlgorithmComponent``'s):
        calc_targets(unroll, bootstrap, initial_internal_states=None): dict with "vs", "advantages" and the
            learner's "log_probs" and "values" [T, B].
        update_samples(samples, targets, time_percentage): one optimizer step on ``samples`` ({"states",
            "actions"}, any [T, B], e.g. [1, N]) with ``targets`` of the same shape: "vs", "advantages", and
            the proximal policy's "log_probs" and "values" (the reference of the clipped ratio and of value
            clipping); results as ``update``, plus the loss function's ``ratio_stats`` of the clipped ratio
            before the step ("approx_kl", "clip_fraction").

    Args:
        **kwargs: See ``IMPALAAlgorithmComponent``; ``loss_spec`` takes ``APPOLossFunction``'s keywords
            (``clip_ratio``, ``value_clipping``, ``normalize_advantages``, ...).
    """

    default_scope = "appo"
    loss_class = APPOLossFunction

    def _loss(self, unroll, evaluated, bootstrap_values, rewards):
        return self.loss_function.loss(evaluated["log_likelihood"], unroll["behaviour_log_probs"],
                                       evaluated["entropy"], evaluated["value"], bootstrap_values, rewards,
                                       unroll["terminals"], unroll["behaviour_values"])

    def _ratio_stats(self, log_probs, reference_log_probs):
        stats = self.loss_function.ratio_stats(log_probs, reference_log_probs)
        return {key: stats[key] for key in ("approx_kl", "clip_fraction")}

    @rlgraph_api
    def calc_targets(self, unroll, bootstrap, initial_internal_states=None):
        evaluated, bootstrap_values = self._evaluate_unroll(unroll, bootstrap, initial_internal_states)
        rewards = unroll["rewards"]
        if self.reward_clipping is not None:
            rewards = self.reward_clipping.preprocess(rewards)
        rewards = self._graph_fn_bootstrap_truncations(rewards, unroll["truncation_values"])
        vs, advantages = self.loss_function.targets(evaluated["log_likelihood"], unroll["behaviour_log_probs"],
                                                    evaluated["value"], bootstrap_values, rewards,
                                                    unroll["terminals"])
        return dict(vs=vs, advantages=advantages, log_probs=evaluated["log_likelihood"], values=evaluated["value"])

    @rlgraph_api
    def update_samples(self, samples, targets, time_percentage):
        evaluated = self.policy.evaluate_actions(self._nn_inputs(samples["states"], None, None), samples["actions"])
        loss = self.loss_function.loss_from_targets(evaluated["log_likelihood"], targets["log_probs"],
                                                    evaluated["entropy"], evaluated["value"], targets["vs"],
                                                    targets["advantages"], targets["values"])
        step_loss, grad_norm = self.optimizer.step(self.policy.variables(), loss, time_percentage)
        return self._update_stats(step_loss, grad_norm, evaluated, targets["log_probs"])
