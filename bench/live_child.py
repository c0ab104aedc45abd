"""`vjp ARGS...` as the console script runs it, except that `vjp live` draws headless and leaves after its
first paint: what bench/live.py times against `vjp run`. Not a test; nothing here is imported by the package."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["live"]:
        from vjp_explorer.cli import live as cli_live
        from vjp_explorer.render import live_app

        class FirstPaint(live_app.LiveApp):
            def on_mount(self) -> None:
                super().on_mount()
                self.call_after_refresh(self.exit, None)  # once the first frame is on the (headless) screen

        original = live_app.LiveApp.run

        def run(app: live_app.LiveApp) -> str | None:
            first = FirstPaint(app.session, app.svg, app.seed, app.digits)
            return original(first, headless=True, size=(80, 24))

        cli_live.on_terminal = lambda: True
        live_app.LiveApp.run = run  # type: ignore[method-assign]
    from vjp_explorer.entry import main as vjp

    sys.argv[0] = "vjp"
    vjp()


if __name__ == "__main__":
    main()
