# Sourced by scripts/dev and scripts/test: make .venv (Python >= 3.11) with the project, its
# extras and the repository's `test` dependency group installed (INSTALL below), reinstalling
# only when pyproject.toml changes.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
# The extras the suite uses, and the repository's own (unpublished) dependency group.
EXTRAS="embedded,metrics,oauth,otel,postgres,testing,uvicorn"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }

# pyenv (when present) only exposes python3.X shims of the versions it is told about: make the
# interpreters of the test matrix findable for nox.
if command -v pyenv > /dev/null 2>&1 && [[ -z "${PYENV_VERSION:-}" ]]; then
  versions=()
  for minor in 3.11 3.12 3.13; do
    v="$(pyenv versions --bare 2> /dev/null | grep -E "^${minor//./\\.}\.[0-9]+$" | sort -V | tail -n 1 || true)"
    [[ -n "$v" ]] && versions+=("$v")
  done
  if ((${#versions[@]})); then
    PYENV_VERSION="$(IFS=:; echo "${versions[*]}")"
    export PYENV_VERSION
  fi
fi

find_python() {
  local candidate
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" > /dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2> /dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

bootstrap_venv() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    local python
    python="$(find_python)" || { log "Python >= 3.11 is needed"; exit 1; }
    log "creating $VENV with $python"
    "$python" -m venv "$VENV"
  fi
  local stamp
  stamp="$VENV/.installed-$(sha256sum < "$ROOT/pyproject.toml" | cut -c1-16)"
  if [[ ! -f "$stamp" ]]; then
    # uv (also in the test extra) installs in seconds what pip takes a minute or two for.
    log "installing the project into $VENV (uv pip install -e '.[$EXTRAS]' --group test)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check uv
    "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" -e "$ROOT[$EXTRAS]" --group "$ROOT/pyproject.toml:test"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
  fi
}
