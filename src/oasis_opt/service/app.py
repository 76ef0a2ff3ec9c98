"""The HTTP API of ``oasis-opt serve`` (FastAPI; its OpenAPI schema at ``/openapi.json``, a page
listing the endpoints from it at ``/docs``, served from the package: no CDN, so it works
offline) and the dashboard at ``/``.

======================  =============================================================================
``POST /jobs``          submit a job (an instance-format job with its ``task``; ``id`` and ``arrival``
                        optional): 201 and the job, or 4xx ``{"detail": "<field>: <message>",
                        "field": ...}`` with nothing written (400 bad job, 409 duplicate id)
``GET /jobs``           every job: state, admitted?, plan, progress, predicted and real completion,
                        utility so far. States: ``pending`` (not arrived), ``waiting`` (arrived,
                        not decided), ``running`` (admitted, workers in the slot now),
                        ``scheduled`` (admitted, no workers now: its plan runs later),
                        ``rejected``, ``cancelling`` / ``cancelled``, ``completed``
``GET /jobs/{id}``      one job (404 unknown)
``DELETE /jobs/{id}``   cancel at the next slot boundary (409 when it is over already)
``GET /cluster``        per server and slot: capacity, committed (a policy that plans ahead), used,
                        the jobs in it
``GET /summary``        counts, utility, utilisation and their history per slot (the dashboard's)
``GET /metrics``        the same in the Prometheus text format
``GET /health``         the slot runner's status ("starting", "running", "finished", "failed" and
                        why), the slots finished and decided, the slot running and for how long
``POST /models``        deploy a completed job's weights: ``{"name", "job"}`` -> 201 and the new
                        version with its validation and held-out accuracy (``service.models``;
                        409 a job not completed or without weights)
``GET /models``         every deployed model's versions; ``GET /models/{name}`` one model's
``POST /models/{name}/  the predicted classes of raw images: ``{"images": [[...], ...],
predict``               "version"?}`` -> ``{"name", "version", "labels"}`` (the last version
                        unless one is named; 404 unknown, 400 bad images)
======================  =============================================================================

With a token (``oasis-opt serve --token`` or ``OASIS_OPT_TOKEN``), ``POST`` and ``DELETE`` need
``Authorization: Bearer <token>``: 401 without one, 403 with a wrong one; reading needs none. A
job body over ``MAX_JOB_BYTES`` is refused (413) before it is read whole.
"""
from __future__ import annotations

import html
import json
import secrets
import time
from importlib import resources
from typing import Any, Callable, Iterator

from .._extras import require
from .models import Models
from .runner import ServiceRunner
from .scheduler import BadRequest, Scheduler

# importing this module needs the service extra: one line naming it when it is missing
require("fastapi", extra="service", feature="the scheduling service")
require("prometheus_client", extra="service", feature="the scheduling service")
from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.responses import HTMLResponse, JSONResponse, Response  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.core import GaugeMetricFamily, Metric  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402

TOKEN_ENV = "OASIS_OPT_TOKEN"
MAX_JOB_BYTES = 1 << 20  # a job document is a few kB; 1 MiB leaves room for long utility tables
MAX_PREDICT_BYTES = 1 << 25  # models.MAX_IMAGES rows of a few hundred numbers as JSON

_JOB_SCHEMA = {
    "type": "object",
    "description": "a job of the oasis-opt/instance@1 format with its training task",
    "required": ["epochs", "chunks", "chunk_time", "worker", "ps", "utility"],
    "properties": {
        "id": {"type": "string"}, "arrival": {"type": "integer", "minimum": 1},
        "epochs": {"type": "integer", "minimum": 1}, "chunks": {"type": "integer", "minimum": 1},
        "chunk_time": {"type": "number", "exclusiveMinimum": 0},
        "worker": {"type": "object", "additionalProperties": {"type": "number"}},
        "ps": {"type": "object", "additionalProperties": {"type": "number"}},
        "utility": {"type": "object"}, "class": {"type": "string"},
        "provenance": {"type": "object"},
        "task": {"type": "object", "required": ["name", "config"],
                 "properties": {"name": {"type": "string"}, "config": {"type": "object"},
                                "seed": {"type": "integer"}, "data_seed": {"type": "integer"},
                                "dataset": {"type": "string"}}},
    },
}


