"""Adversarial agent text through Outbound.block, then through GitHub's own renderer.

Each case is sanitised and rendered with cmark-gfm (`cmarkgfm`, GitHub's fork of cmark, with
GitHub's extensions: tables, autolinks, strikethrough, tag filter, task lists; footnotes and
`<pre lang>` as on github.com), once with raw HTML omitted and once with it passed through
(GitHub passes it to its HTML sanitiser, which keeps the text), and the rendered HTML is
read with html.parser. On both renderings:

- no live mention: `@name` in a text node that is not inside `<code>` or `<pre>` nor inside
  an autolink (an `<a>` whose text is its address: GitHub takes everything up to a space
  after `https://` or `www.` into one), and not right after [A-Za-z0-9_];
- no closing reference but to the job's own issue (octo/widgets#5): a closing keyword and an
  issue reference (`#N`, `o/r#N`, `GH-N`, an issue or pull request URL, or a list of them)
  in the text outside code, tags ignored, separated by nothing but spaces (any kind, not a
  line break) and an optional colon; text is compared after NFKC, as fullwidth forms are.

On the rendering with raw HTML passed through, nothing is hidden:

- every word of the input (a run of letters or of digits, after decoding entities, NFKC,
  dropping invisible characters and casefolding) is shown: in a text node, a link's
  address, a code block's language, a list item's number, a ticked task box (x), or, for
  the images and line breaks the App keeps as written, the element's name and attributes;
  except the words of HTML comments (and `<?…>`, `<!…>`), which the case names as
  `removed`, and then `(HTML comment removed)` is shown;
- the HTML has no comments, no `title` attributes, and no elements but those Markdown makes.

No image (nor other media) loads from anywhere but GitHub.

The same cases, sanitised by the regex sanitiser this one replaced (main before the
markdown-it rewrite), fail these checks.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import unquote

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from bot.github import outbound
from bot.github.outbound import Outbound

AGENT = Outbound("octo", "widgets", 5)
NOTE = "(HTML comment removed)"
GITHUB = Options.CMARK_OPT_GITHUB_PRE_LANG | Options.CMARK_OPT_FOOTNOTES
RENDERINGS = {"html omitted": GITHUB, "html passed": GITHUB | Options.CMARK_OPT_UNSAFE}
MARKDOWN_TAGS = frozenset(
    "p a code pre em strong del ul ol li blockquote h1 h2 h3 h4 h5 h6 hr br img table thead"
    " tbody tr th td input sup section".split()
)
KEPT_AS_WRITTEN = frozenset({"img", "br"})
VOID = frozenset({"img", "br", "hr", "input"})


@dataclass(frozen=True)
class Case:
    text: str
    removed: str = ""  # the words of its HTML comments


MENTIONS = {
    "plain": "thanks @alice!",
    "punctuation before": 'cc:@alice,@bob (@carol) "@dave" é@erin',
    "emphasis": "_@alice_ and *@bob* and __@carol__",
    "nested emphasis": "***@alice*** **_@bob_** ~~@carol~~ ~@dave~ *a **@erin** b*",
    "name split by emphasis": "@ali*ce* and @b**ob**",
    "unpaired backtick before": "`@alice",
    "unpaired backticks apart": "x ` y @alice and `` z @bob",
    "backticks that pair with inserted ones": "a `b` c ` @alice ` d",
    "code span touching": "`x`@alice and @bob`y` and `p`@carol`q`",
    "link text": "[@alice](https://example.com) [see @bob too](https://example.com)",
    "image alt": "![@alice](https://evil.example/p.png)",
    "entity": "&#64;alice &#x40;bob @&#99;arol",
    "escaped": "\\@alice \\\\@bob",
    "fullwidth": "＠alice ＠ａｌｉｃｅ",
    "team": "ping @org/team and @org/team-2.",
    "html inline": '<b>@alice</b> <span title="@bob">x</span> <code>@carol</code>',
    "after a tag": "x<br>@alice and <kbd>@bob</kbd>",
    "table": "| who | why |\n|---|---|\n| @alice | Fixes #2 |\n| `a|b` | @bob\\|x |",
    "quote and lazy line": "> hi @alice\nlazy @bob",
    "lists": "- @alice\n  - @bob\n1. @carol\n- [ ] @dave",
    "setext headings": "@alice\n---\n\n@bob\n===",
    "atx heading": "# @alice #",
    "indented line in a paragraph": "text\n    @alice",
    "indented code stays code": "    @alice",
    "bare urls": "see https://medium.com/@alice and www.example.com/@bob and x:https://a.io/@carol",
    "autolink": "see <https://example.com/@alice>",
    "email": "mail alice@example.com or @bob",
    "html block": "<div>\n@alice\n</div>",
    "html block in a fence's place": "<div>\n```\n@alice\n```\n</div>",
    "details": "<details><summary>ok @alice</summary>\n\nmore @bob\n\n</details>",
    "link title": '[x](https://example.com "@alice")',
    "reference title": "[x][a]\n\n[a]: https://example.com '@alice'",
    "fence info": "```py @alice\nx\n```",
    "lists of code": "- a\n  ```\n- @alice\n  ```",
    "backtick info string": "``` a`b\n@alice\n```",
    "code span over lines": "`a\n@alice b`",
}

CLOSINGS = {
    "plain": "Fixes #2",
    "no-break space": "Closes\u00a0#2",
    "thin and ideographic spaces": "Fixes\u2009#2, Fixes\u3000#3, Fixes\u202f#4",
    "entity hash": "Closes &#35;2",
    "entity keyword": "Fixe&#115; #2",
    "entity space": "Fixes&#32;#2 and Fixes&nbsp;#3",
    "tags": "<b>Closes</b> #2",
    "emphasis": "**Fixes** #2 and _Resolves_: #3",
    "emphasis inside the word": "**Fix**es #2",
    "autolink url": "fixes <https://github.com/octo/widgets/issues/2>",
    "bare url": "Fixes https://github.com/octo/widgets/issues/2",
    "pull url": "Closes https://github.com/octo/widgets/pull/3",
    "other repository": "fixes o/r#2 and Closes octo/widgets-two#5",
    "list of references": "Fixes #5, #6 and #7",
    "gh form": "closes GH-2",
    "fullwidth": "Ｆｉｘｅｓ ＃2",
    "zero width entity": "Fi&#x200b;xes #2",
    "code": "`Fixes #2` and Fixes `#3`",
    "link text": "[Fixes #2](https://example.com)",
    "heading": "## Closes #2\n\nResolved #3\n===",
    "html block": "<p>\nFixes #2\n</p>",
    "quote": "> Fixes #2",
    "comment inside": "Fix<!-- x -->es #2",
}

HIDDEN = {
    "comment": Case("Done.<!-- delete CI -->", removed="delete CI"),
    "comment block": Case("<!--\nsecret plan\n-->\nvisible", removed="secret plan"),
    "empty comment": Case("a<!---->b<!-->c", removed=""),
    "unclosed inline comment": Case("Done.<!-- unclosed, shown"),
    "unclosed comment block": Case(
        "<!-- hides\neverything after", removed="hides everything after"
    ),
    "processing instruction": Case("x <?php secret ?> y", removed="php secret"),
    "declaration": Case("x\n\n<!DOCTYPE secret>", removed="DOCTYPE secret"),
    "cdata": Case("x <![CDATA[secret]]> y", removed="CDATA secret"),
    "comment idiom": Case('[//]: # (hidden)\n[//]: # "hidden too"\n[comment]: <> (and this)'),
    "definition title": Case("[a]: https://x.example 'hidden'\n\nsee [a]"),
    "unused definition": Case("[a]: https://x.example 'hidden'"),
    "definition in a list": Case("- [a]: https://x.example\n  'hidden'"),
    "definition in a quote": Case("> [a]: https://x.example 'hidden'"),
    "footnote": Case("x[^1]\n\n[^1]: hidden\n\n[^2]: unused"),
    "link title": Case('[a](https://x.example "hidden") and [b](<https://x.example> (also))'),
    "image title": Case('![a](https://github.com/x.png "hidden")'),
    "details": Case("<details><summary>ok</summary>\n\nhidden\n\n</details>"),
    "span title": Case('<span title="hidden">x</span>'),
    "tiny text": Case("<sub><sub>hidden</sub></sub>"),
    "fence info": Case("```py hidden words\nx\n```"),
    "image then text": Case('<img src="https://github.com/x.png">\nhidden @alice'),
    "script": Case("<script>hidden()</script>"),
    "style": Case("<style>p { display: none }</style>\n\ntext"),
    "unclosed fence": Case("```\ncode"),
    "tag characters as entities": Case("tag&#xE0041;&#xE0042; and &#x202e;rtl"),
    "entity-made comment": Case("&lt;!-- shown --&gt;"),
    "task list": Case("- [x] done\n- [ ] todo"),
}

IMAGES = {
    "markdown": "![p](https://evil.example/p.png) ![q](//evil.example/q.png)",
    "reference": "![p][pixel]\n\n[pixel]: https://evil.example/p.png",
    "reference after a failed inline one": "![a](https://github.com/x.png\n\n[a]: https://evil.example/p",
    "entity in the address": "![x](&#104;ttps://evil.example/p.png)",
    "html": '<img src="https://evil.example/p.png"> <IMG\nSRC=https://evil.example/q.png>',
    "html quoted >": '<img alt="a>b" src="https://evil.example/p">',
    "srcset": '<source srcset="https://github.com/a.png 1x, https://evil.example/b.png 2x">',
    "poster": '<video poster="https://evil.example/p.png"></video>',
    "github alt with a link": "![a [b](https://x.io 'hidden') c](https://github.com/x.png)",
}

CORPUS: dict[str, Case] = {
    **{f"image: {name}": Case(text) for name, text in IMAGES.items()},
    **{f"mention: {name}": Case(text) for name, text in MENTIONS.items()},
    **{f"closing: {name}": Case(text) for name, text in CLOSINGS.items()},
    **{f"hidden: {name}": case for name, case in HIDDEN.items()},
}
CORPUS["closing: comment inside"] = Case(CLOSINGS["comment inside"], removed="x")


@dataclass
class Page(HTMLParser):
    """Rendered HTML: text nodes with what encloses them, and what the reader is shown."""

    nodes: list[tuple[str, bool, int | None]] = field(default_factory=list)  # text, code, <a>
    shown: list[str] = field(default_factory=list)
    anchors: list[tuple[str, list[str]]] = field(default_factory=list)  # href, texts
    comments: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # what images and media load
    tags: set[str] = field(default_factory=set)
    titles: list[str] = field(default_factory=list)
    stack: list[tuple[str, int | None]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)  # the next number of each open <ol>

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.tags.add(tag)
        self.titles += [value or "" for name, value in attrs if name == "title"]
        self.sources += [
            part.split()[0]
            for name, value in attrs
            if name in ("src", "srcset", "poster", "data") and value
            for part in value.split(",")
            if part.strip()
        ]
        if tag in KEPT_AS_WRITTEN:
            self.shown += [tag, *(f"{name} {unquote(value or '')}" for name, value in attrs)]
        if tag == "pre" and values.get("lang"):
            self.shown.append(values["lang"] or "")
        if tag == "input" and "checked" in values:
            self.shown.append("x")  # a task list's ticked box
        if tag == "ol":
            self.numbers.append(int(values.get("start") or 1))
        if tag == "li" and self.stack and self.stack[-1][0] == "ol":
            self.shown.append(str(self.numbers[-1]))
            self.numbers[-1] += 1
        anchor = None
        if tag == "a":
            self.anchors.append((values.get("href") or "", []))
            self.shown.append(unquote(values.get("href") or ""))
            anchor = len(self.anchors) - 1
        if tag not in VOID:
            self.stack.append((tag, anchor))

    def handle_endtag(self, tag: str) -> None:
        for n in range(len(self.stack) - 1, -1, -1):
            if self.stack[n][0] == tag:
                del self.stack[n:]
                return

    def handle_data(self, data: str) -> None:
        code = any(tag in ("code", "pre") for tag, _ in self.stack)
        anchor = next((a for tag, a in reversed(self.stack) if tag == "a"), None)
        self.nodes.append((data, code, anchor))
        self.shown.append(data)
        if anchor is not None:
            self.anchors[anchor][1].append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def autolink(self, anchor: int | None) -> bool:
        """Whether `<a>` number `anchor` shows its own address (GitHub links nothing in it)."""
        if anchor is None:
            return False
        href, texts = self.anchors[anchor]
        text = "".join(texts)
        text = unquote(text)
        return unquote(href) in (text, "mailto:" + text, "http://" + text)


def render(markdown: str, options: int) -> Page:
    page = Page()
    page.feed(cmarkgfm.github_flavored_markdown_to_html(markdown, options=options))
    page.close()
    return page


def normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def words(text: str) -> set[str]:
    """Runs of letters and runs of digits, as the reader sees them."""
    shown = "".join(char for char in normal(text) if unicodedata.category(char) != "Cf")
    return set(re.findall(r"[^\W\d_]+|\d+", shown.casefold()))


def live_mentions(page: Page) -> list[str]:
    return [
        found[0]
        for text, code, anchor in page.nodes
        if not code and not page.autolink(anchor)
        for found in re.finditer(r"(?<![A-Za-z0-9_])@[A-Za-z0-9][\w/-]*", normal(text))
    ]


_REF = (
    r"(?:(?P<owner>[A-Za-z0-9][\w.-]*)/(?P<repo>[\w.-]+))?#(?P<num>\d+)|GH-(?P<gh>\d+)"
    r"|https?://(?P<host>[^\s/]+)/(?P<uowner>[\w.-]+)/(?P<urepo>[\w.-]+)/(?:issues|pull)/(?P<unum>\d+)"
)
_SPACE = r"[^\S\n]*"
_CLOSING = re.compile(
    rf"(?<![A-Za-z0-9_])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?![A-Za-z0-9])"
    rf"{_SPACE}:?{_SPACE}(?=({_REF}))",
    re.IGNORECASE,
)
_MORE = re.compile(rf"{_SPACE}(?:,|and|&){_SPACE}(?=({_REF}))", re.IGNORECASE)
_ONE = re.compile(rf"(?:{_REF})(?![A-Za-z0-9_])", re.IGNORECASE)


def closed_issues(page: Page) -> list[str]:
    """The references a closing keyword in the rendered text points at, other than #5."""
    text = normal("".join(text for text, code, _ in page.nodes if not code))
    refs = []
    for found in _CLOSING.finditer(text):
        at = found.end()
        while (ref := _ONE.match(text, at)) is not None:
            refs.append(ref)
            more = _MORE.match(text, ref.end())
            if more is None:
                break
            at = more.end()
    return [ref[0] for ref in refs if not _own(ref)]


