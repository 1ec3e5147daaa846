"""The portal's upload route: ``PUT/DELETE <base>/api/flowtrain/upload/<token>``, beside Streamlit's own.

Mounted by ``serve.py`` (``st.App("app.py", routes=ROUTES)``, how every launcher starts the portal). A
request is allowed by its ticket (:mod:`portal.upload_store`: a random token the signed-in page was given,
bound to its user); behind a sign-in proxy (``auth.mode = "header"``) the request must also carry the proxy's
user header and secret, naming the ticket's user, as every page request does. The body of a ``PUT`` is
streamed to disk piece by piece as it arrives (``?offset=N``; the first piece also ``&name=…&total=…``);
the answer is JSON: ``{"received": N, "complete": bool}`` or ``{"error": "what and how to fix it"}``.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from portal import upload_store
from portal.upload_store import Ticket, UploadError

PATH = "/api/flowtrain/upload/{token}"
LOOPBACK = {"127.0.0.1", "::1", None}


def _check_user(request: Request, ticket: Ticket) -> None:
    from portal import users
    from settings import load_settings

    settings = load_settings()
    if settings.auth.mode != "header":
        return  # the token, given only to the signed-in page of this user, is the permission
    host = request.client.host if request.client else None
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
    try:
        name = users.user_from_request(headers, None if host in LOOPBACK else host, settings)
    except users.AccessError as err:
        raise UploadError(str(err), 403) from None
    if name != ticket.user:
        raise UploadError("this upload belongs to another user", 403)


def _int(request: Request, key: str) -> int:
    try:
        return int(request.query_params.get(key, "0"))
    except ValueError:
        raise UploadError(f"?{key}= must be a whole number", 400) from None


async def _put(request: Request) -> Response:
    try:
        ticket = upload_store.find(request.path_params["token"])
        _check_user(request, ticket)
        offset, total = _int(request, "offset"), _int(request, "total")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():  # at most one piece (8 MiB) is held at a time
            chunks.append(chunk)
            size += len(chunk)
            if size > upload_store.PIECE_BYTES:
                upload_store.reset(ticket)
                raise UploadError(f"a piece may hold at most {upload_store.PIECE_BYTES:,} bytes", 413)
        received = await run_in_threadpool(upload_store.write_piece, ticket, offset, chunks,
                                           request.query_params.get("name", ""), total)
        return JSONResponse({"received": received, "complete": ticket.complete})
    except UploadError as err:
        return JSONResponse({"error": str(err)}, status_code=err.status)
    except ClientDisconnect:
        upload_store.reset(ticket)  # the browser went away mid-piece: nothing partial stays
        return Response(status_code=499)


async def _delete(request: Request) -> Response:
    try:
        ticket = upload_store.find(request.path_params["token"])
        _check_user(request, ticket)
    except UploadError as err:
        return JSONResponse({"error": str(err)}, status_code=err.status)
    upload_store.reset(ticket)
    return JSONResponse({"cancelled": True})


ROUTES = [Route(PATH, _put, methods=["PUT"]), Route(PATH, _delete, methods=["DELETE"])]
