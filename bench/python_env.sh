# Sourced by the bench scripts: pick_python VENV MODULES PACKAGES... prints a Python that can import
# MODULES (a comma-separated import list, e.g. "numpy, sklearn"): $PYTHON if set, else Debian's
# /usr/bin/python3, else the python3 on PATH; if none can, `pip install --user` PACKAGES into the
# first that accepts it. Debian 12's own Python refuses that (PEP 668, "externally managed"): the
# last resort is a virtual environment in VENV, which touches nothing outside the checkout.
pick_python() {
    local venv="$1" modules="$2"
    shift 2
    local packages=("$@") candidates=() py
    has_libs() { "$1" -c "import $modules" >/dev/null 2>&1; }
    [ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
    candidates+=(/usr/bin/python3 python3)
    for py in "${candidates[@]}" "$venv/bin/python"; do
        command -v "$py" >/dev/null 2>&1 && has_libs "$py" && { echo "$py"; return; }
    done
    for py in "${candidates[@]}"; do
        command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1 || continue
        printf '==> installing %s for %s (pip install --user)\n' "${packages[*]}" "$py" >&2
        if "$py" -m pip install --user --quiet "${packages[@]}" >&2 && has_libs "$py"; then
            echo "$py"
            return
        fi
        printf '==> pip install --user did not work for %s\n' "$py" >&2
    done
    for py in "${candidates[@]}"; do
        command -v "$py" >/dev/null 2>&1 || continue
        printf '==> installing %s into a virtual environment, %s\n' "${packages[*]}" "$venv" >&2
        if "$py" -m venv "$venv" >&2 && "$venv/bin/python" -m pip install --quiet "${packages[@]}" >&2 \
            && has_libs "$venv/bin/python"; then
            echo "$venv/bin/python"
            return
        fi
        rm -rf "$venv"
    done
    echo "no Python 3 could get ${packages[*]} (on Debian: apt-get install python3-venv); or set PYTHON=/path/to/python3 with them" >&2
    exit 1
}
