"""A local GitHub stand-in: the REST endpoints the bot uses, bare git remotes and webhooks out.

`teaparty demo` runs it instead of github.com, and the test suite uses it end to end. It
behaves like GitHub where the bot depends on it: App JWTs and installation tokens, status
codes and idempotency quirks, and it checks every request and response body against GitHub's
OpenAPI description (violations land in `FakeGitHub.violations`).

Module map: state (the world), git (bare remotes), shapes (response objects), routes / pulls /
catchup (one handler per operationId; catchup: the delivery log and listings an App reads to
catch up after downtime), webhooks.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.fakehub import webhooks
from bot.fakehub.auth import AuthKind, authenticate, credential
from bot.fakehub.catchup import CATCHUP_ROUTES, DeliveryLog
from bot.fakehub.git import create_bare
from bot.fakehub.openapi import OpenAPI, Operation
from bot.fakehub.pulls import PULL_ROUTES, open_pull
from bot.fakehub.routes import ROUTES, Call, Reply, repo_for
from bot.fakehub.serve import ThreadRunner, serve_local
from bot.fakehub.shapes import Json, Urls
from bot.fakehub.state import (
    DEFAULT_APP_PERMISSIONS,
    DOCS,
    Comment,
    HubError,
    HubIssue,
    HubRepo,
    HubState,
    Permission,
    Reaction,
    UserKind,
    not_found,
)

_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the hub answered."""

    method: str
    path: str
    query: Mapping[str, str]
    status: int
    operation_id: str | None
    auth: AuthKind
    body: Any = None


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    remaining: int
    apply: bool = False


