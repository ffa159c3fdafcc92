#!/usr/bin/env bash
# check_install.sh PYTHON REPO — the kiln package as a user gets it: `pip
# install` of a copy of REPO/python (pip builds in the folder it is given)
# into a fresh venv, then every test of test_kiln.py run by the venv's
# interpreter from another folder, with KILN_TEST_INSTALLED=1 (the package
# must come from the venv). No network: a .pth file puts PYTHON's own
# site-packages (which may be a venv's) after the venv's, bringing numpy, onnx
# and pip, and the setuptools and wheel that build the package
# (--no-build-isolation --no-index; scripts/setup.sh installs them). KILN (the
# binary under test) comes from the environment.
set -euo pipefail
py="$1" repo="$2"
tmp="$(mktemp -d /tmp/kiln-pyinstall.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH
"$py" -m venv --without-pip "$tmp/venv"
venv_py="$tmp/venv/bin/python"
site="$("$venv_py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
"$py" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' >"$site/base.pth"
"$venv_py" -c 'import setuptools, wheel' || {
  echo "check_install.sh: $py lacks setuptools or wheel (run scripts/setup.sh)" >&2
  exit 1
}
cp -r "$repo/python" "$tmp/src"
"$venv_py" -m pip install --quiet --no-index --no-deps --no-build-isolation \
  --disable-pip-version-check --root-user-action=ignore "$tmp/src"
cd "$tmp"
KILN_TEST_INSTALLED=1 "$venv_py" "$repo/tests/python/test_kiln.py"
