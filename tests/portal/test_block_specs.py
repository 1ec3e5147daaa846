"""A spec with blocks in the portal as it is before the block editor: it loads valid, its code page
renders, and the support table lists the ops inside the blocks (not the blocks' names)."""

from __future__ import annotations

from core import zoo
from tests.portal.conftest import assert_no_exception, editor


def test_a_template_with_blocks_loads_valid_and_its_code_page_renders(app):
    at = app()
    editor(at).load_spec(zoo.template("resnet18_cifar"))
    assert not editor(at).problems()
    # the blocks unchanged but for the positions their nodes are laid out at (to be drawn when opened)
    assert _unplaced(editor(at).spec().model.blocks) == _unplaced(zoo.template("resnet18_cifar").model.blocks)
    at.switch_page("pages/code.py").run()
    assert_no_exception(at)
    [table] = [df.value for df in at.dataframe]
    assert {"Conv2d", "BatchNorm2d", "Add", "ReLU", "Linear"} <= set(table["op"])
    assert not {"basic_block", "basic_block_down"} & set(table["op"])


def _unplaced(blocks) -> list:
    docs = [b.model_dump(mode="json") for b in blocks]
    for node in (n for d in docs for n in d["nodes"]):
        node.pop("position")
    return docs
