#!/usr/bin/env bash
# Debian packages the test suite needs (beyond Python 3.11+ and Java 17). Idempotent: installs only
# what is missing, and only when run as root (CI); otherwise it says what to install.
set -euo pipefail
# command-or-path:package pairs
needed=(
  "/usr/bin/chromium:chromium"
  "/usr/lib/postgresql:postgresql"
)
missing=()
for pair in "${needed[@]}"; do
  probe=${pair%%:*}; package=${pair##*:}
  if [ ! -e "$probe" ] && ! command -v "$probe" >/dev/null 2>&1; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "Missing Debian packages: ${missing[*]}. Install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
