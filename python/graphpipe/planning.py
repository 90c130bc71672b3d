"""Planning from Python: partition, compare, schedule, simulate and profile a graphpipe.Model."""
import html
import json
import os
import sys

from . import _graphpipe
from ._format import fmt_bytes, fmt_seconds, html_table, markdown_table, size_arg, text_table
from .model import Model, load

PLANNERS = ("gpp", "pipedream", "piper", "balanced")


class Stage:
    """One stage of a plan: its operators, devices (replicas) and predicted time and memory."""

    def __init__(self, d):
        self._d = d
        self.id = d["id"]
        self.ops = list(d["nodes"])
        self.devices = list(d["devices"])
        self.replicas = d["replicas"]
        self.depth = d["depth"]
        self.time_s = d["time_s"]
        self.forward_s = d["fwd_s"]
        self.backward_s = d["bwd_input_s"] + d["bwd_weight_s"]
        self.communication_s = d["comm_s"]
        self.allreduce_s = d["allreduce_s"]
        self.memory_bytes = d["peak_memory_bytes"]
        self.weight_bytes = d["weight_bytes"]
        self.recompute = d["recompute"]

    def __repr__(self):
        return (f"Stage({self.id}: {len(self.ops)} ops {self.ops[0]}..{self.ops[-1]}, devices {self.devices}, "
                f"T={fmt_seconds(self.time_s)}, memory {fmt_bytes(self.memory_bytes)})")


