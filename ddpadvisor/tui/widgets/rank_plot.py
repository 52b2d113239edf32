"""A per-rank line plot drawn by plotext inside the terminal, redrawn at the widget's size.

plotext draws without colour; each rank gets its own marker character (so the plot reads under
NO_COLOR) and that character is then coloured with a theme variable (so it reads on dark and
light themes alike).
"""

from __future__ import annotations

from typing import Any

from textual.content import Content, Span
from textual.widget import Widget

from ddpadvisor.i18n import t

MARKERS = ("•", "×", "◆", "▲", "■", "○", "◇", "△")
RANK_STYLES = (
    "$text-accent",
    "$text-primary",
    "$text-success",
    "$text-warning",
    "$text-error",
    "$text-secondary",
)

Points = list[tuple[int, float]]


def _thin(points: Points, most: int) -> Points:
    """Keep at most ``most`` points, evenly spread, always keeping the last one."""
    if len(points) <= most or most < 2:
        return points
    step = (len(points) - 1) / (most - 1)
    return [points[round(i * step)] for i in range(most)]


def blank_figure(width: int, height: int) -> Any:
    """plotext's figure, cleared and sized to the widget (not the real terminal), colourless."""
    import plotext as plt

    fig = plt.figure
    fig.clear()
    plt.terminal.limit(False, False)
    fig.plot_size(width, height)
    fig.theme("colorless")
    fig.legend(False)
    return fig


def plot_text(title: str, by_rank: dict[int, Points], width: int, height: int) -> str:
    fig = blank_figure(width, height)
    for i, rank in enumerate(sorted(by_rank)):
        points = _thin(by_rank[rank], max(2, width * 2))
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        fig.draw(fig.signal(xs, ys, marker=MARKERS[i % len(MARKERS)]).lines())
    fig.label(t("step"), axis=0)
    text: str = fig.build().string(colorless=True)
    return text.rstrip("\n")


def legend(by_rank: dict[int, Points]) -> Content:
    parts: list[str | tuple[str, str]] = []
    for i, rank in enumerate(sorted(by_rank)):
        parts.append((f" {MARKERS[i % len(MARKERS)]} ", RANK_STYLES[i % len(RANK_STYLES)]))
        parts.append(t("rank {rank} ", rank=rank))
    series = list(by_rank.values())
    if len(series) > 1 and all(s == series[0] for s in series):
        # The last rank is drawn over the others; say so, or the plot looks like one rank.
        parts.append((t(" (identical on every rank)"), "$text-muted"))
    return Content.assemble(*parts)


def colour_markers(text: str, ranks: int) -> Content:
    styles = {MARKERS[i % len(MARKERS)]: RANK_STYLES[i % len(RANK_STYLES)] for i in range(ranks)}
    spans = [Span(i, i + 1, styles[ch]) for i, ch in enumerate(text) if ch in styles]
    return Content(text, spans)


class RankPlot(Widget):
    """``render`` reads the current size, so a resize redraws the plot (as dolphie does)."""

    DEFAULT_CSS = """
    RankPlot { height: 12; min-height: 10; }
    """

    def __init__(self, title: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.title = title
        self.by_rank: dict[int, Points] = {}
        self._cache: tuple[tuple[int, int], Content] | None = None

    def set_title(self, title: str) -> None:
        if title != self.title:
            self.title = title
            self._cache = None
            self.refresh()

    def show(self, by_rank: dict[int, Points]) -> None:
        self.by_rank = by_rank
        self._cache = None
        self.refresh()

    def render(self) -> Content:
        if not any(self.by_rank.values()):
            return Content.styled(
                t("{title}: no data in this trace", title=self.title), "$text-muted"
            )
        width, height = self.content_size.width, self.content_size.height
        if width < 20 or height < 6:
            return Content.styled(t("{title}: too small to draw", title=self.title), "$text-muted")
        key = (width, height)
        if self._cache is None or self._cache[0] != key:
            head = Content.assemble((self.title, "bold"), "  ", legend(self.by_rank))
            body = plot_text(self.title, self.by_rank, width, height - 1)
            self._cache = (key, Content("\n").join([head, colour_markers(body, len(self.by_rank))]))
        return self._cache[1]
