# Shared by scripts/demo and scripts/test (sourced, not run): one line per step on stderr, pip's own progress
# on a terminal and its plain lines elsewhere, so no step is ever a silent minute.
PY=${PYTHON:-python3}

step() { printf '==> %s\n' "$*" >&2; }

# pip's progress bar on a terminal; elsewhere (CI logs) its plain lines, without the bar's control characters.
if [ -t 2 ]; then PIP_PROGRESS=(); else PIP_PROGRESS=(--progress-bar off); fi

# install_det_k8s EXTRAS [VENV]: det-k8s from this checkout into VENV (default .venv, editable), with EXTRAS ("" or
# "[test]"), every dependency at the version constraints.txt pins (DET_K8S_CONSTRAINTS=none: the newest allowed).
# Skipped when pyproject.toml, constraints.txt and the extras are what the last install used.
install_det_k8s() {
  local extras="$1" venv="${2:-.venv}" constraints=(-c constraints.txt)
  [ "${DET_K8S_CONSTRAINTS:-}" = none ] && constraints=()
  if [ ! -x "$venv/bin/python" ]; then
    step "creating $venv ($PY -m venv $venv)"
    "$PY" -m venv "$venv"
  fi
  local stamp="$venv/.det-k8s-installed${extras//[^a-z]/-}" want
  want="$("$venv/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read() + open("constraints.txt", "rb").read()).hexdigest(), sys.version_info[:2])') ${constraints[*]:-newest}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    step "det-k8s${extras} is installed in $venv (pyproject.toml and constraints.txt unchanged since)"
    return
  fi
  step "installing det-k8s${extras} into $venv with pip (${constraints[*]:+the versions constraints.txt pins; }a few minutes the first time)"
  # pip is silent while it resolves and builds; a line every 20 s says it is still at work.
  ( while sleep 20; do step "  pip is still installing ($SECONDS s)"; done ) &
  local beat=$!
  "$venv/bin/python" -m pip install --disable-pip-version-check "${PIP_PROGRESS[@]}" "${constraints[@]}" -e ".${extras}" \
    || { kill "$beat" 2>/dev/null; return 1; }
  kill "$beat" 2>/dev/null || true
  printf '%s\n' "$want" > "$stamp"
}

fetch_tools() {
  step "fetching helm 3 and 4 and kubectl into .tools/ (scripts/fetch_tools.py)"
  .venv/bin/python scripts/fetch_tools.py
}
