"""/metrics: what a cycle did and what the database shows — queue depth by class, GPUs in use by budget and run
class, drains, budget burn, cycle time, preemptions and API latency — in Prometheus text, scraped from the real
application over a real store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from allotment.ops.metrics import ObservedStore
from tests.api.conftest import make_api


def scrape(client: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")  # type: ignore[attr-defined]
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_show_queue_gpus_drains_burn_cycles_and_api_latency(db: Engine, tmp_path: Path) -> None:
    api = make_api(db, tmp_path)
    observed = ObservedStore(api.rig.store, api.rig.sessions)
    api.rig.engine = dataclasses.replace(api.rig.engine, store=observed)
    for _ in range(3):
        api.submit("ben", "pretrain", resources={"gpus": 8})
    api.submit("eli", "finetune", contract={"class": "opportunistic"})
    before = scrape(api.client)
    assert value(before, "allotment_queue_depth", contract="guaranteed", kind="batch") == 3
    assert value(before, "allotment_queue_depth", contract="opportunistic", kind="batch") == 1
    cycles = value(before, "allotment_cycles_total")

    api.rig.step()
    api.rig.step(api.rig.clock.now() + 600)
    after = scrape(api.client)
    assert value(after, "allotment_cycles_total") == cycles + 2
    assert value(after, "allotment_queue_depth", contract="guaranteed", kind="batch") == 0
    assert value(after, "allotment_gpus_in_use", budget="pretrain", run_class="guaranteed") == 24
    assert value(after, "allotment_gpus_in_use", budget="finetune", run_class="opportunistic") == 1
    assert value(after, "allotment_budget_spent_credits", budget="pretrain") > 0
    assert value(after, "allotment_cycle_seconds_count") >= 2
    assert value(after, "allotment_cycle_phase_seconds_count", phase="decide") >= 2
    assert value(after, "allotment_starts_total", rule="fair-share") >= 1
    assert value(after, "allotment_last_cycle_age_seconds") == 0
    assert value(after, "allotment_api_request_seconds_count", method="POST", route="/jobs", status="201") >= 4

    node = api.call("GET", "/nodes", "eli").json()[0]["name"]
    assert api.call("POST", f"/nodes/{node}/drain", "fay", {"why": "ECC"}).status_code == 200
    drained = scrape(api.client)
    assert value(drained, "allotment_nodes", state="draining") == 1


def test_preemptions_are_counted_by_reason(db: Engine, tmp_path: Path) -> None:
    api = make_api(db, tmp_path)
    api.rig.engine = dataclasses.replace(api.rig.engine, store=ObservedStore(api.rig.store, api.rig.sessions))
    for _ in range(4):
        api.submit("eli", "finetune", resources={"gpus": 8}, contract={"class": "opportunistic"})
    api.rig.step()
    before = value(scrape(api.client), "allotment_preemptions_total", reason="for-guaranteed")
    for _ in range(4):
        api.submit("ben", "pretrain", resources={"gpus": 8})
    api.rig.step()
    after = value(scrape(api.client), "allotment_preemptions_total", reason="for-guaranteed")
    assert after - before >= 1
