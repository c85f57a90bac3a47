// Package deploy holds the tests of the repository's deployment artefacts:
// the Dockerfile and docker-compose.yml at the repository root (this
// package), the Kubernetes manifests (deploy/k8s) and the image's health
// check binary (deploy/healthcheck).
package deploy
