# Shared by scripts/demo and scripts/test (sourced, not run): one line per step on stderr, pip's own progress
# on a terminal and its plain lines elsewhere, so no step is ever a silent minute.
PY=${PYTHON:-python3}

step() { printf '==> %s\n' "$*" >&2; }

# pip's progress bar on a terminal; elsewhere (CI logs) its plain lines, without the bar's control characters.
if [ -t 2 ]; then PIP_PROGRESS=(); else PIP_PROGRESS=(--progress-bar off); fi

# install_det_k8s EXTRAS: det-k8s from this checkout into .venv (editable), with EXTRAS ("" or "[test]").
# Skipped when pyproject.toml and the extras are what the last install used: code changes need no reinstall.
install_det_k8s() {
  local extras="$1"
  if [ ! -x .venv/bin/python ]; then
    step "creating .venv ($PY -m venv .venv)"
    "$PY" -m venv .venv
  fi
  local stamp=".venv/.det-k8s-installed${extras//[^a-z]/-}" want
  want="$(.venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest(), sys.version_info[:2])')"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    step "det-k8s${extras} is installed in .venv (pyproject.toml unchanged since)"
    return
  fi
  step "installing det-k8s${extras} into .venv with pip (a few minutes the first time)"
  .venv/bin/python -m pip install --disable-pip-version-check "${PIP_PROGRESS[@]}" -e ".${extras}"
  printf '%s\n' "$want" > "$stamp"
}

fetch_tools() {
  step "fetching helm 3 and 4 and kubectl into .tools/ (scripts/fetch_tools.py)"
  .venv/bin/python scripts/fetch_tools.py
}