class Plan:
    """A graph of pipeline stages (`graphpipe partition`'s result)."""

    def __init__(self, handle):
        self._handle = handle
        self._d = json.loads(handle.to_json())
        self.stages = [Stage(s) for s in self._d["stages"]]
        self.edges = [dict(e) for e in self._d["edges"]]
        # Weights several stages read (a tied embedding; Llama's rotary tables when trained): a copy in
        # each of `stages`, their gradients all-reduced once per step (`allreduce_s`) over those stages'
        # devices.
        self.tied_weights = [dict(t) for t in self._d.get("tied_weights", [])]

    model = property(lambda self: self._d["model"])
    planner = property(lambda self: self._d["planner"])
    devices = property(lambda self: self._d["num_devices"])
    batch = property(lambda self: self._d["batch"])
    micro_batch = property(lambda self: self._d["micro_batch"])
    micro_batches = property(lambda self: self._d["num_micro_batches"])
    depth = property(lambda self: self._d["depth"])
    samples_per_s = property(lambda self: self._d["samples_per_s"], doc="predicted throughput")
    step_time_s = property(lambda self: self._d["step_time_s"])
    search_time_s = property(lambda self: self._d["search_time_s"])
    notes = property(lambda self: self._d["notes"])

    @property
    def peak_memory_bytes(self):
        return max(s.memory_bytes for s in self.stages)

    def to_json(self):
        return self._handle.to_json()

    @classmethod
    def from_json(cls, text):
        """A plan from its JSON text (Plan.to_json, `graphpipe partition -o`) or a path to such a file."""
        if not text.lstrip().startswith("{") and os.path.exists(text):
            with open(text) as f:
                text = f.read()
        return cls(_graphpipe.Plan.from_json(text))

    def save(self, path):
        with open(path, "w") as f:
            f.write(self.to_json())

    def _rows(self):
        return [(s.id, len(s.ops), s.ops[0], s.ops[-1], ",".join(map(str, s.devices)), s.depth,
                 fmt_seconds(s.time_s), fmt_bytes(s.memory_bytes) + (" recompute" if s.recompute else ""))
                for s in self.stages]

    _header = ("stage", "ops", "first op", "last op", "devices", "depth", "T_s", "memory/device")

    def _title(self):
        tied = ""
        if self.tied_weights:
            stages = sorted({s for t in self.tied_weights for s in t["stages"]})
            tied = (f"; {len(self.tied_weights)} tied weights ({fmt_bytes(sum(t['bytes'] for t in self.tied_weights))}) "
                    f"copied in stages {','.join(map(str, stages))}, all-reduced in "
                    f"{fmt_seconds(sum(t['allreduce_s'] for t in self.tied_weights))} per step")
        return (f"{self.model}: {len(self.stages)} stages on {self.devices} devices (planner {self.planner}); "
                f"{self.samples_per_s:.1f} samples/s predicted, step {fmt_seconds(self.step_time_s)} "
                f"(B={self.batch}, b={self.micro_batch}, depth {self.depth}); search {fmt_seconds(self.search_time_s)}"
                f"{tied}")

    def __repr__(self):
        return self._title() + "\n" + text_table(self._header, self._rows())

    def _repr_html_(self):
        return html_table(self._header, self._rows(), caption=self._title()) + self.svg()

    def svg(self):
        """The stage graph: stages as boxes in columns by their distance from the sources, edges
        labelled with the bytes a micro-batch sends."""
        level = {}
        for s in self.stages:  # stages are in topological order
            level.setdefault(s.id, 0)
            for e in self.edges:
                if e["src"] == s.id:
                    level[e["dst"]] = max(level.get(e["dst"], 0), level[s.id] + 1)
        columns = {}
        for s in self.stages:
            columns.setdefault(level[s.id], []).append(s)
        w, h, gx, gy = 170, 58, 60, 24
        pos = {}
        for col, stages in columns.items():
            for row, s in enumerate(stages):
                pos[s.id] = (20 + col * (w + gx), 20 + row * (h + gy))
        width = 40 + (max(columns) + 1) * (w + gx) - gx
        height = 40 + max(len(v) for v in columns.values()) * (h + gy) - gy
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
               f'font-size="11">',
               '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
               '<path d="M0,0 L8,4 L0,8 z"/></marker></defs>']
        for e in self.edges:
            (x1, y1), (x2, y2) = pos[e["src"]], pos[e["dst"]]
            out.append(f'<line x1="{x1 + w}" y1="{y1 + h / 2}" x2="{x2}" y2="{y2 + h / 2}" stroke="#555" '
                       f'marker-end="url(#a)"/>')
            out.append(f'<text x="{(x1 + w + x2) / 2}" y="{(y1 + y2 + h) / 2 - 4}" text-anchor="middle" fill="#555">'
                       f'{fmt_bytes(e["bytes_per_micro_batch"])}</text>')
        for s in self.stages:
            x, y = pos[s.id]
            label = html.escape(f"{s.ops[0]} .. {s.ops[-1]}" if len(s.ops) > 1 else s.ops[0])
            out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="#e8f0fe" stroke="#335"/>')
            out.append(f'<text x="{x + 6}" y="{y + 15}" font-weight="bold">stage {s.id}: {len(s.ops)} ops '
                       f'x{s.replicas}</text>')
            out.append(f'<text x="{x + 6}" y="{y + 31}">{label[:30]}</text>')
            out.append(f'<text x="{x + 6}" y="{y + 47}">T={fmt_seconds(s.time_s)} '
                       f'{fmt_bytes(s.memory_bytes)}</text>')
        out.append("</svg>")
        return "".join(out)


def _planning_options(devices, memory, batch, micro_batch, cluster, cost, bandwidth, replication, communication,
                      recompute, rank, time_limit, profile_file, profile_batch, gpp_max_nodes=None):
    options = dict(devices=devices, memory=memory if isinstance(memory, str) or memory is None else str(memory),
                   batch=batch, micro_batch=micro_batch, cluster=cluster, bandwidth=bandwidth,
                   replication=replication, communication=communication, recompute=recompute, rank=rank,
                   time_limit=time_limit, profile=profile_file, profile_batch=profile_batch,
                   gpp_max_nodes=gpp_max_nodes)
    if memory is not None:
        size_arg(memory, "memory")
    if isinstance(cost, Profile):
        options["measured"] = cost._handle
    elif isinstance(cost, str):
        options["cost"] = cost
    elif cost is not None:
        raise TypeError("cost must be 'analytic', a profile JSON path or a graphpipe.Profile")
    if cluster is not None and not isinstance(cluster, str):
        raise TypeError("cluster must be the path of a cluster YAML file")
    return options


def _model_arg(model):
    """The extension's model: None (a PipeDream profile is planned), a Model, or what load() takes."""
    if model is None:
        return None
    return (model if isinstance(model, Model) else load(model))._handle


def _progress(verbose):
    return (lambda line: print(line, file=sys.stderr, flush=True)) if verbose else None


