"""The root component of APPO: PPO's clipped surrogate on V-trace advantages."""
from rlgraph.components.algorithms.impala_algorithm_component import IMPALAAlgorithmComponent
from rlgraph.components.loss_functions.appo_loss_function import APPOLossFunction


class APPOAlgorithmComponent(IMPALAAlgorithmComponent):
    """Asynchronous PPO as in Sample Factory (Petrenko et al. 2020): ``IMPALAAlgorithmComponent`` with
    ``APPOLossFunction`` (Schulman et al. 2017's clipped ratio on V-trace advantages, Espeholt et al. 2018).

    Same API as ``IMPALAAlgorithmComponent``; ``update``'s ``unroll`` also holds "behaviour_values" (``V(x_t)``
    as the actor computed it, ``act``'s "value"), used by the loss's optional value clipping. Several passes
    (epochs, minibatches of environment columns) over one unroll are several ``update`` calls; V-trace is
    recomputed with the current policy in each.

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
