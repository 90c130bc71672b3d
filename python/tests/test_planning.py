import json
import subprocess

import pytest

import graphpipe as gp


def test_partition_matches_the_cli(cli, mmt, tmp_path):
    plan = gp.partition(mmt, devices=4, memory="4GiB", batch=32)
    onnx = tmp_path / "mmt.onnx"
    onnx.write_bytes(mmt.onnx_bytes())
    out = subprocess.run([cli, "partition", str(onnx), "--devices", "4", "--memory", "4GiB", "--batch", "32", "--json"],
                         check=True, capture_output=True, text=True).stdout
    ref = json.loads(out)
    assert len(plan.stages) == len(ref["stages"])
    assert plan.samples_per_s == pytest.approx(ref["samples_per_s"], rel=1e-9)
    assert [s.ops for s in plan.stages] == [s["nodes"] for s in ref["stages"]]
    assert sorted(d for s in plan.stages for d in s.devices) == sorted(d for s in ref["stages"] for d in s["devices"])
    assert plan.search_time_s > 0 and plan.planner == "gpp" and plan.devices == 4


def test_plan_json_round_trip(mmt, tmp_path):
    plan = gp.partition(mmt, devices=4, memory="4GiB", batch=32)
    again = gp.Plan.from_json(plan.to_json())
    assert again.to_json() == plan.to_json()
    path = tmp_path / "plan.json"
    plan.save(path)
    assert gp.Plan.from_json(str(path)).samples_per_s == plan.samples_per_s
    assert "stage" in repr(plan)
    html = plan._repr_html_()
    assert "<table>" in html and html.count("<rect") == len(plan.stages)


def test_tied_weights_are_listed_with_their_stages(cli, gpt2tied_fixture):
    # HF GPT-2 (dynamo export) reads its token embedding in the first layer and, tied, as the output
    # projection: on 4 balanced stages a copy sits in each stage that reads it, and the plan prices
    # their all-reduce; the CLI agrees.
    path = gpt2tied_fixture / "model.onnx"
    plan = gp.partition(gp.load(str(path)), devices=4, batch=8, planner="balanced")
    assert plan.tied_weights, "the tied embedding is read by the first and the last stage"
    for t in plan.tied_weights:
        assert len(t["stages"]) >= 2 and t["bytes"] > 0 and t["allreduce_s"] > 0
    assert "tied weights" in repr(plan)
    out = subprocess.run([cli, "partition", str(path), "--devices", "4", "--batch", "8", "--planner", "balanced",
                          "--json"], check=True, capture_output=True, text=True).stdout
    assert json.loads(out)["tied_weights"] == plan.tied_weights
    assert gp.Plan.from_json(plan.to_json()).tied_weights == plan.tied_weights


def test_partition_bad_inputs(mmt):
    with pytest.raises(gp.Error, match="planner"):
        gp.partition(mmt, devices=2, planner="magic")
    with pytest.raises(gp.Error, match="memory|fit"):
        gp.partition(mmt, devices=2, memory="1KiB", batch=32)
    with pytest.raises(gp.Error, match="no such|not found|cannot"):
        gp.partition("/nonexistent/model.onnx", devices=2)
    with pytest.raises(TypeError, match="cost"):
        gp.partition(mmt, devices=2, cost=3)


def test_compare_has_every_planner_and_gpp_is_never_below_a_chain(mmt):
    rows = gp.compare(mmt, devices=4, memory="4GiB", batch=32)
    assert [r["planner"] for r in rows] == list(gp.planning.PLANNERS)
    gpp = rows[0]
    assert gpp["gpp_ratio"] == pytest.approx(1.0)
    for r in rows[1:]:
        if r.get("plan") is not None:
            assert gpp["samples_per_s"] >= r["samples_per_s"] * (1 - 1e-9), r
    md = rows.to_markdown()
    assert md.startswith("| planner |") and md.count("\n") == 1 + len(rows)


def test_compare_impossible_memory_reports_each_planner(mmt):
    rows = gp.compare(mmt, devices=2, memory="1KiB", batch=32)
    assert all(r["plan"] is None and r["error"] for r in rows)


