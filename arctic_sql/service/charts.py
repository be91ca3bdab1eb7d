"""Small charts as inline SVG, drawn on the server: no JavaScript library, no build step, and they
print and screenshot as the page does.

>>> svg = line_chart([(1, 10.0), (2, 30.0)], "bytes", fmt=str)
>>> svg.startswith("<svg") and "polyline" in svg
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

WIDTH, HEIGHT, PAD = 520, 180, 36


def _scale(values: Sequence[float], size: float, low: float = 0.0) -> Callable[[float], float]:
    high = max(values, default=0.0)
    span = (high - low) or 1.0
    return lambda v: size * (v - low) / span


def line_chart(
    points: Sequence[tuple[float, float]],
    label: str,
    fmt: Callable[[float], str],
    x_label: str = "version",
    x_fmt: Callable[[float], str] = lambda x: f"{x:g}",
) -> str:
    """A line over ``points`` (x, y), with the first and last x and the largest y labelled."""
    if not points:
        return f'<p class="empty">No {escape(label)} to chart yet.</p>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    sx = _scale(xs, inner_w, min(xs)) if len(points) > 1 else (lambda v: inner_w / 2)
    sy = _scale(ys, inner_h)
    coords = " ".join(f"{PAD + sx(x):.1f},{HEIGHT - PAD - sy(y):.1f}" for x, y in points)
    dots = "".join(
        f'<circle cx="{PAD + sx(x):.1f}" cy="{HEIGHT - PAD - sy(y):.1f}" r="2.5">'
        f"<title>{escape(x_label)} {escape(x_fmt(x))}: {escape(fmt(y))}</title></circle>"
        for x, y in points
    )
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
        f'<text x="{PAD}" y="16" class="title">{escape(label)}</text>'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" class="axis"/>'
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" class="axis"/>'
        f'<text x="{PAD + 4}" y="{PAD - 4}" class="tick">max {escape(fmt(max(ys)))}</text>'
        f'<text x="{PAD}" y="{HEIGHT - PAD + 16}" class="tick">{escape(x_label)} {escape(x_fmt(min(xs)))}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - PAD + 16}" class="tick" text-anchor="end">{escape(x_fmt(max(xs)))}</text>'
        f'<polyline points="{coords}" class="line"/>{dots}</svg>'
    )


def bar_chart(bars: Sequence[tuple[str, float]], label: str, fmt: Callable[[float], str]) -> str:
    """Vertical bars, one per (name, value); names under the bars when there is room."""
    if not bars or not any(v for _, v in bars):
        return f'<p class="empty">No {escape(label)} yet.</p>'
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    width = inner_w / len(bars)
    sy = _scale([v for _, v in bars], inner_h)
    parts = []
    for i, (name, value) in enumerate(bars):
        h = sy(value)
        x = PAD + i * width
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{HEIGHT - PAD - h:.1f}" width="{max(1.0, width - 2):.1f}" '
            f'height="{h:.1f}" class="bar"><title>{escape(name)}: {escape(fmt(value))}</title></rect>'
        )
        if len(bars) <= 12:
            parts.append(
                f'<text x="{x + width / 2:.1f}" y="{HEIGHT - PAD + 14}" class="tick" '
                f'text-anchor="middle">{escape(name[:14])}</text>'
            )
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
        f'<text x="{PAD}" y="16" class="title">{escape(label)}</text>'
        f'<text x="{WIDTH - PAD}" y="16" class="tick" text-anchor="end">'
        f"max {escape(fmt(max(v for _, v in bars)))}</text>"
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" class="axis"/>'
        f"{''.join(parts)}</svg>"
    )


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
