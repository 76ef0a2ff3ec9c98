"""The thin HTTP client of ``oasis-opt submit`` and ``oasis-opt status`` (httpx)."""
from __future__ import annotations

from typing import Any

from .._extras import require


class ServiceError(Exception):
    """The service refused a request (``field``: what it names) or could not be reached."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def request(method: str, url: str, path: str, *, json: Any = None, token: str | None = None,
            timeout: float = 30.0) -> Any:
    """``method url/path`` and the decoded JSON answer; ``ServiceError`` for a refusal (the
    service's field and message) or a service that does not answer (field ``--url``)."""
    httpx = require("httpx", extra="service", feature="the service's client")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.request(method, url.rstrip("/") + path, json=json, headers=headers,
                          timeout=timeout)
    except httpx.HTTPError as e:
        raise ServiceError("--url", f"cannot reach the service at {url} ({e})") from None
    try:
        body = r.json()
    except ValueError:
        body = None
    if r.status_code >= 400:
        if isinstance(body, dict) and isinstance(body.get("detail"), str):
            detail = body["detail"]
            field = body.get("field") or "job"
            prefix = f"{field}: "
            raise ServiceError(field, detail[len(prefix):] if detail.startswith(prefix)
                               else detail)
        raise ServiceError("--url", f"the service answered {r.status_code} {r.reason_phrase}")
    return body
