// Package chart tests the Helm chart deploy/helm/walrelay without a cluster: helm
// lint and helm template (the Helm CLI built from helm.sh/helm/v4, pinned in this
// module's go.mod) for the default values and for testdata/all.yaml, which sets
// every option; every rendered object decoded strictly into the Kubernetes and
// prometheus-operator types; the rendered configuration read back by
// `walrelay run --check`. A module of its own, so that the product's go.mod
// carries no Helm or Kubernetes module (deploy/README.md).
package chart
