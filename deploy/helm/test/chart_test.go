package chart_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const chartDir = "../walrelay"

// helmBin and walrelayBin are built once by TestMain.
var helmBin, walrelayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "walrelay-chart-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helmBin, walrelayBin = filepath.Join(dir, "helm"), filepath.Join(dir, "walrelay")
	code := 1
	if err := build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds the Helm CLI at the version this module pins (go.mod's tool line)
// and walrelay from the product module at the root of the repository.
func build() error {
	for _, c := range []*exec.Cmd{
		exec.Command("go", "build", "-o", helmBin, "helm.sh/helm/v4/cmd/helm"),
		exec.Command("go", "-C", "../../..", "build", "-o", walrelayBin, "./cmd/walrelay"),
	} {
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(c.Args, " "), err, out)
		}
	}
	return nil
}

// helm runs the Helm CLI with a home of its own (no user's repositories or
// plugins) and returns its standard output.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// valueSets are the values the chart is tested with: its defaults, and a file
// that sets every option.
var valueSets = map[string][]string{
	"default": nil,
	"all":     {"--values", "testdata/all.yaml"},
}

func TestLint(t *testing.T) {
	for name, args := range valueSets {
		out := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
		if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint with the %s values:\n%s", name, out)
		}
	}
}

// rendered is what helm template renders, each object decoded strictly.
type rendered struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap
	service        *corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *monitoringv1.ServiceMonitor
	prometheusRule *monitoringv1.PrometheusRule
}

// render runs helm template and decodes every object into its type, refusing
// unknown fields and kinds the chart is not meant to render.
func render(t *testing.T, args []string) rendered {
	t.Helper()
	out := helm(t, append([]string{"template", "walrelay", chartDir, "--namespace", "outbox"}, args...)...)
	var r rendered
	for _, doc := range strings.Split(out, "\n---") {
		doc = strings.TrimSpace(strings.TrimPrefix(doc, "---"))
		if doc == "" || allComments(doc) {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("rendered object: %v\n%s", err, doc)
		}
		var into any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			r.deployment = &appsv1.Deployment{}
			into = r.deployment
		case "v1 ConfigMap":
			r.configMap = &corev1.ConfigMap{}
			into = r.configMap
		case "v1 Service":
			r.service = &corev1.Service{}
			into = r.service
		case "policy/v1 PodDisruptionBudget":
			r.pdb = &policyv1.PodDisruptionBudget{}
			into = r.pdb
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.serviceMonitor = &monitoringv1.ServiceMonitor{}
			into = r.serviceMonitor
		case "monitoring.coreos.com/v1 PrometheusRule":
			r.prometheusRule = &monitoringv1.PrometheusRule{}
			into = r.prometheusRule
		default:
			t.Fatalf("rendered an object of an unexpected kind %s %s:\n%s", head.APIVersion, head.Kind, doc)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v\n%s", head.Kind, err, doc)
		}
	}
	if r.deployment == nil || r.configMap == nil || r.service == nil {
		t.Fatalf("helm template rendered no Deployment, ConfigMap or Service:\n%s", out)
	}
	return r
}

func allComments(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// The defaults run a pair that rollouts and drains can move: two replicas, a new
// pod up (and standing by, Ready) before an old one stops, one pod down at a time,
// probes on /healthz and /readyz (which counts a standby as ready), non-root with a
// read-only root filesystem, resources set; no ServiceMonitor or PrometheusRule.
func TestDefaults(t *testing.T) {
	r := render(t, valueSets["default"])
	d := r.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		*ru.MaxSurge != intstr.FromInt32(1) || *ru.MaxUnavailable != intstr.FromInt32(0) {
		t.Errorf("strategy = %+v, want RollingUpdate with maxSurge 1, maxUnavailable 0", d.Spec.Strategy)
	}
	if r.pdb == nil || r.pdb.Spec.MaxUnavailable == nil || *r.pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("PodDisruptionBudget = %+v, want maxUnavailable 1", r.pdb)
	} else if !reflect.DeepEqual(r.pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget selects %v, the Deployment %v", r.pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
	}
	if !reflect.DeepEqual(r.service.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("Service selects %v, the Deployment %v", r.service.Spec.Selector, d.Spec.Selector.MatchLabels)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe = %+v, want GET /readyz (a standby is ready)", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe = %+v, want GET /healthz", p)
	}
	sc, psc := c.SecurityContext, d.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("security context = %+v, pod's %+v; want non-root, read-only, no privilege escalation", sc, psc)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources = %+v, want requests and limits", c.Resources)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9731 || r.service.Spec.Ports[0].Port != 9731 {
		t.Errorf("ports: container %+v, service %+v; want metrics on 9731", c.Ports, r.service.Spec.Ports)
	}
	if r.serviceMonitor != nil || r.prometheusRule != nil {
		t.Error("ServiceMonitor or PrometheusRule rendered by default; they need the prometheus-operator's CRDs")
	}
}

