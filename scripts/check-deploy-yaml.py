"""Offline checks of the deployment files that no validator on this machine covers (scripts/test
manifests). kubernetes-validate checks each manifest against the API's schema; this checks what
makes a schema-valid deployment fail on its first rollout:

- each role (`bff serve`, `bff jobs work`, `bff migrate`) gets its own secrets and no others, the
  ones it needs required and the features' optional (Kubernetes), in Container Apps and compose too;
- the API and the workers run the same BFF_PUSH_ROUTE: on the hub's, the API's token changes
  enqueue the installation mirrors that the workers' tag sends rely on;
- a Deployment an HPA scales has no `replicas`; a PodDisruptionBudget lets a drain through and
  keeps a pod; terminationGracePeriodSeconds covers the preStop sleep, BFF_SHUTDOWN_GRACE and 5 s;
- BFF_EVENT_LOOPS comes from the CPU request, and every container has CPU and memory requests and
  limits; probes name ports the container has;
- the generated ConfigMaps (kustomization.yaml) exist, hold valid variable names and no secret, and
  app-config.json parses and is mounted as a directory (kubelet never updates a subPath);
- every Azure secret is a Key Vault reference through an identity, every `secretRef` is declared;
- no Kubernetes manifest inlines a Secret.
"""

import json
import pathlib
import re
import sys

import yaml

deploy = pathlib.Path(sys.argv[1])
k8s = deploy / "k8s"
problems = []

# What each command reads from secrets: (required, optional). docs and deploy/README.md
# ("Configuration by command") say why; a role given more holds secrets it never uses.
ROLE_SECRETS = {
    "serve": (
        {"BFF_DATABASE_URL", "BFF_JWT_KEYS"},
        # The hub's key: on the Notification Hubs route the API's token changes enqueue the
        # installation mirrors, and `bff serve` checks the route's settings whole. The web's Auth.js
        # secrets (docs/web-session.md): the current one, and the older ones a rotation keeps.
        {
            "BFF_OIDC_CLIENT_SECRET", "BFF_LLM_API_KEY", "BFF_REVENUECAT_API_KEY", "BFF_REVENUECAT_WEBHOOK_AUTH", "BFF_NH_CONNECTION_STRING",
            "BFF_WEB_AUTH_SECRET", "BFF_WEB_AUTH_SECRET_1", "BFF_WEB_AUTH_SECRET_2", "BFF_WEB_AUTH_SECRET_3",
        },
    ),
    "jobs work": (
        {"BFF_DATABASE_URL"},
        {"BFF_LLM_API_KEY", "BFF_REVENUECAT_API_KEY", "BFF_APNS_KEY_ID", "BFF_APNS_TEAM_ID", "BFF_NH_CONNECTION_STRING"},
    ),
    "migrate": ({"BFF_DATABASE_URL"}, set()),
}
SECRET_NAMES = set().union(*(required | optional for required, optional in ROLE_SECRETS.values()))
DEFAULT_SHUTDOWN_GRACE = 75
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The push route each of `bff serve` and `bff jobs work` runs, by platform: {platform: {role: {route}}}.
push_routes = {}


def note_push_route(platform, role, environment):
    if role in ("serve", "jobs work"):
        push_routes.setdefault(platform, {}).setdefault(role, set()).add(environment.get("BFF_PUSH_ROUTE") or "direct")


def role_of(arguments):
    command = " ".join(arguments or [])
    return next((role for role in ROLE_SECRETS if command == role), None)


def check_role(where, role, secret_refs):
    """secret_refs: {variable: optional?}; optional is None where the platform has no such notion."""
    required, optional = ROLE_SECRETS[role]
    for name in sorted(required - secret_refs.keys()):
        problems.append(f"{where}: `bff {role}` needs the secret {name}")
    for name, is_optional in sorted(secret_refs.items()):
        if name not in required | optional:
            problems.append(f"{where}: `bff {role}` does not read {name}; give it only its own secrets")
        elif is_optional is not None and is_optional != (name in optional):
            want = "optional: true (a feature's key, absent when the feature is off)" if name in optional else "required"
            problems.append(f"{where}: {name} must be {want}")


