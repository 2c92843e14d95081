"""KeyBar: the key hints as textual's footer shows them, on one line; a click presses a key."""

from __future__ import annotations

import asyncio
from typing import ClassVar, List, Optional, Tuple

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widget import Widget

from npuwatch.widgets.tui.key_bar import KeyBar


class Pane(Widget, can_focus=True):
    BINDINGS: ClassVar[List[BindingType]] = [Binding("x", "app.note('x')", "Extra")]


class KeysApp(App[None]):
    AUTO_FOCUS = None  # the pane's key shows only once it is focused
    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("q", "note('q')", "Quit"),
        Binding("plus,equals_sign", "note('plus')", "Slower"),
        Binding("d", "note('d')", "Dim"),
        Binding("h", "note('h')", "Hidden", show=False),
        Binding("o", "note('o')", "Other", tooltip="the other thing"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.notes: List[str] = []
        self.bells = 0
        self.dim_enabled: Optional[bool] = None  # check_action's answer for "d": None = disabled

    def compose(self) -> ComposeResult:
        yield Pane()
        yield KeyBar()

    def check_action(self, action: str, parameters: Tuple[object, ...]) -> Optional[bool]:
        return self.dim_enabled if action == "note" and parameters == ("d",) else True

    def action_note(self, what: str) -> None:
        self.notes.append(what)

    def bell(self) -> None:
        self.bells += 1


def run(body, size: Tuple[int, int] = (100, 5)) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        app = KeysApp()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await body(app, pilot, app.query_one(KeyBar))

    asyncio.run(main())


def line(bar: KeyBar) -> str:
    return bar.render_line(0).text


def test_the_shown_keys_one_per_action_and_the_palette_on_the_right():
    async def body(app: KeysApp, pilot, bar: KeyBar) -> None:  # type: ignore[no-untyped-def]
        keys = " q Quit  + Slower  d Dim  o Other "
        palette = "▏^p palette "
        assert line(bar) == keys + " " * (100 - len(keys) - len(palette)) + palette
        assert [hint.key for hint in bar.hints] == ["q", "plus", "d", "o", "ctrl+p"]
        assert [hint.enabled for hint in bar.hints] == [True, True, False, True, True]
        assert bar.hints[3].tooltip == "the other thing"
        assert bar.hints[0].tooltip == ""  # none given: none shown, as textual's footer
        assert bar.hints[4].tooltip  # the palette's key says what it does

    run(body)


def test_a_click_presses_the_key_and_a_disabled_key_rings_the_bell():
    async def body(app: KeysApp, pilot, bar: KeyBar) -> None:  # type: ignore[no-untyped-def]
        quit_, slower, dim = bar.hints[:3]
        await pilot.click(KeyBar, offset=(quit_.start + 1, 0))
        await pilot.click(KeyBar, offset=(slower.end - 1, 0))
        await pilot.click(KeyBar, offset=(dim.start, 0))
        await pilot.pause()
        assert app.notes == ["q", "plus"]
        assert app.bells == 1
        await pilot.click(KeyBar, offset=(60, 0))  # between the keys and the palette: nothing
        await pilot.pause()
        assert app.notes == ["q", "plus"] and app.bells == 1

    run(body)


def test_the_bar_follows_the_bindings_of_the_focused_widget_and_the_actions_state():
    async def body(app: KeysApp, pilot, bar: KeyBar) -> None:  # type: ignore[no-untyped-def]
        assert "x Extra" not in line(bar)
        app.query_one(Pane).focus()
        await pilot.pause()
        assert "x Extra" in line(bar)
        app.dim_enabled = True
        app.refresh_bindings()
        await pilot.pause()
        assert bar.hints[[h.key for h in bar.hints].index("d")].enabled

    run(body)


def test_a_narrow_bar_keeps_the_palette_and_cuts_the_keys():
    async def body(app: KeysApp, pilot, bar: KeyBar) -> None:  # type: ignore[no-untyped-def]
        assert line(bar) == " q Quit  + Slow▏^p palette "
        assert bar.hints[1].end == 15  # cut where the palette begins
        assert [hint.key for hint in bar.hints] == ["q", "plus", "ctrl+p"]

    run(body, size=(27, 5))


class WideApp(KeysApp, inherit_bindings=False):
    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("w", "note('w')", "日本語"),  # two cells a character
        Binding("d", "note('d')", "Dim"),
        Binding("q", "note('q')", "Quit"),
    ]


def test_wide_descriptions_keep_each_style_on_its_own_key():
    async def main() -> None:
        app = WideApp()
        async with app.run_test(size=(60, 3)) as pilot:
            await pilot.pause()
            bar = app.query_one(KeyBar)
            styles = {seg.text.strip(): seg.style for seg in bar.render_line(0) if seg.text.strip()}
            assert styles["Dim"] is not None and styles["Dim"].dim  # the disabled key
            assert not (styles["Quit"] and styles["Quit"].dim)
            quit_ = bar.hints[2]
            assert (quit_.start, quit_.end) == (17, 25)  # " w 日本語 " is 10 cells, " d Dim " 7
            await pilot.click(KeyBar, offset=(quit_.start + 1, 0))
            await pilot.pause()
            assert app.notes == ["q"]

    asyncio.run(main())


def test_hovering_a_key_shows_its_tooltip():
    async def body(app: KeysApp, pilot, bar: KeyBar) -> None:  # type: ignore[no-untyped-def]
        other = bar.hints[3]
        await pilot.hover(KeyBar, offset=(other.start + 1, 0))
        await pilot.pause()
        assert bar.tooltip == "the other thing"
        await pilot.hover(KeyBar, offset=(60, 0))
        await pilot.pause()
        assert bar.tooltip is None
        await pilot.hover(KeyBar, offset=(other.start + 1, 0))
        await pilot.pause()
        app.query_one(Pane).focus()  # the bindings change under the mouse: no stale tooltip
        await pilot.pause()
        assert bar.tooltip is None
        assert "x Extra" in line(bar)

    run(body)
