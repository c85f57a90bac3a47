// Package k8s holds the Kubernetes manifests of a three-node queen-node
// cluster (a StatefulSet, its headless and client Services and a
// PodDisruptionBudget, tied together by kustomization.yaml) and the test that
// validates them: every document is decoded strictly into the k8s.io/api
// types, so an unknown, misspelled or wrongly cased field fails, and then the
// properties the cluster depends on are checked. See README.md.
package k8s