// Every option lands where it should: the PrometheusRule carries the rules of
// deploy/prometheus/alerts.yml, the ServiceMonitor scrapes the metrics port, the
// pgpass Secret is mounted and named by PGPASSFILE, Secrets reach the environment.
func TestAllOptions(t *testing.T) {
	r := render(t, valueSets["all"])
	d := r.deployment
	if d.Name != "outbox-relay" || *d.Spec.Replicas != 3 {
		t.Errorf("Deployment %s with %d replicas, want outbox-relay with 3", d.Name, *d.Spec.Replicas)
	}
	if r.serviceMonitor == nil || r.serviceMonitor.Spec.Endpoints[0].Port != "metrics" ||
		string(r.serviceMonitor.Spec.Endpoints[0].Interval) != "15s" {
		t.Errorf("ServiceMonitor = %+v, want the metrics port every 15s", r.serviceMonitor)
	}
	if r.prometheusRule == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(read(t, "../../prometheus/alerts.yml"), &want); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml as a PrometheusRule's spec: %v", err)
	}
	if !reflect.DeepEqual(r.prometheusRule.Spec, want) {
		t.Error("the PrometheusRule's rules differ from deploy/prometheus/alerts.yml")
	}
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["WALRELAY_KAFKA_SASL_PASSWORD"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "kafka-credentials" || e.ValueFrom.SecretKeyRef.Key != "password" {
		t.Errorf("WALRELAY_KAFKA_SASL_PASSWORD = %+v, want the Secret kafka-credentials, key password", e)
	}
	if env["PGPASSFILE"].Value != "/etc/walrelay/pgpass/pgpass" {
		t.Errorf("PGPASSFILE = %+v, want /etc/walrelay/pgpass/pgpass", env["PGPASSFILE"])
	}
	mounted := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "walrelay-pgpass" && len(v.Secret.Items) == 1 && v.Secret.Items[0].Path == "pgpass" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("volumes %+v: the Secret walrelay-pgpass is not mounted as pgpass", d.Spec.Template.Spec.Volumes)
	}
	if c.Ports[0].ContainerPort != 9800 || r.service.Spec.Ports[0].Port != 9800 {
		t.Errorf("metrics port: container %d, service %d; want 9800", c.Ports[0].ContainerPort, r.service.Spec.Ports[0].Port)
	}
	if got := d.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels; !reflect.DeepEqual(got, d.Spec.Selector.MatchLabels) {
		t.Errorf("topology spread selects %v, want the pods' %v", got, d.Spec.Selector.MatchLabels)
	}
}

// The chart's copy of the alert rules is the file itself, byte for byte.
func TestAlertRulesCopy(t *testing.T) {
	if !bytes.Equal(read(t, chartDir+"/files/alerts.yml"), read(t, "../../prometheus/alerts.yml")) {
		t.Error("deploy/helm/walrelay/files/alerts.yml differs from deploy/prometheus/alerts.yml; copy it again")
	}
}

// The rendered ConfigMap is a configuration walrelay accepts: `walrelay run
// --check` with the file mounted where the Deployment says, and every variable the
// Deployment takes from a Secret stubbed, exits 0.
func TestConfigurationChecks(t *testing.T) {
	for name, args := range valueSets {
		t.Run(name, func(t *testing.T) {
			r := render(t, args)
			dir := t.TempDir()
			config := filepath.Join(dir, "walrelay.yaml")
			if err := os.WriteFile(config, []byte(r.configMap.Data["walrelay.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			for _, e := range r.deployment.Spec.Template.Spec.Containers[0].Env {
				switch {
				case e.Name == "WALRELAY_CONFIG":
					env = append(env, e.Name+"="+config)
				case e.Name == "PGPASSFILE":
					env = append(env, e.Name+"="+filepath.Join(dir, "pgpass"))
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					env = append(env, e.Name+"="+stub(e.Name))
				default:
					env = append(env, e.Name+"="+e.Value)
				}
			}
			cmd := exec.Command(walrelayBin, "run", "--check")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "configuration valid") {
				t.Errorf("walrelay run --check on the rendered configuration: %v\n%s\nconfiguration:\n%s", err, out, r.configMap.Data["walrelay.yaml"])
			}
		})
	}
}

// stub is a stand-in for a Secret's value: a database URL where one is expected.
func stub(name string) string {
	if strings.HasSuffix(name, "_URL") {
		return "postgres://walrelay@db.invalid:5432/app"
	}
	return "stub-" + strings.ToLower(name)
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The product's module carries no Helm or Kubernetes module: they stay in this one.
func TestProductModuleCarriesNoHelm(t *testing.T) {
	for _, f := range []string{"../../../go.mod", "../../../go.sum"} {
		for _, line := range strings.Split(string(read(t, f)), "\n") {
			for _, mod := range []string{"helm.sh/", "k8s.io/", "sigs.k8s.io/", "prometheus-operator"} {
				if strings.Contains(line, mod) {
					t.Errorf("%s: %q; keep Helm and Kubernetes modules in deploy/helm/test", f, line)
				}
			}
		}
	}
}
