"""The model zoo: every template validates; ImageNet templates match torchvision's published figures."""

from __future__ import annotations

import pytest

from core import zoo
from core.validate import validate

# torchvision's published parameter counts and GFLOPS (multiply-accumulates, in billions).
TORCHVISION = {
    "resnet18": (11_689_512, 1.81),
    "resnet50": (25_557_032, 4.09),
    "vgg16": (138_357_544, 15.47),
    "mobilenet_v2": (3_504_872, 0.30),
    "alexnet": (61_100_840, 0.71),
    "vit_b_16": (86_567_656, 17.56),
}

REQUIRED = {"mlp", "lenet5", "mnist_cnn", "resnet18_cifar", "resnet18", "resnet50", "vgg16", "mobilenet_v2",
            "alexnet", "lstm_text_classifier", "transformer_text_classifier", "vit_b_16", "vit_cifar", "unet",
            "gpt2_small", "gpt_mini"}


def test_zoo_has_the_required_templates() -> None:
    assert REQUIRED <= {e.name for e in zoo.entries()}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_template_validates(name: str) -> None:
    spec = zoo.template(name)
    result = validate(spec)
    assert result.total_params > 0
    assert spec.name == name


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_imagenet_templates_match_torchvision(name: str) -> None:
    params, gmacs = TORCHVISION[name]
    result = validate(zoo.template(name))
    assert result.total_params == params
    assert result.total_macs / 1e9 == pytest.approx(gmacs, rel=0.03)
    assert result.nodes[result.output_id].output.shape == (1000,)


def test_gpt2_small_is_huggingface_gpt2_with_its_head_tied() -> None:
    # HuggingFace gpt2: wte 50257×768 + wpe 1024×768 + 12 × 7,087,872 + ln_f 1,536; lm_head tied (no weight of its own)
    result = validate(zoo.template("gpt2_small"))
    assert result.total_params == 124_439_808
    assert result.nodes["lm_head"].n_params == 0
    assert result.nodes["output"].output.shape == (1024, 50257)


def test_gpt_mini_is_small() -> None:
    assert validate(zoo.template("gpt_mini")).total_params == 636_032  # 256×128 table, 64 positions, 3 layers


def test_mnist_cnn_is_the_pytorch_examples_network() -> None:
    # pytorch/examples mnist Net: 1,199,882 parameters.
    assert validate(zoo.template("mnist_cnn")).total_params == 1_199_882


def test_unknown_template_lists_the_choices() -> None:
    from core.errors import CommandError

    with pytest.raises(CommandError, match="resnet18"):
        zoo.template("resnet19")
