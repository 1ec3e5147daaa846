"""Bad input to the vision-transformer ops is a validation problem naming the node (and the parameter at
fault), every one at once, before any program is written."""

from __future__ import annotations

import pytest

from core.errors import SpecError
from core.validate import validate
from core.zoo.builder import GraphBuilder


def test_patch_size_and_ranks_that_do_not_fit_are_problems_naming_each_node() -> None:
    g = GraphBuilder()
    image = g.add("Input", id="input")
    g.add("PatchEmbed", image, id="patches", patch_size=5, embed_dim=8)  # 5 does not divide 32
    g.add("ClassToken", image, id="cls")  # an image is no sequence
    tokens = g.add("PatchEmbed", g.add("Flatten", image, id="flat"), id="patches_of_vector", patch_size=2,
                   embed_dim=8)  # a vector is no image
    g.add("Output", g.add("Linear", g.add("SequencePool", tokens, mode="first"), out_features=10), id="output")
    spec = g.spec("bad-vit", "", {"source": "sklearn:digits", "input_shape": [3, 32, 32]}, {"loss": "cross_entropy"})
    with pytest.raises(SpecError) as err:
        validate(spec)
    by_location = {p.location: p for p in err.value.problems}
    patch = by_location["model.nodes[patches].params.patch_size"]
    assert "patch_size 5×5 does not divide the image 32×32" in patch.message and "divides the image" in patch.fix
    assert "a sequence (T, E)" in by_location["model.nodes[cls].inputs"].expected
    assert "an image (C, H, W)" in by_location["model.nodes[patches_of_vector].inputs"].expected
