package k8s

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// What the cluster needs; the manifests must agree with these.
const (
	wantReplicas   = 3
	healthPath     = "/health"
	httpPort       = 6632
	gossipPort     = 6635
	imageDataDir   = "/data" // the image's QUEEN_DATA_DIR (Dockerfile)
	imageUID       = 65532   // the image's USER (Dockerfile)
	minGracePeriod = 30      // seconds: 10 s HTTP drain + leadership transfer
)

// decodeStrict decodes one YAML document into obj the way the API server's
// strict field validation does: duplicate keys, unknown fields and fields in
// the wrong case are errors. (sigs.k8s.io/yaml's UnmarshalStrict uses
// encoding/json, which matches field names case-insensitively, so
// "ServiceName" would slip through it; sigs.k8s.io/json does not.)
func decodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// splitDocuments splits a multi-document YAML file on its "---" lines and
// drops documents that hold only comments or whitespace.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		t := bytes.TrimRight(line, " \t\r\n")
		if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}

// newObject is the typed object for an apiVersion and kind this directory
// may contain; anything else is an error.
func newObject(tm metav1.TypeMeta) (any, error) {
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	}
	return nil, fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
}

// decodeObject decodes one document by its apiVersion and kind.
func decodeObject(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	obj, err := newObject(tm)
	if err != nil {
		return nil, err
	}
	return obj, decodeStrict(doc, obj)
}

// kustomization is the part of kustomize's Kustomization this directory uses;
// decoding it strictly catches a misspelled "resources".
type kustomization struct {
	APIVersion      string            `json:"apiVersion"`
	Kind            string            `json:"kind"`
	Resources       []string          `json:"resources"`
	SecretGenerator []secretGenerator `json:"secretGenerator"`
}

// secretGenerator is one Secret kustomize makes from files: each entry is
// "key=path" or "path" (the key is then the file's base name).
type secretGenerator struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Files []string `json:"files"`
}

// keys maps each key of the generated Secret to the file it is read from.
func (g secretGenerator) keys() map[string]string {
	out := map[string]string{}
	for _, f := range g.Files {
		key, path, ok := strings.Cut(f, "=")
		if !ok {
			key, path = filepath.Base(f), f
		}
		out[key] = path
	}
	return out
}

type manifests struct {
	sts      *appsv1.StatefulSet
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
	secrets  map[string]secretGenerator // kustomization.yaml's secretGenerator, by name
}

