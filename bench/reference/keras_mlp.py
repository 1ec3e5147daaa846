"""Hand-written Keras reference: the 784-512-512-10 perceptron, trained for throughput."""

import sys
from pathlib import Path

import keras
from keras import layers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keras_common import cosine, parse_args, train  # noqa: E402


def build(shape: tuple[int, ...]) -> keras.Model:
    return keras.Sequential([
        keras.Input(shape),
        layers.Flatten(),
        layers.Dense(512, activation="relu"),
        layers.Dense(512, activation="relu"),
        layers.Dense(10),
    ])


if __name__ == "__main__":
    args = parse_args(__doc__)
    keras.utils.set_random_seed(0)
    train(build, keras.optimizers.AdamW(cosine(args.steps, 1e-3), weight_decay=0.01, epsilon=1e-8), args)
