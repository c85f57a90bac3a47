// Package deploy holds the tests of the repository's deployment artefacts:
// the Dockerfile and docker-compose.yml at the repository root and
// gen-secrets.sh, the script that makes the keys both deployments mount
// (this package), the Kubernetes manifests (deploy/k8s) and the image's
// health check binary (deploy/healthcheck). TestComposeClusterTLS runs the
// compose file's three nodes as real processes on loopback, with the
// script's secrets. See README.md.
package deploy