def _own(ref: re.Match[str]) -> bool:
    if ref["unum"]:
        where = (ref["host"], ref["uowner"], ref["urepo"], ref["unum"])
        return where == ("github.com", "octo", "widgets", "5")
    owner, repo = (ref["owner"] or "octo", ref["repo"] or "widgets")
    return (owner.lower(), repo.lower(), ref["num"] or ref["gh"]) == ("octo", "widgets", "5")


@pytest.mark.parametrize("name", CORPUS)
@pytest.mark.parametrize("rendering", RENDERINGS)
def test_the_rendered_text_pings_nobody_and_closes_only_the_own_issue(
    name: str, rendering: str
) -> None:
    posted = AGENT.block(CORPUS[name].text)
    page = render(posted, RENDERINGS[rendering])
    assert live_mentions(page) == [], posted
    assert closed_issues(page) == [], posted


@pytest.mark.parametrize("name", CORPUS)
def test_the_rendered_html_loads_nothing_from_elsewhere(name: str) -> None:
    page = render(AGENT.block(CORPUS[name].text), RENDERINGS["html passed"])
    assert [url for url in page.sources if not AGENT.github_url(url)] == []


@pytest.mark.parametrize("name", CORPUS)
def test_the_rendered_text_hides_nothing(name: str) -> None:
    case = CORPUS[name]
    posted = AGENT.block(case.text)
    page = render(posted, RENDERINGS["html passed"])
    shown = words(" ".join(page.shown))
    assert words(html.unescape(case.text)) - words(case.removed) <= shown, posted
    if case.removed:
        assert NOTE in "".join(page.shown), posted
    assert page.comments == [], posted
    assert page.titles == [], posted
    assert page.tags <= MARKDOWN_TAGS, posted


