"""The portal's upload route and what it writes (portal/upload_route.py, portal/upload_store.py): a large
ONNX model reaches the disk in pieces, only inside the user's data roots, never through a symbolic link,
within the site's limit, and nothing partial stays after an error, a cancel or an abandoned upload.
The real route in-process (Starlette's test client), real files in tmp_path."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest
from starlette.applications import Starlette

from portal import upload_store
from portal.upload_route import ROUTES
from portal.users import default_local_user
from tests.onnx_models import gemm_model

with warnings.catch_warnings():  # starlette 1.x asks for httpx2; the client is the same
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

PIECE = 64 * 1024  # small pieces: several per test model


@pytest.fixture
def client() -> TestClient:
    return TestClient(Starlette(routes=ROUTES))


def _roots(portal_env: Path) -> tuple[Path, Path]:
    root = (portal_env / "data").resolve()
    return root, root / "imported"


def _model(n: int = 300_000) -> bytes:
    import numpy as np

    return gemm_model(np.ones((n // 16, 4), np.float32)).SerializeToString()


def _send(client: TestClient, token: str, raw: bytes, name: str = "m.onnx", total: int | None = None,
          headers: dict[str, str] | None = None) -> list:
    answers, offset = [], 0
    while offset < len(raw):
        params = {"offset": offset} | ({"total": total or len(raw), "name": name} if offset == 0 else {})
        r = client.put(f"/api/flowtrain/upload/{token}", params=params, content=raw[offset:offset + PIECE],
                       headers=headers or {})
        answers.append(r)
        if r.status_code != 200:
            break
        offset = r.json()["received"]
    return answers


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_model_arrives_in_pieces_complete_and_readable(portal_env: Path, client: TestClient) -> None:
    root, folder = _roots(portal_env)
    ticket = upload_store.issue(default_local_user(), root, folder, 2**30)
    raw = _model()
    answers = _send(client, ticket.token, raw)
    assert len(answers) > 3 and all(r.status_code == 200 for r in answers)
    assert answers[-1].json() == {"received": len(raw), "complete": True}
    assert ticket.path.read_bytes() == raw and oct(ticket.path.stat().st_mode & 0o777) == "0o600"
    with upload_store.open_complete(upload_store.take(ticket.token, default_local_user())) as f:
        assert f.read() == raw
    upload_store.end(ticket)
    assert _leftovers(folder) == []


def test_the_site_limit_is_checked_before_the_first_byte_and_at_every_piece(portal_env: Path,
                                                                            client: TestClient) -> None:
    root, folder = _roots(portal_env)
    raw = _model()
    ticket = upload_store.issue(default_local_user(), root, folder, len(raw) - 1)
    [r] = _send(client, ticket.token, raw, "vgg.onnx")
    assert r.status_code == 413 and "is 0.3 MB; this portal imports ONNX models of at most 0.3 MB" in r.json()["error"]
    assert "max_onnx_upload_mb" in r.json()["error"] and _leftovers(folder) == []
    # a client that announces less than it sends is stopped at the piece that goes over, its partial removed
    ticket = upload_store.issue(default_local_user(), root, folder, 2**30)
    answers = _send(client, ticket.token, raw, total=len(raw) // 2)
    assert answers[-1].status_code == 413 and "sent more than the" in answers[-1].json()["error"]
    assert _leftovers(folder) == []
    answers = _send(client, ticket.token, raw)  # the page may send another file with its ticket
    assert answers[-1].json()["complete"] and ticket.path.read_bytes() == raw


def test_a_wrong_type_or_a_file_that_is_not_onnx_is_refused_at_once(portal_env: Path, client: TestClient) -> None:
    root, folder = _roots(portal_env)
    ticket = upload_store.issue(default_local_user(), root, folder, 2**30)
    [r] = _send(client, ticket.token, _model(), "weights.npz")
    assert r.status_code == 415 and r.json()["error"] == "'weights.npz' is not an ONNX model: choose a file ending in .onnx"
    ticket = upload_store.issue(default_local_user(), root, folder, 2**30)
    [r] = _send(client, ticket.token, b"PK\x03\x04" + bytes(200_000), "renamed.onnx")
    assert r.status_code == 415 and "is not an ONNX model (it does not start like one)" in r.json()["error"]
    assert _leftovers(folder) == []


def test_a_symbolic_link_below_the_root_is_never_written_through(portal_env: Path, client: TestClient) -> None:
    """The folder was checked when the ticket was issued; replaced by a link before the upload (or a link
    higher up, on the way to it), nothing is written there, and the link's target stays empty."""
    root, folder = _roots(portal_env)
    elsewhere = portal_env / "portal-owned"
    elsewhere.mkdir()
    for link, target in ((folder, folder), (root / "models", root / "models" / "fc")):
        ticket = upload_store.issue(default_local_user(), root, target, 2**30)
        if link.exists():
            link.rmdir()
        link.symlink_to(elsewhere)
        [r] = _send(client, ticket.token, _model())
        assert r.status_code == 403 and f"{link} is a symbolic link or not a folder" in r.json()["error"]
        assert list(elsewhere.iterdir()) == []
        link.unlink()


