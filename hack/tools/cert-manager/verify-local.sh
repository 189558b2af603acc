#!/usr/bin/env bash
# verify-local.sh DIR — smoke-tests a build.sh output dir without any nodes:
# runs etcd and kube-apiserver as local processes, applies the CRDs from
# DIR/cert-manager.yaml, runs the three cert-manager binaries out of cluster
# with --kubeconfig, and checks that
#   - the webhook serves TLS and creates its dynamic serving CA Secret,
#   - cainjector injects that CA into the chart's webhook configurations (pointed
#     at the local webhook by URL), so the apiserver really calls the webhook,
#   - a self-signed Issuer + Certificate produce a Secret with tls.crt,
#   - a CA Issuer backed by that Secret issues a second Certificate,
#   - a ValidatingWebhookConfiguration annotated cert-manager.io/inject-ca-from
#     gets the Certificate's CA as caBundle.
# Everything runs under one temp dir and is stopped/removed on exit.
#
# Env: ETCD, KUBE_APISERVER (binaries; default /work/main/bin/...), KUBECTL,
#      ports: ETCD_PORT=22379 APISERVER_PORT=26443.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
DIR=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
ETCD=${ETCD:-$ROOT/bin/etcd}
KUBE_APISERVER=${KUBE_APISERVER:-$ROOT/bin/kube-apiserver}
KUBECTL=${KUBECTL:-kubectl}
ETCD_PORT=${ETCD_PORT:-22379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-22380}
APISERVER_PORT=${APISERVER_PORT:-26443}
WEBHOOK_PORT=${WEBHOOK_PORT:-26250}
WEBHOOK_HEALTHZ_PORT=${WEBHOOK_HEALTHZ_PORT:-26251}
CONTROLLER_METRICS_PORT=${CONTROLLER_METRICS_PORT:-26402}
CONTROLLER_HEALTHZ_PORT=${CONTROLLER_HEALTHZ_PORT:-26403}

