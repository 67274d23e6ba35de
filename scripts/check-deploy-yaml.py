"""Offline checks of the deployment files that no validator on this machine covers (scripts/test
manifests): deploy/compose.yaml and deploy/azure/*.yaml parse, every Azure secret is a Key Vault
reference through a managed identity, every `secretRef` names a declared secret, and no Kubernetes
manifest inlines a Secret."""

import pathlib
import sys

import yaml

deploy = pathlib.Path(sys.argv[1])
problems = []

compose = yaml.safe_load((deploy / "compose.yaml").read_text())
environment = compose.get("x-bff-env") or {}
if not isinstance(environment, dict) or not environment:
    problems.append("compose.yaml: x-bff-env is missing or empty")
for name, service in (compose.get("services") or {}).items():
    if not isinstance(service, dict) or not (service.get("image") or service.get("build")):
        problems.append(f"compose.yaml: service {name} has neither image nor build")

for path in sorted((deploy / "azure").glob("*.yaml")):
    document = yaml.safe_load(path.read_text())
    configuration = document["properties"]["configuration"]
    declared = set()
    for secret in configuration.get("secrets") or []:
        declared.add(secret["name"])
        if "value" in secret or not secret.get("keyVaultUrl", "").startswith("https://") or not secret.get("identity"):
            problems.append(f"{path.name}: secret {secret['name']} is not a Key Vault reference through an identity")
    for container in document["properties"]["template"]["containers"]:
        for variable in container.get("env") or []:
            if "secretRef" in variable and variable["secretRef"] not in declared:
                problems.append(f"{path.name}: {variable['name']} names the undeclared secret {variable['secretRef']}")
            if variable["name"] in {"BFF_JWT_KEYS", "BFF_DATABASE_URL", "BFF_LLM_API_KEY", "BFF_REVENUECAT_API_KEY"} and "value" in variable:
                problems.append(f"{path.name}: {variable['name']} is inlined; reference a secret")

for path in sorted((deploy / "k8s").glob("*.yaml")):
    for document in yaml.safe_load_all(path.read_text()):
        if isinstance(document, dict) and document.get("kind") == "Secret":
            problems.append(f"k8s/{path.name}: a Secret is inlined; reference one created apart")

for problem in problems:
    print(f"manifests: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