def test_cancel_removes_the_partial_upload(portal_env: Path, client: TestClient) -> None:
    root, folder = _roots(portal_env)
    ticket = upload_store.issue(default_local_user(), root, folder, 2**30)
    raw = _model()
    r = client.put(f"/api/flowtrain/upload/{ticket.token}", params={"offset": 0, "total": len(raw), "name": "m.onnx"},
                   content=raw[:PIECE])
    assert r.json() == {"received": PIECE, "complete": False} and _leftovers(folder) == [ticket.part_name]
    out_of_order = client.put(f"/api/flowtrain/upload/{ticket.token}", params={"offset": 3 * PIECE},
                              content=raw[3 * PIECE:4 * PIECE])
    assert out_of_order.status_code == 409 and _leftovers(folder) == []  # a gap ends the upload
    client.put(f"/api/flowtrain/upload/{ticket.token}", params={"offset": 0, "total": len(raw), "name": "m.onnx"},
               content=raw[:PIECE])
    assert client.delete(f"/api/flowtrain/upload/{ticket.token}").json() == {"cancelled": True}
    assert _leftovers(folder) == []


def test_an_abandoned_upload_and_a_restarted_portals_leftovers_are_removed(portal_env: Path,
                                                                           client: TestClient) -> None:
    root, folder = _roots(portal_env)
    idle = upload_store.issue(default_local_user(), root, folder, 2**30)  # an editor left open, nothing sent
    ticket = upload_store.issue(default_local_user(), root, folder, 2**30)
    raw = _model()
    client.put(f"/api/flowtrain/upload/{ticket.token}", params={"offset": 0, "total": len(raw), "name": "m.onnx"},
               content=raw[:PIECE])
    upload_store.sweep(now=time.monotonic() + upload_store.TICKET_TTL_S + 1)  # the tab was closed an hour ago
    assert _leftovers(folder) == []
    assert client.put(f"/api/flowtrain/upload/{ticket.token}", params={"offset": PIECE}).status_code == 404
    assert upload_store.find(idle.token) is idle  # still uploads the next morning
    old, fresh = folder / f"{upload_store.PREFIX}old.part", folder / f"{upload_store.PREFIX}fresh.part"
    old.write_bytes(b"\x08" * 10)
    fresh.write_bytes(b"\x08" * 10)
    os.utime(old, (time.time() - upload_store.TICKET_TTL_S - 60,) * 2)
    upload_store.issue(default_local_user(), root, folder, 2**30)
    assert _leftovers(folder) == [fresh.name]  # another upload of this minute may still be going on


def test_behind_the_proxy_each_piece_must_name_the_tickets_user(portal_env: Path, client: TestClient) -> None:
    secret = portal_env / "proxy.secret"
    secret.write_text("s3cret-0123456789abcdef\n", encoding="utf-8")
    secret.chmod(0o600)
    config = portal_env / "flowtrain.toml"
    config.write_text(config.read_text(encoding="utf-8") + f'[auth]\nmode = "header"\nheader = "X-Remote-User"\n'
                      f'proxy_secret_file = "{secret}"\n', encoding="utf-8")
    root, folder = _roots(portal_env)
    ticket = upload_store.issue("ines", root, folder, 2**30)
    raw = _model()
    [r] = _send(client, ticket.token, raw, headers={"X-Remote-User": "ines"})
    assert r.status_code == 403 and "did not come through the portal's sign-in proxy" in r.json()["error"]
    [r] = _send(client, ticket.token, raw, headers={"X-Remote-User": "omar",
                                                     "X-FlowTrain-Proxy-Secret": "s3cret-0123456789abcdef"})
    assert r.status_code == 403 and r.json()["error"] == "this upload belongs to another user"
    assert _leftovers(folder) == []
    answers = _send(client, ticket.token, raw, headers={"X-Remote-User": "ines",
                                                        "X-FlowTrain-Proxy-Secret": "s3cret-0123456789abcdef"})
    assert answers[-1].json()["complete"] and ticket.path.read_bytes() == raw
    with pytest.raises(upload_store.UploadError, match="belongs to another user"):
        upload_store.take(ticket.token, "omar")
    upload_store.end(ticket)
