"""The job page as HTML: a list of jobs, one job (its board, gates and the hierarchy of its
conversations with what each used), and one conversation's transcript.

Server-rendered, no build step: one small inline script swaps the live part of a job's page
when its event stream says it changed (without JavaScript the page is whole, and a link
reloads it). Every string shown is agent- or user-written, so every one goes through
`Shown`: secrets masked first, then escaped for HTML. Long texts fold (`<details>`), and a
transcript is a page of its own, so a job of thousands of messages stays a light page.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from orchestrator.api import Gate, JobPage, JobSummary, Level, Message, Task, Usage

PAGE_MESSAGES = 200  # a transcript's page: a conversation may run to thousands
FOLD_CHARS = 600  # a text longer than this shows its start, the rest behind a fold
HEAD_CHARS = 240

STYLE = """
:root{color-scheme:light dark;--line:#8884;--dim:#888}
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:0 .8rem 3rem}
header{padding:.6rem 0;border-bottom:1px solid var(--line)}
h1{font-size:1.3rem;margin:.8rem 0 .2rem}h2{font-size:1.05rem;margin:1.4rem 0 .4rem}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.25rem .4rem;
border-bottom:1px solid var(--line);vertical-align:top}
.scroll{overflow-x:auto}.dim{color:var(--dim)}.num{text-align:right;white-space:nowrap}
pre{white-space:pre-wrap;word-break:break-word;margin:.2rem 0;font-size:13px}
.msg{border-left:3px solid var(--line);padding:.2rem .6rem;margin:.6rem 0}
.assistant{border-color:#4a8}.tool{border-color:#888}.user{border-color:#48c}
.error{border-color:#c44}.state{font-weight:600}
.tree ul{list-style:none;padding-left:1.1rem;border-left:1px dotted var(--line);margin:0}
.tree>ul{padding-left:0;border:0}.tree li{margin:.15rem 0}
"""

LIVE_SCRIPT = """
(function(){var live=document.getElementById('live');if(!live||!window.EventSource)return;
var s=new EventSource(live.dataset.stream);
s.addEventListener('page',function(e){live.innerHTML=JSON.parse(e.data);});
s.addEventListener('end',function(){s.close();});})();
"""


@dataclass(frozen=True)
class Shown:
    """How text is shown: `redact` masks what must not be seen (secrets) before escaping."""

    redact: Callable[[str], str]

    def __call__(self, text: object) -> str:
        return html.escape(self.redact(str(text)), quote=True)

    def folded(self, text: str, *, pre: bool = True) -> str:
        """`text` whole when short; else its start, and the rest behind a fold."""
        wrap = "pre" if pre else "div"
        if len(text) <= FOLD_CHARS:
            return f"<{wrap}>{self(text)}</{wrap}>"
        return (
            f"<details><summary><{wrap}>{self(text[:HEAD_CHARS])}…</{wrap}>"
            f'<span class="dim">{len(text):,} characters: open</span></summary>'
            f"<{wrap}>{self(text)}</{wrap}></details>"
        )


def document(title: str, body: str, *, shown: Shown, script: str = "") -> str:
    scripted = f"<script>{script}</script>" if script else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{shown(title)}</title><style>{STYLE}</style></head><body>"
        f'<header><a href="/jobs">jobs</a></header>{body}{scripted}</body></html>'
    )


def jobs_list(jobs: Iterable[JobSummary], *, shown: Shown) -> str:
    rows = "".join(
        f'<tr><td><a href="/jobs/{job.job_id}">{job.job_id}</a></td>'
        f"<td>{shown(job.title)}<div class=dim>{shown(_origin(job))}</div></td>"
        f'<td class="state">{shown(job.state)}</td><td>{shown(job.step)}</td>'
        f'<td class="num">{_money(job.cost_usd)}</td></tr>'
        for job in jobs
    )
    table = (
        '<div class="scroll"><table><tr><th>job</th><th>title</th><th>state</th>'
        f'<th>step</th><th class="num">cost</th></tr>{rows}</table></div>'
        if rows
        else "<p>No jobs yet.</p>"
    )
    return document("Jobs", f"<h1>Jobs</h1>{table}", shown=shown)


def job_page(page: JobPage, *, shown: Shown, stream: str | None) -> str:
    """A job's whole page; with `stream`, the live part redraws from that event stream."""
    summary = page.view.summary
    live = f' data-stream="{shown(stream)}"' if stream else ""
    body = (
        f"<h1>Job {summary.job_id}: {shown(summary.title)}</h1>"
        f'<p class="dim">{shown(_origin(summary))}'
        + (f" · branch <code>{shown(page.view.branch)}</code>" if page.view.branch else "")
        + f' · <a href="/jobs/{summary.job_id}">reload</a></p>'
        f'<div id="live"{live}>{live_part(page, shown=shown)}</div>'
    )
    return document(
        f"Job {summary.job_id}: {summary.title}",
        body,
        shown=shown,
        script=LIVE_SCRIPT if stream else "",
    )


def live_part(page: JobPage, *, shown: Shown) -> str:
    """What changes while the job runs: its state, board, gates and hierarchy."""
    view, summary = page.view, page.view.summary
    step = "" if summary.step == summary.state else f": {shown(summary.step)}"
    state = (
        f'<p><span class="state" id="state">{shown(summary.state)}</span>{step} · '
        f"{_tokens(summary.usage)} tokens · "
        f"{_money(summary.cost_usd)} · updated {shown(_ago(summary.updated_at))}</p>"
    )
    error = f"<p><b>Last error:</b> {shown(view.last_error)}</p>" if view.last_error else ""
    result = f"<h2>Result</h2>{shown.folded(view.result)}" if view.result else ""
    return (
        state
        + error
        + _board(view.tasks, shown=shown)
        + _gates(view.gates, shown=shown)
        + _hierarchy(page, shown=shown)
        + result
    )


def transcript(
    job_id: int, level: Level, messages: Sequence[Message], *, shown: Shown, after: int = 0
) -> str:
    """A page of one conversation's messages (those after message `after`), with tool calls
    and results; long ones folded; links to the pages before and after."""
    items = "".join(_message(m, shown=shown) for m in messages)
    here = f"/jobs/{job_id}/c/{quote(level.conversation_id, safe='')}"
    pages = []
    if after > 0:
        pages.append(f'<a href="{shown(here)}?after={max(0, after - PAGE_MESSAGES)}">earlier</a>')
    if messages and messages[-1].seq < level.messages:
        pages.append(f'<a href="{shown(here)}?after={messages[-1].seq}">later messages</a>')
    items += f"<p>{' · '.join(pages)}</p>" if pages else ""
    task = f" (task #{level.task})" if level.task is not None else ""
    body = (
        f'<p><a href="/jobs/{job_id}">job {job_id}</a></p>'
        f"<h1>{shown(level.agent)}{task}</h1>"
        f'<p class="dim">{level.messages} messages · {_tokens(level.usage)} tokens · '
        f"{_money(level.cost_usd)}</p>{items or '<p>No messages yet.</p>'}"
    )
    return document(f"Job {job_id}: {level.agent}", body, shown=shown)


def _board(tasks: tuple[Task, ...], *, shown: Shown) -> str:
    if not tasks:
        return "<h2>Board</h2><p>No tasks yet: the lead is planning.</p>"
    rows = "".join(
        f'<tr id="task-{t.number}"><td>#{t.number}</td><td>{shown(t.title)}'
        + (f"<div class=dim>blocked: {shown(t.blocked_reason)}</div>" if t.blocked_reason else "")
        + f'</td><td class="state">{shown(t.state)}</td><td>{shown(t.review)}</td>'
        f"<td>{shown(t.workgroup or '')}</td></tr>"
        for t in tasks
    )
    return (
        '<h2>Board</h2><div class="scroll"><table><tr><th>#</th><th>task</th><th>state</th>'
        f"<th>review</th><th>workgroup</th></tr>{rows}</table></div>"
    )


def _gates(gates: tuple[Gate, ...], *, shown: Shown) -> str:
    if not gates:
        return ""
    items = "".join(
        f"<li><b>{shown(g.kind)}</b> asked by {shown(g.asked_by)}: "
        f"{shown.folded(g.question)}<div>{_answer(g, shown=shown)}</div></li>"
        for g in gates
    )
    return f"<h2>Questions</h2><ul>{items}</ul>"


def _answer(gate: Gate, *, shown: Shown) -> str:
    if gate.answer is not None:
        via = f" ({shown(gate.answered_via)})" if gate.answered_via else ""
        return f"answered <b>{shown(gate.answer)}</b> by {shown(gate.answered_by)}{via}"
    if gate.closed_at is not None:
        return "closed unanswered"
    options = f" ({shown(' / '.join(gate.options))})" if gate.options else ""
    return f"open{options}"


def _hierarchy(page: JobPage, *, shown: Shown) -> str:
    """The conversations as nested lists, each with its totals and a link to its transcript."""
    if not page.levels:
        return ""
    known = {level.conversation_id for level in page.levels}
    children: dict[str | None, list[Level]] = {}
    for level in page.levels:
        parent = level.parent_id if level.parent_id in known else None
        children.setdefault(parent, []).append(level)
    job_id = page.view.summary.job_id

    def tree(parent: str | None) -> str:
        items = "".join(
            f"<li>{_level(job_id, level, shown=shown)}{tree(level.conversation_id)}</li>"
            for level in children.get(parent, [])
        )
        return f"<ul>{items}</ul>" if items else ""

    return f'<h2>Who did what</h2><div class="tree">{tree(None)}</div>'


def _level(job_id: int, level: Level, *, shown: Shown) -> str:
    task = f" · task #{level.task}" if level.task is not None else ""
    link = f"/jobs/{job_id}/c/{quote(level.conversation_id, safe='')}"
    return (
        f'<a href="{shown(link)}">{shown(level.agent)}</a>{task}'
        f' <span class="dim">{"working" if level.active else "done"} · '
        f"{level.messages} messages · {_tokens(level.usage)} tokens · "
        f"{_money(level.cost_usd)}</span>"
    )


def _message(message: Message, *, shown: Shown) -> str:
    error = " error" if message.content.get("is_error") else ""
    kind = message.content.get("kind")
    label = f"{message.sender} · {message.role}" + (f" · {kind}" if kind else "")
    usage = f" · {_tokens(message.usage)} tokens" if message.usage is not None else ""
    text = message.whole_text
    calls = "".join(
        f"<div>→ <b>{shown(call.name)}</b> {shown.folded(_args(call.args))}</div>"
        for call in message.tool_calls
    )
    return (
        f'<div class="msg {shown(message.role)}{error}"><div class="dim">#{message.seq} '
        f"{shown(label)}{usage}</div>{shown.folded(text) if text else ''}{calls}</div>"
    )


def _args(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), ensure_ascii=False, indent=1)


def _origin(job: JobSummary) -> str:
    origin = job.origin
    if origin.forge == "github":
        return f"{origin.repository}#{origin.issue}"
    return origin.repository or job.job_key


def _tokens(usage: Usage) -> str:
    total = usage.input_tokens + usage.output_tokens
    return f"{total:,}"


def _money(usd: float | None) -> str:
    return "cost unknown" if usd is None else f"${usd:.4f}"


def _ago(at: float) -> str:
    """When `at` was: its time of day today, its date and time before."""
    shown = "%H:%M:%S UTC" if time.time() - at < 86400 else "%Y-%m-%d %H:%M UTC"
    return time.strftime(shown, time.gmtime(at))
