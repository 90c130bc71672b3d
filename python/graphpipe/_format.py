"""Numbers and tables as graphpipe's CLI prints them, for reprs and notebooks."""
import html


def fmt_bytes(n):
    n = float(n)
    if n >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n:.0f} B"


def fmt_seconds(s):
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def fmt_count(n, unit=""):
    n = float(n)
    for scale, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " K")):
        if n >= scale:
            return f"{n / scale:.2f}{suffix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def size_arg(value, what):
    """A size given as bytes (int) or text ("8GiB"); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a size such as '8GiB' or a number of bytes")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{what} must be positive")
        return value
    if isinstance(value, str):
        from . import _graphpipe
        return _graphpipe.parse_size(value, what)
    raise TypeError(f"{what} must be a size such as '8GiB' or a number of bytes, not {type(value).__name__}")


def text_table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) for x, w in zip(r, widths))
    return "\n".join([line(header)] + [line(r) for r in rows])


def html_table(header, rows, caption=None):
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    out.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def markdown_table(header, rows):
    out = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)
