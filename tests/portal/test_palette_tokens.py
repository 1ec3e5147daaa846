"""The palette lists the vision-transformer ops from the op registry under their own family, and a
PatchEmbed dropped from it is valid at once on an image (its example parameters)."""

from __future__ import annotations

from tests.portal.conftest import assert_no_exception, canvas_args, editor


def test_palette_offers_the_vision_transformer_ops(app):
    at = app()
    assert "Tokens (vision transformers)" in [e.label for e in at.expander]
    at.button(key="palette.ClassToken").click().run()
    at.button(key="palette.PatchEmbed").click().run()
    assert_no_exception(at)
    assert {"classtoken1", "patchembed1"} <= {n["id"] for n in canvas_args(at)["nodes"]}
    assert editor(at).node("patchembed1")["data"]["params"] == {"patch_size": 16, "embed_dim": 768}
