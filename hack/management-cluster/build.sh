#!/usr/bin/env bash
# build.sh KUSTOMIZE DIR PATCH...: kustomize build of DIR (another project's config, such as
# Cluster API's core provider in its module directory) with each PATCH (a JSON patch in YAML)
# applied to its Deployments: the settings docs/managers.md gives for a small management
# cluster, which Talon's local clusterctl repository (make release-manifests) installs.
set -euo pipefail
kustomize=$1 dir=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
	echo "resources:"
	# kustomize takes no absolute resource path.
	echo "- $(realpath --relative-to="$work" "$dir")"
	echo "patches:"
	for patch in "$@"; do
		cp "$patch" "$work/"
		printf -- '- path: %s\n  target:\n    kind: Deployment\n' "$(basename "$patch")"
	done
} >"$work/kustomization.yaml"
"$kustomize" build --load-restrictor LoadRestrictionsNone "$work"