# --- Kubernetes ------------------------------------------------------------------------------------

def read_env_file(path):
    entries = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, separator, value = line.partition("=")
        if not separator or not ENV_NAME.match(name):
            problems.append(f"k8s/{path.name}:{number}: not a KEY=value line with a variable name")
            continue
        if name in SECRET_NAMES:
            problems.append(f"k8s/{path.name}:{number}: {name} is a secret; it belongs in bff-secrets")
        entries[name] = value
    return entries


kustomization = yaml.safe_load((k8s / "kustomization.yaml").read_text())
config_maps = {}  # name -> data
for generator in kustomization.get("configMapGenerator") or []:
    data = {}
    for env_file in generator.get("envs") or []:
        data.update(read_env_file(k8s / env_file))
    for file in generator.get("files") or []:
        key, _, source = file.rpartition("=")
        data[key or source] = (k8s / source).read_text()
    config_maps[generator["name"]] = data
if "app-config.json" in (config_maps.get("bff-app-config") or {}):
    try:
        json.loads(config_maps["bff-app-config"]["app-config.json"])
    except ValueError as error:
        problems.append(f"k8s/app-config.json does not parse: {error}")
    if not (next(g for g in kustomization["configMapGenerator"] if g["name"] == "bff-app-config").get("options") or {}).get(
        "disableNameSuffixHash"
    ):
        problems.append("k8s/kustomization.yaml: bff-app-config needs disableNameSuffixHash, or an edit renames it and rolls every pod")

documents = []
for path in sorted(k8s.glob("*.yaml")):
    if path.name == "kustomization.yaml":
        continue
    for document in yaml.safe_load_all(path.read_text()):
        if isinstance(document, dict):
            documents.append((path.name, document))
for name, document in documents:
    if document.get("kind") == "Secret":
        problems.append(f"k8s/{name}: a Secret is inlined; reference one created apart")
    if document.get("kind") == "ConfigMap":
        config_maps[document["metadata"]["name"]] = document.get("data") or {}

scaled = {d["spec"]["scaleTargetRef"]["name"]: d for _, d in documents if d.get("kind") == "HorizontalPodAutoscaler"}


