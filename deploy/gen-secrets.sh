#!/usr/bin/env bash
# gen-secrets.sh: the development secrets of a secure queen-node cluster
# (TLS, mutual TLS between nodes, gossip encryption, JWT), made with openssl
# alone, for docker-compose.yml and deploy/k8s.
#
#   bash deploy/gen-secrets.sh                       # ./secrets/ for docker-compose.yml
#   bash deploy/gen-secrets.sh --k8s queen           # deploy/k8s/secrets/ for namespace "queen"
#   bash deploy/gen-secrets.sh token --role read-only --sub app1 --ttl 3600
#
# Generate (the first form) writes into DIR:
#
#   ca.crt ca.key            a development CA (ca.key never leaves DIR)
#   tls.crt tls.key          the HTTP and gRPC APIs' certificate, signed by the CA, for
#                            localhost, 127.0.0.1, ::1 and the node names (compose), or the
#                            Services' names in the namespace (--k8s)
#   peer-NODE.crt .key       one peer certificate per node for mutual TLS on Raft and
#                            forwarding, signed by the same CA (the nodes check the CA only)
#   gossip.keyring           one random 32-byte gossip key, base64 (--gossip-keyring)
#   jwt.key jwt.pub          an Ed25519 key pair: the nodes verify with jwt.pub
#                            (JWT_ALGORITHM=EdDSA, JWT_PUBLIC_KEY); jwt.key signs tokens
#   admin.jwt                a development admin token (role admin), valid 30 days
#
# Options: -o|--out DIR (default: ./secrets at the repository root, or
# deploy/k8s/secrets with --k8s), --k8s NAMESPACE (Kubernetes names and the
# nodes queen-0..2), --nodes "a b c" (the node names; default queen-1 queen-2
# queen-3), --san NAME (another DNS name or IP of tls.crt; repeatable),
# --days N (certificate validity, default 825), --force (replace an existing
# DIR's secrets; without it the script leaves them alone and exits 0).
#
# token prints a new token signed with DIR/jwt.key: --role ROLE (admin;
# read-write, read-only, write-only), --sub SUBJECT (dev-admin), --ttl SECONDS
# (2592000 = 30 days), --queues "p1,p2" (a scoped token: queue name prefixes).
#
# The issuer and audience are those docker-compose.yml and
# deploy/k8s/statefulset.yaml set (JWT_ISSUER, JWT_AUDIENCE); override them with
# the same variables here if you change them there.
#
# File modes: the keys the containers read (tls.key, peer-*.key) are 0644, so
# the image's user (65532) can read them through Compose's bind mounts, which
# keep the host's owner; DIR itself is 0700, so nobody else on the host can.
# ca.key, jwt.key and admin.jwt, which are never mounted, are 0600.
set -euo pipefail
umask 077

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
issuer=${JWT_ISSUER:-queen-dev}
audience=${JWT_AUDIENCE:-queen-node}

die() { echo "gen-secrets.sh: $*" >&2; exit 2; }
command -v openssl >/dev/null 2>&1 || die "openssl is not installed (Debian: apt-get install openssl)"

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

# token DIR ROLE SUB TTL QUEUES: a JWT signed with DIR/jwt.key (EdDSA).
mint() {
  local dir=$1 role=$2 sub=$3 ttl=$4 queues=$5
  [ -f "$dir/jwt.key" ] || die "$dir/jwt.key does not exist: generate the secrets first"
  case "$role$sub$queues$issuer$audience" in *'"'* | *'\'*) die "quotes and backslashes are not allowed in claims" ;; esac
  [[ $ttl =~ ^[0-9]+$ ]] || die "--ttl $ttl: want seconds"
  local now extra="" q
  now=$(date +%s)
  if [ -n "$queues" ]; then
    local list=""
    IFS=',' read -r -a qs <<<"$queues"
    for q in "${qs[@]}"; do list+="${list:+,}\"$q\""; done
    extra=",\"queues\":[$list]"
  fi
  local header payload input sig tmp
  header=$(printf '{"alg":"EdDSA","typ":"JWT"}' | b64url)
  payload=$(printf '{"iss":"%s","aud":"%s","sub":"%s","role":"%s","iat":%d,"nbf":%d,"exp":%d%s}' \
    "$issuer" "$audience" "$sub" "$role" "$now" "$now" $((now + ttl)) "$extra" | b64url)
  input="$header.$payload"
  # Ed25519 signs the message itself (-rawin), read from a file.
  tmp=$(mktemp)
  printf '%s' "$input" >"$tmp"
  sig=$(openssl pkeyutl -sign -inkey "$dir/jwt.key" -rawin -in "$tmp" | b64url)
  rm -f "$tmp"
  printf '%s.%s\n' "$input" "$sig"
}

