"""`vjp live`: the full-screen explorer (Textual). Change v; Jᵀv, .grad, the ledger and the checks follow.

The only module that imports textual, and only when `vjp live` runs. It shows a session's Frames (live.py,
live_snippet.py) through live_view.py's renderables; every number comes from the session. A new v is shown at
once (from J where it is materialised); the session's background run (a real backward(v), the checks, the
graph) replaces it when it is done and v has not changed meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from rich.measure import Measurement
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, ListItem, ListView, Static

from ..errors import VjpError
from ..live import Frame, basis, parse_v, random_v
from . import live_view as L

CSS = """
Screen { layout: vertical; }
#top { height: auto; }
#vrow { height: 1; }
#vrow Label { width: auto; padding: 0 1 0 0; }
Input { border: none; height: 1; padding: 0 1; width: 1fr; }
Input:focus { border: none; background: $boost; }
#vlabel { width: auto; max-width: 40%; padding: 0 0 0 1; }
#loss { display: none; }
#events { width: 26; border-right: solid $primary; }
#main { height: 1fr; }
#jrow { height: auto; }
#jrow.stacked { layout: vertical; }
#jmap { width: auto; padding: 0 2 0 0; }
#grads { width: 1fr; }
#legend { height: auto; }
#ledger, #checks { margin: 1 0 0 0; }
.panel { padding: 0 1; }
"""


# the command palette's entries of vjp's own: (key, title, what it does, the app's action)
PALETTE = [
    ("b", "v = e0, e1, …", "one row of J at a time: each press the next basis vector", "basis"),
    ("1", "v = all ones", "backward of y.sum(): the column sums of J", "ones"),
    ("r", "v = random", "numpy's standard normal, seeded; the seed is shown next to v", "random"),
    ("u", "v from a loss", "v = dL/dy for a loss typed in, e.g. sum(y**2) (programs)", "upstream"),
    ("v", "edit v", "type v: numbers of the output's shape; Enter applies, Esc leaves", "focus_v"),
    ("g", "backward graph", "the nodes torch ran, each with the cotangent it received", "graph"),
    ("n", "backward as code", "the call's backward script, node by node, with each cotangent in and out", "code"),
    ("s", "save as SVG", "the screen as it is, to --svg FILE or vjp-live.svg", "save"),
    ("c", "print the vjp run command", "quit, and print the vjp run command of this state", "command"),
    ("?", "keys", "every key of the live view", "keys"),
]


class TextScreen(ModalScreen[None]):
    """A scrollable page over the main view: the graph, or the keys."""

    BINDINGS = [
        Binding("escape,q,g,question_mark,f1", "dismiss", "close"),
        Binding("ctrl+c", "app.quit_live", "quit", show=False, priority=True),
    ]
    DEFAULT_CSS = "TextScreen { background: $background; } TextScreen VerticalScroll { padding: 0 1; }"

    def __init__(self, renderable: Any, name: str) -> None:
        super().__init__(name=name)
        self.renderable = renderable

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.renderable, id="page")
        yield Footer()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


class CodeScreen(ModalScreen[None]):
    """The call's backward as code, one node at a time (live_code.py's walk, live_code_view.py's page)."""

    BINDINGS = [
        Binding("n,right,space,down", "step(1)", "next node"),
        Binding("p,left,up", "step(-1)", "previous"),
        Binding("home", "go(0)", "first", show=False),
        Binding("end", "go(-1)", "last", show=False),
        Binding("escape,q", "dismiss", "close"),
        Binding("ctrl+c", "app.quit_live", "quit", show=False, priority=True),
    ]
    DEFAULT_CSS = "CodeScreen { background: $background; } CodeScreen VerticalScroll { padding: 0 1; }"

    def __init__(self, walk: Any, note: str, digits: int) -> None:
        super().__init__(name="code")
        self.walk, self.note, self.digits = walk, note, digits

    @property
    def renderable(self) -> Any:
        from .live_code_view import code_page

        return code_page(self.walk, self.note, self.digits)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.renderable, id="page")
        yield Footer()

    def action_step(self, by: int) -> None:
        self.action_go(self.walk.at + by)

    def action_go(self, k: int) -> None:
        self.walk = self.walk.go(k if k >= 0 else len(self.walk.steps) - 1)
        self.query_one("#page", Static).update(self.renderable)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