def partition(model, devices=None, memory="16GiB", planner="gpp", batch=64, *, micro_batch=None, cluster=None,
              cost="analytic", bandwidth=None, replication=True, communication=True, recompute="auto",
              rank="simulation", time_limit=None, profile_file=None, profile_batch=None, gpp_max_nodes=None,
              verbose=False):
    """Cuts `model` (a graphpipe.Model, or anything graphpipe.load takes) into a graph of stages.

    devices/memory describe a uniform cluster (or cluster= a cluster YAML); batch is the global
    batch; cost is "analytic", a profile JSON path, or a graphpipe.Profile; planner is one of
    gpp, pipedream, piper, balanced. profile_file= plans a PipeDream graph.txt instead of a model.
    gpp_max_nodes: gpp plans a graph of more operators on half as many groups of them (default 2000;
    0: every operator, exact).
    """
    if planner not in PLANNERS:
        raise _graphpipe.Error(f"planner '{planner}' is not one of {', '.join(PLANNERS)}")
    options = _planning_options(devices, memory, batch, micro_batch, cluster, cost, bandwidth, replication,
                                communication, recompute, rank, time_limit, profile_file, profile_batch,
                                gpp_max_nodes)
    return Plan(_graphpipe.partition(_model_arg(model), planner, options, _progress(verbose)))


class Comparison(list):
    """Every planner's row (a list of dicts): planner, samples_per_s, search_time_s, stages, depth,
    micro_batch, peak_memory_bytes, gpp_ratio, notes, and plan (a graphpipe.Plan) or error."""

    _header = ("planner", "search", "stages", "depth", "b", "samples/s", "peak memory", "GPP/this")

    def _rows(self):
        rows = []
        for r in self:
            if r.get("error"):
                rows.append((r["planner"], "n/a", "", "", "", "", "", r["error"][:60]))
            else:
                rows.append((r["planner"], fmt_seconds(r["search_time_s"]), r["stages"], r["depth"], r["micro_batch"],
                             f"{r['samples_per_s']:.1f}", fmt_bytes(r["peak_memory_bytes"]),
                             f"{r['gpp_ratio']:.2f}" if r.get("gpp_ratio") else "-"))
        return rows

    def to_markdown(self):
        return markdown_table(self._header, self._rows())

    def __repr__(self):
        return text_table(self._header, self._rows())

    def _repr_html_(self):
        return html_table(self._header, self._rows())


def compare(model, devices=None, memory="16GiB", batch=64, *, micro_batch=None, cluster=None, cost="analytic",
            bandwidth=None, replication=True, communication=True, recompute="auto", rank="simulation",
            time_limit=None, profile_file=None, profile_batch=None, gpp_max_nodes=None, verbose=False):
    """Every planner (gpp, pipedream, piper, balanced) on the same problem, as `graphpipe compare`."""
    options = _planning_options(devices, memory, batch, micro_batch, cluster, cost, bandwidth, replication,
                                communication, recompute, rank, time_limit, profile_file, profile_batch,
                                gpp_max_nodes)
    rows = Comparison()
    results = _graphpipe.compare(_model_arg(model), options, _progress(verbose))
    gpp = next((p for name, p, _ in results if name == "gpp" and p is not None), None)
    for name, handle, error in results:
        if handle is None:
            rows.append({"planner": name, "error": error, "plan": None})
            continue
        plan = Plan(handle)
        rows.append({"planner": name, "samples_per_s": plan.samples_per_s, "search_time_s": plan.search_time_s,
                     "stages": len(plan.stages), "depth": plan.depth, "micro_batch": plan.micro_batch,
                     "peak_memory_bytes": plan.peak_memory_bytes, "notes": plan.notes,
                     "gpp_ratio": gpp.samples_per_s / plan.samples_per_s if gpp and plan.samples_per_s else None,
                     "plan": plan})
    return rows


class Schedule:
    """Every device's ordered instructions (forward, backward, send, receive, all-reduce, step)."""

    def __init__(self, handle):
        self._handle = handle

    policy = property(lambda self: self._handle.policy)
    micro_batches = property(lambda self: self._handle.num_micro_batches)
    devices = property(lambda self: self._handle.num_devices)

    def to_text(self):
        return self._handle.to_text()

    @classmethod
    def from_text(cls, text):
        return cls(_graphpipe.Schedule.from_text(text))

    def __repr__(self):
        return f"graphpipe.Schedule({self.policy}, {self.micro_batches} micro-batches on {self.devices} devices)"


