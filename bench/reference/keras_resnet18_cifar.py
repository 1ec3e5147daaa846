"""Hand-written Keras reference: ResNet-18 (CIFAR variant: 3×3 stem, no max-pool), trained for throughput,
with random-crop and flip augmentation in the tf.data pipeline."""

import sys
from pathlib import Path

import keras
import tensorflow as tf
from keras import layers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keras_common import cosine, parse_args, train  # noqa: E402


def conv_bn(x, filters: int, kernel: int, stride: int, relu: bool = True):
    if stride > 1 and kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2)(x)
        x = layers.Conv2D(filters, kernel, strides=stride, use_bias=False)(x)
    else:
        x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    return layers.ReLU()(x) if relu else x


def block(x, filters: int, stride: int):
    y = conv_bn(x, filters, 3, stride)
    y = conv_bn(y, filters, 3, 1, relu=False)
    if stride != 1 or x.shape[-1] != filters:
        x = conv_bn(x, filters, 1, stride, relu=False)
    return layers.ReLU()(layers.Add()([y, x]))


def build(shape: tuple[int, ...]) -> keras.Model:
    inputs = keras.Input(shape)
    x = conv_bn(inputs, 64, 3, 1)
    for stage, width in enumerate((64, 128, 256, 512)):
        x = block(x, width, 2 if stage else 1)
        x = block(x, width, 1)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10)(x))


def augment(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    x = tf.image.random_crop(tf.pad(x, [[4, 4], [4, 4], [0, 0]]), tf.shape(x))
    return tf.image.random_flip_left_right(x), y


if __name__ == "__main__":
    args = parse_args(__doc__)
    keras.utils.set_random_seed(0)
    optimizer = keras.optimizers.SGD(cosine(args.steps, 0.1), momentum=0.9, nesterov=True, weight_decay=5e-4)
    train(build, optimizer, args, augment=augment)