// load decodes every resource kustomization.yaml lists.
func load(t *testing.T) *manifests {
	t.Helper()
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := decodeStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}

	// Every manifest in the directory is listed, and every listed one exists.
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(files, listed) {
		t.Fatalf("kustomization.yaml resources %v, directory has %v", listed, files)
	}

	m := &manifests{services: map[string]*corev1.Service{}, secrets: map[string]secretGenerator{}}
	for _, g := range k.SecretGenerator {
		if errs := validation.IsDNS1123Subdomain(g.Name); len(errs) > 0 {
			t.Errorf("secretGenerator %q: %v", g.Name, errs)
		}
		if _, dup := m.secrets[g.Name]; dup {
			t.Fatalf("secretGenerator %q twice", g.Name)
		}
		if len(g.Files) == 0 {
			t.Errorf("secretGenerator %q: no files", g.Name)
		}
		for key, path := range g.keys() {
			if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
				t.Errorf("secretGenerator %q: key %q: %v", g.Name, key, errs)
			}
			// kustomize refuses files outside the kustomization's directory.
			if filepath.IsAbs(path) || !filepath.IsLocal(path) {
				t.Errorf("secretGenerator %q: file %q is not below deploy/k8s (kustomize's load restrictor refuses it)", g.Name, path)
			}
		}
		if g.Type == string(corev1.SecretTypeTLS) {
			if ks := g.keys(); ks[corev1.TLSCertKey] == "" || ks[corev1.TLSPrivateKeyKey] == "" || len(ks) != 2 {
				t.Errorf("secretGenerator %q: type %s wants exactly the keys tls.crt and tls.key, has %v", g.Name, g.Type, slices.Sorted(mapsKeys(ks)))
			}
		}
		m.secrets[g.Name] = g
	}
	seen := map[string]string{}
	for _, f := range k.Resources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := splitDocuments(data)
		if len(docs) == 0 {
			t.Fatalf("%s: no documents", f)
		}
		for i, doc := range docs {
			where := fmt.Sprintf("%s document %d", f, i+1)
			obj, err := decodeObject(doc)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			meta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
			kind := fmt.Sprintf("%T", obj)
			if prev, dup := seen[kind+"/"+meta.GetName()]; dup {
				t.Fatalf("%s: %s %q already defined in %s", where, kind, meta.GetName(), prev)
			}
			seen[kind+"/"+meta.GetName()] = where
			if errs := validation.IsDNS1123Subdomain(meta.GetName()); len(errs) > 0 {
				t.Errorf("%s: name %q: %v", where, meta.GetName(), errs)
			}
			// The namespace comes from kubectl -n or an overlay, and the pods
			// read theirs from the downward API: no manifest may pin one.
			if meta.GetNamespace() != "" {
				t.Errorf("%s: metadata.namespace %q: leave it to kubectl -n / kustomize", where, meta.GetNamespace())
			}
			switch o := obj.(type) {
			case *appsv1.StatefulSet:
				if m.sts != nil {
					t.Fatalf("%s: a second StatefulSet", where)
				}
				m.sts = o
			case *corev1.Service:
				if errs := validation.IsDNS1035Label(o.Name); len(errs) > 0 {
					t.Errorf("%s: Service name %q: %v", where, o.Name, errs)
				}
				m.services[o.Name] = o
			case *policyv1.PodDisruptionBudget:
				if m.pdb != nil {
					t.Fatalf("%s: a second PodDisruptionBudget", where)
				}
				m.pdb = o
			}
		}
	}
	if m.sts == nil || m.pdb == nil || len(m.services) == 0 {
		t.Fatalf("want a StatefulSet, Services and a PodDisruptionBudget; have %v", slices.Sorted(mapsKeys(seen)))
	}
	return m
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// container is the queen-node container of the pod template.
func (m *manifests) container(t *testing.T) *corev1.Container {
	t.Helper()
	cs := m.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, have %d", len(cs))
	}
	return &cs[0]
}

// env is the container's env as a map, after checking that every $(VAR)
// reference names a variable defined earlier in the list: Kubernetes expands
// only those and leaves any other reference as literal text.
func env(t *testing.T, c *corev1.Container) map[string]corev1.EnvVar {
	t.Helper()
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	defined := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
			t.Errorf("env %q: %v", e.Name, errs)
		}
		if _, dup := defined[e.Name]; dup {
			t.Errorf("env %s is set twice", e.Name)
		}
		for _, mm := range ref.FindAllStringSubmatch(e.Value, -1) {
			if _, ok := defined[mm[1]]; !ok {
				t.Errorf("env %s refers to $(%s), which is not defined before it", e.Name, mm[1])
			}
		}
		defined[e.Name] = e
	}
	return defined
}

// fieldRef is the downward-API field an env var is set from, or "".
func fieldRef(e corev1.EnvVar) string {
	if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
		return ""
	}
	return e.ValueFrom.FieldRef.FieldPath
}

// resolvePort is the container port number a probe or a Service targets.
func resolvePort(t *testing.T, c *corev1.Container, p intstr.IntOrString, proto corev1.Protocol) int32 {
	t.Helper()
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, cp := range c.Ports {
		cpProto := cp.Protocol
		if cpProto == "" {
			cpProto = corev1.ProtocolTCP
		}
		if cpProto != proto {
			continue
		}
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	t.Errorf("port %s/%s is not a port of container %s", p.String(), proto, c.Name)
	return -1
}

// addrPort is the port of a host:port env value.
func addrPort(t *testing.T, name, v string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s=%q: port: %v", name, v, err)
	}
	return n
}

