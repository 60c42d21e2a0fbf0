"""Chart geometry for the dashboard's inline SVG (``admin/mcp_tasks/task/dashboard.html``,
coloured by the admin's CSS variables): numbers in, rectangles and paths out."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

#: The drawing's size in SVG units (it scales to the page's width).
WIDTH, HEIGHT = 960, 200
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 22


@dataclasses.dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    css: str = ""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One bucket: its hover area (with its ``title``) and its bars."""

    hover: Rect
    title: str
    bars: list[Rect]


@dataclasses.dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclasses.dataclass(frozen=True)
class Chart:
    width: int
    height: int
    slots: list[Slot]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    line: str = ""
    area: str = ""
    baseline: float = HEIGHT - BOTTOM
    plot_left: float = LEFT
    plot_right: float = WIDTH - RIGHT
    #: Where the axes' labels go: the y labels' right end, the x labels' baseline.
    y_label_x: float = LEFT - 6
    x_label_y: float = HEIGHT - 6


def nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50… at least ``value`` (1 for nothing)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    return next((int(s * power) for s in (1, 2, 5) if s * power >= value), int(10 * power))


def _y(value: float, top: int) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return round(HEIGHT - BOTTOM - plot * value / top, 2)


def _y_ticks(top: int) -> list[Tick]:
    values = [0, top] if top < 2 or top % 2 else [0, top // 2, top]
    return [Tick(_y(v, top), str(v)) for v in values]


def _slot_width(count: int) -> float:
    return (WIDTH - LEFT - RIGHT) / max(count, 1)


def _x_ticks(labels: Sequence[str | None]) -> list[Tick]:
    width = _slot_width(len(labels))
    return [Tick(round(LEFT + i * width, 2), label) for i, label in enumerate(labels) if label]


def stacked_bars(
    stacks: Sequence[Sequence[tuple[str, int]]],
    titles: Sequence[str],
    labels: Sequence[str | None],
) -> Chart:
    """One bar per bucket, stacked bottom up from ``(css class, value)`` pairs; ``labels``:
    the x-axis label at each bucket's start (None: no label there)."""
    top = nice_ceiling(max((sum(v for _, v in stack) for stack in stacks), default=0))
    width = _slot_width(len(stacks))
    gap = min(2.0, width * 0.2)
    slots = []
    for i, stack in enumerate(stacks):
        x = round(LEFT + i * width, 2)
        bars, total = [], 0
        for css, value in stack:
            if value:
                y0, y1 = _y(total, top), _y(total + value, top)
                bars.append(Rect(x + gap / 2, y1, round(width - gap, 2), round(y0 - y1, 2), css))
                total += value
        hover = Rect(x, TOP, round(width, 2), HEIGHT - TOP - BOTTOM)
        slots.append(Slot(hover, titles[i], bars))
    return Chart(WIDTH, HEIGHT, slots, _x_ticks(labels), _y_ticks(top))


def step_line(values: Sequence[int], titles: Sequence[str], labels: Sequence[str | None]) -> Chart:
    """A step line of ``values``, each holding over its bucket, with the area below it."""
    top = nice_ceiling(max(values, default=0))
    width = _slot_width(len(values))
    points: list[str] = []
    slots = []
    for i, value in enumerate(values):
        x0, x1, y = round(LEFT + i * width, 2), round(LEFT + (i + 1) * width, 2), _y(value, top)
        points += [f"{x0},{y}", f"{x1},{y}"]
        slots.append(Slot(Rect(x0, TOP, round(width, 2), HEIGHT - TOP - BOTTOM), titles[i], []))
    line = "M" + " L".join(points) if points else ""
    base = HEIGHT - BOTTOM
    area = f"{line} L{WIDTH - RIGHT},{base} L{LEFT},{base} Z" if points else ""
    return Chart(WIDTH, HEIGHT, slots, _x_ticks(labels), _y_ticks(top), line=line, area=area)