def quantity(value):
    """CPU in cores."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def preStop_seconds(container):
    handler = ((container.get("lifecycle") or {}).get("preStop")) or {}
    if "sleep" in handler:
        return int(handler["sleep"]["seconds"])
    command = (handler.get("exec") or {}).get("command") or []
    if command[:1] in (["sleep"], ["/bin/sleep"]) and len(command) == 2:
        return int(command[1])
    return 0


workload_pods = {}  # Deployment name -> (labels, replicas)
for name, document in documents:
    kind = document.get("kind")
    if kind not in ("Deployment", "Job"):
        continue
    where = f"k8s/{name}"
    pod = document["spec"]["template"]["spec"]
    if kind == "Deployment":
        labels = document["spec"]["template"]["metadata"]["labels"]
        hpa = scaled.get(document["metadata"]["name"])
        if hpa and "replicas" in document["spec"]:
            problems.append(f"{where}: the HPA {hpa['metadata']['name']} scales it; `replicas` would reset its count on each apply")
        workload_pods[document["metadata"]["name"]] = (labels, hpa["spec"].get("minReplicas", 1) if hpa else document["spec"].get("replicas", 1))
    if pod.get("automountServiceAccountToken") is not False or not pod.get("serviceAccountName"):
        problems.append(f"{where}: runs as a named ServiceAccount without a mounted token")
    volumes = {volume["name"]: volume for volume in pod.get("volumes") or []}
    for container in pod["containers"]:
        cwhere = f"{where} ({container['name']})"
        role = role_of(container.get("args"))
        environment = {}
        for source in container.get("envFrom") or []:
            if "secretRef" in source:
                problems.append(f"{cwhere}: envFrom a Secret gives every key to the role; name each secret")
            reference = (source.get("configMapRef") or {}).get("name")
            if reference is not None:
                if reference not in config_maps:
                    problems.append(f"{cwhere}: envFrom names the ConfigMap {reference}, which kustomization.yaml does not make")
                else:
                    environment.update(config_maps[reference])
        secret_refs = {}
        for variable in container.get("env") or []:
            value_from = variable.get("valueFrom") or {}
            if "secretKeyRef" in value_from:
                secret_refs[variable["name"]] = bool(value_from["secretKeyRef"].get("optional", False))
            elif variable["name"] in SECRET_NAMES:
                problems.append(f"{cwhere}: {variable['name']} is not read from a Secret")
            if "value" in variable:
                environment[variable["name"]] = variable["value"]
            if variable["name"] == "BFF_EVENT_LOOPS":
                field = value_from.get("resourceFieldRef") or {}
                if field.get("resource") != "requests.cpu" or str(field.get("divisor")) != "1":
                    problems.append(f"{cwhere}: BFF_EVENT_LOOPS must come from requests.cpu with divisor 1")
        if role is None:
            problems.append(f"{cwhere}: args {container.get('args')} are none of the roles {sorted(ROLE_SECRETS)}")
        else:
            check_role(cwhere, role, secret_refs)
            note_push_route("k8s", role, environment)
            if role == "migrate" and environment:
                problems.append(f"{cwhere}: `bff migrate` reads BFF_DATABASE_URL alone; drop {sorted(environment)}")
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in (resources.get(part) or {}):
                    problems.append(f"{cwhere}: no {resource} in resources.{part}")
        if kind == "Deployment":
            if "BFF_EVENT_LOOPS" not in {v["name"] for v in container.get("env") or []}:
                problems.append(f"{cwhere}: BFF_EVENT_LOOPS is not set (from the CPU request)")
            if "cpu" in (resources.get("requests") or {}) and "cpu" in (resources.get("limits") or {}):
                if quantity(resources["limits"]["cpu"]) < quantity(resources["requests"]["cpu"]):
                    problems.append(f"{cwhere}: the CPU limit is below the request")
            grace = int(environment.get("BFF_SHUTDOWN_GRACE", DEFAULT_SHUTDOWN_GRACE))
            needed = preStop_seconds(container) + grace + 5
            if pod.get("terminationGracePeriodSeconds", 30) < needed:
                problems.append(
                    f"{cwhere}: terminationGracePeriodSeconds {pod.get('terminationGracePeriodSeconds', 30)} is below preStop "
                    f"{preStop_seconds(container)} + BFF_SHUTDOWN_GRACE {grace} + 5 = {needed}: SIGKILL would cut the drain"
                )
            if environment.get("BFF_ADMIN_HOST") != "0.0.0.0":
                problems.append(f"{cwhere}: BFF_ADMIN_HOST must be 0.0.0.0, or probes and scrapes cannot reach the admin port")
        ports = {port.get("name") for port in container.get("ports") or []}
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            port = ((container.get(probe) or {}).get("httpGet") or {}).get("port")
            if isinstance(port, str) and port not in ports:
                problems.append(f"{cwhere}: {probe} names the port {port}, which the container does not declare")
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount["name"]) or {}
            config_map = (volume.get("configMap") or {}).get("name")
            if config_map is not None and config_map not in config_maps:
                problems.append(f"{cwhere}: the volume {mount['name']} names the ConfigMap {config_map}, which nothing makes")
            if config_map == "bff-app-config" and "subPath" in mount:
                problems.append(f"{cwhere}: app-config mounted with subPath; kubelet would never update it")
            if "secret" in volume and not volume["secret"].get("optional"):
                problems.append(f"{cwhere}: the Secret volume {mount['name']} holds feature keys; make it optional")

for name, document in documents:
    if document.get("kind") != "PodDisruptionBudget":
        continue
    selector = document["spec"]["selector"]["matchLabels"]
    matched = [(workload, replicas) for workload, (labels, replicas) in workload_pods.items() if selector.items() <= labels.items()]
    if not matched:
        problems.append(f"k8s/{name}: selects no Deployment")
    for workload, replicas in matched:
        spec = document["spec"]
        if "minAvailable" in spec and not 0 < spec["minAvailable"] < replicas:
            problems.append(f"k8s/{name}: minAvailable {spec['minAvailable']} with {replicas} pods of {workload} blocks every drain or guards nothing")
        if "maxUnavailable" in spec and not 0 < spec["maxUnavailable"] < replicas:
            problems.append(f"k8s/{name}: maxUnavailable {spec['maxUnavailable']} with {replicas} pods of {workload} lets a drain take them all")

# --- Azure Container Apps --------------------------------------------------------------------------

for path in sorted((deploy / "azure").glob("*.yaml")):
    document = yaml.safe_load(path.read_text())
    configuration = document["properties"]["configuration"]
    declared = set()
    for secret in configuration.get("secrets") or []:
        declared.add(secret["name"])
        if "value" in secret or not secret.get("keyVaultUrl", "").startswith("https://") or not secret.get("identity"):
            problems.append(f"{path.name}: secret {secret['name']} is not a Key Vault reference through an identity")
    used = set()
    template = document["properties"]["template"]
    for container in template["containers"]:
        secret_refs = {}
        environment = {}
        for variable in container.get("env") or []:
            if "secretRef" in variable:
                used.add(variable["secretRef"])
                secret_refs[variable["name"]] = None
                if variable["secretRef"] not in declared:
                    problems.append(f"{path.name}: {variable['name']} names the undeclared secret {variable['secretRef']}")
            elif variable["name"] in SECRET_NAMES:
                problems.append(f"{path.name}: {variable['name']} is inlined; reference a secret")
            else:
                environment[variable["name"]] = variable.get("value")
        role = role_of(container.get("args"))
        if role is not None:
            check_role(path.name, role, secret_refs)
            note_push_route("azure", role, environment)
            if role != "migrate":
                grace = int(environment.get("BFF_SHUTDOWN_GRACE", DEFAULT_SHUTDOWN_GRACE))
                if template.get("terminationGracePeriodSeconds", 30) < grace + 5:
                    problems.append(f"{path.name}: terminationGracePeriodSeconds is below BFF_SHUTDOWN_GRACE {grace} + 5")
                if environment.get("BFF_ADMIN_HOST") != "0.0.0.0":
                    problems.append(f"{path.name}: BFF_ADMIN_HOST must be 0.0.0.0 for the probes on the admin port")
    for name in sorted(declared - used):
        problems.append(f"{path.name}: the secret {name} is declared but no container reads it")

for platform, by_role in sorted(push_routes.items()):
    routes = set().union(*by_role.values())
    if len(routes) > 1:
        problems.append(
            f"{platform}: the API and the workers run different BFF_PUSH_ROUTE ({', '.join(f'{role}: {sorted(r)}' for role, r in sorted(by_role.items()))});"
            " on the hub's route the API's token changes enqueue the installation mirrors, so both need it"
        )

# --- compose ---------------------------------------------------------------------------------------

compose = yaml.safe_load((deploy / "compose.yaml").read_text())
environment = compose.get("x-bff-env") or {}
if not isinstance(environment, dict) or not environment:
    problems.append("compose.yaml: x-bff-env is missing or empty")
for name, service in (compose.get("services") or {}).items():
    if not isinstance(service, dict) or not (service.get("image") or service.get("build")):
        problems.append(f"compose.yaml: service {name} has neither image nor build")
        continue
    role = role_of(service.get("command"))
    if role == "migrate":
        extra = set(service.get("environment") or {}) & (SECRET_NAMES - ROLE_SECRETS["migrate"][0])
        if extra:
            problems.append(f"compose.yaml: `bff migrate` is given {sorted(extra)}, which it never reads")

for problem in problems:
    print(f"manifests: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
