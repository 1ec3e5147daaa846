"""The code page: the generated program of each framework side by side, the support table, a zip, and
the cross-framework equivalence check (run as ``python -m flowtrain check-equivalence`` in a
subprocess: the portal process never imports a framework)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from core.errors import FlowTrainError, SpecError
from core.mapping.base import FRAMEWORKS, support_table
from portal import limits
from portal.editor_state import Editor

REPO = Path(__file__).resolve().parents[1]
EQUIVALENCE_TIMEOUT_S = 900
LANGUAGES = {".py": "python", ".json": "json", ".sbatch": "bash", ".sh": "bash"}


@st.cache_data(show_spinner=False, max_entries=64)
def generated_files(spec_json: str, framework: str) -> tuple[dict[str, str] | None, str | None]:
    """(files, None) or (None, why not) for one framework."""
    from core.codegen import generate
    from core.load import spec_from_json

    try:
        return generate(spec_from_json(spec_json), framework).files, None
    except FlowTrainError as err:
        return None, str(err)
    except Exception as err:  # noqa: BLE001 - a bug in one framework's templates must not hide the others
        return None, f"internal error while generating {framework} code ({type(err).__name__}: {err}); " \
                     "please report it"


def zip_files(programs: dict[str, dict[str, str]]) -> bytes:
    """One folder per framework."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for fw, files in programs.items():
            for name, content in sorted(files.items()):
                zf.writestr(f"{fw}/{name}" if len(programs) > 1 else name, content)
    return buf.getvalue()


def run_equivalence(spec_json: str, timeout_s: float = EQUIVALENCE_TIMEOUT_S) -> dict[str, Any]:
    """``check-equivalence --json`` in a subprocess; the parsed report, or ``{"error": …}``."""
    with tempfile.TemporaryDirectory(prefix="flowtrain-eq-") as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(spec_json, encoding="utf-8")
        try:
            proc = subprocess.run([sys.executable, "-m", "flowtrain", "check-equivalence", str(path), "--json"],
                                  cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"the equivalence check took longer than {timeout_s:g} s and was stopped"}
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        return {"error": f"check-equivalence exited with {proc.returncode}: {tail}"}
    return doc if isinstance(doc, dict) else {"error": "check-equivalence printed no report"}


def _equivalence(spec_json: str, user: str) -> None:
    st.subheader("Equivalence across frameworks")
    st.caption("Builds the model in each framework with the same weights and compares the outputs for the "
               "same random input (runs each framework in its own process; takes a while).")
    if st.button("Check equivalence", key="code.equivalence"):
        try:
            with limits.GATE.hold("equivalence", user), \
                    st.status("Running the model in torch, keras and paddle…", expanded=False) as status:
                report = run_equivalence(spec_json)
                state = "error" if "error" in report or not report.get("ok") else "complete"
                status.update(label="Equivalence check finished", state=state)
        except limits.Busy as err:
            st.warning(str(err))
            return
        st.session_state["code.equivalence_report"] = (spec_json, report)
    saved = st.session_state.get("code.equivalence_report")
    if not saved or saved[0] != spec_json:
        return
    report = saved[1]
    if "error" in report:
        st.error(report["error"])
        return
    (st.success if report.get("ok") else st.error)(
        f"{'Equivalent' if report.get('ok') else 'NOT equivalent'} (tolerance {report.get('tolerance')})")
    st.dataframe(pd.DataFrame([{"framework": fw, **o} for fw, o in report.get("frameworks", {}).items()]),
                 hide_index=True)
    if report.get("pairs"):
        st.dataframe(pd.DataFrame(report["pairs"]), hide_index=True)


def page(ed: Editor, user: str) -> None:
    st.title("Generated code")
    try:
        spec = ed.valid_spec()
    except SpecError as err:
        st.warning(f"The pipeline has {len(err.problems)} problem(s); fix them on the Editor page to see its code.")
        st.code(str(err), language=None)
        return
    spec_json = spec.to_json()
    chosen = st.multiselect("Frameworks", list(FRAMEWORKS), default=list(FRAMEWORKS), key="code.frameworks")
    programs: dict[str, dict[str, str]] = {}
    failures: dict[str, str] = {}
    with st.spinner("Generating…"):
        for fw in chosen:
            files, why = generated_files(spec_json, fw)
            if files is None:
                failures[fw] = why or "generation failed"
            else:
                programs[fw] = files
    first = ("train.py", "model.py", "devices.py", "data.py", "runtime.py", "loop.py")
    names = sorted({n for files in programs.values() for n in files},
                   key=lambda n: (first.index(n) if n in first else len(first), n))
    if names:
        a, b = st.columns([3, 2], vertical_alignment="bottom")
        shown = a.radio("File", names, horizontal=True, key="code.file")
        b.download_button("Download all as zip", data=zip_files(programs), file_name=f"{spec.name}-programs.zip",
                          mime="application/zip", key="code.zip_all")
    cols = st.columns(max(len(chosen), 1))
    for col, fw in zip(cols, chosen, strict=False):
        with col:
            st.markdown(f"#### {fw}")
            if fw in failures:
                st.error(failures[fw])
                continue
            files = programs[fw]
            st.download_button(f"Download {fw} program (zip)", data=zip_files({fw: files}),
                               file_name=f"{spec.name}-{fw}.zip", mime="application/zip", key=f"code.zip.{fw}")
            if names and shown in files:
                st.code(files[shown], language=LANGUAGES.get(Path(shown).suffix), line_numbers=True)
            elif names:
                st.caption(f"{fw} has no {shown}.")
    st.subheader("Support table")
    table = support_table()
    nodes = [*spec.model.nodes, *(n for block in spec.model.blocks for n in block.nodes)]
    used = sorted({n.op for n in nodes if n.op in table})  # ops, not the uses of blocks
    only_used = st.toggle("Only the ops of this graph", value=True, key="code.only_used")
    rows = [{"op": op, **{fw: "✅" if ok else "—" for fw, ok in table[op].items()}}
            for op in (used if only_used else sorted(table))]
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    _equivalence(spec_json, user)
