"""The App acting for a signed-in person: what it makes of GitHub's answers, odd ones too."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from bot.errors import GitHubError
from bot.github.users import GitHubUsers, SignInError

Handler = Callable[[httpx.Request], httpx.Response]


def users(handler: Handler, *, server_url: str = "https://github.com") -> GitHubUsers:
    return GitHubUsers(
        server_url=server_url,
        api_url="https://api.github.com/",
        client_id="Iv1.a",
        client_secret="cs",
        transport=httpx.MockTransport(handler),
    )


def test_the_sign_in_goes_to_the_web_host_or_for_local_remotes_to_the_apis() -> None:
    def nothing(request: httpx.Request) -> httpx.Response:
        raise AssertionError(request)

    url = users(nothing).authorize_url(state="s t", redirect_uri="https://tea.example/cb")
    assert url.startswith("https://github.com/login/oauth/authorize?client_id=Iv1.a")
    assert "state=s+t" in url
    local = users(nothing, server_url="file:///srv/remotes")
    assert local.web_url == "https://api.github.com"


async def test_a_refused_or_broken_exchange_is_a_sign_in_error() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        assert b"client_secret=cs" in request.content
        return httpx.Response(200, json={"error": "bad_verification_code"})

    with pytest.raises(SignInError, match="bad_verification_code"):
        await users(refused).exchange("c", redirect_uri="https://tea.example/cb")

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>")

    with pytest.raises(SignInError, match="JSONDecodeError"):
        await users(broken).exchange("c", redirect_uri="https://tea.example/cb")


@pytest.mark.parametrize(
    ("answer", "role"),
    [
        (httpx.Response(200, json={"permissions": {"pull": True, "push": True}}), "write"),
        (httpx.Response(200, json={"permissions": {"pull": True, "maintain": True}}), "maintain"),
        (httpx.Response(200, json={"id": 1}), "none"),  # no permissions: not theirs to see
        (httpx.Response(200, json=[]), "none"),
        (httpx.Response(404, json={"message": "Not Found"}), "none"),
        (httpx.Response(401, json={"message": "Bad credentials"}), "none"),
    ],
)
async def test_a_role_from_githubs_answer(answer: httpx.Response, role: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer ghu_t"
        assert request.url.path == "/repos/octo/widgets"
        return answer

    assert await users(handler).role("ghu_t", "octo/widgets") == role


async def test_github_failing_is_an_error_not_a_role() -> None:
    def failing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502)

    with pytest.raises(GitHubError, match="502"):
        await users(failing).role("ghu_t", "octo/widgets")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(GitHubError, match="ConnectError"):
        await users(down).login("ghu_t")

    def nameless(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"id": 3})

    with pytest.raises(GitHubError, match="no login"):
        await users(nameless).login("ghu_t")

    def garbled(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy's page</html>")

    with pytest.raises(GitHubError, match="GET /repos/octo/widgets: 200 with a body that is no"):
        await users(garbled).role("ghu_t", "octo/widgets")
