"""Hand-written Keras reference: the U-Net of Ronneberger et al. (2015) with padded 3×3 convolutions (4 levels
down, 4 up, transposed 2×2 convolutions, skip connections joined encoder first), ``--base`` channels at the
top (64 in the paper; the CPU bench uses 16), He-initialised convolutions, Adam, per-pixel cross-entropy,
the horizontal flip applied to each image and its mask alike in the tf.data pipeline; trained for throughput
(bench/reference/keras_common.py: model.fit on a cached, prefetched pipeline, channels-last)."""

import sys
from pathlib import Path

import keras
import tensorflow as tf
from keras import layers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keras_common import parse_args, train  # noqa: E402

CLASSES, DEPTH = 4, 4
# He's N(0, 2/fan_in) (keras's "he_normal" is truncated), zero biases: the zoo unet's `init: he`
HE = {"kernel_initializer": keras.initializers.VarianceScaling(2.0, "fan_in", "untruncated_normal"),
      "bias_initializer": "zeros"}


def double_conv(x, filters: int):
    x = layers.Conv2D(filters, 3, padding="same", activation="relu", **HE)(x)
    return layers.Conv2D(filters, 3, padding="same", activation="relu", **HE)(x)


def build_unet(base: int):
    def build(shape: tuple[int, ...]) -> keras.Model:
        inputs = keras.Input(shape)
        x, skips = inputs, []
        for level in range(DEPTH + 1):
            x = double_conv(x if level == 0 else layers.MaxPooling2D(2)(x), base * 2 ** level)
            skips.append(x)
        skips.pop()
        for level in reversed(range(DEPTH)):
            up = layers.Conv2DTranspose(base * 2 ** level, 2, strides=2, **HE)(x)
            x = double_conv(layers.Concatenate()([skips.pop(), up]), base * 2 ** level)
        return keras.Model(inputs, layers.Conv2D(CLASSES, 1, **HE)(x))  # (H, W, classes) scores

    return build


def flip_pair(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Mirror an image (H, W, C) and its mask (H, W) left-right together, with probability ½."""
    flip = tf.random.uniform([]) < 0.5
    return tf.cond(flip, lambda: (tf.reverse(x, [1]), tf.reverse(y, [1])), lambda: (x, y))


if __name__ == "__main__":
    args = parse_args(__doc__, (("--base", int, 16),))
    keras.utils.set_random_seed(0)
    train(build_unet(args.base), keras.optimizers.Adam(1e-3, epsilon=1e-8), args, augment=flip_pair)