if [ "${1:-}" = token ]; then
  shift
  dir="$root/secrets" role=admin sub=dev-admin ttl=2592000 queues=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -o | --out) dir=$2; shift 2 ;;
      --role) role=$2; shift 2 ;;
      --sub) sub=$2; shift 2 ;;
      --ttl) ttl=$2; shift 2 ;;
      --queues) queues=$2; shift 2 ;;
      -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "token: unknown argument $1" ;;
    esac
  done
  mint "$dir" "$role" "$sub" "$ttl" "$queues"
  exit 0
fi

dir="" namespace="" nodes="queen-1 queen-2 queen-3" days=825 force=false
sans=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o | --out) dir=$2; shift 2 ;;
    --k8s) namespace=$2; nodes="queen-0 queen-1 queen-2"; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --san) sans+=("$2"); shift 2 ;;
    --days) days=$2; shift 2 ;;
    --force) force=true; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
if [ -z "$dir" ]; then
  if [ -n "$namespace" ]; then dir="$root/deploy/k8s/secrets"; else dir="$root/secrets"; fi
fi
[[ $days =~ ^[0-9]+$ ]] || die "--days $days: want a number"

if [ -e "$dir/ca.crt" ] && ! $force; then
  echo "gen-secrets.sh: $dir already holds secrets; left as they are (--force replaces them)" >&2
  exit 0
fi
mkdir -p "$dir"
chmod 700 "$dir"
dir=$(cd "$dir" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The names of tls.crt.
names=(localhost 127.0.0.1 ::1)
if [ -n "$namespace" ]; then
  svc=queen headless=queen-headless
  names+=("$svc" "$svc.$namespace" "$svc.$namespace.svc" "$svc.$namespace.svc.cluster.local"
    "*.$headless.$namespace.svc" "*.$headless.$namespace.svc.cluster.local")
else
  for n in $nodes; do names+=("$n"); done
fi
names+=("${sans[@]+"${sans[@]}"}")
san=""
for n in "${names[@]}"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+="${san:+,}IP:$n"; else san+="${san:+,}DNS:$n"; fi
done

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME CN EKU SAN: DIR/NAME.crt and DIR/NAME.key, signed by the CA.
sign() {
  local name=$1 cn=$2 eku=$3 alt=$4
  newkey "$dir/$name.key"
  openssl req -new -key "$dir/$name.key" -subj "/O=queen-node dev/CN=$cn" -out "$work/$name.csr"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature"
    echo "extendedKeyUsage = $eku"
    echo "subjectKeyIdentifier = hash"
    echo "authorityKeyIdentifier = keyid"
    if [ -n "$alt" ]; then echo "subjectAltName = $alt"; fi
  } >"$work/$name.ext"
  openssl x509 -req -in "$work/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days "$days" -sha256 -extfile "$work/$name.ext" -out "$dir/$name.crt" 2>/dev/null
}

# The CA.
newkey "$dir/ca.key"
cat >"$work/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
x509_extensions = ca
prompt = no
[dn]
O = queen-node dev
CN = queen-node development CA
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
openssl req -x509 -new -key "$dir/ca.key" -config "$work/ca.cnf" -days $((days + 30)) -sha256 -out "$dir/ca.crt"

# The APIs' certificate, and one peer certificate per node.
sign tls queen-node serverAuth "$san"
for n in $nodes; do
  sign "peer-$n" "$n" "serverAuth, clientAuth" "DNS:$n"
done

# The gossip keyring: one key, the one that encrypts.
openssl rand -base64 32 >"$dir/gossip.keyring"

# The JWT key pair.
openssl genpkey -algorithm ed25519 -out "$dir/jwt.key"
openssl pkey -in "$dir/jwt.key" -pubout -out "$dir/jwt.pub"

mint "$dir" admin dev-admin 2592000 "" >"$dir/admin.jwt"

# Modes: what the containers mount is world-readable inside a 0700 DIR.
chmod 644 "$dir"/*.crt "$dir"/*.key "$dir/gossip.keyring" "$dir/jwt.pub"
chmod 600 "$dir/ca.key" "$dir/jwt.key" "$dir/admin.jwt"

cat <<EOF
Secrets written to $dir:
$(cd "$dir" && ls -1 | sed 's/^/  /')
tls.crt names: ${names[*]}
peer certificates: $nodes

A development admin token (30 days) is in $dir/admin.jwt; mint others with
  bash $0 token -o $dir --role read-write --sub my-app
Call a node:
  curl --cacert $dir/ca.crt -H "Authorization: Bearer \$(cat $dir/admin.jwt)" https://localhost:6632/api/v1/system/cluster
EOF
