"""The alert rules' one source, deploy/prometheus/bff-rules.yaml, and what is made from it.

    python scripts/alert-rules.py write   rewrites deploy/k8s/monitoring/prometheusrule.yaml
    python scripts/alert-rules.py check   fails (exit 1) when anything below does not hold
    python scripts/alert-rules.py azure   prints an ARM template of the same groups for Azure Monitor
                                          managed Prometheus (deploy/azure/alerts.md)

The PrometheusRule is the source file indented under `spec:` (comments and all, so the cluster's
copy explains itself), behind a fixed header. `check` (scripts/test alerts) proves that the
committed PrometheusRule is exactly what `write` makes and that its spec.groups parse equal to the
source's groups; that every alert has a severity S1, S2 or S3 and a summary, a description and a
runbook_url naming a section of deploy/RUNBOOK.md; and that the promtool unit tests
(deploy/prometheus/tests/*.yaml) have, for every alert, a case where it fires with its labels and
annotations checked and a case where it does not fire. promtool itself runs in scripts/test."""

import json
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = ROOT / "deploy/prometheus/bff-rules.yaml"
TESTS = ROOT / "deploy/prometheus/tests"
RUNBOOK = ROOT / "deploy/RUNBOOK.md"
MONITORING = ROOT / "deploy/k8s/monitoring"
RULE = MONITORING / "prometheusrule.yaml"

HEADER = """\
# GENERATED from deploy/prometheus/bff-rules.yaml by `python scripts/alert-rules.py write`: edit
# the source, then run that; `scripts/test alerts` fails while the two differ. For clusters with
# the Prometheus Operator (deploy/k8s/monitoring/kustomization.yaml).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: bff
  labels:
    app.kubernetes.io/name: bff
spec:
"""
SEVERITIES = {"S1", "S2", "S3"}
# Azure Monitor alert severities: 0 Critical, 1 Error, 2 Warning, 3 Informational, 4 Verbose.
AZURE_SEVERITY = {"S1": 0, "S2": 1, "S3": 2}


def generated() -> str:
    lines = SOURCE.read_text().splitlines()
    return HEADER + "".join(f"  {line}\n" if line else "\n" for line in lines)


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but - and _ dropped, spaces to -."""
    found = set()
    for line in markdown.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def iso8601(duration: str) -> str:
    """A Prometheus duration of whole hours and minutes ("1h", "15m", "1h30m") as ISO 8601."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?", duration)
    if not duration or not match:
        raise ValueError(f"for: {duration!r} is not whole hours and minutes; Azure takes ISO 8601 durations")
    hours, minutes = match.groups()
    return "PT" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")


def azure_template() -> dict:
    """One Microsoft.AlertsManagement/prometheusRuleGroups resource per group of the source, with
    the same expressions, labels and annotations; each alert's Azure severity and action group
    follow its S1/S2/S3 label."""
    source = yaml.safe_load(SOURCE.read_text())
    resources = []
    for group in source["groups"]:
        rules = []
        for rule in group["rules"]:
            azure = {"expression": rule["expr"].strip()}
            if "record" in rule:
                azure["record"] = rule["record"]
            else:
                severity = rule["labels"]["severity"]
                azure.update(
                    alert=rule["alert"],
                    labels=rule["labels"],
                    annotations=rule["annotations"],
                    severity=AZURE_SEVERITY[severity],
                    actions=[{"actionGroupId": f"[parameters('actionGroup{severity}')]"}],
                    resolveConfiguration={"autoResolved": True, "timeToResolve": "PT5M"},
                )
                if "for" in rule:
                    azure["for"] = iso8601(rule["for"])
            rules.append(azure)
        resources.append({
            "type": "Microsoft.AlertsManagement/prometheusRuleGroups",
            "apiVersion": "2023-03-01",
            "name": f"[concat(parameters('namePrefix'), '{group['name']}')]",
            "location": "[parameters('location')]",
            "properties": {
                "description": f"deploy/prometheus/bff-rules.yaml, group {group['name']}",
                "scopes": ["[parameters('azureMonitorWorkspaceId')]"],
                "enabled": True,
                "interval": "PT1M",
                "rules": rules,
            },
        })
    string = {"type": "string"}
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {
            "azureMonitorWorkspaceId": string,
            "location": {"type": "string", "defaultValue": "[resourceGroup().location]"},
            "namePrefix": {"type": "string", "defaultValue": ""},
            "actionGroupS1": string,
            "actionGroupS2": string,
            "actionGroupS3": string,
        },
        "resources": resources,
    }