// failureWindow is how long a probe may fail before it acts, in seconds,
// with the API's defaults (period 10 s, threshold 3) for unset fields.
func failureWindow(p *corev1.Probe) int32 {
	period, threshold := p.PeriodSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if threshold == 0 {
		threshold = 3
	}
	return period * threshold
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func TestStrictDecodingRejectsBadFields(t *testing.T) {
	good := "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: 3\n  serviceName: h\n"
	if _, err := decodeObject([]byte(good)); err != nil {
		t.Fatalf("the good document fails: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":   strings.Replace(good, "replicas: 3", "replica: 3", 1),
		"wrong case":      strings.Replace(good, "serviceName", "ServiceName", 1),
		"duplicate field": strings.Replace(good, "replicas: 3\n", "replicas: 3\n  replicas: 2\n", 1),
		"wrong type":      strings.Replace(good, "replicas: 3", `replicas: "3"`, 1),
		"misplaced field": strings.Replace(good, "  replicas: 3\n", "", 1) + "replicas: 3\n",
		"unknown kind":    strings.Replace(good, "StatefulSet", "StatefulSets", 1),
		"wrong version":   strings.Replace(good, "apps/v1", "apps/v1beta1", 1),
	} {
		if _, err := decodeObject([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error:\n%s", name, doc)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "# header only\n---\na: 1\n---   \n# c\nb: 2\n--- # trailing comment\n\n---\n"
	got := splitDocuments([]byte(in))
	if len(got) != 2 || !bytes.Contains(got[0], []byte("a: 1")) || !bytes.Contains(got[1], []byte("b: 2")) {
		t.Fatalf("splitDocuments: %q", got)
	}
}

func TestStatefulSet(t *testing.T) {
	m := load(t)
	sts := m.sts
	spec := sts.Spec
	pod := spec.Template.Spec
	c := m.container(t)
	e := env(t, c)

	if spec.Replicas == nil || *spec.Replicas != wantReplicas {
		t.Fatalf("replicas %s, want %d", ptrString(spec.Replicas), wantReplicas)
	}
	replicas := int(*spec.Replicas)
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: want Parallel, or the pods cannot all start and bootstrap", spec.PodManagementPolicy)
	}

	// The selector selects the template's pods (the API server insists).
	sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pod labels %v (err %v)", spec.Selector, spec.Template.Labels, err)
	}

	// The governing Service is headless and publishes unready pods.
	headless := m.services[spec.ServiceName]
	if headless == nil {
		t.Fatalf("serviceName %q: no such Service (have %v)", spec.ServiceName, slices.Sorted(func(y func(string) bool) {
			for k := range m.services {
				if !y(k) {
					return
				}
			}
		}))
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s: clusterIP %q, want None", headless.Name, headless.Spec.ClusterIP)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: publishNotReadyAddresses false: peers could not resolve each other before a leader exists", headless.Name)
	}

	// Node id = pod name, from the downward API.
	podName := ""
	for name, v := range e {
		if fieldRef(v) == "metadata.name" {
			podName = name
		}
	}
	if podName == "" {
		t.Fatal("no env var from fieldRef metadata.name")
	}
	if got := e["QUEEN_NODE_ID"].Value; got != "$("+podName+")" {
		t.Errorf("QUEEN_NODE_ID %q, want $(%s)", got, podName)
	}
	nsVar := ""
	for name, v := range e {
		if fieldRef(v) == "metadata.namespace" {
			nsVar = name
		}
	}

	// Bind addresses: all interfaces, with the ports the image documents.
	wantPorts := map[string]int{"QUEEN_HTTP_ADDR": 6632, "QUEEN_GRPC_ADDR": 6633, "QUEEN_RAFT_ADDR": 6634, "QUEEN_GOSSIP_ADDR": 6635}
	for name, port := range wantPorts {
		v, ok := e[name]
		if !ok {
			t.Errorf("%s not set (the flag's default binds 127.0.0.1, unreachable from other pods)", name)
			continue
		}
		if got := addrPort(t, name, v.Value); got != port {
			t.Errorf("%s=%q: port %d, want %d", name, v.Value, got, port)
		}
	}

	// Advertise: this pod's stable DNS name under the headless Service.
	adv := e["QUEEN_ADVERTISE_ADDR"].Value
	advPrefix := "$(" + podName + ")." + spec.ServiceName + "."
	if !strings.HasPrefix(adv, advPrefix) {
		t.Fatalf("QUEEN_ADVERTISE_ADDR %q, want %s<namespace>.svc...", adv, advPrefix)
	}
	suffix := strings.TrimPrefix(adv, advPrefix) // "$(NAMESPACE).svc.cluster.local"
	if nsVar == "" || !strings.HasPrefix(suffix, "$("+nsVar+").svc") {
		t.Errorf("QUEEN_ADVERTISE_ADDR %q: want the namespace from the downward API, then .svc", adv)
	}
	if strings.Contains(adv, ":") {
		t.Errorf("QUEEN_ADVERTISE_ADDR %q: a host only; the ports come from the *-addr flags", adv)
	}

	// Join: exactly the pods of this StatefulSet, by the same names, on the gossip port.
	var joined []string
	for _, a := range strings.Split(e["QUEEN_JOIN"].Value, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Errorf("QUEEN_JOIN entry %q: %v", a, err)
			continue
		}
		if port != strconv.Itoa(gossipPort) {
			t.Errorf("QUEEN_JOIN entry %q: port %s, want the gossip port %d", a, port, gossipPort)
		}
		pod, rest, _ := strings.Cut(host, ".")
		if rest != spec.ServiceName+"."+suffix {
			t.Errorf("QUEEN_JOIN entry %q: want <pod>.%s.%s", a, spec.ServiceName, suffix)
		}
		joined = append(joined, pod)
	}
	var pods []string
	for i := range replicas {
		pods = append(pods, fmt.Sprintf("%s-%d", sts.Name, i))
	}
	if slices.Sort(joined); !slices.Equal(joined, pods) {
		t.Errorf("QUEEN_JOIN names %v, want exactly %v", joined, pods)
	}

	if got := e["QUEEN_BOOTSTRAP_EXPECT"].Value; got != strconv.Itoa(replicas) {
		t.Errorf("QUEEN_BOOTSTRAP_EXPECT %q, want the replica count %d", got, replicas)
	}

	// Data: one PVC per pod, mounted at the data dir.
	dataDir := imageDataDir
	if v, ok := e["QUEEN_DATA_DIR"]; ok {
		dataDir = v.Value
	}
	if len(spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("volumeClaimTemplates: %d, want 1", len(spec.VolumeClaimTemplates))
	}
	vct := spec.VolumeClaimTemplates[0]
	if !slices.Contains(vct.Spec.AccessModes, corev1.ReadWriteOnce) {
		t.Errorf("volumeClaimTemplate %s: accessModes %v, want ReadWriteOnce", vct.Name, vct.Spec.AccessModes)
	}
	if q, ok := vct.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Sign() <= 0 {
		t.Errorf("volumeClaimTemplate %s: no storage request", vct.Name)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		if vm.Name == vct.Name {
			mounted = vm.MountPath == dataDir && !vm.ReadOnly && vm.SubPath == ""
			if !mounted {
				t.Errorf("volume %s mounted at %q (readOnly %v, subPath %q), want %q", vm.Name, vm.MountPath, vm.ReadOnly, vm.SubPath, dataDir)
			}
		}
	}
	if !mounted {
		t.Errorf("the volumeClaimTemplate %q is not mounted at the data dir %q", vct.Name, dataDir)
	}
	for _, v := range pod.Volumes {
		if v.Name == vct.Name {
			t.Errorf("pod volume %q shadows the volumeClaimTemplate", v.Name)
		}
	}

	// Probes.
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil {
		t.Fatal("readinessProbe: want httpGet " + healthPath)
	}
	if rp.HTTPGet.Path != healthPath || resolvePort(t, c, rp.HTTPGet.Port, corev1.ProtocolTCP) != httpPort {
		t.Errorf("readinessProbe: GET %s on %s, want %s on %d", rp.HTTPGet.Path, rp.HTTPGet.Port.String(), healthPath, httpPort)
	}
	if got := addrPort(t, "QUEEN_HTTP_ADDR", e["QUEEN_HTTP_ADDR"].Value); got != httpPort {
		t.Errorf("QUEEN_HTTP_ADDR port %d, but the probe checks %d", got, httpPort)
	}
	lp := c.LivenessProbe
	switch {
	case lp == nil:
		t.Error("no livenessProbe")
	case lp.TCPSocket != nil:
		resolvePort(t, c, lp.TCPSocket.Port, corev1.ProtocolTCP)
	case lp.HTTPGet != nil:
		resolvePort(t, c, lp.HTTPGet.Port, corev1.ProtocolTCP)
	default:
		t.Error("livenessProbe: want tcpSocket or httpGet")
	}
	if lp != nil {
		if w := failureWindow(lp); w < 30 {
			t.Errorf("livenessProbe restarts after %ds of failures; give an election more room (>= 30s)", w)
		}
	}
	if sp := c.StartupProbe; sp != nil {
		if w := failureWindow(sp); w < 60 {
			t.Errorf("startupProbe allows only %ds to start", w)
		}
	}

	// Security.
	psc := pod.SecurityContext
	csc := c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("want both a pod and a container securityContext")
	}
	nonRoot := psc.RunAsNonRoot
	if csc.RunAsNonRoot != nil {
		nonRoot = csc.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		t.Error("runAsNonRoot is not true")
	}
	uid := psc.RunAsUser
	if csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if uid != nil && *uid != imageUID {
		t.Errorf("runAsUser %d, the image's user is %d", *uid, imageUID)
	}
	if psc.FSGroup == nil {
		t.Error("no fsGroup: a fresh PersistentVolume is root-owned and the non-root node could not write it")
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if csc.Privileged != nil && *csc.Privileged {
		t.Error("privileged")
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %v: want drop ALL, add none", csc.Capabilities)
	}

	// Shutdown, scheduling, environment hygiene.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < minGracePeriod {
		t.Errorf("terminationGracePeriodSeconds %s, want >= %d", ptrString(g), minGracePeriod)
	}
	if r := c.Resources.Requests; r.Cpu().IsZero() || r.Memory().IsZero() {
		t.Errorf("resource requests %v: want cpu and memory", r)
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && lim.Cmp(*c.Resources.Requests.Memory()) < 0 {
		t.Errorf("memory limit %s below the request %s", lim.String(), c.Resources.Requests.Memory().String())
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Error("enableServiceLinks is not false: the Service \"queen\" would inject QUEEN_* variables the node reads as flags")
	}
	if c.Image == "" {
		t.Error("no image")
	}
	if len(c.Command) > 0 {
		t.Errorf("command %v overrides the image's entrypoint", c.Command)
	}
}

func TestServices(t *testing.T) {
	m := load(t)
	c := m.container(t)
	podLabels := labels.Set(m.sts.Spec.Template.Labels)
	var client []*corev1.Service
	for _, s := range m.services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s: selector %v does not select the pods %v", s.Name, s.Spec.Selector, podLabels)
		}
		names := map[string]bool{}
		for _, p := range s.Spec.Ports {
			if names[p.Name] {
				t.Errorf("Service %s: port name %q twice", s.Name, p.Name)
			}
			names[p.Name] = true
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			resolvePort(t, c, target, p.Protocol)
		}
		if s.Name != m.sts.Spec.ServiceName {
			client = append(client, s)
		}
	}
	// The headless Service carries every peer port, so its DNS SRV records
	// cover raft and gossip too.
	headless := m.services[m.sts.Spec.ServiceName]
	for _, want := range []struct {
		port  int32
		proto corev1.Protocol
	}{{6632, "TCP"}, {6633, "TCP"}, {6634, "TCP"}, {6635, "TCP"}, {6635, "UDP"}} {
		if headless != nil && !slices.ContainsFunc(headless.Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Port == want.port && p.Protocol == want.proto
		}) {
			t.Errorf("headless Service: no port %d/%s", want.port, want.proto)
		}
	}
	if len(client) != 1 {
		t.Fatalf("want one client Service besides the headless one, have %d", len(client))
	}
	cs := client[0]
	if cs.Spec.ClusterIP == corev1.ClusterIPNone || cs.Spec.PublishNotReadyAddresses {
		t.Errorf("client Service %s: want a cluster IP and only Ready pods", cs.Name)
	}
	var ports []int32
	for _, p := range cs.Spec.Ports {
		ports = append(ports, p.Port)
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []int32{6632, 6633}) {
		t.Errorf("client Service %s: ports %v, want [6632 6633] (HTTP, gRPC)", cs.Name, ports)
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	m := load(t)
	pdb := m.pdb
	if pdb.Spec.MinAvailable != nil {
		t.Errorf("minAvailable set; use maxUnavailable")
	}
	if mu := pdb.Spec.MaxUnavailable; mu == nil || *mu != intstr.FromInt32(1) {
		t.Errorf("maxUnavailable %v, want 1", mu)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("selector %v: empty or invalid (%v)", pdb.Spec.Selector, err)
	}
	if !sel.Matches(labels.Set(m.sts.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pods %v", pdb.Spec.Selector, m.sts.Spec.Template.Labels)
	}
	// With one pod out, a majority of the voters remains.
	if r := int(*m.sts.Spec.Replicas); r-1 < r/2+1 {
		t.Errorf("%d replicas lose quorum with one unavailable", r)
	}
}

// The node's key files, by the variable that names each; all must be set.
var secureFiles = []string{"QUEEN_TLS_CERT", "QUEEN_TLS_KEY", "QUEEN_PEER_TLS_CERT", "QUEEN_PEER_TLS_KEY", "QUEEN_PEER_TLS_CA", "QUEEN_GOSSIP_KEYRING"}

// jwtVar is the value of a JWT setting: JWT_NAME (spec §4.17) or
// QUEEN_JWT_NAME, which the node reads first; setting both is an error.
func jwtVar(t *testing.T, e map[string]corev1.EnvVar, name string) (corev1.EnvVar, bool) {
	t.Helper()
	a, okA := e["JWT_"+name]
	b, okB := e["QUEEN_JWT_"+name]
	if okA && okB {
		t.Errorf("both JWT_%s and QUEEN_JWT_%s are set", name, name)
	}
	if okB {
		return b, true
	}
	return a, okA
}

// secretFile is the Secret and key a file path inside the container comes
// from: the volume mounted at the path's directory (the longest mount path
// that holds it), which must be a Secret volume.
func secretFile(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, path string) (secret, key string) {
	t.Helper()
	var best *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		if strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/") && (best == nil || len(vm.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	if best == nil {
		t.Errorf("%s is on no volume mount", path)
		return "", ""
	}
	if !best.ReadOnly {
		t.Errorf("volume %s (holding %s) is mounted read-write", best.Name, path)
	}
	if best.SubPath != "" {
		t.Errorf("volume %s: subPath %q: a subPath mount never sees an updated Secret", best.Name, best.SubPath)
	}
	rel := strings.TrimPrefix(path, strings.TrimSuffix(best.MountPath, "/")+"/")
	for _, v := range pod.Volumes {
		if v.Name != best.Name {
			continue
		}
		if v.Secret == nil {
			t.Errorf("%s is on volume %s, which is not a Secret", path, v.Name)
			return "", ""
		}
		key = rel
		if len(v.Secret.Items) > 0 {
			key = ""
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					key = it.Key
				}
			}
		}
		return v.Secret.SecretName, key
	}
	t.Errorf("volume %s (holding %s) is not a pod volume", best.Name, path)
	return "", ""
}

