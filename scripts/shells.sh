#!/usr/bin/env bash
# The shells the completion tests (tests/completions.rs) run: bash, zsh and fish. Installs the
# missing ones from Debian's packages with apt-get (as root, or through sudo), one install at
# a time, unless PT_SHELLS_INSTALL=0; prints nothing on success.
#
#   scripts/shells.sh            # exit 0 when bash, zsh and fish are all there afterwards
#
# On failure it says why on stderr (the tests then skip, printing it).
set -eu
missing=()
for sh in bash zsh fish; do
  command -v "$sh" > /dev/null 2>&1 || missing+=("$sh")
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "${PT_SHELLS_INSTALL:-1}" = 1 ] || { echo "shells.sh: ${missing[*]} not installed" >&2; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo > /dev/null 2>&1 && sudo -n true 2> /dev/null; then
    sudo="sudo -n"
  else
    echo "shells.sh: ${missing[*]} not installed, and installing needs root" >&2
    exit 1
  fi
fi
command -v apt-get > /dev/null 2>&1 || { echo "shells.sh: ${missing[*]} not installed (no apt-get)" >&2; exit 1; }
log="${TMPDIR:-/tmp}/pt-shells-apt.log"
# Several tests may ask at once: one install, the others wait for it.
if ! flock "${TMPDIR:-/tmp}/pt-shells-apt.lock" $sudo env DEBIAN_FRONTEND=noninteractive sh -c \
  "apt-get install -y -q ${missing[*]} || { apt-get update -q && apt-get install -y -q ${missing[*]}; }" \
  > "$log" 2>&1; then
  echo "shells.sh: apt-get install ${missing[*]} failed (see $log)" >&2
  exit 1
fi
for sh in "${missing[@]}"; do
  command -v "$sh" > /dev/null 2>&1 || { echo "shells.sh: $sh still missing (see $log)" >&2; exit 1; }
done
