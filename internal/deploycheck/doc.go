// Package deploycheck holds tests that keep deploy/ (image, compose, Kubernetes, alerts, dashboard) consistent with the relay.
package deploycheck
