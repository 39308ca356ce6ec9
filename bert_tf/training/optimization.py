"""Optimizers and learning-rate schedules for BERT (Keras 3 optimizers).

AdamW as in the paper (β1 0.9, β2 0.999, ε 1e-6, weight decay 0.01 not
applied to LayerNorm and bias variables), LAMB for large batches, linear
warm-up then linear or polynomial decay, global-norm clipping, gradient
accumulation, and loss scaling under `mixed_float16`.
"""

import dataclasses

import keras

from bert_tf.config import OptimizerConfig  # noqa: F401 (re-export)

# Variable names (Keras 3 `variable.name`) that get no weight decay:
# LayerNorm gamma/beta and every bias, as in the original BERT.
NO_DECAY = ("gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmUpPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak`, then polynomial decay to `end`.

    Example:
    >>> schedule = WarmUpPolynomialDecay(1e-4, warmup_steps=10,
    ...                                  decay_steps=110)
    >>> [round(float(schedule(s)), 7) for s in (0, 5, 10, 60, 110, 200)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0, 0.0]
    """

    def __init__(self, peak, warmup_steps, decay_steps, end=0.0, power=1.0):
        self.peak = peak
        self.warmup_steps = warmup_steps
        self.decay_steps = decay_steps
        self.end = end
        self.power = power

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = keras.ops.cast(self.warmup_steps, "float32")
        warm = self.peak * step / keras.ops.maximum(warmup, 1.0)
        if not self.decay_steps:
            decayed = keras.ops.convert_to_tensor(self.peak, "float32")
        else:
            span = max(self.decay_steps - self.warmup_steps, 1)
            done = keras.ops.clip((step - warmup) / span, 0.0, 1.0)
            decayed = (self.peak - self.end) * (1.0 - done) ** self.power + \
                self.end
        return keras.ops.where(step < warmup, warm, decayed)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps,
                "decay_steps": self.decay_steps, "end": self.end,
                "power": self.power}


def split_clipping(config, mixed_precision):
    """Who clips the gradient: (optimizer config, trainer clipnorm or None).

    The trainer clips the replica-summed gradient itself, which is exact
    under tf.distribute (Keras's `global_clipnorm` clips each replica's
    partial gradient); fp16 loss scaling needs the optimizer to clip the
    unscaled gradient, so then the optimizer keeps it.

    Example:
    >>> from bert_tf.config import OptimizerConfig
    >>> opt, clip = split_clipping(OptimizerConfig(clipnorm=1.0), "float32")
    >>> opt.clipnorm, clip
    (0.0, 1.0)
    """
    if mixed_precision == "mixed_float16":
        return config, None
    return dataclasses.replace(config, clipnorm=0.0), config.clipnorm or None


def create_optimizer(config):
    """A Keras 3 optimizer for `config` (an `OptimizerConfig`).

    Under the `mixed_float16` global policy it is wrapped in a
    `LossScaleOptimizer`; `mixed_bfloat16` needs no loss scaling.

    Example:
    >>> from bert_tf.config import OptimizerConfig
    >>> opt = create_optimizer(OptimizerConfig(warmup_steps=10,
    ...                                        decay_steps=100))
    >>> type(opt).__name__
    'AdamW'
    """
    config.validate()
    schedule = WarmUpPolynomialDecay(
        config.learning_rate, config.warmup_steps, config.decay_steps,
        config.end_learning_rate, config.power)
    kwargs = dict(
        learning_rate=schedule, beta_1=config.beta_1, beta_2=config.beta_2,
        epsilon=config.epsilon, weight_decay=config.weight_decay or None,
        global_clipnorm=config.clipnorm or None,
        gradient_accumulation_steps=(config.gradient_accumulation_steps
                                     if config.gradient_accumulation_steps > 1
                                     else None))
    optimizer_cls = (keras.optimizers.AdamW if config.name == "adamw" else
                     keras.optimizers.Lamb)
    optimizer = optimizer_cls(**kwargs)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    if keras.mixed_precision.global_policy().name == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