T=$(mktemp -d /tmp/cm-verify.XXXXXX)
PIDS=()
cleanup() {
  # Stop in reverse start order (cert-manager, apiserver, etcd); SIGKILL after 30s.
  local i p
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    p=${PIDS[i]}
    kill "$p" 2>/dev/null || continue
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if [ "${KEEP_LOGS:-}" = 1 ]; then echo "logs kept in $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
step() { echo "==> $*"; }
fail() { echo "FAIL: $*" >&2; for f in "$T"/*.log; do echo "--- $f"; tail -n 30 "$f"; done >&2; exit 1; }
k() { "$KUBECTL" --kubeconfig "$T/kubeconfig" "$@"; }
wait_for() { # wait_for SECONDS DESCRIPTION CMD...
  local n=$1 what=$2; shift 2
  for _ in $(seq "$n"); do if "$@" >/dev/null 2>&1; then return 0; fi; sleep 1; done
  fail "timed out waiting for $what"
}

step "certificates"
cd "$T"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=verify-ca -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout apiserver.key -out apiserver.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > apiserver.ext
openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile apiserver.ext -out apiserver.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /O=system:masters/CN=admin -keyout admin.key -out admin.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > admin.ext
openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile admin.ext -out admin.crt 2>/dev/null
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
cat > kubeconfig <<KC
apiVersion: v1
kind: Config
clusters:
- name: verify
  cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$T/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$T/admin.crt", client-key: "$T/admin.key"}
contexts:
- name: verify
  context: {cluster: verify, user: admin}
current-context: verify
KC

step "etcd on 127.0.0.1:$ETCD_PORT"
"$ETCD" --name verify --data-dir "$T/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "verify=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" >etcd.log 2>&1 &
PIDS+=($!)
wait_for 60 etcd curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

step "kube-apiserver on 127.0.0.1:$APISERVER_PORT"
"$KUBE_APISERVER" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
  --cert-dir "$T/apiserver-certs" --tls-cert-file apiserver.crt --tls-private-key-file apiserver.key \
  --client-ca-file ca.crt --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file sa.pub \
  --service-account-signing-key-file sa.key --service-cluster-ip-range 10.96.0.0/24 \
  >apiserver.log 2>&1 &
PIDS+=($!)
wait_for 120 kube-apiserver k get --raw /readyz

step "CRDs from cert-manager.yaml"
python3 - "$DIR/cert-manager.yaml" > crds.yaml <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
print(yaml.safe_dump_all([d for d in docs if d.get("kind") in ("CustomResourceDefinition", "Namespace")]))
PY
k apply --server-side -f crds.yaml >/dev/null
wait_for 60 "CRDs established" k wait --for condition=established --timeout 1s crd/certificates.cert-manager.io crd/issuers.cert-manager.io crd/certificaterequests.cert-manager.io

step "cert-manager processes"
"$DIR/cert-manager-webhook" --kubeconfig "$T/kubeconfig" --v=2 --secure-port "$WEBHOOK_PORT" --healthz-port "$WEBHOOK_HEALTHZ_PORT" \
  --dynamic-serving-ca-secret-namespace cert-manager --dynamic-serving-ca-secret-name cert-manager-webhook-ca \
  --dynamic-serving-dns-names cert-manager-webhook,cert-manager-webhook.cert-manager,cert-manager-webhook.cert-manager.svc,localhost \
  --metrics-listen-address=0 --some-unknown-flag=ignored >webhook.log 2>&1 &
PIDS+=($!)
"$DIR/cert-manager-cainjector" --kubeconfig "$T/kubeconfig" --v=2 --leader-election-namespace kube-system \
  --metrics-listen-address=0 >cainjector.log 2>&1 &
PIDS+=($!)
"$DIR/cert-manager-controller" --kubeconfig "$T/kubeconfig" --v=2 --cluster-resource-namespace cert-manager \
  --leader-election-namespace kube-system --acme-http01-solver-image quay.io/jetstack/cert-manager-acmesolver:v1.19.1 \
  --max-concurrent-challenges 60 --enable-certificate-owner-ref=true \
  --metrics-listen-address "127.0.0.1:$CONTROLLER_METRICS_PORT" \
  --internal-healthz-listen-address "127.0.0.1:$CONTROLLER_HEALTHZ_PORT" >controller.log 2>&1 &
PIDS+=($!)

step "webhook serves TLS and creates its CA Secret"
wait_for 120 "webhook CA secret" k -n cert-manager get secret cert-manager-webhook-ca
k -n cert-manager get secret cert-manager-webhook-ca -o jsonpath='{.data.ca\.crt}' | base64 -d > webhook-ca.crt
wait_for 60 "webhook healthz" curl -fsS "http://127.0.0.1:$WEBHOOK_HEALTHZ_PORT/livez"
# Any HTTP answer over a TLS connection verified against the CA Secret will do.
wait_for 60 "webhook TLS" curl -sS --cacert webhook-ca.crt "https://localhost:$WEBHOOK_PORT/validate" -o /dev/null
echo "webhook TLS on :$WEBHOOK_PORT verified against cert-manager/cert-manager-webhook-ca:"
echo | openssl s_client -connect "127.0.0.1:$WEBHOOK_PORT" -servername localhost -CAfile webhook-ca.crt 2>/dev/null |
  grep -E 'Verify return code|subject=|issuer=' || true

step "chart's webhook configurations, pointed at the local webhook"
python3 - "$DIR/cert-manager.yaml" "$WEBHOOK_PORT" > webhooks.yaml <<'PY'
import sys, yaml
out = []
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        path = "/validate" if d["kind"].startswith("Validating") else "/mutate"
        for w in d["webhooks"]:
            w["clientConfig"] = {"url": "https://localhost:%s%s" % (sys.argv[2], path)}
        out.append(d)
assert len(out) == 2, out
print(yaml.safe_dump_all(out))
PY
k apply -f webhooks.yaml >/dev/null
has_bundle() { [ -n "$(k get "$1" "$2" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]; }
wait_for 120 "caBundle injected into cert-manager-webhook configurations" has_bundle validatingwebhookconfiguration cert-manager-webhook
wait_for 60 "mutating caBundle" has_bundle mutatingwebhookconfiguration cert-manager-webhook
echo "caBundle injected into validating and mutating cert-manager-webhook"
# The apiserver now validates cert-manager resources through the local webhook:
# an invalid Issuer must be rejected by it.
k create ns verify >/dev/null
if out=$(k -n verify apply -f - 2>&1 <<'Y'
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: invalid}
spec: {}
Y
); then fail "invalid Issuer was accepted: $out"; fi
echo "invalid Issuer rejected: $out" | grep -i 'webhook' || fail "rejection did not come from the webhook: $out"

step "self-signed Issuer + CA Certificate"
k -n verify apply -f - >/dev/null <<'Y'
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: root-ca}
spec:
  isCA: true
  commonName: verify-root-ca
  secretName: root-ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: selfsigned, kind: Issuer}
Y
wait_for 120 "root-ca Ready" k -n verify wait --for condition=Ready --timeout 1s certificate/root-ca
k -n verify get secret root-ca -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -subject -issuer

step "CA Issuer from that Secret issues a second Certificate"
k -n verify apply -f - >/dev/null <<'Y'
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca}
spec: {ca: {secretName: root-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: serving}
spec:
  secretName: serving-cert
  dnsNames: [svc.verify.svc]
  issuerRef: {name: ca, kind: Issuer}
Y
wait_for 120 "serving Ready" k -n verify wait --for condition=Ready --timeout 1s certificate/serving
k -n verify get secret serving-cert -o jsonpath='{.data.tls\.crt}' | base64 -d > serving.crt
k -n verify get secret root-ca -o jsonpath='{.data.tls\.crt}' | base64 -d > root.crt
openssl x509 -in serving.crt -noout -subject -issuer -ext subjectAltName
openssl verify -CAfile root.crt serving.crt

step "cainjector: inject-ca-from Certificate into a ValidatingWebhookConfiguration"
k apply -f - >/dev/null <<'Y'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: verify-inject
  annotations: {cert-manager.io/inject-ca-from: verify/serving}
webhooks:
- name: verify.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: "https://svc.verify.svc/validate"}
  rules: [{apiGroups: ["example.com"], apiVersions: ["v1"], operations: [CREATE], resources: [widgets]}]
Y
wait_for 120 "verify-inject caBundle" has_bundle validatingwebhookconfiguration verify-inject
k get validatingwebhookconfiguration verify-inject -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d > injected.crt
cmp <(k -n verify get secret serving-cert -o jsonpath='{.data.ca\.crt}' | base64 -d) injected.crt &&
  echo "caBundle == serving-cert ca.crt ($(openssl x509 -in injected.crt -noout -subject))"

step "all processes still running"
for p in "${PIDS[@]}"; do kill -0 "$p" || fail "process $p exited"; done
echo "PASS"
