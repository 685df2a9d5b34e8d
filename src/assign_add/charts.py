"""Chart specifications rendered twice: a PNG (matplotlib) and an interactive HTML fragment (plotly).

Analyses describe *what* to draw with these small dataclasses; :func:`render` writes
``NAME.png`` and ``NAME.html`` (a ``<div>`` without plotly.js, which the report includes once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from assign_add.io import atomic_write, atomic_write_text


@dataclass
class Line:
    title: str
    x: list[float]
    series: dict[str, list[float]]
    xlabel: str = "step"
    ylabel: str = ""
    markers: dict[str, float] = field(default_factory=dict)  # label -> x of a vertical line
    ylim: tuple[float, float] | None = None


@dataclass
class Heat:
    title: str
    z: list[list[float]]
    xlabels: list[str]
    ylabels: list[str]
    xlabel: str = ""
    ylabel: str = ""
    symmetric: bool = False


@dataclass
class Bars:
    title: str
    categories: list[str]
    series: dict[str, list[float]]
    ylabel: str = ""


Chart = Line | Heat | Bars


def render(chart: Chart, directory: Path, name: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    png, html = directory / f"{name}.png", directory / f"{name}.html"
    _render_png(chart, png)
    atomic_write_text(html, _render_html(chart, name))
    return [png, html]


def _render_png(chart: Chart, path: Path) -> None:
    data = png_bytes(chart)
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def show(chart: Chart):
    """The chart as an image for a notebook cell (``IPython.display.Image``)."""
    from IPython.display import Image

    return Image(data=png_bytes(chart), format="png")


def png_bytes(chart: Chart) -> bytes:
    """The PNG of a chart (matplotlib, Agg)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    if isinstance(chart, Line):
        for label, ys in chart.series.items():
            ax.plot(chart.x, ys, label=label, lw=1.4)
        for label, x in chart.markers.items():
            ax.axvline(x, color="grey", ls="--", lw=0.9)
            ax.text(x, 1.0, f" {label}", transform=ax.get_xaxis_transform(), fontsize=7, va="top", color="grey")
        if chart.ylim:
            ax.set_ylim(*chart.ylim)
        if len(chart.series) > 1:
            ax.legend(fontsize=7, ncol=2)
    elif isinstance(chart, Heat):
        z = np.asarray(chart.z, dtype=float)
        lim = np.nanmax(np.abs(z)) if chart.symmetric else None
        im = ax.imshow(z, cmap="RdBu_r" if chart.symmetric else "viridis", vmin=-lim if lim else None, vmax=lim, aspect="auto")
        fig.colorbar(im, ax=ax)
        if len(chart.xlabels) <= 30:
            ax.set_xticks(range(len(chart.xlabels)), chart.xlabels, fontsize=7)
        if len(chart.ylabels) <= 30:
            ax.set_yticks(range(len(chart.ylabels)), chart.ylabels, fontsize=7)
    else:
        width = 0.8 / max(len(chart.series), 1)
        xs = np.arange(len(chart.categories))
        for i, (label, ys) in enumerate(chart.series.items()):
            ax.bar(xs + i * width, ys, width, label=label)
        ax.set_xticks(xs + 0.4 - width / 2, chart.categories, rotation=45, ha="right", fontsize=7)
        if len(chart.series) > 1:
            ax.legend(fontsize=7)
    ax.set_title(chart.title, fontsize=10)
    ax.set_xlabel(getattr(chart, "xlabel", ""))
    ax.set_ylabel(getattr(chart, "ylabel", ""))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _render_html(chart: Chart, name: str) -> str:
    import plotly.graph_objects as go

    fig = go.Figure()
    if isinstance(chart, Line):
        for label, ys in chart.series.items():
            fig.add_trace(go.Scatter(x=chart.x, y=ys, mode="lines", name=label))
        for label, x in chart.markers.items():
            fig.add_vline(x=x, line_dash="dash", line_color="grey", annotation_text=label)
        if chart.ylim:
            fig.update_yaxes(range=list(chart.ylim))
    elif isinstance(chart, Heat):
        z = np.asarray(chart.z, dtype=float)
        kwargs = {"colorscale": "RdBu_r", "zmid": 0} if chart.symmetric else {"colorscale": "Viridis"}
        fig.add_trace(go.Heatmap(z=z.tolist(), x=chart.xlabels, y=chart.ylabels, **kwargs))
        fig.update_yaxes(autorange="reversed")
    else:
        for label, ys in chart.series.items():
            fig.add_trace(go.Bar(x=chart.categories, y=ys, name=label))
    fig.update_layout(
        title=chart.title, height=380, margin=dict(l=50, r=20, t=50, b=50),
        xaxis_title=getattr(chart, "xlabel", ""), yaxis_title=getattr(chart, "ylabel", ""),
    )
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{name}")
