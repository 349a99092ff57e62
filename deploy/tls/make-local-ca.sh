#!/usr/bin/env bash
# Makes a throwaway local CA and a server certificate signed by it, for tests and the local
# cluster: ca.pem (trust this), server.pem + server-key.pem (give these to the gateway).
# The server certificate names localhost and 127.0.0.1. Never use these in production.
#
#   deploy/tls/make-local-ca.sh DIR
#   curl --cacert DIR/ca.pem https://127.0.0.1:8443/health
set -euo pipefail
out="${1:?usage: make-local-ca.sh DIR}"
mkdir -p "$out"
cd "$out"
days=3650
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
  -subj "/CN=switchyard local CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout ca-key.pem -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -sha256 \
  -subj "/CN=localhost" \
  -keyout server-key.pem -out server.csr 2>/dev/null
cat > server.ext <<'EXT'
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
EXT
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
  -days "$days" -sha256 -extfile server.ext -out server.pem 2>/dev/null
rm -f server.csr server.ext ca.srl
echo "CA: $out/ca.pem  certificate: $out/server.pem  key: $out/server-key.pem"
