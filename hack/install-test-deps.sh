#!/usr/bin/env bash
# Copyright 2026 The Talon Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# Installs the Debian packages the bare-metal tests need (QEMU, iPXE, OVMF, iproute2, and dnsmasq as
# the site's DHCP server beside Talon's proxy) and the dashboard's test drives (headless Chromium),
# only those that are missing. Idempotent: exits 0 without touching apt when all are present.
# Runs `apt-get update` only when an install fails for lack of package lists.

set -o errexit -o nounset -o pipefail

# package:file that shows the package is installed
deps=(
  "iproute2:/usr/bin/ip"
  "qemu-system-x86:/usr/bin/qemu-system-x86_64"
  "ipxe-qemu:/usr/lib/ipxe/qemu/efi-e1000.rom"
  "ipxe:/usr/lib/ipxe/undionly.kpxe"
  "ovmf:/usr/share/OVMF/OVMF_CODE_4M.fd"
  "dnsmasq-base:/usr/sbin/dnsmasq"
  "chromium:/usr/bin/chromium"
)

missing=()
for dep in "${deps[@]}"; do
  pkg="${dep%%:*}"
  file="${dep#*:}"
  if [[ ! -e "${file}" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "Test dependencies already installed."
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "Missing packages ${missing[*]}, and apt-get is not available: install them by hand." >&2
  exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi

echo "Installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  echo "Install failed; updating package lists and trying again"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
