# shellcheck shell=bash
# Shared helpers for scripts/dev and scripts/test (and scripts/lib/pg-cluster).
# Source it; it defines variables and functions and has no other side effect
# until a function is called.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="$ROOT/.local"              # gitignored: clusters, venv, logs, pid files
PG_CLUSTER="$ROOT/scripts/lib/pg-cluster"
VENV="$LOCAL/venv"
# The hand-written Swift that follows .swift-format (Sources/BFFAPI is generated).
SWIFT_FORMAT_PATHS=("$ROOT/Package.swift" "$ROOT/Sources/BFF" "$ROOT/Sources/BFFWire" "$ROOT/Sources/EventLoopExecutor"
  "$ROOT/Sources/bff" "$ROOT/Tests" "$ROOT/Tools/bff-bench")
PIDS_DIR="$LOCAL/pids"

# Python tools used by the scripts, pinned. Changing this list re-runs pip.
# oidc-provider-mock 0.4.8 needs Python >= 3.12 (see pick_python).
VENV_REQUIREMENTS=(
  "oidc-provider-mock==0.4.8"
  "schemathesis==4.32.5"
  "openapi-spec-validator==0.9.0"
  "kubernetes-validate==1.37.0"
  "swagger-ui-bundle==1.1.0"
  "check-jsonschema==0.39.0"
  "zizmor==1.32.0"
)
# Used only where no Python >= 3.12 exists (Debian 12 ships 3.11): the last
# release of the mock that runs on 3.11. It differs from 0.4.8 mainly in
# accepting only client_secret_basic at the token endpoint.
OIDC_MOCK_PY311_PIN="oidc-provider-mock==0.3.4"

# The toolchain lives in /opt/swift on the project's machines; CI's environment
# may not have it on PATH.
if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
  PATH="/opt/swift/usr/bin:$PATH"
fi
PATH="$PATH:/usr/sbin:/sbin"      # runuser, useradd

log()  { printf '==> %s\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [[ "$(id -u)" == 0 ]]; }

# Runs a command as root: directly, or through sudo. Fails when neither works.
as_root() {
  if is_root; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    return 1
  fi
}

can_be_root() { is_root || command -v sudo >/dev/null 2>&1; }

# Installs Debian packages without starting any service they ship (the
# postgresql package would otherwise start the system cluster).
apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  can_be_root || return 1
  local policy=/usr/sbin/policy-rc.d
  if [[ ! -e "$policy" ]]; then
    as_root sh -c "printf '#!/bin/sh\nexit 101\n' > '$policy' && chmod 755 '$policy'"
    # Left behind, it would keep every service from starting through apt: cleanup removes it too
    # when the script is stopped meanwhile.
    APT_POLICY_ADDED="$policy"
  fi
  local rc=0
  as_root apt-get update -qq || rc=$?
  if [[ "$rc" == 0 ]]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" || rc=$?
  fi
  remove_apt_policy
  return "$rc"
}

APT_POLICY_ADDED=""
remove_apt_policy() {
  [[ -n "$APT_POLICY_ADDED" ]] || return 0
  as_root rm -f "$APT_POLICY_ADDED"
  APT_POLICY_ADDED=""
}

# --- PostgreSQL ---------------------------------------------------------------

# Prints the newest PostgreSQL server bin directory (PG_BINDIR overrides).
pg_bindir() {
  if [[ -n "${PG_BINDIR:-}" ]]; then
    [[ -x "$PG_BINDIR/initdb" ]] || return 1
    printf '%s\n' "$PG_BINDIR"
    return 0
  fi
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$found" ]] || return 1
  dirname "$found"
}

ensure_postgres() {
  if pg_bindir >/dev/null; then
    return 0
  fi
  log "PostgreSQL server binaries not found; installing Debian's postgresql package"
  if ! apt_install postgresql; then
    die "PostgreSQL server binaries not found (looked for /usr/lib/postgresql/*/bin/initdb).
Install PostgreSQL 15 or newer, e.g. on Debian/Ubuntu as root:
    apt-get update && apt-get install -y postgresql
or set PG_BINDIR to a directory holding initdb, pg_ctl, postgres and psql."
  fi
  pg_bindir >/dev/null || die "postgresql installed, but no /usr/lib/postgresql/*/bin/initdb found"
}

# psql DIR PORT [psql args...]: psql as the cluster superuser over the socket.
cluster_psql() {
  local dir="$1" port="$2"
  shift 2
  PGOPTIONS="-c client_min_messages=warning" "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/run" -p "$port" -U bff "$@"
}