// TestStatefulSetSecure: every pod runs with TLS, peer TLS, the gossip
// keyring, JWT and --require-secure, each key read from a file of a Secret
// that kustomization.yaml generates with that key; the readiness probe speaks
// HTTPS.
func TestStatefulSetSecure(t *testing.T) {
	m := load(t)
	pod := &m.sts.Spec.Template.Spec
	c := m.container(t)
	e := env(t, c)

	if v, err := strconv.ParseBool(e["QUEEN_REQUIRE_SECURE"].Value); err != nil || !v {
		t.Errorf("QUEEN_REQUIRE_SECURE %q, want true", e["QUEEN_REQUIRE_SECURE"].Value)
	}
	if v, _ := jwtVar(t, e, "ENABLED"); v.Value != "true" {
		t.Errorf("JWT_ENABLED %q, want true", v.Value)
	}
	if v, _ := jwtVar(t, e, "SECRET"); v.Value != "" {
		t.Error("JWT_SECRET holds the secret in the manifest: use JWT_PUBLIC_KEY, or valueFrom a Secret")
	}
	files := slices.Clone(secureFiles)
	keyVars := 0
	for _, name := range []string{"PUBLIC_KEY", "JWKS_FILE"} {
		if v, ok := jwtVar(t, e, name); ok {
			keyVars++
			if strings.HasPrefix(v.Value, "/") {
				files = append(files, v.Name)
			} else if !strings.Contains(v.Value, "-----BEGIN") {
				t.Errorf("%s %q: want a file path or PEM text", v.Name, v.Value)
			}
		}
	}
	if v, ok := jwtVar(t, e, "SECRET"); ok && v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
		keyVars++
	}
	if v, ok := jwtVar(t, e, "JWKS_URL"); ok && v.Value != "" {
		keyVars++
	}
	if keyVars == 0 {
		t.Error("JWT has no key: set JWT_PUBLIC_KEY, JWT_JWKS_FILE, JWT_JWKS_URL or JWT_SECRET from a Secret")
	}
	if v, ok := jwtVar(t, e, "ALGORITHM"); ok {
		if !slices.Contains([]string{"HS256", "RS256", "EdDSA", "auto"}, v.Value) {
			t.Errorf("JWT_ALGORITHM %q", v.Value)
		}
	}

	podVar := ""
	for name, v := range e {
		if fieldRef(v) == "metadata.name" {
			podVar = name
		}
	}
	mounted := map[string]bool{}
	for i := range int(*m.sts.Spec.Replicas) {
		podName := fmt.Sprintf("%s-%d", m.sts.Name, i)
		peer := map[string]string{}
		for _, name := range files {
			v, ok := e[name]
			if !ok || v.Value == "" {
				t.Errorf("%s is not set", name)
				continue
			}
			path := strings.ReplaceAll(v.Value, "$("+podVar+")", podName)
			if !strings.HasPrefix(path, "/") || strings.Contains(path, "$(") {
				t.Errorf("%s %q: want an absolute path in a Secret volume", name, v.Value)
				continue
			}
			secret, key := secretFile(t, pod, c, path)
			if secret == "" {
				continue
			}
			mounted[secret] = true
			g, ok := m.secrets[secret]
			if !ok {
				t.Errorf("%s (%s): Secret %q is not generated by kustomization.yaml (have %v)", name, path, secret, slices.Sorted(mapsKeys(secretNames(m))))
				continue
			}
			if _, ok := g.keys()[key]; !ok {
				t.Errorf("pod %s: %s = %s: Secret %s has no key %q (has %v)", podName, name, path, secret, key, slices.Sorted(mapsKeys(g.keys())))
			}
			peer[name] = secret + "/" + key
		}
		// The pods' peer pairs are their own.
		for name, want := range map[string]string{"QUEEN_PEER_TLS_CERT": podName + ".crt", "QUEEN_PEER_TLS_KEY": podName + ".key"} {
			if !strings.HasSuffix(peer[name], "/"+want) {
				t.Errorf("pod %s: %s is %s, want its own %s", podName, name, peer[name], want)
			}
		}
	}
	for name := range m.secrets {
		if !mounted[name] {
			t.Errorf("secretGenerator %q: no file of it is used", name)
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			if v.Secret.Optional != nil && *v.Secret.Optional {
				t.Errorf("volume %s: an optional Secret would start the node without its keys", v.Name)
			}
			if mode := v.Secret.DefaultMode; mode != nil && *mode&0o004 != 0 {
				t.Errorf("volume %s: defaultMode %#o is world-readable", v.Name, *mode)
			}
		}
	}

	if rp := c.ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Error("readinessProbe: want httpGet with scheme: HTTPS (the HTTP API serves TLS)")
	}
	if lp := c.LivenessProbe; lp != nil && lp.HTTPGet != nil && lp.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Error("livenessProbe: httpGet without scheme: HTTPS against a TLS port")
	}
}

