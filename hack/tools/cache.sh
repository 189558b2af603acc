#!/usr/bin/env bash
# cache.sh OUT FILE... -- COMMAND...
#
# Puts the tool binary OUT (a path under bin/) in place from a cache keyed by content, so that
# a fresh clone, or a checkout whose go.mod files merely have new dates, reuses the tools a
# previous build made instead of linking them again. The key is the SHA-256 of the FILEs (a
# tool module's go.mod and go.sum, or a build script), the Go version, CGO_ENABLED, GOFLAGS
# and the COMMAND itself (its flags and the versions it stamps in). On a miss COMMAND runs
# with every {} in it replaced by a temporary path it must write the binary to; the binary is
# then kept as $TALON_TOOLS_CACHE/<name>-<key> (default ~/.cache/talon/tools) and linked (or
# copied) to OUT. Entries of the same name with another key are removed, so the cache holds
# one build of each tool. Safe under make -j: each build writes its own temporary file and
# moves it into place.
set -euo pipefail

out=$1
shift
files=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	files+=("$1")
	shift
done
[ $# -gt 1 ] || {
	echo "usage: $0 OUT FILE... -- COMMAND..." >&2
	exit 2
}
shift

cache=${TALON_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/tools}
name=$(basename "$out")
# A tool of a second Kubernetes minor keeps its directory in its name (v1.37/kube-apiserver).
case "$(basename "$(dirname "$out")")" in
v[0-9]*.[0-9]*) name="$(basename "$(dirname "$out")")-$name" ;;
esac
key=$({
	cat "${files[@]}"
	go env GOVERSION
	echo "CGO_ENABLED=${CGO_ENABLED:-} GOFLAGS=${GOFLAGS:-}"
	printf '%s\n' "$@"
} | sha256sum | cut -c1-16)
entry=$cache/$name-$key

if [ ! -x "$entry" ]; then
	mkdir -p "$cache"
	tmp=$(mktemp "$cache/.$name.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	cmd=()
	for arg in "$@"; do cmd+=("${arg//\{\}/$tmp}"); done
	echo "Building $name (no cached build of key $key)"
	"${cmd[@]}"
	chmod +x "$tmp"
	mv -f "$tmp" "$entry"
	trap - EXIT
	find "$cache" -maxdepth 1 -name "$name-*" ! -name "$name-$key" -delete
fi
mkdir -p "$(dirname "$out")"
rm -f "$out"
ln "$entry" "$out" 2>/dev/null || cp "$entry" "$out"
touch "$out"
