"""Draw a memory plan as SVG: execution steps across, arena addresses up, one labelled box per buffer.

The peak (the highest byte in use) is marked with a line, and so is the
op order's largest live set (every buffer counted whole), so the picture shows how far the
overlap contracts take the plan below it. The ring of a block run row by row (mcu/plan/fused.py) is
hatched, and so is each ring of a streamed prefix (mcu/plan/prefix.py), with its tensor's name.
"""

from __future__ import annotations

from html import escape

from mcu.plan.planner import Plan, occupied_bytes_per_step

RING_SUFFIX = "_ring"  # the scratch buffer of a fused block (mcu/plan/memory.py names it)
_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac"]


def plan_svg(plan: Plan, title: str, step_names: list[str] | None = None, width: int = 1100,
             height: int = 640, rings: dict[str, list[tuple[str, int, int, int, int]]] | None = None) -> str:
    """``rings``: by buffer name, the rings inside it as (tensor, offset in the buffer, bytes, rows kept, rows
    written per call: the band): a streamed prefix's scratch (mcu/plan/prefix.py), each ring drawn hatched
    with its tensor's name, its rows and its band."""
    steps = max((b.last_use for b in plan.buffers), default=0) + 1
    top = max(plan.arena_size, plan.lower_bound, 1)
    left, right, upper, lower = 90, 20, 50, 70
    pw, ph = width - left - right, height - upper - lower
    sx = pw / steps
    sy = ph / top

    def y(addr: float) -> float:
        return upper + ph - addr * sy

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        '<rect x="0" y="0" width="100%" height="100%" fill="white"/>',
        # A fused block's ring (mcu/plan/fused.py) is hatched: rows that come and go, not one tensor.
        '<defs><pattern id="ring" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#f28e2b"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7a3f00" '
        'stroke-width="2"/></pattern></defs>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<text x="{left}" y="40">arena {plan.arena_size} B, largest live set of the op order '
        f'{plan.lower_bound} B, {len(plan.buffers)} buffers ({plan.method})</text>',
        f'<line x1="{left}" y1="{upper + ph}" x2="{left + pw}" y2="{upper + ph}" stroke="black"/>',
        f'<line x1="{left}" y1="{upper}" x2="{left}" y2="{upper + ph}" stroke="black"/>',
    ]
    for i in range(5):
        addr = top * i / 4
        parts.append(f'<text x="{left - 6}" y="{y(addr) + 4:.1f}" text-anchor="end">{int(addr)}</text>')
    label_every = max(1, steps // 30)
    for s in range(0, steps, label_every):
        name = step_names[s] if step_names and s < len(step_names) else str(s)
        x = left + (s + 0.5) * sx
        parts.append(f'<text x="{x:.1f}" y="{upper + ph + 14}" text-anchor="end" '
                     f'transform="rotate(-45 {x:.1f} {upper + ph + 14})">{escape(name)}</text>')
    for i, (b, off) in enumerate(zip(plan.buffers, plan.offsets)):
        x0 = left + b.first_use * sx
        w = (b.last_use - b.first_use + 1) * sx
        y0 = y(off + b.size)
        h = max(b.size * sy, 0.5)
        color = _PALETTE[i % len(_PALETTE)]
        inner = (rings or {}).get(b.name, [])
        for tensor, at, size, rows, band in inner:
            ry = y(off + at + size)
            kept = f"{rows} row{'s' if rows != 1 else ''}, band {band}"
            parts.append(
                f'<g class="ring"><title>{escape(tensor)}: ring of {kept} ({size} B) at [{off + at}, '
                f'{off + at + size}): the rows a streamed prefix keeps, its producer writing up to {band} '
                f'a call; steps {b.first_use}-{b.last_use}</title>'
                f'<rect x="{x0:.1f}" y="{ry:.1f}" width="{w:.1f}" height="{max(size * sy, 0.5):.1f}" '
                f'fill="url(#ring)" fill-opacity="0.55" stroke="{color}"/>'
                f'<text x="{x0 + 2:.1f}" y="{ry + min(size * sy, 12) - 2:.1f}" font-size="8">'
                f'{escape(tensor)} ({kept})</text></g>')
        if inner:
            continue
        ring = b.name.endswith(RING_SUFFIX)
        what = " (ring of expanded rows of a block run row by row)" if ring else ""
        fill = "url(#ring)" if ring else color
        parts.append(
            f'<g class="{"ring" if ring else "buffer"}"><title>{escape(b.name)}: {b.size} B at [{off}, '
            f'{off + b.size}), steps {b.first_use}-{b.last_use}{what}'
            f'</title><rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" '
            f'fill-opacity="0.55" stroke="{color}"/>'
            f'<text x="{x0 + 2:.1f}" y="{y0 + min(h, 14) - 3:.1f}" font-size="9">{escape(b.name)}</text></g>')
    for value, label, color in ((plan.arena_size, "peak", "#d62728"), (plan.lower_bound, "largest live set", "#555")):
        parts.append(f'<line x1="{left}" y1="{y(value):.1f}" x2="{left + pw}" y2="{y(value):.1f}" stroke="{color}" '
                     f'stroke-dasharray="6 3"/>')
        parts.append(f'<text x="{left + pw - 4}" y="{y(value) - 4:.1f}" text-anchor="end" fill="{color}">'
                     f'{label} {value} B</text>')
    # Bytes the buffers live at each step occupy (shared bytes once), as a step line: never above the peak.
    live = occupied_bytes_per_step(plan, steps)
    points = " ".join(f"{left + s * sx:.1f},{y(v):.1f} {left + (s + 1) * sx:.1f},{y(v):.1f}"
                      for s, v in enumerate(live))
    parts.append(f'<polyline class="live-bytes" points="{points}" fill="none" stroke="#222" stroke-width="1.5">'
                 f'<title>bytes live per step: {", ".join(str(v) for v in live)}</title></polyline>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">execution step</text>')
    parts.append(f'<text x="14" y="{upper + ph / 2}" transform="rotate(-90 14 {upper + ph / 2})" '
                 f'text-anchor="middle">arena offset (bytes)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