# --- Python tools ---------------------------------------------------------------

# Prints the interpreter for the venv: $PYTHON, else the newest Python >= 3.12
# found on PATH or in pyenv's versions, else python3.
pick_python() {
  local cand
  local -a cands=()
  [[ -n "${PYTHON:-}" ]] && { printf '%s\n' "$PYTHON"; return 0; }
  cands+=(python3.14 python3.13 python3.12)
  # pyenv's shims answer "command not found" for versions not selected, so
  # look at the installs themselves.
  while IFS= read -r cand; do
    cands+=("$cand")
  done < <(ls -d "${PYENV_ROOT:-${HOME:-/root}/.pyenv}"/versions/3.*/bin/python3 2>/dev/null | sort -rV)
  for cand in "${cands[@]}"; do
    if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then
      printf '%s\n' "$cand"
      return 0
    fi
  done
  printf '%s\n' python3
}

ensure_venv() {
  local python stamp="$VENV/.requirements.sha256" want
  local -a reqs=("${VENV_REQUIREMENTS[@]}")
  python="$(pick_python)"
  if ! command -v "$python" >/dev/null 2>&1 && [[ -z "${PYTHON:-}" ]]; then
    # The Swift toolchain's Debian images come without Python.
    log "python3 not found; installing Debian's python3 and python3-venv"
    apt_install python3 python3-venv || true
  fi
  command -v "$python" >/dev/null 2>&1 || die "$python not found: install it (apt-get install -y python3 python3-venv)"
  if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
    "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null \
      || die "Python >= 3.11 is needed (3.12+ preferred); set PYTHON=/path/to/python3.12"
    warn "no Python >= 3.12 found (set PYTHON=...): using $("$python" -V 2>&1) with $OIDC_MOCK_PY311_PIN"
    reqs[0]="$OIDC_MOCK_PY311_PIN"
  fi
  want="$( { printf '%s\n' "${reqs[@]}"; "$python" -c 'import sys; print("python", *sys.version_info[:2])'; } | sha256sum | cut -d' ' -f1)"
  if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c '' 2>/dev/null \
     && [[ "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
    return 0
  fi
  # A venv whose interpreter is gone, or of another version than the chosen
  # one, is rebuilt.
  if [[ -e "$VENV" ]] && ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
  fi
  if [[ -x "$VENV/bin/python" ]] \
     && [[ "$("$VENV/bin/python" -c 'import sys; print(sys.version_info[:2])')" != "$("$python" -c 'import sys; print(sys.version_info[:2])')" ]]; then
    rm -rf "$VENV"
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating the Python virtualenv at $VENV ($("$python" -V 2>&1))"
    mkdir -p "$LOCAL"
    if ! "$python" -m venv "$VENV" >/dev/null 2>&1; then
      rm -rf "$VENV"
      # Debian ships venv/ensurepip separately.
      apt_install python3-venv || die "'$python -m venv' failed: install python3-venv (apt-get install -y python3-venv)"
      "$python" -m venv "$VENV" || die "could not create $VENV"
    fi
  fi
  log "installing ${reqs[*]} into $VENV"
  printf '%s\n' "${reqs[@]}" > "$VENV/requirements.txt"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$VENV/requirements.txt" \
    || die "pip install failed (see above)"
  printf '%s\n' "$want" > "$stamp"
}

# --- processes, ports, HTTP -------------------------------------------------------

# Pids of processes listening on TCP PORT (any address), from /proc (no ss/lsof needed).
listen_pids() {
  local port="$1" hex inode
  hex="$(printf '%04X' "$port")"
  for inode in $(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
                   /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
    find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\\[$inode\\]" 2>/dev/null | cut -d/ -f3
  done | sort -u
}

# Command lines that mark a process as started by these scripts from this
# checkout; scripts may add more (scripts/test adds $BFF_BIN).
OWN_PATTERNS=("$LOCAL/" "$ROOT/.build/")

is_ours() {
  local cmd pattern
  cmd="$(cmdline_of "$1")"
  for pattern in "${OWN_PATTERNS[@]}"; do
    [[ "$cmd" == *"$pattern"* ]] && return 0
  done
  return 1
}

cmdline_of() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null || true; }

# True while PID runs (a zombie counts as gone: nobody may ever reap it).
alive() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
  [[ -n "$state" && "$state" != Z ]]
}

# Sends TERM, waits up to 10 s, then KILL. Reaps the pid when it is our child. CONT follows TERM:
# a process paused with STOP (scripts/bench pauses its server) handles TERM only once it runs again.
stop_pid() {
  local pid="$1" i
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# Frees PORT from our own stale processes (anything run from this checkout's
# .local or .build); fails when another program holds it.
free_port() {
  local port="$1" pid cmd
  for pid in $(listen_pids "$port"); do
    cmd="$(cmdline_of "$pid")"
    if is_ours "$pid"; then
      log "stopping stale process $pid on port $port: $cmd"
      stop_pid "$pid"
    else
      die "port $port is in use by pid $pid ($cmd)"
    fi
  done
}

# Stops the process recorded in pid file NAME if it still runs our program.
stop_stale_pidfile() {
  local file="$PIDS_DIR/$1.pid" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file" 2>/dev/null || true)"
  if [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid"; then
    if is_ours "$pid"; then
      log "stopping stale $1 (pid $pid)"
      stop_pid "$pid"
    fi
  fi
  rm -f "$file"
}

# Refuses to run two copies of the same script on this checkout (they would
# share ports and clusters). The guard is a pid file, checked against /proc.
single_instance() {
  local name="$1" file="$PIDS_DIR/$1.pid" pid
  mkdir -p "$PIDS_DIR"
  pid="$(cat "$file" 2>/dev/null || true)"
  if [[ "$pid" =~ ^[0-9]+$ && "$pid" != "$$" ]] && alive "$pid" \
     && [[ "$(cmdline_of "$pid")" == *"scripts/$name"* ]]; then
    die "scripts/$name is already running (pid $pid)"
  fi
  echo "$$" > "$file"
  CLEANUP_FILES+=("$file")
}

# wait_http URL TIMEOUT_SECONDS [PID]: waits for a 2xx answer; gives up early
# when PID (the server being waited for) exits.
wait_http() {
  local url="$1" timeout="$2" pid="${3:-}" deadline
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    if [[ -n "$pid" ]] && ! alive "$pid"; then
      warn "process $pid exited while waiting for $url"
      return 1
    fi
    if http_ok "$url"; then
      return 0
    fi
    sleep 0.2
  done
  warn "no 2xx answer from $url within ${timeout}s"
  return 1
}

http_ok() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
  else
    python3 - "$1" <<'EOF' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if 200 <= r.status < 300 else 1)
EOF
  fi
}

# ensure_commands CMD:PACKAGE...: installs the Debian package of each command not on PATH.
ensure_commands() {
  local pair missing=()
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  ((${#missing[@]})) || return 0
  log "installing Debian's ${missing[*]}"
  apt_install "${missing[@]}" || die "could not install ${missing[*]}: apt-get install -y ${missing[*]}"
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || die "${pair#*:} installed, but ${pair%%:*} is not on PATH"
  done
}

random_base64url() {
  head -c "${1:-32}" /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '='
}

# start_push_stand_in BIN DIR APNS_PORT FCM_PORT LATENCY_MS [NH_PORT]: local APNs, FCM and
# Notification Hubs servers (push-stand-in) in the background, with a certificate for localhost made
# here; NH_PORT 0 or absent: a free port. They check what they receive as the real services do, but
# no push reaches a phone. Accepted pushes (and the hub's accepted sends) are logged to
# DIR/deliveries.log, refusals and each service's HTTP/2 streams per connection to DIR/stand-in.log;
# DIR/push.env holds the BFF_* lines that point a server at APNs and FCM, DIR/nh.env those that
# select the Notification Hubs route against the local hub instead. PUSH_STAND_IN_PID is the
# process's id.
PUSH_STAND_IN_PID=""
start_push_stand_in() {
  local bin="$1" dir="$2" apns_port="$3" fcm_port="$4" latency="$5" nh_port="${6:-0}" pid waited=0
  [[ -x "$bin" ]] || die "$bin not found"
  ensure_commands openssl:openssl
  mkdir -p "$dir"
  rm -f "$dir/push.env" "$dir/nh.env"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -addext basicConstraints=critical,CA:TRUE \
    -keyout "$dir/tls.key" -out "$dir/tls.crt" >/dev/null 2>&1 || die "openssl could not make the push stand-ins' certificate"
  free_port "$apns_port"
  free_port "$fcm_port"
  ((nh_port == 0)) || free_port "$nh_port"
  "$bin" --dir "$dir" --cert "$dir/tls.crt" --key "$dir/tls.key" --apns-port "$apns_port" --fcm-port "$fcm_port" \
    --nh-port "$nh_port" --latency-ms "$latency" >>"$dir/deliveries.log" 2>>"$dir/stand-in.log" &
  pid=$!
  PUSH_STAND_IN_PID=$pid
  CLEANUP_PIDS+=("$pid")
  until [[ -s "$dir/push.env" ]]; do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$dir/stand-in.log" >&2; die "push-stand-in exited"; }
    ((waited++ < 300)) || die "push-stand-in did not start within 30 s"
    sleep 0.1
  done
}

# start_stand_in BIN PORT LOG READY [ARG...]: a stand-in program on 127.0.0.1:PORT in the
# background, its output in LOG, waited for until LOG shows READY (each prints its URL once it
# listens).
start_stand_in() {
  local bin="$1" port="$2" log_file="$3" ready="$4" name pid waited=0
  name="$(basename "$bin")"
  [[ -x "$bin" ]] || die "$bin not found"
  free_port "$port"
  : >"$log_file"
  "$bin" --port "$port" "${@:5}" >>"$log_file" 2>&1 &
  pid=$!
  CLEANUP_PIDS+=("$pid")
  until grep -q -- "$ready" "$log_file"; do
    alive "$pid" || { tail -n 20 "$log_file" >&2; die "$name exited"; }
    ((waited++ < 300)) || die "$name did not start within 30 s"
    sleep 0.1
  done
}

# start_llm_stand_in BIN PORT LOG: a local OpenAI-compatible Chat Completions server
# (llm-stand-in): it checks requests as the real APIs do and streams the same curious question to
# every turn, without a model. Point a server at it with BFF_LLM_BASE_URL=http://127.0.0.1:PORT/v1,
# BFF_LLM_API_KEY=local-llm-key, BFF_LLM_MODEL=local-tutor.
start_llm_stand_in() { start_stand_in "$1" "$2" "$3" "/v1/chat/completions"; }

# start_revenuecat_stand_in BIN PORT LOG [ARG...]: RevenueCat's REST API v1 (revenuecat-stand-in):
# it checks requests as RevenueCat does, accepts any receipt and grants a month of the product it
# names. Point a server at it with BFF_REVENUECAT_BASE_URL=http://127.0.0.1:PORT/v1 and
# BFF_REVENUECAT_API_KEY=sk_local_revenuecat.
start_revenuecat_stand_in() { start_stand_in "$1" "$2" "$3" "/v1 (key" "${@:4}"; }

# start_oidc_mock PORT: oidc-provider-mock on 127.0.0.1:PORT in the background.
# The authorize page shows a form (pick a subject, press Authorize) and no
# other interaction; any client id and redirect URI are accepted.
start_oidc_mock() {
  local port="$1" logf="$LOCAL/oidc.log" pid
  stop_stale_pidfile "oidc-$port"
  free_port "$port"
  mkdir -p "$PIDS_DIR"
  log "starting oidc-provider-mock on http://127.0.0.1:$port (log: $logf)"
  "$VENV/bin/oidc-provider-mock" --host 127.0.0.1 --port "$port" >>"$logf" 2>&1 &
  pid=$!
  echo "$pid" > "$PIDS_DIR/oidc-$port.pid"
  CLEANUP_PIDS+=("$pid")
  CLEANUP_FILES+=("$PIDS_DIR/oidc-$port.pid")
  wait_http "http://127.0.0.1:$port/.well-known/openid-configuration" 30 "$pid" \
    || { tail -n 20 "$logf" >&2; die "oidc-provider-mock did not start"; }
}

# --- cleanup --------------------------------------------------------------------

CLEANUP_PIDS=()            # processes to stop, newest last
CLEANUP_FILES=()           # pid files to remove
CLEANUP_CLUSTER_STOP=()    # "DIR PORT" pairs to stop
CLEANUP_CLUSTER_DESTROY=() # "DIR PORT" pairs to destroy

cleanup() {
  local rc=$? i entry
  trap - EXIT INT TERM
  set +e
  for ((i = ${#CLEANUP_PIDS[@]} - 1; i >= 0; i--)); do
    stop_pid "${CLEANUP_PIDS[$i]}"
  done
  for entry in "${CLEANUP_CLUSTER_STOP[@]}"; do
    "$PG_CLUSTER" stop "${entry% *}" "${entry##* }" || warn "could not stop the cluster in ${entry% *}"
  done
  for entry in "${CLEANUP_CLUSTER_DESTROY[@]}"; do
    "$PG_CLUSTER" destroy "${entry% *}" "${entry##* }" || warn "could not destroy the cluster in ${entry% *}"
  done
  rm -f "${CLEANUP_FILES[@]}"
  remove_apt_policy
  exit "$rc"
}

# Installs the trap; call once from the script that sources this file.
install_cleanup_trap() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