def _static(name: str) -> str:
    return resources.files("oasis_opt.service").joinpath("static", name).read_text()


def create_app(scheduler: Scheduler, runner: ServiceRunner | None = None,
               token: str | None = None) -> FastAPI:
    """The FastAPI application over ``scheduler`` (``runner``: the slot runner whose status
    ``/health`` shows; ``token``: required on mutating requests when set)."""
    app = FastAPI(title="oasis-opt scheduling service",
                  description="Online scheduling of distributed training jobs (OASiS and "
                  "the package's other online policies), slot by slot.",
                  version=_version(), docs_url=None, redoc_url=None)

    @app.exception_handler(BadRequest)
    def refuse(request: Request, e: BadRequest) -> JSONResponse:
        return JSONResponse({"detail": str(e), "field": e.field}, status_code=e.status,
                            headers={"WWW-Authenticate": "Bearer"} if e.status == 401 else None)

    def authorised(request: Request) -> None:
        """A dependency of the mutating routes: the bearer token, when the service has one."""
        if token is None:
            return
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise BadRequest("authorization", "this service needs a bearer token for this "
                             "request (Authorization: Bearer <token>; oasis-opt --token)", 401)
        if not secrets.compare_digest(value.strip().encode(), token.encode()):
            raise BadRequest("authorization", "the bearer token is not this service's", 403)

    @app.get("/docs", include_in_schema=False)
    def docs() -> Any:
        return HTMLResponse(_docs_page(app.openapi()))

    @app.get("/", include_in_schema=False)
    def dashboard() -> Any:
        return HTMLResponse(_static("dashboard.html"))

    @app.get("/dashboard.js", include_in_schema=False)
    def dashboard_js() -> Any:
        return Response(_static("dashboard.js"), media_type="text/javascript")

    @app.post("/jobs", status_code=201, summary="submit a job",
              dependencies=[Depends(authorised)], openapi_extra={
                  "requestBody": {"required": True,
                                  "content": {"application/json": {"schema": _JOB_SCHEMA}}}})
    async def submit(request: Request) -> Any:
        body = await _body(request, MAX_JOB_BYTES)
        try:
            doc = json.loads(body, parse_constant=float)
        except ValueError as e:
            raise BadRequest("job", f"not valid JSON: {e}") from None
        # in a worker thread: the check and the write must not hold up the event loop
        return JSONResponse(await run_in_threadpool(scheduler.submit, doc), status_code=201)

    @app.get("/jobs", summary="every job")
    def jobs() -> Any:
        return scheduler.jobs_view()

    @app.get("/jobs/{job_id}", summary="one job")
    def job(job_id: str) -> Any:
        return scheduler.job_view(scheduler.job_seq(job_id))

    @app.delete("/jobs/{job_id}", summary="cancel a job at the next slot boundary",
                dependencies=[Depends(authorised)])
    def cancel(job_id: str) -> Any:
        return scheduler.cancel(job_id)

    @app.get("/cluster", summary="per server and slot: committed vs used")
    def cluster() -> Any:
        return scheduler.cluster_view()

    @app.get("/summary", summary="counts, utility, utilisation, and their history")
    def summary() -> Any:
        return scheduler.summary()

    @app.get("/health", summary="the slot runner's status")
    def health() -> Any:
        started = runner.slot_started if runner else None
        return {"status": runner.status if runner else "manual",
                "error": runner.error if runner else None,
                "slot": scheduler.finished_slots, "decided": scheduler.decided_slots,
                "slot_running": runner.slot_running if runner else None,
                "slot_running_s": None if started is None else time.monotonic() - started,
                "horizon": scheduler.cluster.horizon, "replays": scheduler.replays}

    class Collector:
        def collect(self) -> Iterator[Metric]:
            s = scheduler.summary()
            for name, help_text in (("admitted", "jobs admitted"), ("rejected", "jobs rejected"),
                                    ("running", "admitted jobs with workers in the slot now"),
                                    ("scheduled", "admitted jobs without workers now"),
                                    ("completed", "jobs completed"),
                                    ("cancelled", "jobs cancelled"),
                                    ("pending", "jobs submitted, not decided yet"),
                                    ("slot", "slots finished"), ("utility", "utility so far")):
                yield GaugeMetricFamily(f"oasis_{name}", help_text, value=s[name])
            g = GaugeMetricFamily("oasis_utilisation", "share of the cluster's capacity used "
                                  "over the slots run, per resource", labels=["resource"])
            for r, v in s["utilisation"].items():
                g.add_metric([r], v)
            yield g

    _model_routes(app, Models(scheduler), authorised)
    registry = CollectorRegistry()
    registry.register(Collector())

    @app.get("/metrics", summary="Prometheus metrics")
    def metrics() -> Any:
        return Response(generate_latest(registry),
                                  media_type="text/plain; version=0.0.4; charset=utf-8")

    return app