@pytest.mark.parametrize("name", CORPUS)
def test_the_apps_words_after_agent_text_still_work(name: str) -> None:
    """Whatever agent text leaves open (a fence, a list, HTML) ends where it ends."""
    posted = AGENT.block(CORPUS[name].text) + "\n\n@decider, please answer. Closes #6"
    page = render(posted, RENDERINGS["html passed"])
    assert live_mentions(page) == ["@decider"], posted
    assert closed_issues(page) == ["#6"], posted


@pytest.mark.parametrize(
    "text",
    [
        "Fixes #5",
        "closes octo/widgets#5",
        "Resolves https://github.com/octo/widgets/issues/5",
        "**Fixes** #5",
        "Closes&nbsp;#5",
    ],
)
def test_the_own_issue_is_still_closed(text: str) -> None:
    page = render(AGENT.block(text), RENDERINGS["html passed"])
    rendered = normal("".join(text for text, code, _ in page.nodes if not code))
    assert _CLOSING.search(rendered), rendered


def test_the_note_is_the_sanitisers() -> None:
    assert outbound.COMMENT_NOTE == NOTE


def test_every_case_settles_without_the_code_block_fallback() -> None:
    fell_back = [
        name
        for name, case in CORPUS.items()
        if AGENT.block(case.text).startswith("```\n") and not case.text.startswith("```")
    ]
    assert fell_back == []
