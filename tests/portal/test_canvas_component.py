"""The canvas component as the portal serves it (portal/canvas_component.py): the installed
streamlit-flow bundle, patched not to answer the states Python sends and to keep what did not change,
still reporting what the user does."""

from __future__ import annotations

from portal import canvas_component
from portal.canvas_component import BUILD, PATCHES, build_folder, patched


def test_the_installed_bundle_takes_the_patches_and_is_served_patched():
    folder = build_folder()
    assert folder != BUILD, "streamlit-flow's bundle is not the one the patches were written for (see the log)"
    index = (folder / "index.html").read_text(encoding="utf-8")
    [bundle] = list((folder / "static" / "js").glob(f"main.*{canvas_component.SUFFIX}.js"))
    assert f"./static/js/{bundle.name}" in index
    assert not [p for p in (folder / "static" / "js").glob("main.*.js") if p != bundle], "only the patched bundle"
    text = bundle.read_text(encoding="utf-8")
    assert text.startswith("window.__ftKeep=function(prev,next)") and "window.__ftKeep(i,e.args.nodes)" in text
    for old, new in PATCHES:
        assert old not in text and text.count(new) == 1
    # no answer to a state taken or to a layout run; the user's connection, drag and clicks still reach Python
    assert "N(e.args.nodes,e.args.edges,null)" not in text and "N(t,n,null)" not in text
    for reported in ("c(r),N(i,r,n)", "N(n,s,null)", "N(i,s,n.id)", "N(i,s,null)"):
        assert reported in text, reported
    assert (folder / "bootstrap.min.css").is_file() and list((folder / "static" / "css").glob("main.*.css"))


def test_a_bundle_the_patches_do_not_fit_is_left_alone():
    assert patched("(()=>{})") is None
    old, _new = PATCHES[0]
    assert patched(old + old) is None, "a piece found twice is not patched"