def _model_routes(app: FastAPI, models: Models, authorised: Callable[[Request], None]) -> None:
    """Deployment: ``POST /models``, ``GET /models``, ``GET /models/{name}`` and
    ``POST /models/{name}/predict`` (module docstring)."""

    async def json_body(request: Request, limit: int, what: str) -> dict:
        body = await _body(request, limit, what)
        try:
            doc = json.loads(body, parse_constant=float)
        except ValueError as e:
            raise BadRequest(what, f"not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise BadRequest(what, "expected a JSON object")
        return doc

    @app.post("/models", status_code=201, summary="deploy a completed job's weights",
              dependencies=[Depends(authorised)])
    async def deploy(request: Request) -> Any:
        doc = await json_body(request, MAX_JOB_BYTES, "model")
        view = await run_in_threadpool(models.deploy, doc.get("name"), doc.get("job"))
        return JSONResponse(view, status_code=201)

    @app.get("/models", summary="every deployed model's versions")
    def listing() -> Any:
        return models.all()

    @app.get("/models/{name}", summary="one model's versions")
    def versions(name: str) -> Any:
        return models.versions(name)

    @app.post("/models/{name}/predict", summary="the predicted classes of raw images")
    async def predict(name: str, request: Request) -> Any:
        doc = await json_body(request, MAX_PREDICT_BYTES, "images")
        return await run_in_threadpool(models.predict, name, doc.get("images"),
                                       doc.get("version"))


async def _body(request: Request, limit: int, what: str = "job") -> bytes:
    """The request's body, refused (413, field ``job``) once it passes ``limit`` bytes: by its
    Content-Length before reading, else while it streams in, so an oversized body is never held
    whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(what, f"the body is {int(declared)} bytes; a {what} request takes "
                         f"at most {limit}", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(what, f"the body is over {limit} bytes, the most a {what} "
                             "request takes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def _docs_page(schema: dict) -> str:
    """``/docs``: the endpoints of the OpenAPI ``schema`` (method, path, summary), from the
    package alone (FastAPI's Swagger UI loads its script from a CDN: blank offline)."""
    rows = "".join(f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}"
                   f"</code></td><td>{html.escape(op.get('summary', ''))}</td></tr>"
                   for path, ops in schema["paths"].items() for method, op in ops.items())
    info = schema["info"]
    return (f"<!doctype html><meta charset=utf-8><title>{html.escape(info['title'])} API</title>"
            f"<h1>{html.escape(info['title'])} {html.escape(info['version'])}</h1>"
            f"<p>{html.escape(info.get('description', ''))}</p><table border=1 cellpadding=4>"
            f"<tr><th>method</th><th>path</th><th>what</th></tr>{rows}</table>"
            "<p>The full schema, request bodies included: <a href=openapi.json>"
            "/openapi.json</a>. The dashboard: <a href=.>/</a>.</p>")


def _version() -> str:
    from .. import __version__

    return __version__
