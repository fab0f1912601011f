# shellcheck shell=bash
# Certificates for daemon-to-daemon mutual TLS (sourced, not run): tools/demo --nodes.
# The same openssl commands as docs/service.md ("Several nodes") shows: a CA, and per node
# an EC P-256 key and a certificate signed by that CA for both TLS uses. Messages go to
# stderr; returns 1 if openssl fails.
#
#   ember_make_ca DIR
#       DIR/ca.pem and DIR/ca.key: a self-signed CA, valid 7 days.
#   ember_make_node_cert DIR NAME SANS
#       DIR/NAME.pem and DIR/NAME.key signed by DIR/ca.*, CN=NAME, subjectAltName SANS
#       (e.g. "DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1": kj checks the host name a peer
#       dials against DNS entries only, so an address needs a DNS entry too).

ember_openssl() {
  local dir="$1"
  shift
  if ! openssl "$@" >>"${dir}/openssl.log" 2>&1; then
    echo "certs: openssl $1 failed; see ${dir}/openssl.log" >&2
    return 1
  fi
}

ember_make_ca() {
  local dir="$1"
  ember_openssl "${dir}" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "${dir}/ca.key" -out "${dir}/ca.pem" -days 7 -subj "/CN=ember-demo-ca"
}

ember_make_node_cert() {
  local dir="$1" name="$2" sans="$3"
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "${sans}" \
    >"${dir}/${name}.ext"
  ember_openssl "${dir}" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "${dir}/${name}.key" -out "${dir}/${name}.csr" -subj "/CN=${name}" &&
    ember_openssl "${dir}" x509 -req -in "${dir}/${name}.csr" -CA "${dir}/ca.pem" \
      -CAkey "${dir}/ca.key" -CAcreateserial -days 7 -extfile "${dir}/${name}.ext" \
      -out "${dir}/${name}.pem"
}
