#!/usr/bin/env bash
# A self-signed serving certificate for rebalancer's webhook or extender,
# without cert-manager: a new CA and a certificate it signs (openssl) for the
# component's Service DNS names and any more names and addresses given,
# stored in Secret <service>-tls (tls.crt, tls.key, ca.crt). For the webhook
# the CA also goes into the MutatingWebhookConfiguration's caBundle; for the
# extender, kube-scheduler is given it (tlsConfig.caData). Run it after
# applying the component, and again before the certificate expires; the
# servers reload the Secret's new files. `hack/webhook-cert.sh --help` lists
# the flags and environment variables.
#
#   hack/webhook-cert.sh                  # the webhook's, with kubectl's current context
#   KUBECTL="kubectl --context prod" hack/webhook-cert.sh
#   hack/webhook-cert.sh --extender --ip 10.96.0.20 --dns extender.example.com
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: hack/webhook-cert.sh [--extender] [--dns NAME]... [--ip ADDRESS]... [--out DIR [--no-apply]]

Signs a serving certificate for rebalancer's webhook (or, with --extender, its
kube-scheduler extender) with a new self-signed CA, valid for the Service's
DNS names (<service>.<namespace>.svc and .svc.cluster.local) and the names
and addresses given, and stores it in Secret <service>-tls (tls.crt, tls.key,
ca.crt). For the webhook it also puts the CA in the caBundle of the
MutatingWebhookConfiguration.

  --extender      the extender's certificate: Service rebalancer-extender,
                  Secret rebalancer-extender-tls; no webhook configuration
  --dns NAME      one more DNS name (repeatable): lowercase RFC 1123, or a
                  wildcard *.NAME; e.g. the name kube-scheduler calls the
                  extender by
  --ip ADDRESS    one more IP address (repeatable), IPv4 or IPv6; e.g. the
                  extender Service's ClusterIP, which a kube-scheduler static
                  pod calls
  --out DIR       also write ca.crt, tls.crt and tls.key into DIR (kube-
                  scheduler's tlsConfig.caFile can name DIR/ca.crt)
  --no-apply      write only --out DIR; touch no cluster
  -h, --help      this text

Environment:
  NAMESPACE           the component's namespace (rebalancer-system)
  SERVICE             its Service (rebalancer-webhook, or rebalancer-extender
                      with --extender); the Secret is SERVICE-tls
  CONFIGURATION       the MutatingWebhookConfiguration whose caBundle is set
                      (rebalancer-webhook; "" for none; not with --extender)
  DAYS                the validity of the CA and the certificate (365)
  KUBECTL             the kubectl command (kubectl), e.g. "kubectl --context prod"
  EXTRA_DNS_NAMES     more DNS names, separated by commas or spaces, as --dns
  EXTRA_IP_ADDRESSES  more IP addresses, separated by commas or spaces, as --ip
EOF
}

die() {
  echo "webhook-cert: $*" >&2
  exit 1
}