def test_schedule_policies(mmt):
    plan = gp.partition(mmt, devices=4, memory="4GiB", batch=32)
    s = gp.schedule(plan, "gpipe")
    assert s.policy == "gpipe" and s.micro_batches == plan.micro_batches and s.devices == 4
    again = gp.Schedule.from_text(s.to_text())
    assert again.to_text() == s.to_text()
    assert gp.schedule(plan, "graph-1f1b", micro_batches=8).micro_batches == 8
    with pytest.raises(gp.Error, match="graph-1f1b"):
        gp.schedule(plan, "1f1b")  # MMT's plan is a graph of stages, not a chain
    with pytest.raises(gp.Error, match="policy|gpipe"):
        gp.schedule(plan, "fastest")


def test_simulate(mmt, tmp_path):
    plan = gp.partition(mmt, devices=4, memory="4GiB", batch=32)
    t = gp.simulate(plan)
    assert t.step_time_s > 0 and 0 <= t.bubble_fraction < 1
    assert t.samples_per_s == pytest.approx(plan.batch / t.step_time_s, rel=1e-6)
    assert len(t.devices) == 4 and max(d["peak_memory_bytes"] for d in t.devices) == t.peak_memory_bytes
    gpipe = gp.simulate(plan, gp.schedule(plan, "gpipe"))
    assert gpipe.schedule.policy == "gpipe"
    trace = json.loads(open(t.to_chrome_trace(tmp_path / "t.json")).read())
    assert trace["traceEvents"]
    assert t.svg().startswith("<svg") and t.svg().rstrip().endswith("</svg>") and "<table>" in t._repr_html_()
    with pytest.raises(TypeError):
        gp.simulate("plan.json")


def test_profile_feeds_the_planner(tmp_path):
    model = gp.load("zoo:mlp:tiny")
    prof = gp.profile(model, batch_sizes=[1, 2], repeats=1, threads=1)
    assert prof.ops == model.ops and prof.threads == 1
    path = tmp_path / "p.json"
    prof.save(path)
    assert gp.Profile.load(path).to_json() == prof.to_json()
    plan = gp.partition(model, devices=2, memory="1GiB", batch=8, cost=prof)
    assert plan.samples_per_s > 0
    assert gp.partition(model, devices=2, memory="1GiB", batch=8, cost=str(path)).samples_per_s == plan.samples_per_s
    with pytest.raises(gp.Error, match="cpu"):
        gp.profile(model, backend="tpu")
    with pytest.raises(gp.Error, match="positive"):
        gp.profile(model, batch_sizes=[0])


def test_gpp_plans_a_larger_graph_on_groups(cli, mmt, tmp_path):
    # gpp_max_nodes: a graph of more operators is planned on half as many groups; the plan still
    # names every operator once, and the CLI's --gpp-max-nodes gives the same plan.
    grouped = gp.partition(mmt, devices=4, memory="4GiB", batch=32, gpp_max_nodes=40)
    assert "planned as" in grouped.notes and "groups" in grouped.notes
    exact = gp.partition(mmt, devices=4, memory="4GiB", batch=32, gpp_max_nodes=0)
    assert "planned as" not in exact.notes
    ops = [op for s in grouped.stages for op in s.ops]
    assert sorted(ops) == sorted(op for s in exact.stages for op in s.ops)
    assert grouped.samples_per_s <= exact.samples_per_s * (1 + 1e-9)
    onnx = tmp_path / "mmt.onnx"
    onnx.write_bytes(mmt.onnx_bytes())
    out = subprocess.run([cli, "partition", str(onnx), "--devices", "4", "--memory", "4GiB", "--batch", "32",
                          "--gpp-max-nodes", "40", "--json"], check=True, capture_output=True, text=True).stdout
    assert json.loads(out)["samples_per_s"] == pytest.approx(grouped.samples_per_s, rel=1e-9)
    with pytest.raises(gp.Error, match="gpp max nodes"):
        gp.partition(mmt, devices=4, memory="4GiB", batch=32, gpp_max_nodes=-1)
