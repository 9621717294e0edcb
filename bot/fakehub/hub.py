"""A local GitHub stand-in: the REST endpoints the bot uses, bare git remotes and webhooks out.

`teaparty demo` runs it instead of github.com, and the test suite uses it end to end. It
behaves like GitHub where the bot depends on it: App JWTs and installation tokens, status
codes and idempotency quirks, and it checks every request (path and query parameters, formats
included, and body) and response body against GitHub's OpenAPI description (violations land in
`FakeGitHub.violations`; a request GitHub would refuse is refused as GitHub refuses it).

Module map: state (the world), openapi and parameters (the description, and the checks of a
request's parameters), git (bare remotes), shapes (response objects), routes / pulls / reviews
/ catchup / branches (one handler per operationId; catchup: the delivery log and listings an
App reads to catch up after downtime), graphql (the App's known GraphQL documents), webhooks,
people and issue_people (helpers that act as people do); review_state, review_actions,
review_shapes, anchors and diffs hold pull request reviews; ci_state, checks and ci_people hold
CI (check suites and runs, Actions jobs with logs, re-runs); app_checks the App's own check runs.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from bot.fakehub import graphql, webhooks
from bot.fakehub.app_checks import APP_CHECK_ROUTES
from bot.fakehub.auth import AuthKind, authenticate, credential
from bot.fakehub.branches import BRANCH_ROUTES
from bot.fakehub.catchup import CATCHUP_ROUTES, DeliveryLog
from bot.fakehub.checks import CHECK_ROUTES, LOG_PATH, read_log
from bot.fakehub.ci_people import CiPeople
from bot.fakehub.faults import Fault, Faults, RecordedRequest, decoded
from bot.fakehub.git import create_bare, refuse_non_fast_forward
from bot.fakehub.issue_people import IssuePeople
from bot.fakehub.oauth import ACCESS_TOKEN_PATH, AUTHORIZE_PATH, OAuthDesk
from bot.fakehub.openapi import OpenAPI, Operation
from bot.fakehub.parameters import check_parameters
from bot.fakehub.people import PullRequestPeople
from bot.fakehub.pulls import PULL_ROUTES, open_pull
from bot.fakehub.reviews import REVIEW_ROUTES
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
from bot.fakehub.workflows import WORKFLOW_ROUTES

_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD"]


class FakeGitHub(PullRequestPeople, IssuePeople, CiPeople):
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
        client_secret: str | None = None,
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
        self.oauth = OAuthDesk(self.state, client_secret=client_secret or secrets.token_hex(20))
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self.spec = OpenAPI.bundled()
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.violations: list[str] = []
        self.deliveries: list[webhooks.SentDelivery] = []
        self.api_url = "http://127.0.0.1/"
        self._faults = Faults(self.state.lock)
        self._used = {"core": 0, "graphql": 0}  # rate-limit points spent, per resource
        routes = (
            ROUTES | PULL_ROUTES | REVIEW_ROUTES | CATCHUP_ROUTES | BRANCH_ROUTES | WORKFLOW_ROUTES
        ) | (CHECK_ROUTES | APP_CHECK_ROUTES)
        self._routes = routes | DeliveryLog(self.deliveries).routes()
        self.asgi = Starlette(
            routes=[
                Route(LOG_PATH + "/{job_id:int}/{key}", self._log, methods=["GET"]),
                Route(AUTHORIZE_PATH, self.oauth.authorize, methods=["GET"]),
                Route(ACCESS_TOKEN_PATH, self.oauth.access_token, methods=["POST"]),
                Route("/{path:path}", self._endpoint, methods=_METHODS),
            ]
        )

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
        refuse_force_pushes: bool = False,
    ) -> Path:
        """Create the bare remote `{root}/{owner}/{name}.git` and install the App on it.

        With `refuse_force_pushes`, a push that is not a fast-forward is refused even when
        forced, as GitHub's branch protection does (GitHub's default accepts it).
        """
        path = self.root / owner / f"{name}.git"
        create_bare(path, source=source, default_branch=default_branch, title=name)
        if refuse_force_pushes:
            refuse_non_fast_forward(path)
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
        fault = Fault(
            method.upper(),
            re.compile(path_regex),
            status,
            dict(headers or {}),
            body if body is not None else {"message": f"Injected {status}"},
            times,
            apply,
        )
        self._faults.add(fault)

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

    async def edit_issue(
        self,
        owner: str,
        name: str,
        number: int,
        *,
        sender: str,
        title: str | None = None,
        body: str | None = None,
    ) -> str | None:
        """Edit the issue's title or text as `sender` and deliver `issues.edited`; the
        delivery id, or None when nothing changed (GitHub then sends nothing)."""
        state = self.state
        repo = state.repo(owner, name)
        issue = state.issue(repo, number)
        changes = state.edit_issue(issue, title=title, body=body)
        if not changes:
            return None
        payload = webhooks.issue_edited(state, repo, issue, changes, self.urls, sender=sender)
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
        try:
            raw = await request.body()
        except ClientDisconnect:  # the caller went away mid-request (a Ctrl-C): nothing to do
            return Response(status_code=499)
        method, path = request.method, request.url.path
        kind, value = credential(request.headers.get("authorization", ""))
        self.api_url = str(request.base_url)
        fault = self._faults.take(method, path)
        if method == "POST" and path == graphql.PATH:
            return await self._graphql(request, raw, fault, kind, value)
        matched = self.spec.match(method, path)
        operation = matched[0] if matched else None
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
            decoded(raw),
        )
        with self.state.lock:
            self.requests.append(record)
            self._used["core"] += 1
            if operation is None:
                self.unexpected.append(record)
        return self._response(reply)

    async def _log(self, request: Request) -> Response:
        """A job's log at its download URL (where `download-job-logs` redirects): plain text,
        no token needed; the stand-in notes whether one came anyway."""
        found = read_log(
            self.state,
            request.path_params["job_id"],
            request.path_params["key"],
            authorization=request.headers.get("authorization", ""),
        )
        if found is None:
            return Response(b"Not Found", 404)
        return Response(found, 200, media_type="text/plain; charset=utf-8")

    async def _graphql(
        self, request: Request, raw: bytes, fault: Fault | None, kind: AuthKind, value: str
    ) -> Response:
        """`POST /graphql`: installation tokens only; its own `graphql` rate limit."""
        operation, cost = None, 1
        if fault is not None and not fault.apply:
            reply = Reply(fault.status, fault.body, dict(fault.headers))
        else:
            reply, operation, cost = await self._run_graphql(raw, kind, value)
            if fault is not None:  # applied; the caller hears only the fault
                reply = Reply(
                    fault.status, fault.body, dict(fault.headers), deliveries=reply.deliveries
                )
        name = "graphql" if operation is None else f"graphql/{operation}"
        query = dict(request.query_params)
        record = RecordedRequest(
            "POST", graphql.PATH, query, reply.status, name, kind, decoded(raw)
        )
        with self.state.lock:
            self.requests.append(record)
            self._used["graphql"] += cost
        return self._response(reply, resource="graphql")

    async def _run_graphql(
        self, raw: bytes, kind: AuthKind, value: str
    ) -> tuple[Reply, str | None, int]:
        """The reply to a GraphQL call, the operation it ran and its cost in points."""
        try:
            token = authenticate(self.state, self._public_key, "graphql", kind=kind, value=value)
            assert token is not None  # "graphql" is not an App (JWT) operation
            answer = await graphql.answer(self.state, token, decoded(raw), self.urls)
        except HubError as exc:
            return Reply(exc.status, exc.body | {"documentation_url": graphql.DOCS}), None, 1
        if answer.violation:
            self._violation(answer.violation)
        return Reply(200, answer.body, deliveries=answer.deliveries), answer.operation, answer.cost

    async def _operate(
        self,
        operation: Operation,
        params: dict[str, str],
        request: Request,
        raw: bytes,
        kind: AuthKind,
        value: str,
    ) -> Reply:
        user = self.oauth.caller(operation.operation_id, kind=kind, value=value)
        token = (
            None
            if user is not None
            else authenticate(
                self.state, self._public_key, operation.operation_id, kind=kind, value=value
            )
        )
        call = Call(
            params,
            dict(request.query_params),
            None,
            token,
            self.urls,
            request.headers.get("accept", ""),
            user,
        )
        if token is not None or user is not None:  # like GitHub: unseen repository (404),
            if "owner" in params:  # permission (403), then the body
                repo_for(self.state, call)
        if token is not None:
            self._routes.check_permission(operation.operation_id, token)
        check_parameters(operation, call, spec=self.spec, on_violation=self._violation)
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

    def _response(self, reply: Reply, *, resource: str = "core") -> Response:
        with self.state.lock:
            used = self._used[resource]
        headers = (
            {  # lower-case keys, so an injected header replaces the default
                "x-github-request-id": uuid.uuid4().hex[:20].upper(),
                "x-github-media-type": "github.v3; format=json",
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": str(max(5000 - used, 0)),
                "x-ratelimit-used": str(used),
                "x-ratelimit-reset": str(int(self.state.clock()) + 3600),
                "x-ratelimit-resource": resource,
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
