"""The live view and snapshot of a camera another node runs, fetched from that node (``serve --node``).

The request goes to the owner node's console with the caller's own credentials (its
``Authorization`` header and cookies: sessions and tokens are shared by every node in PostgreSQL),
so the owner authorises it exactly as if the browser had asked it: same role, same blur. A
request that was already proxied once is never proxied again (``X-CampusGuard-Proxied``): two
nodes that briefly disagree about a camera's owner answer 503 instead of looping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import HTTPException, Request, Response, status
from fastapi.responses import StreamingResponse

__all__ = ["PROXIED_HEADER", "proxy_get", "was_proxied"]

PROXIED_HEADER = "X-CampusGuard-Proxied"
_FORWARDED = ("authorization", "cookie", "accept")
_KEPT = ("content-type", "cache-control", "x-content-type-options", "content-disposition", "x-accel-buffering")


def was_proxied(request: Request) -> bool:
    """The request came from another node's proxy (it is answered here, never sent on)."""
    return request.headers.get(PROXIED_HEADER) is not None


def _unavailable(node_url: str, reason: str) -> HTTPException:
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        f"the node that runs this camera ({node_url}) did not answer: {reason}",
        headers={"Retry-After": "5"},
    )


async def proxy_get(request: Request, node_url: str, *, stream: bool) -> Response:
    """GET the same path from ``node_url`` with the caller's credentials; stream the body when ``stream``."""
    import httpx

    url = node_url.rstrip("/") + request.url.path
    headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED}
    headers[PROXIED_HEADER] = "1"
    client = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None if stream else 10.0))
    try:
        upstream = await client.send(client.build_request("GET", url, headers=headers, params=request.query_params), stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise _unavailable(node_url, type(exc).__name__) from None
    kept = {k: v for k, v in upstream.headers.items() if k.lower() in _KEPT}
    if not stream or upstream.status_code != status.HTTP_200_OK:
        try:
            body = await upstream.aread()
        finally:
            await upstream.aclose()
            await client.aclose()
        return Response(body, status_code=upstream.status_code, headers=kept)

    async def parts() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                if await request.is_disconnected():
                    break
                yield chunk
        except httpx.HTTPError:
            return  # the owner went away mid-stream: the browser reconnects
        finally:
            await upstream.aclose()
            await client.aclose()

    return StreamingResponse(parts(), status_code=upstream.status_code, headers=kept)