class LiveApp(App[str | None]):
    """The explorer of one session (a program's, or a snippet's events)."""

    CSS = CSS
    TITLE = "vjp live"
    AUTO_FOCUS = None  # keys act on the view; v takes the keyboard only when asked (v)
    # the footer shows what fits 80 columns, `? keys` and `q quit` among them; the rest are in `?` and ctrl+p
    BINDINGS = [
        Binding("v", "focus_v", "edit v"),
        Binding("e", "events", "events", show=False),
        Binding("b", "basis", "e0,e1,…"),
        Binding("1", "ones", "ones"),
        Binding("r", "random", "random"),
        Binding("u", "upstream", "loss", show=False),
        Binding("g", "graph", "graph"),
        Binding("n", "code", "code", show=False),  # in ? and the palette: the footer is full at 80 columns
        Binding("s", "save", "svg", show=False),
        Binding("c", "command", "command", show=False),
        Binding("question_mark", "keys", "keys"),
        Binding("f1", "keys", "keys", show=False),
        Binding("q", "quit_live", "quit"),
        Binding("ctrl+c", "quit_live", "quit", show=False, priority=True),  # quits, as in toolong; not a hint
        Binding("escape", "leave", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
        Binding("left", "leaf(-1)", show=False),
        Binding("right", "leaf(1)", show=False),
    ]

    def __init__(self, session: Any, svg: Path | None = None, seed: int = 0, digits: int | None = None) -> None:
        super().__init__()
        self.session = session
        self.svg = svg
        self.seed = seed
        self.digits = digits or (10 if session.frame.dtype == "float64" else 6)
        self.selected: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._drawn: dict[str, Any] = {}
        self._made: dict[str, Any] = {}  # what each widget shows now, for _arrange
        self._select_first()

    # layout

    def compose(self) -> ComposeResult:
        with Vertical(id="top", classes="panel"):
            yield Static(id="header")
            with Horizontal(id="vrow"):
                yield Label("v =")
                yield Input(id="v", placeholder="numbers of the output's shape, e.g. 0.1, 1, 0.0001")
                yield Static(id="vlabel")
            yield Input(id="loss", placeholder="a loss written in the output, e.g. sum(y**2); Enter applies")
            yield Static(id="verdict")
        with Horizontal():
            if self.session.kind == "snippet":
                items = [ListItem(Label(_event_title(f))) for f in self.session.frames]
                yield ListView(*items, id="events")
            with VerticalScroll(id="main", classes="panel", can_focus=False):
                with Horizontal(id="jrow"):
                    yield Static(id="jmap")
                    yield Static(id="grads")
                yield Static(id="legend")
                yield Static(id="ledger")
                yield Static(id="checks")
        yield Footer()

    def on_mount(self) -> None:
        self.show()
        if self.session.kind == "snippet":
            self.query_one("#events", ListView).focus()
        else:
            self.set_focus(None)

    def show(self) -> None:
        """Draw the session's current frame; a part whose inputs did not change is left as it is (a new v
        leaves J's map alone unless the row it picks moves: Textual lays out whatever is updated)."""
        f = self.session.frame
        sel = self.selected
        entry = self.query_one("#v", Input)
        if not entry.has_focus:
            entry.value = L.v_entry(f)
        entry.disabled = f.readonly is not None
        self._put("header", (f.title, f.readonly, f.dtype), lambda: L.header(f))
        self._put("vlabel", (f.v_label, f.m), lambda: L.v_label(f, self.digits))
        jacs = tuple(id(lf.jacobian) for lf in f.leaves)
        room = self._room()
        self._put("jmap", (jacs, f.one_hot, sel, room), lambda: L.jacobian_map(f, sel, room))
        self._put("grads", None, lambda: L.grads_table(f, sel, self.digits))
        self._arrange()
        self._put("legend", (f.out_name, f.one_hot), lambda: L.map_legend(f))
        self._put("ledger", None, lambda: L.ledger_view(f, *sel, self.digits) if sel else "")
        self._put("checks", (f.checks, f.checks_note, f.pending), lambda: L.checks_view(f))
        self._put("verdict", (f.checks, f.checks_note, f.pending), lambda: L.verdict_line(f))

    def _put(self, name: str, key: Any, make: Any) -> None:
        """Update the widget #name unless its key is the one it was drawn with (None: always)."""
        if key is not None and self._drawn.get(name) == key:
            return
        self._drawn[name] = key
        self._made[name] = made = make()
        self.query_one(f"#{name}", Static).update(made)

    def _arrange(self) -> None:
        """J's map and the .grad table side by side where both fit with readable labels, else one under the
        other: a number is never cut to make room (labels shorten, live_view.GradsTable)."""
        grads, jmap = self._made.get("grads"), self._made.get("jmap")
        room = self._room()
        if not isinstance(grads, L.GradsTable) or jmap is None:
            return
        beside = Measurement.get(self.console, self.console.options, jmap).maximum + 2  # #jmap's right padding
        self.query_one("#jrow").set_class(beside + grads.least_width(L.LABEL_EASY) > room, "stacked")

    def _room(self) -> int:
        """The main panel's width for its content (before the first layout: the screen's, less the list)."""
        room = self.query_one("#main", VerticalScroll).scrollable_content_region.width
        if room > 0:
            return room
        return self.size.width - (2 + 27 + 2 if self.session.kind == "snippet" else 2 + 2)  # padding, list, bar

    def on_resize(self) -> None:
        self.call_after_refresh(self.show)  # the new width is known once the layout has run

    def _select_first(self) -> None:
        f = self.session.frame
        self.selected = (f.leaves[0].name, 0) if f.leaves else None

    # v

    def apply_v(self, v: np.ndarray, label: str) -> None:
        """Show v at once (from J where there is one), then ask the session for the real run, in the background."""
        try:
            self.session.set_v(v, label)
        except VjpError as e:
            self.notify(e.render(), severity="error", timeout=8)
            return
        self.show()
        if self.session.frame.pending:
            self.recompute(v, label)

    @work(thread=True, group="backward", description="backward(v) through the pipeline")  # not repr(v)
    def recompute(self, v: np.ndarray, label: str) -> None:
        with self._lock:  # one pipeline run at a time; a v already replaced is not run
            if not np.array_equal(v, self.session.frame.v):
                return
            try:
                frame = self.session.recompute(v, label)
            except Exception as e:  # a bad v or loss is the library's words; anything else too, but shown
                self.call_from_thread(self._failed, e)
                return
        if frame is not None:
            self.call_from_thread(self._accept, frame)

    def _accept(self, frame: Frame) -> None:
        if self.session.accept(frame):
            self.show()

    def _failed(self, e: Exception) -> None:
        text = e.render() if isinstance(e, VjpError) else f"{type(e).__name__}: {e}"
        self.notify(text, severity="error", timeout=10)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "v":
            try:
                v = parse_v(event.value, self.session.frame)
            except VjpError as e:
                self.notify(e.render(), severity="error", timeout=8)
                return
            self.set_focus(None)
            self.apply_v(v, "typed in")
        elif event.input.id == "loss":
            event.input.display = False
            self.set_focus(None)
            self.upstream(event.value)

    @work(thread=True, group="upstream", description="v from a loss")
    def upstream(self, loss: str) -> None:
        try:
            with self._lock:
                v, label = self.session.upstream(loss)
        except Exception as e:
            self.call_from_thread(self._failed, e)
            return
        self.call_from_thread(self.apply_v, v, label)

    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        if event.list_view.index is not None:
            self.session.select(event.list_view.index)
            self._select_first()
            self.show()

    # actions

    def action_focus_v(self) -> None:
        self.query_one("#v", Input).focus()

    def action_events(self) -> None:
        if self.session.kind == "snippet":
            self.query_one("#events", ListView).focus()

    def action_leave(self) -> None:
        self.query_one("#loss", Input).display = False
        self.set_focus(None)
        self.show()

    def action_basis(self) -> None:
        self.apply_v(*basis(self.session.frame))

    def action_ones(self) -> None:
        self.apply_v(np.ones(self.session.frame.m), "ones")

    def action_random(self) -> None:
        self.seed += 1
        self.apply_v(*random_v(self.session.frame, self.seed))

    def action_upstream(self) -> None:
        if self.session.kind != "program":
            self.notify("u works for programs: a snippet's v comes from its own code.", severity="warning")
            return
        loss = self.query_one("#loss", Input)
        loss.display = True
        loss.focus()

    def action_move(self, step: int) -> None:
        if self.selected is None:
            return
        leaf, j = self.selected
        n = self.session.frame.leaf(leaf).numel
        self.selected = (leaf, min(max(j + step, 0), n - 1))
        self.show()

    def action_leaf(self, step: int) -> None:
        if self.selected is None:
            return
        names = [lf.name for lf in self.session.frame.leaves]
        k = (names.index(self.selected[0]) + step) % len(names)
        self.selected = (names[k], 0)
        self.show()

    def action_page(self, step: int) -> None:
        main = self.query_one("#main", VerticalScroll)
        main.scroll_page_down() if step > 0 else main.scroll_page_up()

    def action_graph(self) -> None:
        self.push_screen(TextScreen(L.graph_view(self.session.frame), "graph"))

    def action_code(self) -> None:
        from ..live_code import NoCode, code_walk

        f = self.session.frame
        try:
            walk = code_walk(f.code, f.call)
        except NoCode as e:
            self.notify(str(e), severity="warning", timeout=8)
            return
        self.push_screen(CodeScreen(walk, f.graph_note, self.digits))

    def action_keys(self) -> None:
        self.push_screen(TextScreen(L.keys_view(), "keys"))

    def action_save(self) -> None:
        path = self.svg or _free(Path("vjp-live.svg"))
        try:
            saved = self.save_screenshot(filename=path.name, path=str(path.parent or "."))
        except OSError as e:
            self.notify(f"Cannot write {path} ({e.strerror}).", severity="error")
            return
        self.notify(f"saved {saved}")

    def action_command(self) -> None:
        self.exit(self.session.command_line())

    def action_quit_live(self) -> None:
        self.exit(None)

    def get_system_commands(self, screen: Any) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p): vjp's own actions first, then Textual's."""
        for key, title, help, action in PALETTE:
            yield SystemCommand(f"{title} ({key})", help, getattr(self, f"action_{action}"))
        yield from super().get_system_commands(screen)


def _event_title(f: Frame) -> str:
    return f.title if len(f.title) <= 24 else f.title[:23] + "…"


def _free(path: Path) -> Path:
    """path, or path-1, path-2 ... where it exists already: a second save keeps the first."""
    k = 0
    candidate = path
    while candidate.exists():
        k += 1
        candidate = path.with_name(f"{path.stem}-{k}{path.suffix}")
    return candidate
