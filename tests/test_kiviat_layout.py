"""The Kiviat chart: one small radar per policy, names clear of rings, titles and each other.

The first version drew every policy's filled polygon on one ring (seven of
them were a blur) and centred the axis names on matplotlib's tick circle,
just outside the ring, so "mean wait" (3 o'clock) and "utilization" (9
o'clock) ran into the ring. Checked on the drawn figure, in display pixels,
for 3 to 7 axes and 2 to 7 policies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosim.report.figures import KIVIAT_COLUMNS, kiviat_figure
from cosim.report.runs import KIVIAT_KEYS, Run

NAMES = ["fcfs+easy", "sjf+conservative", "rl:some/long/agent/folder",
         "sjf+conservative@xgboost+kill-0", "wfp3+easy", "unicef+easy", "f1+easy"]


def _runs(keys: tuple[str, ...], n: int = 4) -> list[Run]:
    rng = np.random.default_rng(3)
    return [Run(name=name, path=Path("."), jobs=None, events=None, meta={},
                summary={k: float(rng.uniform(0.2, 0.9)) for k in keys}) for name in NAMES[:n]]


def _axis_names(ax) -> list:
    """Every text that names an axis: hand-drawn texts and any non-empty tick label."""
    return [t for t in [*ax.texts, *ax.get_xticklabels()] if t.get_text().strip()]


def _clear_of_circle(box, cx: float, cy: float, r: float) -> bool:
    """The box lies wholly outside the circle (its nearest point is farther than r)."""
    nx = min(max(cx, box.x0), box.x1)
    ny = min(max(cy, box.y0), box.y1)
    return np.hypot(nx - cx, ny - cy) > r + 1.0


@pytest.mark.parametrize(("n_axes", "n_policies"), [(3, 2), (5, 3), (6, 4), (7, 7)])
def test_one_radar_per_policy_with_names_clear_of_rings_titles_and_each_other(n_axes,
                                                                               n_policies):
    keys = KIVIAT_KEYS[:n_axes]
    fig = kiviat_figure(_runs(keys, n_policies))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        assert len(fig.axes) == n_policies                       # small multiples
        # each radar is named under it, in full (long names wrap)
        labels = [t for t in fig.texts if t.get_text().strip() and t is not fig._suptitle]
        assert [t.get_text().replace("\n", "") for t in labels] == NAMES[:n_policies]
        page = fig.bbox
        fixed = [fig._suptitle, *labels]
        boxes = [o.get_window_extent(renderer) for o in fixed]
        for ax in fig.axes:
            cx, cy = ax.transData.transform((0.0, 0.0))
            ex, ey = ax.transData.transform((0.0, 1.0))       # the outer ring, radius 1
            ring = np.hypot(ex - cx, ey - cy)
            assert ring > 60                                   # readable: over 1.2 in across
            names = _axis_names(ax)
            assert len(names) == n_axes
            for other in fig.axes:   # no radar's names reach into another's ring
                ox, oy = other.transData.transform((0.0, 0.0))
                for text in names:
                    assert _clear_of_circle(text.get_window_extent(renderer), ox, oy, ring)
            for text in names:
                box = text.get_window_extent(renderer)
                assert page.x0 <= box.x0 and box.x1 <= page.x1, text.get_text()
                assert page.y0 <= box.y0 and box.y1 <= page.y1, text.get_text()
                boxes.append(box)
        for i, a in enumerate(boxes):     # titles, policy names, axis names: no overlap
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (a, b)
            assert page.x0 <= a.x0 and a.x1 <= page.x1
        # rows of KIVIAT_COLUMNS radars
        rows = {round(ax.get_position().y0, 3) for ax in fig.axes}
        assert len(rows) == -(-n_policies // KIVIAT_COLUMNS)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_fewer_than_three_axes_draw_no_chart():
    assert kiviat_figure(_runs(KIVIAT_KEYS[:2])) is None
