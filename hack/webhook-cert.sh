#!/usr/bin/env bash
# A self-signed serving certificate for rebalancer's webhook, without
# cert-manager: a CA and a certificate for the webhook Service's DNS names
# (openssl), stored in Secret rebalancer-webhook-tls, and the CA put in the
# MutatingWebhookConfiguration's caBundle. Run it after
# `kubectl apply -k manifests/webhook`, and again before the certificate
# expires (DAYS, default 365); the webhook reloads the Secret's new files.
#
#   hack/webhook-cert.sh                  # uses kubectl's current context
#   KUBECTL="kubectl --context prod" hack/webhook-cert.sh
set -euo pipefail

NAMESPACE=${NAMESPACE:-rebalancer-system}
SERVICE=${SERVICE:-rebalancer-webhook}
CONFIGURATION=${CONFIGURATION:-rebalancer-webhook}
DAYS=${DAYS:-365}
read -r -a KUBECTL <<<"${KUBECTL:-kubectl}"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days "$DAYS" -subj "/CN=$SERVICE-ca" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$SERVICE.$NAMESPACE.svc" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
  "$SERVICE" "$NAMESPACE" "$SERVICE" "$NAMESPACE" >"$dir/ext"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$DAYS" -extfile "$dir/ext" -out "$dir/tls.crt" 2>/dev/null

"${KUBECTL[@]}" -n "$NAMESPACE" create secret tls "$SERVICE-tls" --cert="$dir/tls.crt" --key="$dir/tls.key" \
  --dry-run=client -o yaml | "${KUBECTL[@]}" apply -f -
ca=$(base64 <"$dir/ca.crt" | tr -d '\n')
"${KUBECTL[@]}" patch mutatingwebhookconfiguration "$CONFIGURATION" --type=json \
  -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca\"}]"
echo "webhook-cert: Secret $NAMESPACE/$SERVICE-tls written, caBundle of $CONFIGURATION set (valid $DAYS days)"