def schedule(plan, policy="auto", micro_batches=None):
    """A schedule for `plan`: gpipe, 1f1b, interleaved, graph-1f1b, zb, or auto (the best that fits)."""
    if not isinstance(plan, Plan):
        raise TypeError("schedule() takes a graphpipe.Plan")
    return Schedule(_graphpipe.schedule(plan._handle, policy, micro_batches or 0))


class Timeline:
    """A simulated step: step time, bubbles and peak memory per device, and the timeline itself."""

    def __init__(self, handle, plan):
        self._handle = handle
        self.plan = plan
        self.schedule = Schedule(handle.schedule)

    step_time_s = property(lambda self: self._handle.step_time_s)
    samples_per_s = property(lambda self: self._handle.samples_per_s)
    bubble_fraction = property(lambda self: self._handle.bubble_fraction, doc="mean over devices")
    peak_memory_bytes = property(lambda self: self._handle.peak_memory_bytes)

    @property
    def devices(self):
        """Per device: busy_s, bubble_fraction, static_bytes, peak_memory_bytes."""
        return self._handle.devices

    def to_chrome_trace(self, path):
        """Writes the timeline as Chrome trace JSON (open in https://ui.perfetto.dev)."""
        with open(path, "w") as f:
            f.write(self._handle.chrome_trace(self.plan.model))
        return path

    def to_json(self):
        return self._handle.to_json()

    def svg(self):
        """The timeline as an SVG Gantt chart (as `graphpipe simulate --svg`), without the XML prolog so
        that it embeds in HTML."""
        text = self._handle.svg(f"{self.plan.model} ({self.schedule.policy})")
        return text[text.index("<svg"):]

    def __repr__(self):
        return self._handle.table()

    def _repr_html_(self):
        rows = [(d, fmt_seconds(r["busy_s"]), f"{r['bubble_fraction']:.1%}", fmt_bytes(r["peak_memory_bytes"]))
                for d, r in enumerate(self.devices)]
        caption = (f"step {fmt_seconds(self.step_time_s)}, {self.samples_per_s:.1f} samples/s, "
                   f"bubbles {self.bubble_fraction:.1%} ({self.schedule.policy})")
        return html_table(("device", "busy", "bubble", "peak memory"), rows, caption=caption) + self.svg()


def simulate(plan, schedule=None):
    """Simulates one training step of `plan` under `schedule` (default: the auto policy's)."""
    if not isinstance(plan, Plan):
        raise TypeError("simulate() takes a graphpipe.Plan")
    if schedule is not None and not isinstance(schedule, Schedule):
        raise TypeError("schedule must be a graphpipe.Schedule (graphpipe.schedule(plan, policy))")
    return Timeline(_graphpipe.simulate(plan._handle, schedule._handle if schedule else None), plan)


class Profile:
    """Measured per-op forward/backward times at several micro-batch sizes: a cost model."""

    def __init__(self, handle):
        self._handle = handle

    model = property(lambda self: self._handle.model)
    device = property(lambda self: self._handle.device)
    threads = property(lambda self: self._handle.threads)
    ops = property(lambda self: self._handle.num_ops)

    def to_json(self):
        return self._handle.to_json()

    def save(self, path):
        self._handle.save(os.fspath(path))

    @classmethod
    def from_json(cls, text):
        return cls(_graphpipe.Profile.from_json(text))

    @classmethod
    def load(cls, path):
        return cls(_graphpipe.Profile.from_file(os.fspath(path)))

    def __repr__(self):
        return f"graphpipe.Profile({self.model!r}: {self.ops} ops on {self.device}, {self.threads} threads)"


def profile(model, backend="cpu", batch_sizes=(1, 2, 4, 8), *, repeats=3, threads=0, verbose=False):
    """Measures every op of `model` on `backend` at each micro-batch size (as `graphpipe profile`)."""
    return Profile(_graphpipe.profile(_model_arg(model), backend, list(batch_sizes), repeats, threads,
                                      _progress(verbose)))
