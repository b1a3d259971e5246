"""The Kiviat chart's axis names sit clear of the ring, the title and the legend.

The first version centred the names on matplotlib's tick circle, just outside
the ring: "mean wait" (3 o'clock) and "utilization (useful)" (9 o'clock) ran
into the ring and the policies' polygons, and the top name into the title.
Checked on the drawn figure, in display pixels, for 3 to 7 axes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosim.report.figures import kiviat_figure
from cosim.report.runs import KIVIAT_KEYS, Run

NAMES = ["fcfs+easy", "sjf+conservative", "rl:some/long/agent/folder",
         "sjf+conservative@xgboost+kill-0"]


def _runs(keys: tuple[str, ...]) -> list[Run]:
    rng = np.random.default_rng(3)
    return [Run(name=name, path=Path("."), jobs=None, events=None, meta={},
                summary={k: float(rng.uniform(0.2, 0.9)) for k in keys}) for name in NAMES]


def _axis_names(ax) -> list:
    """Every text that names an axis: hand-drawn texts and any non-empty tick label."""
    return [t for t in [*ax.texts, *ax.get_xticklabels()] if t.get_text().strip()]


def _clear_of_circle(box, cx: float, cy: float, r: float) -> bool:
    """The box lies wholly outside the circle (its nearest point is farther than r)."""
    nx = min(max(cx, box.x0), box.x1)
    ny = min(max(cy, box.y0), box.y1)
    return np.hypot(nx - cx, ny - cy) > r + 1.0


@pytest.mark.parametrize("n_axes", [3, 5, 6, 7])
def test_axis_names_are_outside_the_ring_and_clear_of_title_and_legend(n_axes):
    keys = KIVIAT_KEYS[:n_axes]
    fig = kiviat_figure(_runs(keys))
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        cx, cy = ax.transData.transform((0.0, 0.0))
        ex, ey = ax.transData.transform((0.0, 1.0))       # the outer ring, radius 1
        ring = np.hypot(ex - cx, ey - cy)
        names = _axis_names(ax)
        assert len(names) == n_axes
        others = [fig._suptitle, ax.title, ax.get_legend()]
        others = [o for o in others if o is not None and (not hasattr(o, "get_text")
                                                           or o.get_text())]
        page = fig.bbox
        for text in names:
            box = text.get_window_extent(renderer)
            assert _clear_of_circle(box, cx, cy, ring), (text.get_text(), box, ring)
            assert page.x0 <= box.x0 and box.x1 <= page.x1, text.get_text()
            assert page.y0 <= box.y0 and box.y1 <= page.y1, text.get_text()
            for other in others:
                assert not box.overlaps(other.get_window_extent(renderer)), (
                    text.get_text(), getattr(other, "get_text", lambda: "legend")())
        # the legend names every policy in full, inside the figure
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == NAMES
        box = legend.get_window_extent(renderer)
        assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)
        # names do not overlap each other either
        boxes = [t.get_window_extent(renderer) for t in names]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_fewer_than_three_axes_draw_no_chart():
    assert kiviat_figure(_runs(KIVIAT_KEYS[:2])) is None
