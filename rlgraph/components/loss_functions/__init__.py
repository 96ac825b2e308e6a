"""Loss functions: DQN (double, n-step, prioritized), IMPALA (V-trace), APPO, R2D2."""
from rlgraph.components.loss_functions.appo_loss_function import APPOLossFunction
from rlgraph.components.loss_functions.dqn_loss_function import DQNLossFunction
from rlgraph.components.loss_functions.impala_loss_function import IMPALALossFunction
from rlgraph.components.loss_functions.loss_function import LossFunction
from rlgraph.components.loss_functions.r2d2_loss_function import R2D2LossFunction

__all__ = ["APPOLossFunction", "DQNLossFunction", "IMPALALossFunction", "LossFunction", "R2D2LossFunction"]