class FakeGitHub:
    """GitHub for one App: serve `asgi` (or `serve()`), arrange state, inspect what happened."""

    def __init__(
        self,
        root: Path,
        *,
        app_id: int = 1,
        app_slug: str = "teaparty-demo",
        private_key_pem: str,
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        client_id: str | None = None,
        app_owner: str = "teaparty",
        permissions: Mapping[str, str] = DEFAULT_APP_PERMISSIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.state = HubState(
            root,
            app_id=app_id,
            app_slug=app_slug,
            client_id=client_id or f"Iv1.{app_id:016x}",
            app_owner=app_owner,
            permissions=permissions,
            clock=clock,
        )
        private = load_pem_private_key(private_key_pem.encode(), password=None)
        public = private.public_key()
        if not isinstance(public, RSAPublicKey):
            raise ValueError("a GitHub App key is an RSA key")
        self._public_key = public  # the hub keeps only the public half
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self.spec = OpenAPI.bundled()
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.violations: list[str] = []
        self.deliveries: list[webhooks.SentDelivery] = []
        self.api_url = "http://127.0.0.1/"
        self._faults: list[_Fault] = []
        self._routes = ROUTES | PULL_ROUTES | CATCHUP_ROUTES | DeliveryLog(self.deliveries).routes()
        self.asgi = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=_METHODS)])

    @property
    def server_url(self) -> str:
        """The `GITHUB_SERVER_URL` under which `{owner}/{name}.git` are the bare remotes."""
        return self.root.resolve().as_uri()

    @property
    def urls(self) -> Urls:
        """Where API and web links point."""
        return Urls(self.api_url, self.server_url)

    # -- arranging state ------------------------------------------------------------------

    def add_repo(
        self,
        owner: str,
        name: str,
        *,
        source: Path | None = None,
        default_branch: str = "main",
        installation_id: int = 1,
        private: bool = False,
    ) -> Path:
        """Create the bare remote `{root}/{owner}/{name}.git` and install the App on it."""
        path = self.root / owner / f"{name}.git"
        create_bare(path, source=source, default_branch=default_branch, title=name)
        state = self.state
        repo = HubRepo(
            owner,
            name,
            state.next_id(),
            path,
            default_branch,
            installation_id,
            private,
            state.clock(),
        )
        state.add_repo(repo)
        return path

    def add_user(
        self, login: str, permission: Permission = "write", *, type: UserKind = "User"
    ) -> None:
        """Add an account with this role on every repository."""
        self.state.set_user(login, permission, kind=type)

    def open_issue(self, owner: str, name: str, *, title: str, body: str, author: str) -> int:
        """Open an issue as `author`; returns its number."""
        repo = self.state.repo(owner, name)
        return self.state.open_issue(repo, title=title, body=body, author=author).number

    async def open_pull_as(
        self, owner: str, name: str, *, author: str, head: str, base: str, title: str
    ) -> int:
        """Open a pull request from branch `head` as a person (no webhook); returns its number."""
        repo = self.state.repo(owner, name)
        body = {"head": head, "base": base, "title": title, "body": None}
        return (await open_pull(self.state, repo, body, author=author)).number

    def issue(self, owner: str, name: str, number: int) -> HubIssue:
        """The issue or pull request `number`."""
        return self.state.issue(self.state.repo(owner, name), number)

    def comments(self, owner: str, name: str, number: int) -> list[Comment]:
        """The comments on issue or pull request `number`, oldest first."""
        with self.state.lock:
            return list(self.issue(owner, name, number).comments)

    def reactions(self, owner: str, name: str, number: int) -> list[Reaction]:
        """The reactions to issue or pull request `number`."""
        with self.state.lock:
            return list(self.issue(owner, name, number).reactions)

    def comment_reactions(self, owner: str, name: str, comment_id: int) -> list[str]:
        """What the App reacted to comment `comment_id` with (`+1`, `confused`, ...)."""
        with self.state.lock:
            _, comment = self.state.find_comment(self.state.repo(owner, name), comment_id)
            return [reaction.content for reaction in comment.reactions]

    def pulls(self, owner: str, name: str) -> list[HubIssue]:
        """The repository's pull requests (issues with `pull` set), oldest first."""
        with self.state.lock:
            repo = self.state.repo(owner, name)
            return [issue for issue in repo.issues.values() if issue.pull is not None]

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        apply: bool = False,
    ) -> None:
        """Answer the next `times` matching requests with `status` before doing anything else.

        With `apply`, the request is carried out first (its webhooks sent too) and only its
        answer is replaced: GitHub's 502 after a write that did happen.
        """
        fault = _Fault(
            method.upper(),
            re.compile(path_regex),
            status,
            dict(headers or {}),
            body if body is not None else {"message": f"Injected {status}"},
            times,
            apply,
        )
        with self.state.lock:
            self._faults.append(fault)

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self.state.lock:
            for fault in self._faults:
                if fault.remaining and fault.method in (method, "*") and fault.pattern.search(path):
                    fault.remaining -= 1
                    return fault
            return None

    # -- webhooks -------------------------------------------------------------------------

    async def label_issue(
        self, owner: str, name: str, number: int, label: str, *, sender: str
    ) -> str:
        """Add `label` as `sender` and deliver `issues.labeled`; returns the delivery id."""
        state = self.state
        repo = state.repo(owner, name)
        issue = state.issue(repo, number)
        added = state.add_label(repo, issue, label, actor=sender)
        payload = webhooks.issue_labeled(state, repo, issue, added, self.urls, sender=sender)
        return (await self._deliver("issues", payload)).delivery_id

    async def comment_as(self, owner: str, name: str, number: int, login: str, body: str) -> int:
        """Comment as a person and deliver `issue_comment.created`; returns the comment id."""
        repo = self.state.repo(owner, name)
        issue = self.state.issue(repo, number)
        comment = self.state.add_comment(repo, issue, author=login, body=body)
        await self._deliver(
            "issue_comment", webhooks.comment_created(self.state, repo, comment, self.urls)
        )
        return comment.comment_id

    async def redeliver(self, delivery_id: str) -> webhooks.SentDelivery:
        """Send a past delivery again: the same body and headers, the same delivery id."""
        with self.state.lock:
            first = next((d for d in self.deliveries if d.delivery_id == delivery_id), None)
        if first is None:
            raise KeyError(delivery_id)
        return await self._record_delivery(webhooks.redelivery(first))

    def delivery_log(self) -> list[Json]:
        """Every finished delivery attempt as a `hook-delivery-item`, oldest first."""
        with self.state.lock:
            return [webhooks.hook_delivery_json(d) for d in self.deliveries if d.finished]

    async def _deliver(self, event: str, payload: Json) -> webhooks.SentDelivery:
        delivery = webhooks.prepare(
            event, payload, secret=self.webhook_secret, app_id=self.state.app_id
        )
        return await self._record_delivery(delivery)

    async def _record_delivery(self, delivery: webhooks.SentDelivery) -> webhooks.SentDelivery:
        """Log the attempt under a new id, then make it; a failed one stays failed."""
        with self.state.lock:
            delivery.attempt_id = self.state.next_id()
            delivery.delivered_at = self.state.clock()
            self.deliveries.append(delivery)
        return await webhooks.send(delivery, self.webhook_url)

    async def _deliver_all(self, deliveries: list[webhooks.Outgoing]) -> None:
        for outgoing in deliveries:
            if isinstance(outgoing, webhooks.SentDelivery):
                await self._record_delivery(webhooks.redelivery(outgoing))
            else:
                await self._deliver(*outgoing)

    # -- serving --------------------------------------------------------------------------

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        """Run uvicorn on 127.0.0.1 (a free port) in this event loop; yields the base URL."""
        async with serve_local(self.asgi) as url:
            self.api_url = url
            yield url

    @contextmanager
    def serve_in_thread(self) -> Iterator[str]:
        """`serve()` on a background thread with its own event loop, for synchronous callers."""
        runner = ThreadRunner(self.serve)
        url = runner.start()
        try:
            yield url
        finally:
            runner.stop()

    # -- the request pipeline -------------------------------------------------------------

    async def _endpoint(self, request: Request) -> Response:
        raw = await request.body()
        method, path = request.method, request.url.path
        kind, value = credential(request.headers.get("authorization", ""))
        self.api_url = str(request.base_url)
        matched = self.spec.match(method, path)
        operation = matched[0] if matched else None
        fault = self._take_fault(method, path)
        if fault is not None and not (fault.apply and matched is not None):
            reply = Reply(fault.status, fault.body, dict(fault.headers))
        elif matched is None:
            reply = Reply(404, not_found().body)
        else:
            operation, params = matched
            try:
                reply = await self._operate(operation, params, request, raw, kind, value)
            except HubError as exc:
                reply = Reply(exc.status, exc.body | {"documentation_url": _docs(operation)})
            self._check_response(operation, reply)
            if fault is not None:  # applied; the caller hears only the fault
                reply = Reply(
                    fault.status, fault.body, dict(fault.headers), deliveries=reply.deliveries
                )
        record = RecordedRequest(
            method,
            path,
            dict(request.query_params),
            reply.status,
            operation.operation_id if operation else None,
            kind,
            _decoded(raw),
        )
        with self.state.lock:
            self.requests.append(record)
            if operation is None:
                self.unexpected.append(record)
        return self._response(reply)

    async def _operate(
        self,
        operation: Operation,
        params: dict[str, str],
        request: Request,
        raw: bytes,
        kind: AuthKind,
        value: str,
    ) -> Reply:
        token = authenticate(
            self.state, self._public_key, operation.operation_id, kind=kind, value=value
        )
        call = Call(
            params,
            dict(request.query_params),
            None,
            token,
            self.urls,
            request.headers.get("accept", ""),
        )
        if token is not None:  # like GitHub: unseen repository (404), permission (403), body
            if "owner" in params:
                repo_for(self.state, call)
            self._routes.check_permission(operation.operation_id, token)
        call = replace(call, body=self._check_request(operation, raw))
        return await self._routes.handlers[operation.operation_id](self.state, call)

    def _check_request(self, operation: Operation, raw: bytes) -> Any:
        schema = operation.request_schema
        if schema is None or (not raw.strip() and not operation.request_required):
            return None
        try:
            body = json.loads(raw)
        except ValueError:
            self._violation(f"{operation.operation_id} request: body is not JSON")
            raise HubError(400, "Problems parsing JSON") from None
        if errors := self.spec.validate(schema, body, where="request"):
            self._violation(f"{operation.operation_id} request: " + "; ".join(errors))
            raise HubError(422, "Invalid request.\n\n" + "\n".join(errors))
        return body

    def _check_response(self, operation: Operation, reply: Reply) -> None:
        if reply.raw is not None:
            return
        schema = operation.response_schema(reply.status)
        if not operation.documents(reply.status):
            if reply.status < 400:
                self._violation(
                    f"{operation.operation_id}: status {reply.status} is not documented"
                )
                return
            schema = {"$ref": "#/components/schemas/basic-error"}
        if schema is None:
            return
        errors = self.spec.validate(schema, reply.body, where="response")
        if errors:
            self._violation(
                f"{operation.operation_id} {reply.status} response: " + "; ".join(errors)
            )

    def _violation(self, message: str) -> None:
        with self.state.lock:
            self.violations.append(message)

    def _response(self, reply: Reply) -> Response:
        with self.state.lock:
            used = len(self.requests)
        headers = (
            {  # lower-case keys, so an injected header replaces the default
                "x-github-request-id": uuid.uuid4().hex[:20].upper(),
                "x-github-media-type": "github.v3; format=json",
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": str(max(5000 - used, 0)),
                "x-ratelimit-used": str(used),
                "x-ratelimit-reset": str(int(self.state.clock()) + 3600),
                "x-ratelimit-resource": "core",
            }
            | {name.lower(): value for name, value in reply.headers.items()}
        )
        background = (
            BackgroundTask(self._deliver_all, reply.deliveries) if reply.deliveries else None
        )
        if reply.raw is not None:
            return Response(reply.raw, reply.status, headers, background=background)
        content = b"" if reply.body is None else json.dumps(reply.body).encode()
        media = "application/json; charset=utf-8" if reply.body is not None else None
        return Response(content, reply.status, headers, media_type=media, background=background)


def _docs(operation: Operation) -> str:
    return operation.docs_url or DOCS


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return raw.decode(errors="replace")