func secretNames(m *manifests) map[string]string {
	out := map[string]string{}
	for k := range m.secrets {
		out[k] = k
	}
	return out
}

// TestSecretsFromScript runs deploy/gen-secrets.sh --k8s into a temporary
// directory and checks that it makes every file kustomization.yaml's
// secretGenerator reads, at the same place under secrets/, and that they fit:
// the certificate names the Services and pods of the namespace, the peer
// certificates of every pod and the API certificate chain to ca.crt, and
// each key matches its certificate.
func TestSecretsFromScript(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed, so deploy/gen-secrets.sh was NOT run (Debian: apt-get install openssl)")
	}
	m := load(t)
	dir := t.TempDir()
	const ns = "queen-test"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "../gen-secrets.sh", "--k8s", ns, "-o", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen-secrets.sh --k8s: %v\n%s", err, out)
	}
	file := func(path string) string {
		rel, ok := strings.CutPrefix(path, "secrets/")
		if !ok {
			t.Fatalf("secretGenerator file %q: want it under secrets/, where gen-secrets.sh --k8s writes", path)
		}
		return filepath.Join(dir, rel)
	}
	for name, g := range m.secrets {
		for key, path := range g.keys() {
			if _, err := os.Stat(file(path)); err != nil {
				t.Errorf("Secret %s key %s: gen-secrets.sh made no %s: %v", name, key, path, err)
			}
		}
	}
	if t.Failed() {
		return
	}

	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt: %v", err)
	}
	pair := func(certPath, keyPath string) *x509.Certificate {
		t.Helper()
		kp, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			t.Fatalf("%s + %s: %v", certPath, keyPath, err)
		}
		return kp.Leaf
	}
	tlsKeys := m.secrets["queen-tls"].keys()
	api := pair(file(tlsKeys["tls.crt"]), file(tlsKeys["tls.key"]))
	for _, name := range []string{"localhost", "127.0.0.1", "queen", "queen." + ns + ".svc", "queen." + ns + ".svc.cluster.local",
		"queen-1.queen-headless." + ns + ".svc.cluster.local"} {
		if _, err := api.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("tls.crt for %s: %v", name, err)
		}
	}
	peerKeys := m.secrets["queen-peer-tls"].keys()
	for i := range int(*m.sts.Spec.Replicas) {
		pod := fmt.Sprintf("%s-%d", m.sts.Name, i)
		cert := pair(file(peerKeys[pod+".crt"]), file(peerKeys[pod+".key"]))
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("peer certificate of %s (usage %v): %v", pod, usage, err)
			}
		}
	}
}