extender=false
apply=true
out=""
dns=()
ips=()
while (($# > 0)); do
  case $1 in
    --extender) extender=true ;;
    --no-apply) apply=false ;;
    --dns | --ip | --out)
      [[ $# -gt 1 && $2 != -* ]] || die "$1: needs a value (see --help)"
      case $1 in
        --dns) dns+=("$2") ;;
        --ip) ips+=("$2") ;;
        --out) out=$2 ;;
      esac
      shift
      ;;
    --dns=* | --ip=* | --out=*)
      case $1 in
        --dns=*) dns+=("${1#*=}") ;;
        --ip=*) ips+=("${1#*=}") ;;
        --out=*) out=${1#*=} ;;
      esac
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      usage >&2
      die "unknown argument $1"
      ;;
  esac
  shift
done

extra_dns=${EXTRA_DNS_NAMES:-}
extra_ips=${EXTRA_IP_ADDRESSES:-}
read -r -a extra_dns <<<"${extra_dns//,/ }"
read -r -a extra_ips <<<"${extra_ips//,/ }"
dns+=(${extra_dns[@]+"${extra_dns[@]}"})
ips+=(${extra_ips[@]+"${extra_ips[@]}"})

NAMESPACE=${NAMESPACE:-rebalancer-system}
if $extender; then
  SERVICE=${SERVICE:-rebalancer-extender}
  CONFIGURATION=""
else
  SERVICE=${SERVICE:-rebalancer-webhook}
  CONFIGURATION=${CONFIGURATION-rebalancer-webhook}
fi
DAYS=${DAYS:-365}
read -r -a KUBECTL <<<"${KUBECTL:-kubectl}"

label='[a-z0-9]([-a-z0-9]*[a-z0-9])?'
subdomain="$label(\\.$label)*"
octet='(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])'
ipv4="($octet\\.){3}$octet"
h='[0-9a-fA-F]{1,4}'
ipv6="($h:){7}$h|($h:){1,7}:|($h:){1,6}:$h|($h:){1,5}(:$h){1,2}|($h:){1,4}(:$h){1,3}|($h:){1,3}(:$h){1,4}|($h:){1,2}(:$h){1,5}|$h:(:$h){1,6}|:((:$h){1,7}|:)"

[[ $NAMESPACE =~ ^$label$ && ${#NAMESPACE} -le 63 ]] || die "NAMESPACE \"$NAMESPACE\": not a namespace name (RFC 1123 label)"
[[ $SERVICE =~ ^$label$ && ${#SERVICE} -le 59 ]] || die "SERVICE \"$SERVICE\": not a Service name (RFC 1123 label, with -tls at most 63 characters)"
[[ $DAYS =~ ^[1-9][0-9]{0,4}$ ]] || die "DAYS \"$DAYS\": want a whole number of days from 1 to 99999"
if [[ -n $CONFIGURATION && ! ( $CONFIGURATION =~ ^$subdomain$ ) ]]; then
  die "CONFIGURATION \"$CONFIGURATION\": not an object name (RFC 1123 subdomain)"
fi
for name in ${dns[@]+"${dns[@]}"}; do
  [[ $name =~ ^(\*\.)?$subdomain$ && ${#name} -le 253 ]] ||
    die "--dns \"$name\": not a DNS name (lowercase RFC 1123, such as extender.example.com or *.example.com)"
done
for ip in ${ips[@]+"${ips[@]}"}; do
  [[ $ip =~ ^($ipv4)$ || $ip =~ ^($ipv6)$ ]] || die "--ip \"$ip\": not an IPv4 or IPv6 address"
done
$apply || [[ -n $out ]] || die "--no-apply: give --out DIR, or the certificate goes nowhere"

# The subjectAltName list, each entry once.
sans=()
declare -A seen=()
for entry in "DNS:$SERVICE.$NAMESPACE.svc" "DNS:$SERVICE.$NAMESPACE.svc.cluster.local" \
  ${dns[@]+"${dns[@]/#/DNS:}"} ${ips[@]+"${ips[@]/#/IP:}"}; do
  if [[ -z ${seen[$entry]:-} ]]; then
    seen[$entry]=1
    sans+=("$entry")
  fi
done
san=$(IFS=,; echo "${sans[*]}")

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# openssl, its output shown only when it fails.
ssl() {
  local log
  if ! log=$(openssl "$@" 2>&1); then
    die "openssl $1: $log"
  fi
}

ssl req -x509 -newkey rsa:2048 -nodes -days "$DAYS" -subj "/CN=$SERVICE-ca" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt"
ssl req -newkey rsa:2048 -nodes -subj "/CN=$SERVICE.$NAMESPACE.svc" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr"
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$san" >"$dir/ext"
ssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$DAYS" -extfile "$dir/ext" -out "$dir/tls.crt"

if [[ -n $out ]]; then
  mkdir -p "$out"
  (umask 077 && cp "$dir/ca.crt" "$dir/tls.crt" "$dir/tls.key" "$out/")
  echo "webhook-cert: ca.crt, tls.crt and tls.key written to $out"
fi
if ! $apply; then
  echo "webhook-cert: certificate for $san (valid $DAYS days); no cluster touched"
  exit 0
fi

# Server-side apply: no last-applied annotation copying the private key.
"${KUBECTL[@]}" -n "$NAMESPACE" create secret generic "$SERVICE-tls" --type=kubernetes.io/tls \
  --from-file=tls.crt="$dir/tls.crt" --from-file=tls.key="$dir/tls.key" --from-file=ca.crt="$dir/ca.crt" \
  --dry-run=client -o yaml |
  "${KUBECTL[@]}" apply --server-side --force-conflicts --field-manager=rebalancer-webhook-cert -f -
ca=$(base64 <"$dir/ca.crt" | tr -d '\n')
if [[ -n $CONFIGURATION ]]; then
  "${KUBECTL[@]}" patch mutatingwebhookconfiguration "$CONFIGURATION" --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca\"}]"
  echo "webhook-cert: Secret $NAMESPACE/$SERVICE-tls written for $san, caBundle of $CONFIGURATION set (valid $DAYS days)"
else
  echo "webhook-cert: Secret $NAMESPACE/$SERVICE-tls written for $san (valid $DAYS days)"
  echo "webhook-cert: the CA, for tlsConfig.caData of the clients (kube-scheduler's extender entry): $ca"
fi
