#!/usr/bin/env bash
# build.sh OUTDIR — builds cert-manager v1.19.1 for Talon's hermetic tests, from
# the Go module proxy only:
#   OUTDIR/cert-manager-{controller,webhook,cainjector}   static binaries
#   OUTDIR/cert-manager.yaml                              static install manifest
#   OUTDIR/cert-manager/v1.19.1/cert-manager.yaml         same, in clusterctl's file:// layout
#   docker images quay.io/jetstack/cert-manager-{controller,webhook,cainjector}:v1.19.1
#     (FROM scratch; skipped with CERT_MANAGER_SKIP_IMAGES=1 or when docker is absent)
#
# The cert-manager module zip has no cmd/ (those are separate modules the proxy
# does not serve), so the module is copied to a work dir, Talon's own mains from
# _src/ are dropped in under talon/ (they use the module's internal packages),
# and they are built with the module's own go.mod/go.sum.
#
# Environment:
#   HELM                      helm binary (default: OUTDIR/helm, built from hack/tools/helm if missing)
#   CERT_MANAGER_WORKDIR      work dir (default: OUTDIR/.cert-manager-build)
#   CERT_MANAGER_SKIP_IMAGES  set to 1 to skip docker builds
set -euo pipefail

VERSION=v1.19.1
MODULE=github.com/cert-manager/cert-manager
GIT_COMMIT=a22e21ea38f6a8e031af99471b0a50287fed8e7f # refs/tags/v1.19.1, from the proxy's .info Origin
REGISTRY=quay.io/jetstack
COMPONENTS=(controller webhook cainjector)

[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
WORK=${CERT_MANAGER_WORKDIR:-$OUT/.cert-manager-build}
SRC=$WORK/src
mkdir -p "$WORK"

log() { echo "cert-manager: $*" >&2; }

# 1. Module source. go mod download verifies it against sum.golang.org's go.sum
#    line; the copy is made writable and refreshed only when the version changes.
if [ "$(cat "$WORK/.module" 2>/dev/null || true)" != "$MODULE@$VERSION" ] || [ ! -f "$SRC/go.mod" ]; then
  moddir=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$moddir" ] && [ -f "$moddir/go.mod" ] || { echo "cannot download $MODULE@$VERSION" >&2; exit 1; }
  log "copying $moddir"
  rm -rf "$SRC"
  cp -r "$moddir" "$SRC"
  chmod -R u+w "$SRC"
  echo "$MODULE@$VERSION" > "$WORK/.module"
fi

# 2. Talon's mains, inside the module so internal/ imports are allowed.
rm -rf "$SRC/talon"
cp -r "$HERE/_src" "$SRC/talon"

# 3. Binaries. Skip when the sources, version and toolchain are unchanged.
stamp=$( { echo "$VERSION $(go env GOVERSION)"; cat "$HERE/build.sh"; find "$HERE/_src" -type f -name '*.go' | sort | xargs cat; } | sha256sum | cut -d' ' -f1)
have_bins=1
for c in "${COMPONENTS[@]}"; do [ -x "$OUT/cert-manager-$c" ] || have_bins=0; done
if [ "$have_bins" = 1 ] && [ "$(cat "$WORK/.stamp" 2>/dev/null || true)" = "$stamp" ]; then
  log "binaries up to date"
else
  ldflags="-s -w -X $MODULE/pkg/util.AppVersion=$VERSION -X $MODULE/pkg/util.AppGitCommit=$GIT_COMMIT"
  for c in "${COMPONENTS[@]}"; do
    log "building cert-manager-$c"
    (cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$OUT/cert-manager-$c" "./talon/$c")
  done
  echo "$stamp" > "$WORK/.stamp"
fi

# 4. Static manifest, rendered like upstream's make/manifests.mk does for the
#    release's cert-manager.yaml: the namespace, then `helm template` of the
#    chart with CRDs, creator=static and no startupapicheck Job.
HELM=${HELM:-$OUT/helm}
if [ ! -x "$HELM" ]; then
  log "building helm"
  (cd "$HERE/../helm" && CGO_ENABLED=0 go build -trimpath -o "$HELM" \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=v3.19.0 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34" \
    helm.sh/helm/v3/cmd/helm)
fi
CHART=$WORK/chart/cert-manager
rm -rf "$WORK/chart"
mkdir -p "$WORK/chart"
cp -r "$SRC/deploy/charts/cert-manager" "$CHART"
chmod -R u+w "$CHART"
# Chart.template.yaml carries placeholders the release tooling fills in.
sed -e "s/^version: .*/version: $VERSION/" -e "s/^appVersion: .*/appVersion: $VERSION/" \
  -e 's/{{IS_PRERELEASE}}/false/' "$CHART/Chart.template.yaml" > "$CHART/Chart.yaml"
rm -f "$CHART/Chart.template.yaml" "$CHART/README.template.md"
{
  cat "$SRC/deploy/manifests/namespace.yaml"
  echo "---"
  # --kube-version: a helm built without upstream's ldflags defaults to
  # Kubernetes v1.20, below the chart's kubeVersion constraint (>= 1.22).
  "$HELM" template cert-manager "$CHART" --api-versions="" --kube-version=v1.34.0 --namespace=cert-manager \
    --set crds.enabled=true --set creator=static --set startupapicheck.enabled=false \
    --set image.pullPolicy=IfNotPresent --set webhook.image.pullPolicy=IfNotPresent \
    --set cainjector.image.pullPolicy=IfNotPresent |
    sed -e '1{/^---$/d;}'
} > "$OUT/cert-manager.yaml.tmp"
mv "$OUT/cert-manager.yaml.tmp" "$OUT/cert-manager.yaml"
# clusterctl reads a file:// cert-manager URL as a local repository and wants
# the layout {basepath}/cert-manager/{version}/cert-manager.yaml.
mkdir -p "$OUT/cert-manager/$VERSION"
cp "$OUT/cert-manager.yaml" "$OUT/cert-manager/$VERSION/cert-manager.yaml"
log "wrote $OUT/cert-manager.yaml and $OUT/cert-manager/$VERSION/cert-manager.yaml"

# 5. Images: FROM scratch with the static binary. The chart's pods run as
#    non-root (runAsNonRoot); a numeric USER lets the kubelet verify that
#    without an /etc/passwd in the image.
if [ "${CERT_MANAGER_SKIP_IMAGES:-}" = 1 ] || ! command -v docker >/dev/null; then
  log "skipping images"
  exit 0
fi
for c in "${COMPONENTS[@]}"; do
  img=$REGISTRY/cert-manager-$c:$VERSION
  ctx=$WORK/image-$c
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cp "$OUT/cert-manager-$c" "$ctx/"
  # Trust roots (ACME/Vault issuers), from the build host when it has them.
  mkdir -p "$ctx/etc/ssl/certs"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$ctx/etc/ssl/certs/"; fi
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY etc /etc
COPY cert-manager-$c /app/cert-manager-$c
USER 1000:1000
ENTRYPOINT ["/app/cert-manager-$c"]
DOCKERFILE
  log "building image $img"
  docker build -q -t "$img" "$ctx" >"$WORK/image-$c.log" 2>&1 || { cat "$WORK/image-$c.log" >&2; exit 1; }
  rm -rf "$ctx"
done
