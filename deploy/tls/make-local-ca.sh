#!/usr/bin/env bash
# Makes a throwaway local CA and certificates signed by it, for tests and the local cluster:
#   ca.pem                      trust this (clients, replicas, the gateway for https workers)
#   server.pem, server-key.pem  the gateway's listener (or an https worker)
#   NAME.pem, NAME-key.pem      one per extra NAME: a replica certificate for mutual TLS
#                               between replicas (server and client authentication)
# Every certificate names localhost and 127.0.0.1. An existing CA in DIR is reused, so
# replica certificates can be added later. Never use these in production.
#
#   deploy/tls/make-local-ca.sh DIR [NAME...]
#   curl --cacert DIR/ca.pem https://127.0.0.1:8443/health
set -euo pipefail
out="${1:?usage: make-local-ca.sh DIR [NAME...]}"
shift
mkdir -p "$out"
cd "$out"
days=3650
if [[ ! -f ca.pem || ! -f ca-key.pem ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
    -subj "/CN=switchyard local CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout ca-key.pem -out ca.pem 2>/dev/null
fi

# sign NAME CN EXTENDED_KEY_USAGE
sign() {
  openssl req -newkey rsa:2048 -nodes -sha256 \
    -subj "/CN=$2" \
    -keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
  cat > "$1.ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$3
subjectAltName=DNS:localhost,IP:127.0.0.1
EXT
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
    -days "$days" -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext" ca.srl
}

sign server localhost serverAuth
for name in "$@"; do
  sign "$name" "$name" serverAuth,clientAuth
done
echo "CA: $out/ca.pem  certificate: $out/server.pem  key: $out/server-key.pem${*:+  replicas: $*}"
