"""TensorFlow runs' policies as SavedModels with a ``serving_default`` signature, or as ONNX models (tf2onnx)."""
import logging

from rlgraph.utils.errors import RLGraphBackendError


#: ONNX opset of exported models (onnxruntime 1.18+ runs it).
ONNX_OPSET = 17


def _serving_function(greedy):
    """``(tf.Module holding the agent's variables, its tf.function)``: float32 observations in, the dict
    ``{"actions": ..., scores_name: ...}`` out."""
    import numpy as np
    import tensorflow as tf

    dtype = tf.as_dtype(np.dtype(greedy.state_space.dtype))
    module = tf.Module()
    module.policy_variables = list(greedy.agent.executor.variables().values())
    name = greedy.scores_name

    signature = [tf.TensorSpec([None] + list(greedy.state_space.shape), tf.float32, name="observations")] + [
        tf.TensorSpec([None] + list(shape), tf.float32, name=n) for shape, n in zip(greedy.state_shapes,
                                                                                    greedy.state_names)]

    @tf.function(input_signature=signature)
    def serve(observations, *states):
        actions, scores, *next_states = greedy(tf.cast(observations, dtype), *states)
        out = {"actions": tf.identity(tf.cast(actions, tf.int64), name="actions"),
               name: tf.identity(tf.cast(scores, tf.float32), name=name)}
        for n, s in zip(greedy.state_names, next_states):
            out[f"next_{n}"] = tf.identity(tf.cast(s, tf.float32), name=f"next_{n}")
        return out

    module.serve = serve
    return module, serve


def export_saved_model(greedy, output):
    """Writes the policy as a SavedModel: ``tf.saved_model.load(output).signatures["serving_default"]`` takes
    ``observations`` (float32, ``[batch, ...]``) and returns ``{"actions": int64 [batch], scores_name: float32
    [batch, actions]}``; a recurrent policy also takes ``state_0, ...`` and returns ``next_state_0, ...``; the
    weights are the model's variables."""
    import tensorflow as tf

    module, serve = _serving_function(greedy)
    tf.saved_model.save(module, output, signatures={"serving_default": serve})
    return output


def export_onnx(greedy, output):
    """Writes the policy as an ONNX model (tf2onnx): input ``observations`` (float32, ``[batch, ...]``), outputs
    ``actions`` (int64 ``[batch]``) and the scores (``q_values`` or ``logits``, float32 ``[batch, actions]``)."""
    try:
        import tf2onnx.convert
    except ImportError:
        raise RLGraphBackendError("export --format onnx of a TensorFlow run needs tf2onnx: pip install "
                                  "'rlgraph[export]'.") from None
    _, serve = _serving_function(greedy)
    quiet = logging.getLogger("tf2onnx")
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        tf2onnx.convert.from_function(serve, input_signature=serve.input_signature, opset=ONNX_OPSET,
                                      output_path=output)
    finally:
        quiet.setLevel(level)
    return output
