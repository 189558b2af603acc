#!/usr/bin/env bash
# Builds cri-dockerd, the CRI for Docker Engine that the kubelet of Talon's real management
# cluster runs Pods through, into $1.
#
# cri-dockerd pins its own k8s.io modules (v0.29) with replace directives, which apply only
# in the main module, so it is built as one: a copy of its module directory, with one change.
# cri-dockerd asks Docker for an oom_score_adj of -998 for every Pod sandbox (and the kubelet
# -997 for Guaranteed containers); without CAP_SYS_RESOURCE (as in this project's CI sandbox)
# runc cannot set a negative score and no Pod starts. The change clamps the score to
# cri-dockerd's own, as containerd's restrict_oom_score_adj does.
set -euo pipefail
version=v0.4.3 # v0.4.1 and v0.4.2 are not served by the module proxy
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
src=$(go mod download -json "github.com/Mirantis/cri-dockerd@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work" && chmod -R u+w "$work"
cp "$here/oom_score_adj.go.in" "$work/core/talon_oom_score_adj.go"
# replace FILE OLD NEW: replaces the one line that is exactly OLD (after indentation).
replace() {
  local n
  n=$(grep -c -x "[[:space:]]*$2" "$work/$1" || true)
  [ "$n" = 1 ] || { echo "cri-dockerd $version: expected one line '$2' in $1, found $n" >&2; exit 1; }
  sed -i "s|^\([[:space:]]*\)$2\$|\1$3|" "$work/$1"
}
replace core/sandbox_helpers.go 'hc.OomScoreAdj = defaultSandboxOOMAdj' 'hc.OomScoreAdj = talonOOMScoreAdj(defaultSandboxOOMAdj)'
replace core/helpers_linux.go 'createConfig.HostConfig.OomScoreAdj = int(rOpts.OomScoreAdj)' 'createConfig.HostConfig.OomScoreAdj = talonOOMScoreAdj(int(rOpts.OomScoreAdj))'
cd "$work"
CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/Mirantis/cri-dockerd/cmd/version.Version=${version#v}" -o "$out" .