def check() -> list[str]:
    problems = []
    source = yaml.safe_load(SOURCE.read_text())
    if RULE.read_text() != generated():
        problems.append(f"{RULE.relative_to(ROOT)} is not what the source makes: run python scripts/alert-rules.py write")
    rule = yaml.safe_load(RULE.read_text())
    if rule.get("apiVersion") != "monitoring.coreos.com/v1" or rule.get("kind") != "PrometheusRule":
        problems.append(f"{RULE.relative_to(ROOT)} is no monitoring.coreos.com/v1 PrometheusRule")
    if (rule.get("spec") or {}).get("groups") != source["groups"]:
        problems.append(f"{RULE.relative_to(ROOT)}: spec.groups differ from the groups of {SOURCE.relative_to(ROOT)}")
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    if "prometheusrule.yaml" not in (kustomization.get("resources") or []):
        problems.append("deploy/k8s/monitoring/kustomization.yaml does not list prometheusrule.yaml")

    sections = anchors(RUNBOOK.read_text())
    alerts = {}
    for group in source["groups"]:
        for rule_ in group["rules"]:
            if "alert" not in rule_:
                continue
            name = rule_["alert"]
            alerts[name] = rule_
            if (rule_.get("labels") or {}).get("severity") not in SEVERITIES:
                problems.append(f"{name}: labels.severity is not one of {sorted(SEVERITIES)}")
            annotations = rule_.get("annotations") or {}
            for key in ("summary", "description", "runbook_url"):
                if not annotations.get(key):
                    problems.append(f"{name}: no {key} annotation")
            url = annotations.get("runbook_url", "")
            path, _, anchor = url.partition("#")
            if path != "deploy/RUNBOOK.md" or anchor not in sections:
                problems.append(f"{name}: runbook_url {url!r} names no section of deploy/RUNBOOK.md")

    try:
        azure_template()
    except (KeyError, ValueError) as error:
        problems.append(f"the Azure template cannot be made: {error}")

    fires, quiet = set(), set()
    test_files = sorted(TESTS.glob("*.yaml"))
    if not test_files:
        problems.append(f"no promtool unit tests in {TESTS.relative_to(ROOT)}")
    for path in test_files:
        document = yaml.safe_load(path.read_text())
        if "../bff-rules.yaml" not in (document.get("rule_files") or []):
            problems.append(f"{path.relative_to(ROOT)} does not test ../bff-rules.yaml")
        for test in document.get("tests") or []:
            for case in test.get("alert_rule_test") or []:
                name = case.get("alertname")
                if name not in alerts:
                    problems.append(f"{path.relative_to(ROOT)}: {name} is no alert of the source")
                    continue
                expected = case.get("exp_alerts") or []
                if not expected:
                    quiet.add(name)
                elif all(
                    (e.get("exp_labels") or {}).get("severity") == alerts[name]["labels"]["severity"]
                    and set(e.get("exp_annotations") or {}) >= {"summary", "description", "runbook_url"}
                    for e in expected
                ):
                    fires.add(name)
    for name in alerts:
        if name not in fires:
            problems.append(f"{name}: no unit test where it fires with its severity and annotations checked")
        if name not in quiet:
            problems.append(f"{name}: no unit test where it does not fire")
    return problems


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "write":
        RULE.write_text(generated())
        return 0
    if command == "azure":
        json.dump(azure_template(), sys.stdout, indent=2, ensure_ascii=False)
        print()
        return 0
    if command == "check":
        problems = check()
        for problem in problems:
            print(f"alert rules: {problem}", file=sys.stderr)
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
